import type { VaultMigration } from './vault-migration.js';

/**
 * Which key protector (Electron safeStorage's backend, e.g. `keychain`) wraps the stored key, or NULL
 * for the passphrase alone. When set, `wrapped_key` holds the protector's blob of nonce ‖ sealed key
 * and `nonce` is empty: the sealed key itself is nowhere in the file. Existing rows stay NULL and
 * are protected at their next unlock by a vault opened with a protector.
 */
export const vaultMigration002KeyProtectedBy: VaultMigration = {
  version: 2,
  name: 'key-protected-by',
  up(db) {
    db.exec('ALTER TABLE vault_key ADD COLUMN protected_by TEXT');
  },
};
