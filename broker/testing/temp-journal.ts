import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Journal, type JournalOpenOptions } from '../journal/journal.js';
import { ResultStore } from '../journal/result-store.js';
import { FakeClock } from './fake-clock.js';
import { createMemoryVault, type MemoryVault } from './memory-vault.js';
import { createTempDir, type TempDir } from './temp-dir.js';

export interface TempJournal {
  readonly journal: Journal;
  readonly clock: FakeClock;
  /** The vault the journal wraps its audit secrets with (unlocked unless the options gave one). */
  readonly vault: MemoryVault;
  readonly dir: TempDir;
  /** The database file, for second connections and reopening. */
  readonly path: string;
  /** An independent read-only connection to the file (as another process would open it), closed by dispose. */
  reader(): Database.Database;
  /** Closes the journal (if still open) and the reader, and removes the directory. */
  dispose(): Promise<void>;
}

/**
 * A journal on a real SQLite file in a fresh temp directory, with a manual clock and an unlocked
 * in-memory vault (pass `vault` to start locked). Reopen with `{ path, clock, vault }` to keep
 * reading earlier runs' events.
 */
export async function openTempJournal(
  options: Partial<Omit<JournalOpenOptions, 'vault'>> & { vault?: MemoryVault } = {},
): Promise<TempJournal> {
  const dir = createTempDir('postern-journal-');
  const clock = new FakeClock();
  const path = join(dir.path, 'journal.sqlite');
  try {
    const vault = options.vault ?? (await createMemoryVault());
    const journal = await Journal.open({ ...writerThreadPass(), ...options, path, clock, vault });
    let reader: Database.Database | undefined;
    return {
      journal,
      clock,
      vault,
      dir,
      path,
      reader: () => (reader ??= new Database(path, { readonly: true })),
      dispose: async () => {
        reader?.close();
        await journal.close();
        dir.remove();
      },
    };
  } catch (error) {
    dir.remove();
    throw error;
  }
}

/** The temp journals a test file's cases open, for the file to dispose after each case. */
export interface TempJournals {
  /** Opens a temp journal (openTempJournal) that the next `disposeOpened` disposes. */
  readonly open: () => Promise<TempJournal>;
  /** Disposes every temp journal opened since the last call: the file's afterEach (or a property run's end). */
  readonly disposeOpened: () => Promise<void>;
}

/** For a test file whose cases open one or more temp journals each: the file calls `disposeOpened` after each case. */
export function tempJournals(): TempJournals {
  const opened: TempJournal[] = [];
  return {
    open: async () => {
      const t = await openTempJournal();
      opened.push(t);
      return t;
    },
    disposeOpened: async () => {
      for (const t of opened.splice(0)) await t.dispose();
    },
  };
}

/** A temp journal with a ResultStore on its file, sealing with the journal's key; dispose closes both. */
export async function openTempResultStore(
  options: Parameters<typeof openTempJournal>[0] = {},
): Promise<{ temp: TempJournal; store: ResultStore }> {
  const temp = await openTempJournal(options);
  const store = ResultStore.open(temp.path, temp.journal.rowCipher(), { role: 'broker', journal: temp.journal });
  return {
    store,
    temp: {
      ...temp,
      dispose: async () => {
        store.close();
        await temp.dispose();
      },
    },
  };
}

/**
 * `npm test`'s writer-thread pass (POSTERN_TEST_WRITER_THREAD=1, scripts/test.mjs) runs the journal's tests again with
 * every batch committed on the writer thread; a test that is about the inline writer says `writerThread: false`.
 */
export function writerThreadPass(): Pick<JournalOpenOptions, 'writerThread' | 'threadBatchEventsMin'> {
  return process.env['POSTERN_TEST_WRITER_THREAD'] === '1' ? { writerThread: true, threadBatchEventsMin: 1 } : {};
}
