import { existsSync } from 'node:fs';
import path from 'node:path';
import type { BrokerStatus } from '../contract/index.js';
import type { RestingActionCounts } from '../core/index.js';
import { journalFileName, noJournalSnapshot } from '../journal/journal-file-name.js';

/** What `postern status` reports about a data directory without running a broker in it. */
export type DataDirStatus = Pick<BrokerStatus, 'data_dir' | 'journal'> & {
  /** As the file says them with no broker running it: dispatched with no outcome recorded is unknown, not in flight. */
  readonly actions: RestingActionCounts;
  /** False when the directory holds no journal file yet (no broker ever opened it): the counts are then zeros. */
  readonly journal_file: boolean;
};

/**
 * Reads the data directory's journal read-only: a running daemon may hold it, and only the writer
 * migrates or recovers. `closed` means "not open in this process"; `postern status` asks a running
 * broker for its own state instead, and says `unknown` when one runs but does not answer (broker/cli/status-command.ts).
 */
export async function readDataDirStatus(dataDir: string): Promise<DataDirStatus> {
  // No journal file: nothing to open, so the journal's modules (SQLite, the schemas) are not loaded for it.
  const snapshot = existsSync(path.join(dataDir, journalFileName))
    ? (await import('../journal/read-snapshot.js')).readJournalSnapshot(dataDir)
    : noJournalSnapshot;
  return {
    data_dir: dataDir,
    journal: {
      state: 'closed',
      events: snapshot.events,
      last_seq: snapshot.last_seq,
      schema_version: snapshot.schema_version,
      recovered_at_open: 0,
    },
    actions: { ...snapshot.actions },
    journal_file: snapshot.exists,
  };
}
