import { chmodSync, closeSync, existsSync, openSync } from 'node:fs';
import { join } from 'node:path';
import type Database from 'better-sqlite3';
import { CodedError } from '../contract/coded-error.js';
import type { ErrorCode } from '../contract/index.js';
import { credentialKinds, type CredentialInfo, type CredentialKind } from '../ports/credential-vault.js';
import { openDatabase, statementCache } from '../ports/open-database.js';
import { vaultMigrations } from './migrations/index.js';
import { ReadOnlyConnection } from './read-only-connection.js';
import { nonceBytes } from './sealed-sizes.js';
import type { KdfParams, Sealed } from './vault-crypto.js';
import { vaultFileName } from './vault-file-name.js';

export { vaultFileName };
/** Another process (the CLI beside a daemon) may hold the write lock for one short transaction. */
export const vaultBusyTimeoutMs = 2_000;
/** Credentials per vault: bounds every listing. */
export const credentialsMax = 1_000;
const synchronousFull = 2;
/** Writes (or migrations) through any VaultStore of this process: a data_version kept from before one is stale. */
let localVaultCommits = 0;

export interface WrappedKeyRow {
  readonly kdf: KdfParams;
  readonly sealed: StoredKey;
}

/**
 * The data key as the file holds it: sealed under the passphrase's key, or that sealed key
 * (nonce ‖ ciphertext) wrapped again by a key protector whose backend is named.
 */
export type StoredKey = Sealed | { readonly protectedBy: string; readonly blob: Uint8Array };

/** Backend names are short labels (`keychain`, `gnome_libsecret`); bounds what the file may claim. */
export const protectorBackendCharsMax = 64;

export interface CredentialRow {
  readonly info: CredentialInfo;
  readonly sealed: Sealed;
}

interface KeyRecord {
  kdf_alg: string;
  salt: Buffer;
  opslimit: number;
  memlimit: number;
  nonce: Buffer;
  wrapped_key: Buffer;
  protected_by: string | null;
}

interface CredentialRecord {
  id: string;
  name: string;
  kind: string;
  version_tag: string;
  bindings: string;
  header: string | null;
  param: string | null;
  template: string | null;
  nonce: Buffer;
  sealed: Buffer;
}

/** What the store reads and writes through: the file itself, or (read-only) a ReadOnlyConnection. */
interface Connection {
  readonly db: Database.Database;
  readonly sql: (sql: string) => Database.Statement;
  /** Moves when the connection is made again (a read-only one whose file moved under it). */
  readonly generation: number;
  /** `query`'s answer; a read-only connection repeats it over a fresh snapshot if the file moved under it. */
  read<T>(query: () => T): T;
  close(): void;
}

function directConnection(db: Database.Database): Connection {
  return { db, sql: statementCache(db), generation: 0, read: (query) => query(), close: () => db.close() };
}

/**
 * The SQL of the vault: one wrapped data key and one sealed secret per credential, with the
 * non-secret metadata beside it in plaintext. A daemon sees credentials the CLI added a moment ago:
 * SQLite serializes the two processes' writes, and `find`'s rows (sealed, never opened) are kept only
 * while `PRAGMA data_version` says no other connection committed and this one wrote nothing (data_version is read
 * once per synchronous stretch: dataVersion says why that misses no commit a person or an action could know of).
 */
export class VaultStore {
  /** find's rows by name, as stored (sealed); valid for `rowsVersion` (connection generation and data_version) only. */
  private readonly rows = new Map<string, CredentialRow>();
  private rowsVersion: string | undefined = undefined;
  /** data_version as read in the current synchronous stretch (dataVersion), with what it is valid for. */
  private keptVersion: { generation: number; localCommits: number; dataVersion: number } | undefined = undefined;

  private constructor(private readonly connection: Connection) {}

  static open(dataDir: string): VaultStore {
    const file = join(dataDir, vaultFileName);
    // Create the file 0600 before SQLite does (SQLite would use 0644 minus the umask).
    closeSync(openSync(file, 'a', 0o600));
    if (process.platform !== 'win32') chmodSync(file, 0o600);
    const db = openDatabase(file, { timeout: vaultBusyTimeoutMs });
    try {
      db.pragma('journal_mode = WAL');
      // better-sqlite3's bundled build defaults WAL connections to NORMAL; a key or a rotation must
      // not be lost on power loss after we said it was stored.
      db.pragma('synchronous = FULL');
      if (Number(db.pragma('synchronous', { simple: true })) < synchronousFull) {
        throw new CodedError('VAULT_CORRUPT', 'the vault database refused synchronous=FULL');
      }
      db.pragma('secure_delete = ON');
      migrate(db);
      localVaultCommits += 1;
      return new VaultStore(directConnection(db));
    } catch (error) {
      db.close();
      throw error;
    }
  }

  /**
   * The vault file as it is, for a command that promises not to write (`postern audit verify --check-key`, `postern vault
   * list`): read-only, query-only connections, so SQLite refuses any write, made through a private snapshot
   * (ReadOnlyConnection) so that no `vault.sqlite-wal` or `-shm` appears beside a vault that had none, and every read answered from a file that held
   * still under it. Nothing is created (no file: VAULT_NOT_INITIALIZED), chmodded or migrated (an older schema is
   * refused; the next start of Postern upgrades it). Unlocking through it reads the wrapped key only; a key
   * protector's re-store would be refused, so callers pass none. close() removes a private copy.
   */
  static openReadOnly(dataDir: string): VaultStore {
    const file = join(dataDir, vaultFileName);
    if (!existsSync(file))
      throw new CodedError('VAULT_NOT_INITIALIZED', `there is no vault in ${dataDir}; run \`postern vault init\``);
    const options = { readonly: true, fileMustExist: true, timeout: vaultBusyTimeoutMs };
    return new VaultStore(new ReadOnlyConnection(file, options, requireCurrentSchema));
  }

  readWrappedKey(): WrappedKeyRow | undefined {
    const row = this.connection.read(
      () =>
        this.sql(
          'SELECT kdf_alg, salt, opslimit, memlimit, nonce, wrapped_key, protected_by FROM vault_key WHERE id = 1',
        ).get() as KeyRecord | undefined,
    );
    if (row === undefined) return undefined;
    if (row.kdf_alg !== 'argon2id13') throw corrupt('the vault key uses an unknown key derivation');
    const kdf: KdfParams = {
      alg: 'argon2id13',
      salt: new Uint8Array(row.salt),
      opslimit: row.opslimit,
      memlimit: row.memlimit,
    };
    if (row.protected_by === null) {
      return { kdf, sealed: { nonce: new Uint8Array(row.nonce), ciphertext: new Uint8Array(row.wrapped_key) } };
    }
    if (row.protected_by.length === 0 || row.protected_by.length > protectorBackendCharsMax || row.nonce.length !== 0) {
      throw corrupt('the vault key names a malformed key protector');
    }
    return { kdf, sealed: { protectedBy: row.protected_by, blob: new Uint8Array(row.wrapped_key) } };
  }

  /** Inserts the wrapped key unless one exists; false if another process initialized first. */
  insertWrappedKey(key: WrappedKeyRow, nowMs: number): boolean {
    this.willWrite();
    const [nonce, wrapped, protectedBy] = columnsOf(key.sealed);
    const result = this.sql(
      `INSERT INTO vault_key (id, kdf_alg, salt, opslimit, memlimit, nonce, wrapped_key, protected_by, created_at_ms)
         VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
    ).run(key.kdf.alg, key.kdf.salt, key.kdf.opslimit, key.kdf.memlimit, nonce, wrapped, protectedBy, nowMs);
    return result.changes === 1;
  }

  /**
   * Re-stores the same data key differently wrapped (protected, re-protected, or unprotected) if the
   * row still holds `expected`; false if another process changed it first. The KDF parameters stay.
   */
  replaceStoredKey(expected: StoredKey, next: StoredKey): boolean {
    this.willWrite();
    const [oldNonce, oldWrapped, oldProtectedBy] = columnsOf(expected);
    const [nonce, wrapped, protectedBy] = columnsOf(next);
    const result = this.sql(
      `UPDATE vault_key SET nonce = ?, wrapped_key = ?, protected_by = ?
         WHERE id = 1 AND nonce = ? AND wrapped_key = ? AND protected_by IS ?`,
    ).run(nonce, wrapped, protectedBy, oldNonce, oldWrapped, oldProtectedBy);
    if (result.changes !== 1) return false;
    // Until a checkpoint the main file still holds the old page; the upgrade is only worth it once it is gone.
    this.checkpoint();
    return true;
  }

  list(): CredentialInfo[] {
    const rows = this.connection.read(
      () => this.sql(`SELECT * FROM credentials ORDER BY name LIMIT ${credentialsMax}`).all() as CredentialRecord[],
    );
    return rows.map(toInfo);
  }

  count(): number {
    return this.connection.read(() => (this.sql('SELECT count(*) AS n FROM credentials').get() as { n: number }).n);
  }

  /** The stored row, a fresh copy each call (callers may wipe or change what they are given). */
  find(name: string): CredentialRow | undefined {
    const found = this.connection.read(() => this.findStored(name));
    if (found === undefined) return undefined;
    const { info, sealed } = found;
    return {
      info: { ...info, bindings: [...info.bindings] },
      sealed: { nonce: new Uint8Array(sealed.nonce), ciphertext: new Uint8Array(sealed.ciphertext) },
    };
  }

  private findStored(name: string): CredentialRow | undefined {
    // Another connection's commit (the CLI's add, rotate, remove) moves data_version; this one's writes clear the rows.
    // A read-only connection made again (its file moved) is another connection: its generation moves instead.
    const version = `${this.connection.generation}:${this.dataVersion()}`;
    if (version !== this.rowsVersion) {
      this.rows.clear();
      this.rowsVersion = version;
    }
    let found = this.rows.get(name);
    if (found === undefined) {
      const row = this.sql('SELECT * FROM credentials WHERE name = ?').get(name) as CredentialRecord | undefined;
      if (row === undefined) return undefined;
      found = {
        info: toInfo(row),
        sealed: { nonce: new Uint8Array(row.nonce), ciphertext: new Uint8Array(row.sealed) },
      };
      if (this.rows.size >= credentialsMax) this.rows.clear();
      this.rows.set(name, found);
    }
    return found;
  }

  /**
   * `PRAGMA data_version`, read at most once per synchronous stretch (issue #18: in autocommit each read pays for a WAL
   * read transaction of its own, and an action finds its credential several times). The value read is kept until the
   * microtask queued with it runs, that is before any I/O callback, timer or message can run on this thread, and
   * forgotten at once when a connection of this process commits to a vault or this connection is made again.
   * Why that is as exact as reading it every time: another process's commit (the CLI's remove or rotate) can only
   * become known here (its reply to a person, a request that follows it) through an I/O callback, which cannot run
   * before the kept value is gone (the vault commands write nothing else this process reads synchronously); a find
   * later in the same stretch is ordered before that commit, as a find that ran a moment earlier would be. This
   * process's own commits, on any connection, are counted instead of waited for.
   */
  private dataVersion(): number {
    const { generation } = this.connection;
    const kept = this.keptVersion;
    if (kept !== undefined && kept.generation === generation && kept.localCommits === localVaultCommits)
      return kept.dataVersion;
    const dataVersion = this.sql('PRAGMA data_version').pluck().get() as number;
    if (kept === undefined) queueMicrotask(() => (this.keptVersion = undefined));
    this.keptVersion = { generation, localCommits: localVaultCommits, dataVersion };
    return dataVersion;
  }

  insert(row: CredentialRow, nowMs: number): void {
    this.willWrite();
    const insert = this.connection.db.transaction(() => {
      if (this.count() >= credentialsMax) {
        throw new CodedError('PAYLOAD_LIMIT', `a vault holds at most ${credentialsMax} credentials`, { field: 'name' });
      }
      const taken = this.sql('SELECT 1 FROM credentials WHERE name = ?').get(row.info.name);
      if (taken !== undefined)
        throw new CodedError('CREDENTIAL_EXISTS', 'a credential with this name already exists', { field: 'name' });
      const { info, sealed } = row;
      this.sql(
        `INSERT INTO credentials (id, name, kind, version_tag, bindings, header, param, template, nonce, sealed, updated_at_ms)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ).run(
        info.id,
        info.name,
        info.kind,
        info.version_tag,
        JSON.stringify(info.bindings),
        info.header ?? null,
        info.param ?? null,
        info.template ?? null,
        sealed.nonce,
        sealed.ciphertext,
        nowMs,
      );
    });
    insert.immediate();
  }

  /** Replaces the secret and version of the row that is still at `expectedVersion`; false if it moved. */
  replaceSecret(id: string, expectedVersion: string, versionTag: string, sealed: Sealed, nowMs: number): boolean {
    this.willWrite();
    const result = this.sql(
      'UPDATE credentials SET version_tag = ?, nonce = ?, sealed = ?, updated_at_ms = ? WHERE id = ? AND version_tag = ?',
    ).run(versionTag, sealed.nonce, sealed.ciphertext, nowMs, id, expectedVersion);
    return result.changes === 1;
  }

  /** Replaces version, bindings and sealed secret of the row that is still at `expectedVersion`; false if it moved. */
  replaceRow(expectedVersion: string, info: CredentialInfo, sealed: Sealed, nowMs: number): boolean {
    this.willWrite();
    const result = this.sql(
      'UPDATE credentials SET version_tag = ?, bindings = ?, nonce = ?, sealed = ?, updated_at_ms = ? WHERE id = ? AND version_tag = ?',
    ).run(
      info.version_tag,
      JSON.stringify(info.bindings),
      sealed.nonce,
      sealed.ciphertext,
      nowMs,
      info.id,
      expectedVersion,
    );
    return result.changes === 1;
  }

  remove(name: string): boolean {
    this.willWrite();
    return this.sql('DELETE FROM credentials WHERE name = ?').run(name).changes === 1;
  }

  close(): void {
    if (!this.connection.db.open) return;
    // Fold the WAL back into the file so old sealed rows do not linger in vault.sqlite-wal (a read-only one cannot).
    if (!this.connection.db.readonly) this.checkpoint();
    this.connection.close();
  }

  /** Before a write: find's rows are not the file's any more, nor is a data_version another store of this process kept. */
  private willWrite(): void {
    this.rows.clear();
    localVaultCommits += 1;
  }

  private sql(text: string): Database.Statement {
    return this.connection.sql(text);
  }

  private checkpoint(): void {
    try {
      this.connection.db.pragma('wal_checkpoint(TRUNCATE)');
    } catch {
      // Another connection may hold a read lock; its own close (or the next open) checkpoints.
    }
  }
}

/** A read-only connection reads only the schema this Postern writes: it cannot upgrade an older one. */
function requireCurrentSchema(db: Database.Database): void {
  db.pragma('query_only = 1');
  const known = vaultMigrations.length;
  const version = Number(db.pragma('user_version', { simple: true }));
  if (version > known) throw corrupt(`the vault file is schema v${version}, newer than this Postern (v${known})`);
  if (version < known) throw new OlderVaultSchema(version, known);
}

/**
 * A read-only command's refusal of a vault file of an older schema (INVALID_ARGUMENT naming --data-dir): opening the
 * vault upgrades it, a read-only store never does. A caller that may open the vault instead tells it from other errors.
 */
export class OlderVaultSchema extends CodedError {
  constructor(version: number, known: number) {
    super(
      'INVALID_ARGUMENT',
      `the vault file is schema v${version}, older than this Postern (v${known}); a read-only command does not upgrade it (the next start of Postern does)`,
      { field: '--data-dir' },
    );
  }
}

/** One step per transaction, guarded by user_version; a file from a newer Postern is refused, not guessed at. */
function migrate(db: Database.Database): void {
  vaultMigrations.forEach((m, i) => {
    if (m.version !== i + 1) throw new Error(`vault migration ${m.name} has version ${m.version}, expected ${i + 1}`);
  });
  const known = vaultMigrations.length;
  const version = Number(db.pragma('user_version', { simple: true }));
  if (version > known) throw corrupt(`the vault file is schema v${version}, newer than this Postern (v${known})`);
  for (const step of vaultMigrations.slice(version)) {
    db.transaction(() => {
      // Re-read under the write lock: a second process may have applied this step meanwhile.
      if (Number(db.pragma('user_version', { simple: true })) >= step.version) return;
      step.up(db);
      db.pragma(`user_version = ${step.version}`);
    }).immediate();
  }
}

function columnsOf(key: StoredKey): [Uint8Array, Uint8Array, string | null] {
  if ('protectedBy' in key) return [new Uint8Array(0), key.blob, key.protectedBy];
  return [key.nonce, key.ciphertext, null];
}

/** nonce ‖ ciphertext: what a key protector is given to wrap. */
export function sealedKeyBytes(sealed: Sealed): Uint8Array {
  const out = new Uint8Array(sealed.nonce.length + sealed.ciphertext.length);
  out.set(sealed.nonce, 0);
  out.set(sealed.ciphertext, sealed.nonce.length);
  return out;
}

/** The inverse of sealedKeyBytes; undefined when the bytes cannot be a sealed 32-byte key. */
export function sealedKeyFromBytes(bytes: Uint8Array): Sealed | undefined {
  // A sealed 32-byte key: 24-byte nonce, 32 bytes of ciphertext and a 16-byte tag.
  if (bytes.length !== nonceBytes + 32 + 16) return undefined;
  return { nonce: bytes.slice(0, nonceBytes), ciphertext: bytes.slice(nonceBytes) };
}

/**
 * The bounds of a credential row's plaintext id, version tag and name as the vault writes them (a generated id and
 * tag, a name validateName admitted), and as the journal's events state them (ACTION_ACCEPTED's credential,
 * CREDENTIAL_AUTHORIZED, CREDENTIAL_PROVISIONED): the file is the user's to edit, and an agent can edit it too
 * (THREAT-MODEL), so a row read back is bounded here, before it can become an event. Admission reads a row without
 * opening its sealed secret, which an edit would only fail later.
 */
const credentialIdCharsMax = 200;
const credentialNameCharsMax = 64;

function boundedText(value: unknown, charsMax: number): boolean {
  return typeof value === 'string' && value.length > 0 && value.length <= charsMax;
}

function toInfo(row: CredentialRecord): CredentialInfo {
  if (!(credentialKinds as readonly string[]).includes(row.kind)) throw corrupt('a credential row has an unknown kind');
  if (
    !boundedText(row.id, credentialIdCharsMax) ||
    !boundedText(row.version_tag, credentialIdCharsMax) ||
    !boundedText(row.name, credentialNameCharsMax)
  )
    throw corrupt('a credential row has an id, version tag or name out of bounds');
  let bindings: unknown;
  try {
    bindings = JSON.parse(row.bindings);
  } catch {
    bindings = undefined;
  }
  if (!Array.isArray(bindings) || !bindings.every((b) => typeof b === 'string'))
    throw corrupt('a credential row has malformed bindings');
  return {
    id: row.id,
    name: row.name,
    kind: row.kind as CredentialKind,
    version_tag: row.version_tag,
    bindings: bindings as string[],
    ...(row.header === null ? {} : { header: row.header }),
    ...(row.param === null ? {} : { param: row.param }),
    ...(row.template === null ? {} : { template: row.template }),
  };
}

function corrupt(message: string, code: ErrorCode = 'VAULT_CORRUPT'): CodedError {
  return new CodedError(code, message);
}
