import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { CredentialInfo } from '../ports/credential-vault.js';
import { vaultFileName } from './vault-file-name.js';
import { VaultStore } from './vault-store.js';

/** What the vault file says without a key: whether it holds a wrapped key, and its credentials (never a secret). */
export interface VaultListing {
  readonly state: 'uninitialized' | 'locked';
  readonly credentials: readonly CredentialInfo[];
}

/**
 * `postern vault list` without a broker's word: the file read as it is, through the store's read-only connection
 * (VaultStore.openReadOnly: nothing created, chmodded, migrated or left beside it), with neither libsodium nor the
 * SSH key parser loaded (the vault itself needs both; a listing needs neither: issue 18's cold start). No file: an
 * uninitialized vault with no credentials, and still no file. A file of an older schema is refused with what to do
 * (the next start of Postern upgrades it).
 */
export function readVaultListing(dataDir: string): VaultListing {
  if (!existsSync(join(dataDir, vaultFileName))) return { state: 'uninitialized', credentials: [] };
  const store = VaultStore.openReadOnly(dataDir);
  try {
    return { state: store.readWrappedKey() === undefined ? 'uninitialized' : 'locked', credentials: store.list() };
  } finally {
    store.close();
  }
}
