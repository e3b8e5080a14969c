import { readFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openTempResultStore, type TempJournal } from '../testing/temp-journal.js';
import { migrate, schemaVersion } from './migrate.js';
import { journalMigrations } from './migrations/index.js';
import { migration013SshRecordings } from './migrations/013-ssh-recordings.js';
import { migration019RecordingAlive } from './migrations/019-recording-alive.js';
import { purgeFinishedSql, purgeOpenSql, recordingChunkBytes } from './recording-store.js';
import { ResultStore } from './result-store.js';

const coded = (code: string) => expect.objectContaining({ code });

describe('the recording store (migration 013, on the result store)', () => {
  let temp: TempJournal;
  let store: ResultStore;
  beforeEach(async () => ({ temp, store } = await openTempResultStore()));
  afterEach(() => temp.dispose());

  /** An open row as an earlier run left it: started by another store on the same file (returned, to finish late). */
  async function startedByEarlierRun(actionId: string, startedAtMs: number): Promise<ResultStore> {
    const earlier = ResultStore.open(temp.path, temp.journal.rowCipher(), { role: 'broker' });
    await earlier.recordings.start(actionId, startedAtMs);
    return earlier;
  }

  it('when a multi-chunk cast is finished, it reads back whole under rec_<action>, and its bytes are sealed', async () => {
    const canary = 'CANARY-cast-c0ffee';
    const cast = Buffer.from(`${'x'.repeat(recordingChunkBytes)}${canary}\n`);
    expect(await store.recordings.start('act_000001', 5)).toBe('rec_000001');
    await store.recordings.finish('rec_000001', cast, true, 9);
    expect(store.recordings.read('act_000001')).toMatchObject({
      recording_id: 'rec_000001',
      truncated: true,
      started_at_ms: 5,
      finished_at_ms: 9,
    });
    expect(store.recordings.read('act_000001').cast.equals(cast)).toBe(true);
    const db = new Database(temp.path, { readonly: true });
    expect(db.prepare(`SELECT chunks, cast_bytes FROM recordings`).get()).toEqual({
      chunks: 2,
      cast_bytes: cast.length,
    });
    db.close();
    for (const suffix of ['', '-wal'])
      expect(readFileSync(`${temp.path}${suffix}`).includes(canary), `journal.sqlite${suffix}`).toBe(false);
  });

  it('an action started twice, a finish of what is not open, and a second finish are refused', async () => {
    await store.recordings.start('act_000002', 1);
    await expect(store.recordings.start('act_000002', 2)).rejects.toThrow(coded('INTERNAL'));
    await expect(store.recordings.finish('rec_nope', Buffer.from('x'), false, 3)).rejects.toThrow(coded('INTERNAL'));
    await store.recordings.finish('rec_000002', Buffer.from('cast'), false, 3);
    await expect(store.recordings.finish('rec_000002', Buffer.from('cast'), false, 4)).rejects.toThrow(
      coded('INTERNAL'),
    );
  });

  it('reads answer NOT_FOUND with none, RECORDING_IN_PROGRESS while its command runs, RESULT_EXPIRED once purged', async () => {
    expect(() => store.recordings.read('act_000003')).toThrow(coded('NOT_FOUND'));
    await store.recordings.start('act_000003', 100);
    // Open, and its command is running here: nothing is lost yet, so not RECORDING_INCOMPLETE.
    expect(() => store.recordings.read('act_000003')).toThrow(
      expect.objectContaining({
        code: 'RECORDING_IN_PROGRESS',
        message: 'the command of act_000003 is still in progress: its recording is sealed when it ends',
      }),
    );
    // The next run's broker store did not start it: there it is a leftover (this store stands for a dead run).
    const next = ResultStore.open(temp.path, temp.journal.rowCipher(), { role: 'broker' });
    expect(() => next.recordings.read('act_000003')).toThrow(coded('RECORDING_INCOMPLETE'));
    next.close();
    await store.recordings.finish('rec_000003', Buffer.from('cast'), false, 101);
    // The result store's purge sweeps recordings by the same retention, counted from the finish (as its result's).
    expect(await store.purgeExpired(160, 60, 10)).toBe(0);
    expect(await store.purgeExpired(161, 60, 10)).toBe(1);
    expect(() => store.recordings.read('act_000003')).toThrow(coded('RESULT_EXPIRED'));
    const db = new Database(temp.path, { readonly: true });
    expect(db.prepare(`SELECT count(*) AS n FROM recording_chunks`).get()).toEqual({ n: 0 });
    db.close();
  });

  it('a reader beside the running broker says an open recording is of unknown state, and never purges it', async () => {
    // The broker (`store`, holding the data directory) runs a command; a tool opens the same file as a reader.
    await store.recordings.start('act_000016', 100);
    const reader = ResultStore.open(temp.path, temp.journal.rowCipher());
    try {
      // It cannot tell this running command from one whose broker died: neither "in progress" nor "incomplete".
      expect(() => reader.recordings.read('act_000016')).toThrow(
        expect.objectContaining({
          code: 'RECORDING_STATE_UNKNOWN',
          message:
            'the recording of act_000016 is open, and this reader cannot tell whether its command is still running: ask the running broker',
        }),
      );
      expect(() => store.recordings.read('act_000016')).toThrow(coded('RECORDING_IN_PROGRESS'));
      // Its purge, long past the retention, leaves the running command's recording (finished ones it does purge).
      await store.recordings.start('act_000017', 100);
      await store.recordings.finish('rec_000017', Buffer.from('done'), false, 200);
      expect(await reader.purgeExpired(10_000, 60, 10)).toBe(1);
      await expect(reader.recordings.start('act_000018', 100)).rejects.toThrow(coded('INTERNAL'));
      await store.recordings.finish('rec_000016', Buffer.from('whole cast'), false, 10_001);
      expect(reader.recordings.read('act_000016').cast.toString()).toBe('whole cast');
    } finally {
      reader.close();
    }
  });

  it('a purged recording answers RESULT_EXPIRED whether it was open or complete, never RECORDING_INCOMPLETE', async () => {
    // Left open (a command sent, then the broker crashed before the seal), and another finished; both past retention.
    (await startedByEarlierRun('act_000006', 100)).close();
    await store.recordings.start('act_000007', 100);
    await store.recordings.finish('rec_000007', Buffer.from('cast'), false, 101);
    expect(() => store.recordings.read('act_000006')).toThrow(coded('RECORDING_INCOMPLETE'));
    expect(await store.purgeExpired(161, 60, 10)).toBe(2);
    // Expired either way, never "output lost". The sealed one's chunks were deleted; the open one never had any
    // (finish writes them with the mark that completes the row), so its answer says it never completed.
    expect(() => store.recordings.read('act_000007')).toThrow(
      expect.objectContaining({
        code: 'RESULT_EXPIRED',
        message: 'the recording of act_000007 passed its retention and was purged',
      }),
    );
    expect(() => store.recordings.read('act_000006')).toThrow(
      expect.objectContaining({
        code: 'RESULT_EXPIRED',
        message: 'the recording of act_000006 never completed, and its retention has passed',
      }),
    );
  });

  it('a running command keeps its recording past the retention; it goes a retention after it finished', async () => {
    await store.recordings.start('act_000010', 100);
    // Its command has run for 10 s against a 60 ms retention: nothing to purge, it is still being recorded.
    expect(await store.purgeExpired(10_100, 60, 10)).toBe(0);
    await store.recordings.finish('rec_000010', Buffer.from('long cast'), false, 10_100);
    expect(store.recordings.read('act_000010').cast.toString()).toBe('long cast');
    expect(await store.purgeExpired(10_159, 60, 10)).toBe(0);
    expect(await store.purgeExpired(10_160, 60, 10)).toBe(1);
    expect(() => store.recordings.read('act_000010')).toThrow(coded('RESULT_EXPIRED'));
  });

  it("an earlier run's recording left open by a crash mid-command is kept a retention after it was last seen running", async () => {
    // The earlier broker starts a command at 100; its sweeps at 5,000 and 10,000 find it still running.
    const earlier = await startedByEarlierRun('act_000015', 100);
    expect(await earlier.purgeExpired(5_000, 60, 10)).toBe(0);
    expect(await earlier.purgeExpired(10_000, 60, 10)).toBe(0);
    // A sweep at an earlier clock (a clock stepped back) never moves the mark back.
    expect(await earlier.purgeExpired(7_000, 60, 10)).toBe(0);
    // Then it dies mid-command: no finish, no forget. The next run reads a leftover (its command was sent).
    earlier.close();
    expect(() => store.recordings.read('act_000015')).toThrow(coded('RECORDING_INCOMPLETE'));
    // Purged a retention after 10,000, the last moment it was known running, not a retention after it started.
    expect(await store.purgeExpired(10_059, 60, 10)).toBe(0);
    expect(() => store.recordings.read('act_000015')).toThrow(coded('RECORDING_INCOMPLETE'));
    expect(await store.purgeExpired(10_060, 60, 10)).toBe(1);
    expect(() => store.recordings.read('act_000015')).toThrow(coded('RESULT_EXPIRED'));
  });

  it('a running command does not hold back the purge of the leftovers behind it, and the batch stays bounded', async () => {
    await store.recordings.start('act_000011', 1);
    const earlier = await startedByEarlierRun('act_000012', 2);
    await earlier.recordings.start('act_000013', 3);
    earlier.close();
    expect(await store.recordings.purgeExpired(1_000, 60, 1)).toBe(1);
    expect(await store.recordings.purgeExpired(1_000, 60, 1)).toBe(1);
    expect(await store.recordings.purgeExpired(1_000, 60, 1)).toBe(0);
    for (const id of ['act_000012', 'act_000013'])
      expect(() => store.recordings.read(id)).toThrow(coded('RESULT_EXPIRED'));
    expect(() => store.recordings.read('act_000011')).toThrow(coded('RECORDING_IN_PROGRESS'));
  });

  it('a recording forgotten (its cast could not be built) is a leftover: RECORDING_INCOMPLETE, purged by its end', async () => {
    await store.recordings.start('act_000014', 100);
    await store.recordings.forget('rec_000014', 5_000);
    // A second forget is a no-op, and does not move the mark.
    await store.recordings.forget('rec_000014', 9_000);
    expect(() => store.recordings.read('act_000014')).toThrow(coded('RECORDING_INCOMPLETE'));
    // Its command ran until 5,000: the retention counts from then, not from its start.
    expect(await store.purgeExpired(5_059, 60, 10)).toBe(0);
    expect(await store.purgeExpired(5_060, 60, 10)).toBe(1);
    expect(() => store.recordings.read('act_000014')).toThrow(coded('RESULT_EXPIRED'));
  });

  it("the purge's reads search recordings_by_finish (the open rows its NULL range), never scan every recording", () => {
    const db = new Database(temp.path, { readonly: true });
    try {
      const plan = (sql: string): string =>
        db
          .prepare(`EXPLAIN QUERY PLAN ${sql}`)
          .all(1_000, 500)
          .map((r) => (r as { detail: string }).detail)
          .join('\n');
      expect(plan(purgeOpenSql)).toContain('SEARCH recordings USING INDEX recordings_by_finish (finished_at_ms=?)');
      expect(plan(purgeFinishedSql)).toContain('SEARCH recordings USING INDEX recordings_by_finish (finished_at_ms<?)');
      for (const sql of [purgeOpenSql, purgeFinishedSql]) expect(plan(sql)).not.toMatch(/\bSCAN\b/);
    } finally {
      db.close();
    }
  });

  it("an earlier run's open recording purged before that run's late finish is not sealed then", async () => {
    const earlier = await startedByEarlierRun('act_000009', 100);
    expect(await store.purgeExpired(160, 60, 10)).toBe(1);
    await expect(earlier.recordings.finish('rec_000009', Buffer.from('late cast'), false, 200)).rejects.toThrow(
      coded('RESULT_EXPIRED'),
    );
    earlier.close();
    // Nothing is kept that no later purge would find (purges look only at rows not yet purged).
    const db = new Database(temp.path, { readonly: true });
    expect(db.prepare(`SELECT count(*) AS n FROM recording_chunks`).get()).toEqual({ n: 0 });
    expect(db.prepare(`SELECT complete FROM recordings WHERE recording_id = 'rec_000009'`).get()).toEqual({
      complete: 0,
    });
    db.close();
    expect(() => store.recordings.read('act_000009')).toThrow(coded('RESULT_EXPIRED'));
    expect(await store.purgeExpired(10_000, 60, 10)).toBe(0);
  });

  it('a row marked complete without its finish time is damaged (INTERNAL), not an unfinished recording', async () => {
    await store.recordings.start('act_000008', 1);
    await store.recordings.finish('rec_000008', Buffer.from('cast'), false, 2);
    const db = new Database(temp.path);
    db.exec(`UPDATE recordings SET finished_at_ms = NULL WHERE recording_id = 'rec_000008'`);
    db.close();
    expect(() => store.recordings.read('act_000008')).toThrow(coded('INTERNAL'));
  });

  it('open recordings are listed in action id order after a cursor, bounded; finished and purged ones are not', async () => {
    (await startedByEarlierRun('act_000001', 1)).close();
    for (const n of [4, 3, 2, 5]) await store.recordings.start(`act_00000${n}`, n);
    await store.recordings.finish('rec_000002', Buffer.from('cast'), false, 9);
    await store.recordings.purgeExpired(3, 0, 1);
    expect(store.recordings.openActionIds('', 500)).toEqual(['act_000003', 'act_000004', 'act_000005']);
    expect(store.recordings.openActionIds('act_000003', 1)).toEqual(['act_000004']);
    expect(() => store.recordings.openActionIds('', 501)).toThrow(RangeError);
  });

  it('a chunk moved from another recording, or a missing one, is never handed over', async () => {
    await store.recordings.start('act_000004', 1);
    await store.recordings.finish('rec_000004', Buffer.from('four'), false, 2);
    await store.recordings.start('act_000005', 1);
    await store.recordings.finish('rec_000005', Buffer.from('five'), false, 2);
    const db = new Database(temp.path);
    db.exec(
      `UPDATE recording_chunks SET bytes = (SELECT bytes FROM recording_chunks WHERE recording_id = 'rec_000005'),
         nonce = (SELECT nonce FROM recording_chunks WHERE recording_id = 'rec_000005') WHERE recording_id = 'rec_000004'`,
    );
    db.exec(`DELETE FROM recording_chunks WHERE recording_id = 'rec_000005'`);
    db.close();
    expect(() => store.recordings.read('act_000004')).toThrow(coded('INTERNAL'));
    expect(() => store.recordings.read('act_000005')).toThrow(coded('INTERNAL'));
  });
});

describe('when a version 12 database is migrated to 13', () => {
  it('keeps every result and adds empty, strict recordings tables', () => {
    const db = new Database(':memory:');
    try {
      const upTo12 = journalMigrations.filter((m) => m.version <= 12);
      migrate(db, upTo12);
      const before = db.prepare(`SELECT count(*) AS n FROM results`).get();
      expect(migrate(db, [...upTo12, migration013SshRecordings])).toBe(13);
      expect(schemaVersion(db)).toBe(13);
      expect(db.prepare(`SELECT count(*) AS n FROM results`).get()).toEqual(before);
      expect(db.prepare(`SELECT count(*) AS n FROM recordings`).get()).toEqual({ n: 0 });
      expect(() =>
        db.prepare(`INSERT INTO recordings (recording_id, action_id, started_at_ms) VALUES ('r', 'a', 'now')`).run(),
      ).toThrow(/cannot store TEXT value in INTEGER column/);
    } finally {
      db.close();
    }
  });
});

describe('when a version 18 database is migrated to 19', () => {
  it('marks each recording alive at its finish, or an open one at its start (what the purge counted from before)', () => {
    const db = new Database(':memory:');
    try {
      const upTo18 = journalMigrations.filter((m) => m.version <= 18);
      migrate(db, upTo18);
      db.exec(`INSERT INTO recordings (recording_id, action_id, started_at_ms) VALUES ('rec_1', 'act_1', 100);
        INSERT INTO recordings (recording_id, action_id, started_at_ms, complete, finished_at_ms)
          VALUES ('rec_2', 'act_2', 100, 1, 300)`);
      expect(migrate(db, [...upTo18, migration019RecordingAlive])).toBe(19);
      expect(db.prepare(`SELECT recording_id, alive_at_ms FROM recordings ORDER BY recording_id`).all()).toEqual([
        { recording_id: 'rec_1', alive_at_ms: 100 },
        { recording_id: 'rec_2', alive_at_ms: 300 },
      ]);
    } finally {
      db.close();
    }
  });
});
