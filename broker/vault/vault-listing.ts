import { statSync } from 'node:fs';
import { join } from 'node:path';
import type { CredentialInfo } from '../ports/credential-vault.js';
import { vaultFileName } from './vault-file-name.js';
import { VaultStore } from './vault-store.js';

export { OlderVaultSchema } from './vault-store.js';

/** What the vault file says without a key: whether it holds a wrapped key, and its credentials (never a secret). */
export interface VaultListing {
  readonly state: 'uninitialized' | 'locked';
  readonly credentials: readonly CredentialInfo[];
}

/**
 * `postern vault list` without a broker's word: the file read as it is, through the store's read-only connection
 * (VaultStore.openReadOnly: nothing created, chmodded, migrated or left beside it), with neither libsodium nor the
 * SSH key parser loaded (the vault itself needs both; a listing needs neither: issue 18's cold start). No file, or an
 * empty one (VaultStore.open creates it before SQLite writes the first page; an open that failed, or one still
 * starting, leaves it so): an uninitialized vault with no credentials, as opening the vault says, and still nothing
 * written. A file of an older schema is refused with what to do (the next start of Postern upgrades it).
 */
export function readVaultListing(dataDir: string): VaultListing {
  if (!vaultFileHoldsData(dataDir)) return { state: 'uninitialized', credentials: [] };
  const store = VaultStore.openReadOnly(dataDir);
  try {
    return { state: stateOf(store), credentials: store.list() };
  } finally {
    store.close();
  }
}

/**
 * Only whether the vault was created (its key row), read as readVaultListing reads the file: no credential row is
 * parsed, so a damaged one (anyone who can write the data directory can plant one) does not stop a reader that needs
 * only the state, as opening the vault would not (`postern config pending`). An older schema is refused, as there.
 */
export function readVaultState(dataDir: string): VaultListing['state'] {
  if (!vaultFileHoldsData(dataDir)) return 'uninitialized';
  const store = VaultStore.openReadOnly(dataDir);
  try {
    return stateOf(store);
  } finally {
    store.close();
  }
}

/** False for no file and for an empty one (VaultStore.open creates the file before SQLite writes its first page). */
export function vaultFileHoldsData(dataDir: string): boolean {
  const size = fileSize(join(dataDir, vaultFileName));
  return size !== undefined && size > 0;
}

const stateOf = (store: VaultStore): VaultListing['state'] =>
  store.readWrappedKey() === undefined ? 'uninitialized' : 'locked';

function fileSize(file: string): number | undefined {
  try {
    return statSync(file).size;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}
