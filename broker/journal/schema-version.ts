import type { Database } from 'better-sqlite3';

/**
 * The journal's schema version: PRAGMA user_version, which each migration step sets in its own transaction. Apart from
 * migrate.ts so a reader that only looks (read-snapshot.ts: `postern status`, `config pending`) loads no migration,
 * and with them neither the event cipher nor libsodium.
 */
export function schemaVersion(db: Database): number {
  return Number(db.pragma('user_version', { simple: true }));
}
