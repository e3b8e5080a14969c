import type { Database } from 'better-sqlite3';

/**
 * Drops index `name` and creates it again `on` the same table and columns (`actions (first_seq)`), partial on its new
 * `where`: a migration that changes which rows a filter's index covers (the filter's query names the condition
 * exactly, so INDEXED BY still applies). An index only: no row changes. Runs inside the migration's transaction, so a
 * committed schema never lacks the index.
 */
export function rebuildPartialIndex(db: Database, name: string, on: string, where: string): void {
  db.exec(`DROP INDEX ${name}; CREATE INDEX ${name} ON ${on} WHERE ${where};`);
}
