/**
 * A second wrap around the vault's already passphrase-wrapped data key, bound to the user's OS login
 * (Electron safeStorage: macOS Keychain, Windows DPAPI, a Linux keyring). The vault stores
 * `protect(sealed key)` instead of the sealed key, so a copied vault.sqlite gives nothing to run
 * passphrase guesses against without that login too. The passphrase stays the lock: a protector
 * never sees the raw data key, only ciphertext.
 *
 * Implemented by app/main (safeStorage); broker/vault depends on this port, never on Electron.
 */
export interface VaultKeyProtector {
  /** Which OS store protects the key (`keychain`, `dpapi`, `gnome_libsecret`, …); recorded beside the blob. */
  readonly backend: string;
  /** The sealed (passphrase-wrapped) data key → the blob stored in vault.sqlite instead. Rejects when the keyring cannot. */
  protect(wrappedKey: Uint8Array): Promise<Uint8Array>;
  /**
   * The stored blob → the sealed data key. `reprotect` when the OS rotated its key and the blob should be
   * rewritten. Rejects when the keyring is locked, the login or machine differs, or the blob is damaged.
   */
  unprotect(blob: Uint8Array): Promise<{ wrappedKey: Uint8Array; reprotect: boolean }>;
}

/**
 * What the vault does with a protector it was given: `apply` protects a new vault and upgrades an
 * unprotected one at its next unlock; `remove` unprotects at the next unlock (to move the vault to
 * another machine, or hand it back to the headless daemon).
 */
export type VaultKeyProtection = 'apply' | 'remove';
