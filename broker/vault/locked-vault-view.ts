import { CodedError } from '../contract/coded-error.js';
import type { CredentialVault } from '../ports/credential-vault.js';
import type { VaultListing } from './vault-listing.js';

/**
 * A vault read from its file that stays locked: what a command with no broker and no passphrase may know of it (its
 * state, names and bindings), as a CredentialVault for code written against one (`postern config pending` attaches it
 * to the configuration's integrity, which asks only whether a vault exists). It never unlocks, so its unlock and lock
 * listeners never run; every use of a key is refused as a locked vault refuses it. Built from `readVaultListing`, so
 * neither libsodium nor the SSH key parser loads, and no file is created, migrated or written.
 */
export function lockedVaultView(listing: VaultListing): CredentialVault {
  const locked = (): CodedError =>
    new CodedError(
      'VAULT_LOCKED',
      listing.state === 'uninitialized'
        ? 'the vault has not been created yet'
        : 'the vault is locked; unlock it and retry',
    );
  const never = (): (() => void) => () => undefined;
  return {
    state: () => listing.state,
    list: () => listing.credentials,
    describe: (name) => listing.credentials.find((c) => c.name === name),
    withSecret: () => Promise.reject(locked()),
    wrap: () => {
      throw locked();
    },
    unwrap: () => {
      throw locked();
    },
    onLock: never,
    onUnlock: never,
  };
}
