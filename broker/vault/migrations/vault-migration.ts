import type { Database } from 'better-sqlite3';

/** One numbered step of vault.sqlite's schema; `up` runs in the transaction that bumps PRAGMA user_version. */
export interface VaultMigration {
  readonly version: number;
  readonly name: string;
  up(db: Database): void;
}
