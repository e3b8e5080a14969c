import type { Clock, VaultKeyProtection, VaultKeyProtector } from '../ports/index.js';
import { sodiumReady, type KdfStrength } from './vault-crypto.js';
import { VaultStore } from './vault-store.js';
import { idleLockMsDefault, Vault } from './vault.js';

export {
  Vault,
  idleLockMsDefault,
  passphraseBytesMin,
  passphraseBytesMax,
  protectedKeyBytesMax,
  type AddOptions,
} from './vault.js';
export { vaultFileName } from './vault-store.js';
export { credentialNamePattern, secretBytesMax, type CredentialInput } from './credential-input.js';
export { sshKeyPassphraseBytesMax } from './ssh-key-import.js';
export { chooseKeyProtector, keyProtectorBackend, type KeyProtectorDecision } from './choose-key-protector.js';
export type { KdfStrength } from './vault-crypto.js';

export interface OpenVaultOptions {
  dataDir: string;
  clock: Clock;
  /** Lock after this long without operator activity; default 15 min; 0 = never. */
  idleLockMs?: number;
  /** Argon2id cost for a new vault. 'min' is for tests only (still real Argon2id). Default 'moderate'. */
  kdf?: KdfStrength;
  /**
   * The desktop's safeStorage protector: a new vault is stored protected, an unprotected one is
   * protected at its next unlock (or, with keyProtection 'remove', a protected one unprotected).
   * Without one, a protected vault refuses to unlock (VAULT_KEY_PROTECTED).
   */
  keyProtector?: VaultKeyProtector;
  keyProtection?: VaultKeyProtection;
  /**
   * Open the file read-only (VaultStore.openReadOnly): nothing created, migrated or written, and no key protector.
   * For commands that only unlock to unwrap, such as `postern audit verify --check-key`.
   */
  readOnly?: boolean;
}

/**
 * Opens (creating if needed, unless `readOnly`) `vault.sqlite` in the data directory. The vault starts locked, or
 * uninitialized when no key was ever set; nothing is decrypted until `unlock`.
 */
export async function openVault(options: OpenVaultOptions): Promise<Vault> {
  await sodiumReady();
  if (options.readOnly === true && options.keyProtector !== undefined)
    throw new Error('a read-only vault cannot take a key protector: protecting the key at unlock writes the file');
  const store = options.readOnly === true ? VaultStore.openReadOnly(options.dataDir) : VaultStore.open(options.dataDir);
  return new Vault({
    store,
    clock: options.clock,
    idleLockMs: options.idleLockMs ?? idleLockMsDefault,
    kdf: options.kdf ?? 'moderate',
    ...(options.keyProtector === undefined
      ? {}
      : { keyProtector: options.keyProtector, keyProtection: options.keyProtection ?? 'apply' }),
  });
}
export {
  createPassphraseAttempts,
  passphraseAttemptLimits,
  type AttemptAdmission,
  type AttemptResult,
  type PassphraseAttempts,
} from './passphrase-attempts.js';
export { deriveKekOffLoop } from './kdf-worker.js';
