import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { openDatabase } from '../ports/open-database.js';
import { journalFileName } from './journal.js';
import { JournalStore, type ActionCounts } from './journal-store.js';
import { schemaVersion } from './migrate.js';

export interface JournalSnapshot {
  readonly exists: boolean;
  readonly events: number;
  readonly last_seq: number;
  readonly schema_version: number;
  readonly actions: ActionCounts;
}

/**
 * Reads a data directory's journal without becoming its writer: a read-only connection, no
 * migration, no recovery (a running daemon may hold the journal, and only the writer recovers).
 */
export function readJournalSnapshot(dataDir: string): JournalSnapshot {
  const path = join(dataDir, journalFileName);
  if (!existsSync(path)) {
    return {
      exists: false,
      events: 0,
      last_seq: 0,
      schema_version: 0,
      actions: { total: 0, in_flight: 0, unknown: 0 },
    };
  }
  const db = openDatabase(path, { readonly: true, fileMustExist: true });
  try {
    const version = schemaVersion(db);
    if (version === 0) {
      return {
        exists: true,
        events: 0,
        last_seq: 0,
        schema_version: 0,
        actions: { total: 0, in_flight: 0, unknown: 0 },
      };
    }
    const store = new JournalStore(db);
    return {
      exists: true,
      events: store.countEvents(),
      last_seq: store.lastSeq(),
      schema_version: version,
      actions: store.actionCounts(),
    };
  } finally {
    db.close();
  }
}
