import { chmodSync, closeSync, openSync } from 'node:fs';
import { join } from 'node:path';
import type Database from 'better-sqlite3';
import { CodedError, type ErrorCode } from '../contract/index.js';
import { credentialKinds, type CredentialInfo, type CredentialKind } from '../ports/index.js';
import { openDatabase } from '../ports/open-database.js';
import type { KdfParams, Sealed } from './vault-crypto.js';

/** The vault's own file: never the journal, so the journal can be shared for audit without it. */
export const vaultFileName = 'vault.sqlite';
/** Another process (the CLI beside a daemon) may hold the write lock for one short transaction. */
export const vaultBusyTimeoutMs = 2_000;
/** Credentials per vault: bounds every listing. */
export const credentialsMax = 1_000;
const schemaVersion = 1;
const synchronousFull = 2;

export interface WrappedKeyRow {
  readonly kdf: KdfParams;
  readonly sealed: Sealed;
}

export interface CredentialRow {
  readonly info: CredentialInfo;
  readonly sealed: Sealed;
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

const schema = `
CREATE TABLE vault_key (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  kdf_alg TEXT NOT NULL,
  salt BLOB NOT NULL,
  opslimit INTEGER NOT NULL,
  memlimit INTEGER NOT NULL,
  nonce BLOB NOT NULL,
  wrapped_key BLOB NOT NULL,
  created_at_ms INTEGER NOT NULL
);
CREATE TABLE credentials (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  kind TEXT NOT NULL,
  version_tag TEXT NOT NULL,
  bindings TEXT NOT NULL,
  header TEXT,
  param TEXT,
  template TEXT,
  nonce BLOB NOT NULL,
  sealed BLOB NOT NULL,
  updated_at_ms INTEGER NOT NULL
);
`;

/**
 * The SQL of the vault: one wrapped data key and one sealed secret per credential, with the
 * non-secret metadata beside it in plaintext. Every read goes to the file (no cache), so a daemon
 * sees credentials the CLI added a moment ago; SQLite serializes the two processes' writes.
 */
export class VaultStore {
  private constructor(private readonly db: Database.Database) {}

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
      return new VaultStore(db);
    } catch (error) {
      db.close();
      throw error;
    }
  }

  readWrappedKey(): WrappedKeyRow | undefined {
    const row = this.db.prepare('SELECT kdf_alg, salt, opslimit, memlimit, nonce, wrapped_key FROM vault_key WHERE id = 1').get() as
      | { kdf_alg: string; salt: Buffer; opslimit: number; memlimit: number; nonce: Buffer; wrapped_key: Buffer }
      | undefined;
    if (row === undefined) return undefined;
    if (row.kdf_alg !== 'argon2id13') throw corrupt('the vault key uses an unknown key derivation');
    return {
      kdf: { alg: 'argon2id13', salt: new Uint8Array(row.salt), opslimit: row.opslimit, memlimit: row.memlimit },
      sealed: { nonce: new Uint8Array(row.nonce), ciphertext: new Uint8Array(row.wrapped_key) },
    };
  }

  /** Inserts the wrapped key unless one exists; false if another process initialized first. */
  insertWrappedKey(key: WrappedKeyRow, nowMs: number): boolean {
    const result = this.db
      .prepare(
        `INSERT INTO vault_key (id, kdf_alg, salt, opslimit, memlimit, nonce, wrapped_key, created_at_ms)
         VALUES (1, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
      )
      .run(key.kdf.alg, key.kdf.salt, key.kdf.opslimit, key.kdf.memlimit, key.sealed.nonce, key.sealed.ciphertext, nowMs);
    return result.changes === 1;
  }

  list(): CredentialInfo[] {
    const rows = this.db.prepare(`SELECT * FROM credentials ORDER BY name LIMIT ${credentialsMax}`).all() as CredentialRecord[];
    return rows.map(toInfo);
  }

  count(): number {
    return (this.db.prepare('SELECT count(*) AS n FROM credentials').get() as { n: number }).n;
  }

  find(name: string): CredentialRow | undefined {
    const row = this.db.prepare('SELECT * FROM credentials WHERE name = ?').get(name) as CredentialRecord | undefined;
    return row === undefined ? undefined : { info: toInfo(row), sealed: { nonce: new Uint8Array(row.nonce), ciphertext: new Uint8Array(row.sealed) } };
  }

  insert(row: CredentialRow, nowMs: number): void {
    const insert = this.db.transaction(() => {
      if (this.count() >= credentialsMax) {
        throw new CodedError('PAYLOAD_LIMIT', `a vault holds at most ${credentialsMax} credentials`, { field: 'name' });
      }
      const taken = this.db.prepare('SELECT 1 FROM credentials WHERE name = ?').get(row.info.name);
      if (taken !== undefined) throw new CodedError('CREDENTIAL_EXISTS', 'a credential with this name already exists', { field: 'name' });
      const { info, sealed } = row;
      this.db
        .prepare(
          `INSERT INTO credentials (id, name, kind, version_tag, bindings, header, param, template, nonce, sealed, updated_at_ms)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        )
        .run(info.id, info.name, info.kind, info.version_tag, JSON.stringify(info.bindings), info.header ?? null, info.param ?? null, info.template ?? null, sealed.nonce, sealed.ciphertext, nowMs);
    });
    insert.immediate();
  }

  /** Replaces the secret and version of the row that is still at `expectedVersion`; false if it moved. */
  replaceSecret(id: string, expectedVersion: string, versionTag: string, sealed: Sealed, nowMs: number): boolean {
    const result = this.db
      .prepare('UPDATE credentials SET version_tag = ?, nonce = ?, sealed = ?, updated_at_ms = ? WHERE id = ? AND version_tag = ?')
      .run(versionTag, sealed.nonce, sealed.ciphertext, nowMs, id, expectedVersion);
    return result.changes === 1;
  }

  remove(name: string): boolean {
    return this.db.prepare('DELETE FROM credentials WHERE name = ?').run(name).changes === 1;
  }

  close(): void {
    if (!this.db.open) return;
    // Fold the WAL back into the file so old sealed rows do not linger in vault.sqlite-wal.
    try {
      this.db.pragma('wal_checkpoint(TRUNCATE)');
    } catch {
      // Another connection may hold a read lock; its own close (or the next open) checkpoints.
    }
    this.db.close();
  }
}

function migrate(db: Database.Database): void {
  const version = Number(db.pragma('user_version', { simple: true }));
  if (version > schemaVersion) throw corrupt(`the vault file is schema v${version}, newer than this Postern (v${schemaVersion})`);
  if (version === schemaVersion) return;
  db.transaction(() => {
    // Re-read under the write lock: a second process may have created the schema meanwhile.
    if (Number(db.pragma('user_version', { simple: true })) === schemaVersion) return;
    db.exec(schema);
    db.pragma(`user_version = ${schemaVersion}`);
  }).immediate();
}

function toInfo(row: CredentialRecord): CredentialInfo {
  if (!(credentialKinds as readonly string[]).includes(row.kind)) throw corrupt('a credential row has an unknown kind');
  let bindings: unknown;
  try {
    bindings = JSON.parse(row.bindings);
  } catch {
    bindings = undefined;
  }
  if (!Array.isArray(bindings) || !bindings.every((b) => typeof b === 'string')) throw corrupt('a credential row has malformed bindings');
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
