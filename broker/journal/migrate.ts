import type { Database } from 'better-sqlite3';
import { CodedError } from '../contract/index.js';
import type { Migration } from './migration.js';
import { journalMigrations } from './migrations/index.js';
import { schemaVersion } from './schema-version.js';

export { schemaVersion } from './schema-version.js';

/**
 * Brings the database to the newest schema this code knows, one step per transaction guarded by
 * PRAGMA user_version (which SQLite stores in the file header and rolls back with the
 * transaction). A failed step leaves the database at the version before it; a database written
 * by a newer broker is refused rather than guessed at. Returns the schema version in force.
 */
export function migrate(db: Database, migrations: readonly Migration[] = journalMigrations): number {
  assertNumbered(migrations);
  const known = migrations.length;
  const current = schemaVersion(db);
  if (current > known) {
    throw new CodedError(
      'MIGRATION_FAILED',
      `the journal schema is at version ${current}, newer than this broker knows (${known}); refusing to open it`,
    );
  }
  for (const step of migrations.slice(current)) applyStep(db, step);
  return schemaVersion(db);
}

function applyStep(db: Database, step: Migration): void {
  db.exec('BEGIN IMMEDIATE');
  try {
    // Re-read under the write lock: another process may have applied this step meanwhile.
    const before = schemaVersion(db);
    if (before >= step.version) {
      db.exec('COMMIT');
      return;
    }
    step.up(db);
    db.pragma(`user_version = ${step.version}`);
    db.exec('COMMIT');
  } catch (cause) {
    if (db.inTransaction) db.exec('ROLLBACK');
    throw new CodedError(
      'MIGRATION_FAILED',
      `journal migration ${String(step.version).padStart(3, '0')}-${step.name} failed; the database stays at version ${schemaVersion(db)}`,
      { cause },
    );
  }
}

/** A gap or a reordering in the list is a programmer error, not an operating one. */
function assertNumbered(migrations: readonly Migration[]): void {
  migrations.forEach((m, i) => {
    if (m.version !== i + 1) throw new Error(`migration ${m.name} has version ${m.version}, expected ${i + 1}`);
  });
}
