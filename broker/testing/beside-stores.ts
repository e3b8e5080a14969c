import Database from 'better-sqlite3';
import { RequestStore } from '../journal/request-store.js';
import { ResultStore } from '../journal/result-store.js';
import { openTempJournal, type TempJournal } from './temp-journal.js';

/**
 * A temp journal (with a writer thread running, or inline) and the broker's two stores beside it, writing through it
 * (Journal.writeBeside): what the tests of the writes beside the journal and of the purges open. `close` closes the
 * stores, then the journal.
 */
export interface JournalWithStores {
  readonly temp: TempJournal;
  readonly results: ResultStore;
  readonly requests: RequestStore;
  close(): Promise<void>;
}

/**
 * `threadBatchEventsMin`: the journal's (inline, 12: no batch goes to a thread; with a thread, its default unless
 * given: 1 sends every batch, a lone event too).
 */
export async function openJournalWithStores(
  writerThread: boolean,
  threadBatchEventsMin?: number,
): Promise<JournalWithStores> {
  const batches = writerThread ? threadBatchEventsMin : 12;
  const temp = await openTempJournal({
    writerThread,
    ...(batches === undefined ? {} : { threadBatchEventsMin: batches }),
  });
  const results = ResultStore.open(temp.path, temp.journal.rowCipher(), { role: 'broker', journal: temp.journal });
  const requests = RequestStore.open(temp.path, process.platform, temp.journal);
  return {
    temp,
    results,
    requests,
    close: async () => {
      requests.close();
      results.close();
      await temp.dispose();
    },
  };
}

/** Another connection takes the write lock (as the writer thread does while it commits) and keeps it for `ms`. */
export function holdWriteLock(path: string, ms: number): Promise<void> {
  const db = new Database(path);
  db.exec('BEGIN IMMEDIATE');
  return new Promise((resolve) =>
    setTimeout(() => {
      db.exec('COMMIT');
      db.close();
      resolve();
    }, ms),
  );
}
