import { randomBytes } from 'node:crypto';
import { CodedError } from '../contract/index.js';
import type { Clock, CredentialInfo, CredentialVault, SecretMaterial, VaultState } from '../ports/index.js';
import { checkSecretSize, materialFor, validateName, validateShape, type CredentialInput, type CredentialShape } from './credential-input.js';
import { importSshKey } from './ssh-key-import.js';
import { deriveKekOffLoop } from './kdf-worker.js';
import { newKdfParams, open, randomKey, seal, wipe, type KdfStrength, type Sealed } from './vault-crypto.js';
import type { CredentialRow, VaultStore } from './vault-store.js';

/** Lock after 15 minutes without operator activity unless configured otherwise. */
export const idleLockMsDefault = 15 * 60 * 1_000;
export const passphraseBytesMin = 8;
export const passphraseBytesMax = 1_024;
/** `wrap`/`unwrap` purposes are short labels; payloads are keys, not documents. */
export const wrapPurposeCharsMax = 64;
export const wrapBytesMax = 64 * 1024;
/** The data key's AD: ties the wrapped key to its role so it cannot be confused with a wrapped blob. */
const dataKeyAd = 'postern-vault-data-key:v1';
const wrapAdPrefix = 'postern-wrap:';

export interface VaultOptions {
  readonly store: VaultStore;
  readonly clock: Clock;
  /** 0 = never. */
  readonly idleLockMs: number;
  readonly kdf: KdfStrength;
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
  private lastActivityMs = 0;
  private idleTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private readonly lockListeners = new Set<(reason: string) => void>();
  private readonly unlockListeners = new Set<() => void>();

  constructor(private readonly options: VaultOptions) {
    if (!Number.isInteger(options.idleLockMs) || options.idleLockMs < 0) throw new RangeError(`idleLockMs must be a whole number of ms >= 0, not ${options.idleLockMs}`);
  }

  state(): VaultState {
    // A closed vault holds no key; status may still be asked after shutdown.
    if (this.closed) return 'locked';
    this.lockIfIdle();
    if (this.dataKey !== undefined) return 'unlocked';
    return this.options.store.readWrappedKey() === undefined ? 'uninitialized' : 'locked';
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
    if (this.options.store.readWrappedKey() !== undefined) throw alreadyInitialized();
    const kdf = newKdfParams(this.options.kdf);
    const kek = await deriveKekOffLoop(passphrase, kdf);
    // Another init may have won while the worker derived.
    if (this.options.store.readWrappedKey() !== undefined) {
      wipe(kek);
      throw alreadyInitialized();
    }
    const dataKey = randomKey();
    try {
      const sealed = seal(kek, dataKey, dataKeyAd);
      if (!this.options.store.insertWrappedKey({ kdf, sealed }, this.options.clock.nowMs())) throw alreadyInitialized();
    } catch (error) {
      wipe(dataKey);
      throw error;
    } finally {
      wipe(kek);
    }
    this.becomeUnlocked(dataKey);
  }

  async unlock(passphrase: Uint8Array): Promise<void> {
    this.assertOpen();
    checkPassphrase(passphrase, 1);
    const dataKey = await this.unwrapDataKey(passphrase);
    if (this.closed) {
      wipe(dataKey);
      throw new CodedError('VAULT_LOCKED', 'the vault closed while the passphrase was checked');
    }
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
      wipe(await this.unwrapDataKey(passphrase));
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
      if (!this.options.store.replaceSecret(info.id, row.info.version_tag, info.version_tag, sealed, this.options.clock.nowMs())) {
        throw new CodedError('CREDENTIAL_EXISTS', 'the credential changed while rotating; list it and try again', { field: 'name' });
      }
      return Promise.resolve(info);
    } finally {
      wipe(stored);
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
        ? open(key, { nonce: sealedBytes.subarray(0, nonceLength), ciphertext: sealedBytes.subarray(nonceLength) }, wrapAdPrefix + purpose)
        : undefined;
    if (plaintext === undefined) throw new CodedError('VAULT_CORRUPT', 'the wrapped value failed its integrity check (wrong purpose, other vault, or damaged)');
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

  private async unwrapDataKey(passphrase: Uint8Array): Promise<Uint8Array> {
    const wrapped = this.options.store.readWrappedKey();
    if (wrapped === undefined) throw new CodedError('VAULT_NOT_INITIALIZED', 'the vault has not been created; run `postern vault init`');
    const kek = await deriveKekOffLoop(passphrase, wrapped.kdf);
    try {
      const dataKey = open(kek, wrapped.sealed, dataKeyAd);
      if (dataKey === undefined) throw new CodedError('VAULT_PASSPHRASE_INVALID', 'the passphrase does not open this vault', { field: 'passphrase' });
      if (dataKey.length !== 32) throw new CodedError('VAULT_CORRUPT', 'the unwrapped data key has the wrong length');
      return dataKey;
    } finally {
      wipe(kek);
    }
  }

  private requireKey(): Uint8Array {
    this.assertOpen();
    this.lockIfIdle();
    if (this.dataKey !== undefined) return this.dataKey;
    const uninitialized = this.options.store.readWrappedKey() === undefined;
    throw new CodedError('VAULT_LOCKED', uninitialized ? 'the vault has not been created yet' : 'the vault is locked; unlock it and retry');
  }

  private preparedSecret(shape: Pick<CredentialShape, 'kind' | 'header' | 'template' | 'param'>, secret: Uint8Array, sshKeyPassphrase: Uint8Array | undefined): Uint8Array {
    if (shape.kind === 'ssh_key') return importSshKey(secret, sshKeyPassphrase);
    if (sshKeyPassphrase !== undefined) throw new CodedError('INVALID_ARGUMENT', 'only applies to an ssh_key credential', { field: 'sshKeyPassphrase' });
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
  return JSON.stringify(['postern-credential:v1', info.id, info.version_tag, info.name, info.kind, info.bindings, info.header ?? null, info.template ?? null, info.param ?? null]);
}

function openCredential(key: Uint8Array, row: CredentialRow): Uint8Array {
  const plaintext = open(key, row.sealed satisfies Sealed, associatedData(row.info));
  // Never garbage: a swapped, rolled-back or edited row fails authentication and says so.
  if (plaintext === undefined) throw new CodedError('VAULT_CORRUPT', 'a stored credential failed its integrity check; nothing was decrypted');
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
    throw new CodedError('INVALID_ARGUMENT', `a vault passphrase has at least ${minBytes} bytes`, { field: 'passphrase' });
  }
  if (passphrase.length > passphraseBytesMax) throw new CodedError('PAYLOAD_LIMIT', `a vault passphrase has at most ${passphraseBytesMax} bytes`, { field: 'passphrase' });
}

function checkPurpose(purpose: string): void {
  if (typeof purpose !== 'string' || !/^[a-z0-9][a-z0-9_.:-]*$/i.test(purpose) || purpose.length > wrapPurposeCharsMax) {
    throw new CodedError('INVALID_ARGUMENT', `a wrap purpose is a label of at most ${wrapPurposeCharsMax} characters`, { field: 'purpose' });
  }
}

function alreadyInitialized(): CodedError {
  return new CodedError('VAULT_ALREADY_INITIALIZED', 'the vault already exists in this data directory');
}

function unknownCredential(): CodedError {
  // DESIGN §3: a credential reference may itself be sensitive; the message never echoes it.
  return new CodedError('UNKNOWN_CREDENTIAL', 'no credential by that name', { field: 'name' });
}
