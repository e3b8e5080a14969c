import { vaultMigration001Initial } from './001-initial.js';
import { vaultMigration002KeyProtectedBy } from './002-key-protected-by.js';
import type { VaultMigration } from './vault-migration.js';

export type { VaultMigration } from './vault-migration.js';
/** In order, numbered from 1 without gaps (vault-store.ts checks). */
export const vaultMigrations: readonly VaultMigration[] = [vaultMigration001Initial, vaultMigration002KeyProtectedBy];
