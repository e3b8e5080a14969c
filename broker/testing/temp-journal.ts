import { join } from 'node:path';
import { Journal, type JournalOpenOptions } from '../journal/journal.js';
import { FakeClock } from './fake-clock.js';
import { createTempDir, type TempDir } from './temp-dir.js';

export interface TempJournal {
  readonly journal: Journal;
  readonly clock: FakeClock;
  readonly dir: TempDir;
  /** The database file, for second connections and reopening. */
  readonly path: string;
  /** Closes the journal (if still open) and removes the directory. */
  dispose(): Promise<void>;
}

/** A journal on a real SQLite file in a fresh temp directory, with a manual clock. */
export async function openTempJournal(options: Partial<JournalOpenOptions> = {}): Promise<TempJournal> {
  const dir = createTempDir('postern-journal-');
  const clock = new FakeClock();
  const path = join(dir.path, 'journal.sqlite');
  try {
    const journal = await Journal.open({ ...options, path, clock });
    return {
      journal,
      clock,
      dir,
      path,
      dispose: async () => {
        await journal.close();
        dir.remove();
      },
    };
  } catch (error) {
    dir.remove();
    throw error;
  }
}
