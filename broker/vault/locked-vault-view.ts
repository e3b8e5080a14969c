import { CodedError } from '../contract/coded-error.js';
import type { CredentialInfo, CredentialVault } from '../ports/credential-vault.js';
import type { VaultListing } from './vault-listing.js';

/**
 * A vault read from its file that stays locked: what a command with no broker and no passphrase may know of it (its
 * state, names and bindings), as a CredentialVault for code written against one (`postern config pending` attaches it
 * to the configuration's integrity, which asks only whether a vault exists). It never unlocks, so its unlock and lock
 * listeners never run; every use of a key is refused as a locked vault refuses it. Its state comes from
 * `readVaultState` and its credentials, read only when asked, from `readVaultListing`: neither libsodium nor the SSH
 * key parser loads, no file is created, migrated or written, and a damaged credential row stops only a reader of the
 * credentials.
 */
export function lockedVaultView(
  state: VaultListing['state'],
  credentials: () => readonly CredentialInfo[],
): CredentialVault {
  const locked = (): CodedError =>
    new CodedError(
      'VAULT_LOCKED',
      state === 'uninitialized' ? 'the vault has not been created yet' : 'the vault is locked; unlock it and retry',
    );
  const never = (): (() => void) => () => undefined;
  return {
    state: () => state,
    list: credentials,
    describe: (name) => credentials().find((c) => c.name === name),
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
