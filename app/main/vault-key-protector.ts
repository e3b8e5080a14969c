import {
  chooseKeyProtector,
  keyProtectorBackend,
  type VaultKeyProtection,
  type VaultKeyProtector,
} from '../../broker/host/index.js';

export type { VaultKeyProtector } from '../../broker/host/index.js';

/**
 * The desktop side of "safeStorage as the vault key protector where available": asks Electron's
 * safeStorage which backend it uses and whether it can encrypt, applies the vault's policy
 * (`chooseKeyProtector`: the OS keychain, DPAPI or a real Linux keyring, never basic_text), and
 * when it says yes gives a protector that adds safeStorage as a second wrap around the vault's
 * already Argon2id-wrapped data key. The wrapped key is ciphertext, so passing it through a
 * string (safeStorage encrypts strings) exposes nothing; the raw data key never comes here.
 *
 * What it buys: a copied vault.sqlite cannot be attacked offline without the user's OS login too.
 * What it does not: a process running as the same user can usually ask the same keyring
 * (libsecret, kwallet, DPAPI) to decrypt, so against a same-user agent the passphrase stays the
 * lock. Electron is not imported: main passes `safeStorage`, tests pass a stand-in.
 */

/** The part of Electron's safeStorage used (the non-deprecated async API of Electron ≥ 38). */
export interface SafeStorageLike {
  isAsyncEncryptionAvailable(): Promise<boolean>;
  /** Linux only; never called elsewhere. */
  getSelectedStorageBackend(): string;
  encryptStringAsync(plainText: string): Promise<Uint8Array>;
  decryptStringAsync(encrypted: Buffer): Promise<{ result: string; shouldReEncrypt: boolean }>;
}

export type VaultKeyProtectorChoice =
  | { readonly use: true; readonly backend: string; readonly protector: VaultKeyProtector }
  | { readonly use: false; readonly backend: string; readonly reason: string };

/** Bounds the blob handed to safeStorage: a sealed 32-byte key with its nonce and tag is ~100 bytes. */
export const protectedKeyBytesMax = 4 * 1024;
/** A keyring that does not answer (a locked libsecret waiting on a prompt) must not hold the broker's start. */
export const availabilityWaitMsDefault = 3_000;

export async function chooseVaultKeyProtector(
  platform: string,
  safeStorage: SafeStorageLike,
  options: { availabilityWaitMs?: number } = {},
): Promise<VaultKeyProtectorChoice> {
  const backend = keyProtectorBackend(platform, () => {
    try {
      return safeStorage.getSelectedStorageBackend();
    } catch {
      return 'unknown';
    }
  });
  const decision = chooseKeyProtector(backend);
  if (!decision.use) return { use: false, backend, reason: decision.reason };
  const available = await availableWithin(safeStorage, options.availabilityWaitMs ?? availabilityWaitMsDefault);
  if (available !== true) {
    const why = available === 'timeout' ? 'did not answer in time' : 'cannot encrypt now (no keyring unlocked?)';
    return { use: false, backend, reason: `safeStorage with "${backend}" ${why}` };
  }
  return { use: true, backend, protector: safeStorageProtector(backend, safeStorage) };
}

async function availableWithin(safeStorage: SafeStorageLike, waitMs: number): Promise<boolean | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), waitMs);
  });
  try {
    return await Promise.race([safeStorage.isAsyncEncryptionAvailable().catch(() => false), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function safeStorageProtector(backend: string, safeStorage: SafeStorageLike): VaultKeyProtector {
  return {
    backend,
    async protect(wrappedKey) {
      checkSize(wrappedKey, 'wrappedKey');
      return new Uint8Array(await safeStorage.encryptStringAsync(Buffer.from(wrappedKey).toString('base64')));
    },
    async unprotect(blob) {
      checkSize(blob, 'blob');
      const { result, shouldReEncrypt } = await safeStorage.decryptStringAsync(Buffer.from(blob));
      return { wrappedKey: new Uint8Array(Buffer.from(result, 'base64')), reprotect: shouldReEncrypt };
    },
  };
}

function checkSize(bytes: Uint8Array, field: string): void {
  if (bytes.byteLength === 0 || bytes.byteLength > protectedKeyBytesMax)
    throw new RangeError(`${field} must be 1..${protectedKeyBytesMax} bytes, not ${bytes.byteLength}`);
}

/**
 * `POSTERN_VAULT_KEY_PROTECTION`: unset or `apply` protects the vault key; `remove` takes the
 * protection off at the next unlock (to move the vault to another machine or to the headless
 * daemon). Anything else refuses the start: a typo must not silently pick either.
 */
export const keyProtectionEnvName = 'POSTERN_VAULT_KEY_PROTECTION';

export function keyProtectionFromEnv(env: Readonly<Record<string, string | undefined>>): VaultKeyProtection {
  const value = env[keyProtectionEnvName];
  if (value === undefined || value === '' || value === 'apply') return 'apply';
  if (value === 'remove') return 'remove';
  throw new Error(`${keyProtectionEnvName} is "apply" or "remove", not ${JSON.stringify(value.slice(0, 32))}`);
}

/** The runtime options for a choice: a protector only when safeStorage can protect something. */
export function runtimeKeyProtectorOptions(
  choice: VaultKeyProtectorChoice,
  protection: VaultKeyProtection,
): { vaultKeyProtector?: VaultKeyProtector; vaultKeyProtection?: VaultKeyProtection } {
  return choice.use ? { vaultKeyProtector: choice.protector, vaultKeyProtection: protection } : {};
}

/** One line for the log: what happens to the vault key, never any key material. */
export function describeKeyProtectorChoice(
  choice: VaultKeyProtectorChoice,
  protection: VaultKeyProtection = 'apply',
): string {
  if (!choice.use) {
    // A vault protected earlier stays protected and refuses to unlock (VAULT_KEY_PROTECTED) until safeStorage works again.
    const removal = protection === 'remove' ? `; ${keyProtectionEnvName}=remove cannot take effect` : '';
    return `postern: the vault key is protected by the passphrase alone: ${choice.reason}${removal}`;
  }
  return protection === 'apply'
    ? `postern: safeStorage (${choice.backend}) protects the vault key (an unprotected vault is protected at its next unlock)`
    : `postern: ${keyProtectionEnvName}=remove: safeStorage (${choice.backend}) protection is taken off the vault key at its next unlock`;
}
