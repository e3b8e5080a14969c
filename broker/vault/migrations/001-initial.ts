import type { VaultMigration } from './vault-migration.js';

/** The wrapped data key (one row) and one sealed secret per credential, metadata beside it in plaintext. */
export const vaultMigration001Initial: VaultMigration = {
  version: 1,
  name: 'initial',
  up(db) {
    db.exec(`
      CREATE TABLE vault_key (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        kdf_alg TEXT NOT NULL,
        salt BLOB NOT NULL,
        opslimit INTEGER NOT NULL,
        memlimit INTEGER NOT NULL,
        nonce BLOB NOT NULL,
        wrapped_key BLOB NOT NULL,
        created_at_ms INTEGER NOT NULL
      );
      CREATE TABLE credentials (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL,
        version_tag TEXT NOT NULL,
        bindings TEXT NOT NULL,
        header TEXT,
        param TEXT,
        template TEXT,
        nonce BLOB NOT NULL,
        sealed BLOB NOT NULL,
        updated_at_ms INTEGER NOT NULL
      );
    `);
  },
};
