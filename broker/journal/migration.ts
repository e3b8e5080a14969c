import type { Database } from 'better-sqlite3';

/**
 * One numbered schema step. `up` runs inside the transaction that also bumps PRAGMA user_version,
 * so a step either lands completely with its version or not at all.
 */
export interface Migration {
  readonly version: number;
  readonly name: string;
  up(db: Database): void;
}
