import { randomBytes } from 'node:crypto';
import { CodedError } from '../contract/index.js';
import type {
  Clock,
  CredentialInfo,
  CredentialVault,
  SecretMaterial,
  VaultKeyProtection,
  VaultKeyProtector,
  VaultState,
} from '../ports/index.js';
import {
  checkSecretSize,
  materialFor,
  passphraseBytesMax,
  passphraseBytesMin,
  validateName,
  validateShape,
  type CredentialInput,
  type CredentialShape,
} from './credential-input.js';
import { importSshKey } from './ssh-key-import.js';
import { deriveKekOffLoop } from './kdf-worker.js';
import {
  newKdfParams,
  open,
  randomKey,
  seal,
  wipe,
  type KdfParams,
  type KdfStrength,
  type Sealed,
} from './vault-crypto.js';
import {
  protectorBackendCharsMax,
  sealedKeyBytes,
  sealedKeyFromBytes,
  type CredentialRow,
  type StoredKey,
  type VaultStore,
  type WrappedKeyRow,
} from './vault-store.js';

/** Lock after 15 minutes without operator activity unless configured otherwise. */
export const idleLockMsDefault = 15 * 60 * 1_000;
export { passphraseBytesMin, passphraseBytesMax } from './credential-input.js';
/** `wrap`/`unwrap` purposes are short labels; payloads are keys, not documents. */
export const wrapPurposeCharsMax = 64;
export const wrapBytesMax = 64 * 1024;
/** The data key's AD: ties the wrapped key to its role so it cannot be confused with a wrapped blob. */
const dataKeyAd = 'postern-vault-data-key:v1';
const wrapAdPrefix = 'postern-wrap:';
/** What a key protector may hand back to be stored: a safeStorage blob of a sealed 32-byte key is ~200 bytes. */
export const protectedKeyBytesMax = 4 * 1024;

export interface VaultOptions {
  readonly store: VaultStore;
  readonly clock: Clock;
  /** 0 = never. */
  readonly idleLockMs: number;
  readonly kdf: KdfStrength;
  /** A second wrap of the stored key bound to the OS login (the desktop's safeStorage); see docs/vault.md. */
  readonly keyProtector?: VaultKeyProtector;
  /** What to do with `keyProtector` (default `apply`). */
  readonly keyProtection?: VaultKeyProtection;
}

/** The data key and what the file held, from one successful passphrase check. */
interface Unwrapped {
  readonly dataKey: Uint8Array;
  readonly kdf: KdfParams;
  readonly stored: StoredKey;
  readonly sealed: Sealed;
  /** The protector asked for its blob to be rewritten (the OS rotated its key). */
  readonly reprotect: boolean;
}

export interface AddOptions {
  readonly sshKeyPassphrase?: Uint8Array;
}

/**
 * The credential vault: a random data key wrapped under an Argon2id key from the passphrase, one
 * XChaCha20-Poly1305 box per credential secret. The data key exists in memory only while unlocked;
 * `lock` zeroes it. Metadata is read from the file on every call, so another process's changes
 * (the CLI beside the daemon) are seen at once.
 */
export class Vault implements CredentialVault {
  private dataKey: Uint8Array | undefined;
  /** The wrapped data key as this vault first read or wrote it: keyRow(). */
  private pinnedKey: WrappedKeyRow | undefined;
  private lastActivityMs = 0;
  private idleTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private readonly lockListeners = new Set<(reason: string) => void>();
  private readonly unlockListeners = new Set<() => void>();

  constructor(private readonly options: VaultOptions) {
    if (!Number.isInteger(options.idleLockMs) || options.idleLockMs < 0)
      throw new RangeError(`idleLockMs must be a whole number of ms >= 0, not ${options.idleLockMs}`);
    const backend = options.keyProtector?.backend;
    if (
      backend !== undefined &&
      (typeof backend !== 'string' || backend.length === 0 || backend.length > protectorBackendCharsMax)
    ) {
      throw new RangeError(`a key protector's backend is a name of 1..${protectorBackendCharsMax} characters`);
    }
    this.keyRow();
  }

  /**
   * The wrapped data key as this vault first read it (at open, or when it was first seen or made after an open that
   * found none). The file's later contents are not trusted: a process of the user can rewrite `vault_key` with a
   * data key wrapped under a passphrase of its own, and that passphrase opening that row proves nothing about a
   * person (THREAT-MODEL 3). So every unwrap — unlock, and a decision's passphrase proof — opens this row. The one
   * rewrite a vault makes of its own row (a key protector's re-store, by compare-and-swap) wraps the same data key;
   * a re-store by this vault moves the pin with it, and one by another process leaves a pin that still opens.
   */
  private keyRow(): WrappedKeyRow | undefined {
    this.pinnedKey ??= this.options.store.readWrappedKey();
    return this.pinnedKey;
  }

  state(): VaultState {
    // A closed vault holds no key; status may still be asked after shutdown.
    if (this.closed) return 'locked';
    this.lockIfIdle();
    if (this.dataKey !== undefined) return 'unlocked';
    return this.keyRow() === undefined ? 'uninitialized' : 'locked';
  }

  list(): readonly CredentialInfo[] {
    return this.options.store.list();
  }

  describe(name: string): CredentialInfo | undefined {
    if (typeof name !== 'string' || name.length > 64) return undefined;
    return this.options.store.find(name)?.info;
  }

  async init(passphrase: Uint8Array): Promise<void> {
    this.assertOpen();
    checkPassphrase(passphrase, passphraseBytesMin);
    // UTF-8 only: the control socket carries the passphrase as a JSON string, which must give back the same bytes.
    try {
      new TextDecoder('utf-8', { fatal: true }).decode(passphrase);
    } catch {
      throw new CodedError('INVALID_ARGUMENT', 'a vault passphrase is UTF-8 text', { field: 'passphrase' });
    }
    if (this.keyRow() !== undefined) throw alreadyInitialized();
    const kdf = newKdfParams(this.options.kdf);
    const kek = await deriveKekOffLoop(passphrase, kdf);
    // Another init may have won while the worker derived.
    if (this.keyRow() !== undefined) {
      wipe(kek);
      throw alreadyInitialized();
    }
    const dataKey = randomKey();
    try {
      let sealed: Sealed;
      try {
        sealed = seal(kek, dataKey, dataKeyAd);
      } finally {
        wipe(kek);
      }
      // A protector that fails stores nothing: no vault rather than one weaker than asked for.
      const stored = this.protectionWanted() ? await this.protect(sealed) : sealed;
      if (!this.options.store.insertWrappedKey({ kdf, sealed: stored }, this.options.clock.nowMs()))
        throw alreadyInitialized();
      this.pinnedKey = { kdf, sealed: stored };
    } catch (error) {
      wipe(dataKey);
      throw error;
    }
    this.becomeUnlocked(dataKey);
  }

  async unlock(passphrase: Uint8Array): Promise<void> {
    this.assertOpen();
    checkPassphrase(passphrase, 1);
    const unwrapped = await this.unwrapDataKey(passphrase);
    const { dataKey } = unwrapped;
    let restored: StoredKey | undefined;
    try {
      restored = await this.restoredKey(unwrapped);
    } catch (error) {
      wipe(dataKey);
      throw error;
    }
    if (this.closed) {
      wipe(dataKey);
      throw new CodedError('VAULT_LOCKED', 'the vault closed while the passphrase was checked');
    }
    // Compare-and-swap: if another process re-stored the key meanwhile, its version stands.
    if (restored !== undefined && this.options.store.replaceStoredKey(unwrapped.stored, restored))
      this.pinnedKey = { kdf: unwrapped.kdf, sealed: restored };
    if (this.dataKey !== undefined) {
      // Already unlocked: the passphrase was checked; keep the key we have and count it as activity.
      wipe(dataKey);
      this.touch();
      return;
    }
    this.becomeUnlocked(dataKey);
  }

  /**
   * Whether `passphrase` opens this vault, by the same Argon2id check as unlock (off the event loop),
   * without unlocking or touching anything: an operator's proof that a person is deciding.
   * VAULT_NOT_INITIALIZED when there is no vault to check against.
   */
  async verifyPassphrase(passphrase: Uint8Array): Promise<boolean> {
    this.assertOpen();
    checkPassphrase(passphrase, 1);
    try {
      wipe((await this.unwrapDataKey(passphrase)).dataKey);
      return true;
    } catch (error) {
      if (error instanceof CodedError && error.code === 'VAULT_PASSPHRASE_INVALID') return false;
      throw error;
    }
  }

  lock(reason: string): void {
    this.clearIdleTimer();
    if (this.dataKey === undefined) return;
    wipe(this.dataKey);
    this.dataKey = undefined;
    const errors: unknown[] = [];
    for (const listener of [...this.lockListeners]) {
      try {
        listener(reason);
      } catch (error) {
        errors.push(error);
      }
    }
    // A listener that throws is a bug; the key is already gone, so report it after all have run.
    if (errors.length > 0) throw errors[0];
  }

  touch(): void {
    if (this.dataKey !== undefined) this.lastActivityMs = this.options.clock.nowMs();
  }

  async add(input: CredentialInput): Promise<CredentialInfo> {
    const shape = validateShape(input);
    checkSecretSize(input.secret);
    const key = this.requireKey();
    const stored = this.preparedSecret(shape, input.secret, input.sshKeyPassphrase);
    try {
      const info: CredentialInfo = { ...shape, id: newCredentialId(), version_tag: newVersionTag(1) };
      this.options.store.insert({ info, sealed: seal(key, stored, associatedData(info)) }, this.options.clock.nowMs());
      return Promise.resolve(info);
    } finally {
      wipe(stored);
    }
  }

  async rotate(name: string, secret: Uint8Array, options: AddOptions = {}): Promise<CredentialInfo> {
    validateName(name);
    checkSecretSize(secret);
    const key = this.requireKey();
    const row = this.options.store.find(name);
    if (row === undefined) throw unknownCredential();
    const stored = this.preparedSecret(row.info, secret, options.sshKeyPassphrase);
    try {
      const info: CredentialInfo = { ...row.info, version_tag: newVersionTag(versionNumber(row.info.version_tag) + 1) };
      const sealed = seal(key, stored, associatedData(info));
      // Compare-and-swap on the version: two rotations racing from two processes cannot both win.
      if (
        !this.options.store.replaceSecret(
          info.id,
          row.info.version_tag,
          info.version_tag,
          sealed,
          this.options.clock.nowMs(),
        )
      ) {
        throw new CodedError('CREDENTIAL_EXISTS', 'the credential changed while rotating; list it and try again', {
          field: 'name',
        });
      }
      return Promise.resolve(info);
    } finally {
      wipe(stored);
    }
  }

  /**
   * Replaces a credential's bindings (where it may be sent). The bindings are part of the sealed row's associated
   * data, so the secret is opened and sealed again under the new ones; the version tag keeps its rotation number but
   * changes, so evidence recorded before and after tells the two apart.
   */
  async rebind(name: string, bindings: readonly string[]): Promise<CredentialInfo> {
    validateName(name);
    const key = this.requireKey();
    const row = this.options.store.find(name);
    if (row === undefined) throw unknownCredential();
    const shape = validateShape({ ...row.info, bindings: [...bindings] });
    const plaintext = openCredential(key, row);
    try {
      const info: CredentialInfo = {
        ...row.info,
        bindings: shape.bindings,
        version_tag: newVersionTag(versionNumber(row.info.version_tag)),
      };
      if (
        !this.options.store.replaceRow(
          row.info.version_tag,
          info,
          seal(key, plaintext, associatedData(info)),
          this.options.clock.nowMs(),
        )
      ) {
        throw new CodedError('CREDENTIAL_EXISTS', 'the credential changed while rebinding; list it and try again', {
          field: 'name',
        });
      }
      return Promise.resolve(info);
    } finally {
      wipe(plaintext);
    }
  }

  async remove(name: string): Promise<void> {
    validateName(name);
    if (!this.options.store.remove(name)) throw unknownCredential();
    return Promise.resolve();
  }

  async withSecret<T>(name: string, use: (secret: SecretMaterial, info: CredentialInfo) => Promise<T> | T): Promise<T> {
    const key = this.requireKey();
    const row = typeof name === 'string' && name.length <= 64 ? this.options.store.find(name) : undefined;
    if (row === undefined) throw unknownCredential();
    const plaintext = openCredential(key, row);
    let material: SecretMaterial | undefined;
    try {
      material = materialFor(row.info, plaintext);
      return await use(material, row.info);
    } finally {
      wipe(plaintext);
      if (material?.kind === 'ssh_key') material.privateKey.fill(0);
    }
  }

  wrap(purpose: string, plaintext: Uint8Array): Uint8Array {
    checkPurpose(purpose);
    if (!(plaintext instanceof Uint8Array) || plaintext.length > wrapBytesMax) {
      throw new CodedError('PAYLOAD_LIMIT', `wrap takes at most ${wrapBytesMax} bytes`, { field: 'plaintext' });
    }
    const sealed = seal(this.requireKey(), plaintext, wrapAdPrefix + purpose);
    const out = new Uint8Array(sealed.nonce.length + sealed.ciphertext.length);
    out.set(sealed.nonce, 0);
    out.set(sealed.ciphertext, sealed.nonce.length);
    return out;
  }

  unwrap(purpose: string, sealedBytes: Uint8Array): Uint8Array {
    checkPurpose(purpose);
    const key = this.requireKey();
    const nonceLength = 24;
    const plaintext =
      sealedBytes instanceof Uint8Array && sealedBytes.length > nonceLength && sealedBytes.length <= wrapBytesMax + 64
        ? open(
            key,
            { nonce: sealedBytes.subarray(0, nonceLength), ciphertext: sealedBytes.subarray(nonceLength) },
            wrapAdPrefix + purpose,
          )
        : undefined;
    if (plaintext === undefined)
      throw new CodedError(
        'VAULT_CORRUPT',
        'the wrapped value failed its integrity check (wrong purpose, other vault, or damaged)',
      );
    return plaintext;
  }

  onLock(listener: (reason: string) => void): () => void {
    this.lockListeners.add(listener);
    return () => this.lockListeners.delete(listener);
  }

  onUnlock(listener: () => void): () => void {
    this.unlockListeners.add(listener);
    return () => this.unlockListeners.delete(listener);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    try {
      this.lock('shutdown');
    } finally {
      this.closed = true;
      this.options.store.close();
    }
    return Promise.resolve();
  }

  /** Locks if the idle time has passed by the injected clock; the timer only makes this prompt. */
  private lockIfIdle(): void {
    const { idleLockMs, clock } = this.options;
    if (this.dataKey === undefined || idleLockMs === 0) return;
    if (clock.nowMs() - this.lastActivityMs >= idleLockMs) this.lock('idle');
  }

  private scheduleIdleCheck(): void {
    this.clearIdleTimer();
    const { idleLockMs, clock } = this.options;
    if (idleLockMs === 0 || this.dataKey === undefined) return;
    // Wake at the deadline by the clock; if activity (or a clock that did not move) says "not yet",
    // sleep again for what is left, never less than a tick.
    const remainingMs = Math.max(1, this.lastActivityMs + idleLockMs - clock.nowMs());
    this.idleTimer = setTimeout(() => {
      this.idleTimer = undefined;
      this.lockIfIdle();
      if (this.dataKey !== undefined) this.scheduleIdleCheck();
    }, remainingMs);
    // The vault never keeps the process alive by itself.
    this.idleTimer.unref();
  }

  private clearIdleTimer(): void {
    if (this.idleTimer !== undefined) clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
  }

  private becomeUnlocked(dataKey: Uint8Array): void {
    this.dataKey = dataKey;
    this.lastActivityMs = this.options.clock.nowMs();
    this.scheduleIdleCheck();
    for (const listener of [...this.unlockListeners]) listener();
  }

  private async unwrapDataKey(passphrase: Uint8Array): Promise<Unwrapped> {
    const wrapped = this.keyRow();
    if (wrapped === undefined)
      throw new CodedError('VAULT_NOT_INITIALIZED', 'the vault has not been created; run `postern vault init`');
    // The protector first: without the OS login a copied file offers nothing to run Argon2id guesses against.
    const { sealed, reprotect } = await this.unprotect(wrapped.sealed);
    const kek = await deriveKekOffLoop(passphrase, wrapped.kdf);
    try {
      const dataKey = open(kek, sealed, dataKeyAd);
      if (dataKey === undefined)
        throw new CodedError('VAULT_PASSPHRASE_INVALID', 'the passphrase does not open this vault', {
          field: 'passphrase',
        });
      if (dataKey.length !== 32) throw new CodedError('VAULT_CORRUPT', 'the unwrapped data key has the wrong length');
      return { dataKey, kdf: wrapped.kdf, stored: wrapped.sealed, sealed, reprotect };
    } finally {
      wipe(kek);
    }
  }

  /** The passphrase-sealed key from what the file holds; a protected key needs this vault's protector. */
  private async unprotect(stored: StoredKey): Promise<{ sealed: Sealed; reprotect: boolean }> {
    if (!('protectedBy' in stored)) return { sealed: stored, reprotect: false };
    const protector = this.options.keyProtector;
    if (protector === undefined) {
      throw new CodedError(
        'VAULT_KEY_PROTECTED',
        `the vault key is also protected by the OS keyring (${stored.protectedBy}) through the Postern desktop app, and this process ` +
          'has no keyring access: unlock it in the desktop app on the machine and login that protected it (docs/vault.md: moving a vault)',
      );
    }
    let answer: { wrappedKey: Uint8Array; reprotect: boolean };
    try {
      answer = await protector.unprotect(stored.blob);
    } catch {
      // The keyring's own message may name paths or accounts; the code and backend say enough.
      throw protectorFailed(
        protector.backend,
        'could not unprotect the vault key (locked, another login or machine, or a damaged blob)',
      );
    }
    const sealed = answer.wrappedKey instanceof Uint8Array ? sealedKeyFromBytes(answer.wrappedKey) : undefined;
    if (sealed === undefined)
      throw new CodedError('VAULT_CORRUPT', 'the key protector gave back something that is not a sealed vault key');
    return { sealed, reprotect: answer.reprotect === true };
  }

  /** How the key should be stored after this unlock, or undefined to leave the row as it is. */
  private async restoredKey(unwrapped: Unwrapped): Promise<StoredKey | undefined> {
    const protector = this.options.keyProtector;
    if (protector === undefined) return undefined;
    const isProtected = 'protectedBy' in unwrapped.stored;
    if (!this.protectionWanted()) return isProtected ? unwrapped.sealed : undefined;
    const current =
      isProtected &&
      !unwrapped.reprotect &&
      (unwrapped.stored as { protectedBy: string }).protectedBy === protector.backend;
    return current ? undefined : this.protect(unwrapped.sealed);
  }

  private protectionWanted(): boolean {
    return this.options.keyProtector !== undefined && (this.options.keyProtection ?? 'apply') === 'apply';
  }

  private async protect(sealed: Sealed): Promise<StoredKey> {
    const protector = this.options.keyProtector;
    if (protector === undefined) throw new Error('protect needs a key protector');
    let blob: Uint8Array;
    try {
      blob = await protector.protect(sealedKeyBytes(sealed));
    } catch {
      throw protectorFailed(protector.backend, 'could not protect the vault key (keyring locked or unavailable)');
    }
    if (!(blob instanceof Uint8Array) || blob.length === 0 || blob.length > protectedKeyBytesMax) {
      throw protectorFailed(protector.backend, `gave back a blob outside 1..${protectedKeyBytesMax} bytes`);
    }
    return { protectedBy: protector.backend, blob };
  }

  private requireKey(): Uint8Array {
    this.assertOpen();
    this.lockIfIdle();
    if (this.dataKey !== undefined) return this.dataKey;
    const uninitialized = this.keyRow() === undefined;
    throw new CodedError(
      'VAULT_LOCKED',
      uninitialized ? 'the vault has not been created yet' : 'the vault is locked; unlock it and retry',
    );
  }

  private preparedSecret(
    shape: Pick<CredentialShape, 'kind' | 'header' | 'template' | 'param'>,
    secret: Uint8Array,
    sshKeyPassphrase: Uint8Array | undefined,
  ): Uint8Array {
    if (shape.kind === 'ssh_key') return importSshKey(secret, sshKeyPassphrase);
    if (sshKeyPassphrase !== undefined)
      throw new CodedError('INVALID_ARGUMENT', 'only applies to an ssh_key credential', { field: 'sshKeyPassphrase' });
    // Validate now (UTF-8, no control characters, user:password) so a bad secret fails at import, not at first use.
    materialFor(shape, secret);
    const copy = new Uint8Array(secret.length);
    copy.set(secret);
    return copy;
  }

  private assertOpen(): void {
    if (this.closed) throw new Error('the vault is closed');
  }
}

/**
 * What a sealed secret is bound to: its id and version (so rows cannot be swapped or rolled back
 * to an older version) and every metadata field that decides where and how it is sent (kind,
 * bindings, header, template, param), so editing the plaintext metadata in the file makes the
 * secret undecryptable instead of redirecting it.
 */
function associatedData(info: CredentialInfo): string {
  return JSON.stringify([
    'postern-credential:v1',
    info.id,
    info.version_tag,
    info.name,
    info.kind,
    info.bindings,
    info.header ?? null,
    info.template ?? null,
    info.param ?? null,
  ]);
}

function openCredential(key: Uint8Array, row: CredentialRow): Uint8Array {
  const plaintext = open(key, row.sealed satisfies Sealed, associatedData(row.info));
  // Never garbage: a swapped, rolled-back or edited row fails authentication and says so.
  if (plaintext === undefined)
    throw new CodedError('VAULT_CORRUPT', 'a stored credential failed its integrity check; nothing was decrypted');
  return plaintext;
}

function newCredentialId(): string {
  return `cred_${randomBytes(12).toString('hex')}`;
}

/** `v<rotation>-<random>`: the number tells people how often it rotated; the random part makes it unguessable and unique. */
function newVersionTag(rotation: number): string {
  return `v${rotation}-${randomBytes(4).toString('hex')}`;
}

function versionNumber(tag: string): number {
  const n = Number(/^v(\d{1,9})-/.exec(tag)?.[1] ?? '0');
  return Number.isSafeInteger(n) ? n : 0;
}

function checkPassphrase(passphrase: Uint8Array, minBytes: number): void {
  if (!(passphrase instanceof Uint8Array) || passphrase.length < minBytes) {
    throw new CodedError('INVALID_ARGUMENT', `a vault passphrase has at least ${minBytes} bytes`, {
      field: 'passphrase',
    });
  }
  if (passphrase.length > passphraseBytesMax)
    throw new CodedError('PAYLOAD_LIMIT', `a vault passphrase has at most ${passphraseBytesMax} bytes`, {
      field: 'passphrase',
    });
}

function checkPurpose(purpose: string): void {
  if (
    typeof purpose !== 'string' ||
    !/^[a-z0-9][a-z0-9_.:-]*$/i.test(purpose) ||
    purpose.length > wrapPurposeCharsMax
  ) {
    throw new CodedError('INVALID_ARGUMENT', `a wrap purpose is a label of at most ${wrapPurposeCharsMax} characters`, {
      field: 'purpose',
    });
  }
}

function protectorFailed(backend: string, what: string): CodedError {
  return new CodedError(
    'VAULT_KEY_PROTECTOR_FAILED',
    `the OS keyring (${backend}) ${what}; nothing was unlocked or changed`,
  );
}

function alreadyInitialized(): CodedError {
  return new CodedError('VAULT_ALREADY_INITIALIZED', 'the vault already exists in this data directory');
}

function unknownCredential(): CodedError {
  // DESIGN §3: a credential reference may itself be sensitive; the message never echoes it.
  return new CodedError('UNKNOWN_CREDENTIAL', 'no credential by that name', { field: 'name' });
}
