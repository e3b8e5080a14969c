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

const durable: DurabilityReadBack = { journal_mode: 'wal', synchronous: 2, fullfsync: 0, checkpoint_fullfsync: 0 };

describe('when the journal opens a real database file', () => {
  it('reads back WAL and synchronous=FULL from its own connection', async () => {
    const journal = await Journal.open({ path: join(dir.path, 'j.sqlite'), clock: new FakeClock() });
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
    });
    await journal.close();
  });

  it('sets FULL even though the bundled build defaults a WAL connection to less', () => {
    const db = new Database(join(dir.path, 'raw.sqlite'));
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    expect(() => assertDurable(readDurability(db), 'linux')).toThrow(/synchronous is 1/);
    expect(requireDurableConnection(db, 'linux').synchronous).toBe(2);
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
    ['journal_mode is delete', { ...durable, journal_mode: 'delete' }, 'linux', /journal_mode is delete/],
    ['synchronous is NORMAL', { ...durable, synchronous: 1 }, 'linux', /synchronous is 1/],
    ['synchronous is OFF', { ...durable, synchronous: 0 }, 'linux', /synchronous is 0/],
    ['fullfsync is off on macOS', { ...durable, synchronous: 2 }, 'darwin', /fullfsync is 0/],
    ['checkpoint_fullfsync is off on macOS', { ...durable, fullfsync: 1 }, 'darwin', /checkpoint_fullfsync is 0/],
  ] as const)('refuses when %s', (_name, readBack, platform, message) => {
    expect(() => assertDurable(readBack, platform)).toThrow(
      expect.objectContaining({ code: 'JOURNAL_NOT_DURABLE', message: expect.stringMatching(message) }),
    );
  });

  it.each([
    ['FULL on linux', durable, 'linux'],
    ['EXTRA on linux', { ...durable, synchronous: 3 }, 'linux'],
    ['FULL with fullfsync on macOS', { ...durable, fullfsync: 1, checkpoint_fullfsync: 1 }, 'darwin'],
  ] as const)('accepts %s', (_name, readBack, platform) => {
    expect(() => assertDurable(readBack, platform)).not.toThrow();
  });
});
