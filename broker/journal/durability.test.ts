import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CodedError } from '../contract/index.js';
import { FakeClock } from '../testing/fake-clock.js';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import { assertDurable, readDurability, requireDurableConnection, type DurabilityReadBack } from './durability.js';
import { Journal } from './journal.js';

let dir: TempDir;
beforeEach(() => {
  dir = createTempDir();
});
afterEach(() => dir.remove());

const durable: DurabilityReadBack = {
  journal_mode: 'wal',
  synchronous: 2,
  fullfsync: 0,
  checkpoint_fullfsync: 0,
  wal_autocheckpoint: 0,
};

describe('when the journal opens a real database file', () => {
  it('on Linux syncs behind: reads back WAL and synchronous=NORMAL (the journal fdatasyncs the WAL itself)', async () => {
    const journal = await Journal.open({ path: join(dir.path, 'j.sqlite'), clock: new FakeClock(), platform: 'linux' });
    expect(journal.durability()).toMatchObject({ journal_mode: 'wal', synchronous: 1 });
    await journal.close();
  });

  it('in commit mode reads back WAL and synchronous=FULL from its own connection', async () => {
    const journal = await Journal.open({
      path: join(dir.path, 'j.sqlite'),
      clock: new FakeClock(),
      syncMode: 'commit',
    });
    expect(journal.durability()).toMatchObject({ journal_mode: 'wal', synchronous: 2 });
    await journal.close();
  });

  it('on macOS rules also reads back fullfsync and checkpoint_fullfsync', async () => {
    // SQLite accepts these pragmas on every platform, so the darwin branch runs here for real.
    const journal = await Journal.open({
      path: join(dir.path, 'j.sqlite'),
      clock: new FakeClock(),
      platform: 'darwin',
    });
    expect(journal.durability()).toEqual({
      journal_mode: 'wal',
      synchronous: 2,
      fullfsync: 1,
      checkpoint_fullfsync: 1,
      // Checkpoints run on the checkpointer's thread, never inside a COMMIT (wal-checkpointer.ts).
      wal_autocheckpoint: 0,
    });
    await journal.close();
  });

  it('in commit mode sets FULL even though the bundled build defaults a WAL connection to less', () => {
    const db = new Database(join(dir.path, 'raw.sqlite'));
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    expect(() => assertDurable(readDurability(db), 'linux', 'commit')).toThrow(/synchronous is 1/);
    expect(requireDurableConnection(db, 'linux', 'commit').synchronous).toBe(2);
    db.close();
  });

  it('in sync-behind mode refuses a connection that would not even write its WAL frames at COMMIT (OFF)', () => {
    const db = new Database(join(dir.path, 'raw.sqlite'));
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = OFF');
    expect(() => assertDurable(readDurability(db), 'linux', 'behind')).toThrow(/synchronous is 0/);
    expect(requireDurableConnection(db, 'linux', 'behind').synchronous).toBe(1);
    db.close();
  });
});

describe('when a durability setting is not in force', () => {
  it('refuses to open an in-memory database, which cannot be WAL', async () => {
    const opening = Journal.open({ path: ':memory:', clock: new FakeClock() });
    await expect(opening).rejects.toBeInstanceOf(CodedError);
    await expect(opening).rejects.toMatchObject({ code: 'JOURNAL_NOT_DURABLE', message: /journal_mode is memory/ });
  });

  it.each([
    ['journal_mode is delete', { ...durable, journal_mode: 'delete' }, 'linux', 'behind', /journal_mode is delete/],
    ['synchronous is NORMAL in commit mode', { ...durable, synchronous: 1 }, 'linux', 'commit', /synchronous is 1/],
    ['synchronous is OFF', { ...durable, synchronous: 0 }, 'linux', 'behind', /synchronous is 0/],
    ['fullfsync is off on macOS', { ...durable, synchronous: 2 }, 'darwin', 'commit', /fullfsync is 0/],
    [
      'checkpoint_fullfsync is off on macOS',
      { ...durable, fullfsync: 1 },
      'darwin',
      'commit',
      /checkpoint_fullfsync is 0/,
    ],
    [
      'sync-behind on macOS (fdatasync is not F_FULLFSYNC)',
      { ...durable, fullfsync: 1, checkpoint_fullfsync: 1 },
      'darwin',
      'behind',
      /sync-behind needs F_FULLFSYNC/,
    ],
  ] as const)('refuses when %s', (_name, readBack, platform, mode, message) => {
    expect(() => assertDurable(readBack, platform, mode)).toThrow(
      expect.objectContaining({ code: 'JOURNAL_NOT_DURABLE', message: expect.stringMatching(message) }),
    );
  });

  it.each([
    ['FULL on linux', durable, 'linux'],
    ['NORMAL on linux (sync-behind, the default there)', { ...durable, synchronous: 1 }, 'linux'],
    ['EXTRA on linux', { ...durable, synchronous: 3 }, 'linux'],
    ['FULL with fullfsync on macOS', { ...durable, fullfsync: 1, checkpoint_fullfsync: 1 }, 'darwin'],
  ] as const)('accepts %s', (_name, readBack, platform) => {
    expect(() => assertDurable(readBack, platform)).not.toThrow();
  });
});
