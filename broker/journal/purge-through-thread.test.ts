import { existsSync, readFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { startResultPurge } from '../host/result-purge.js';
import { actionPaths } from '../testing/action-paths.js';
import { createCapturedLogger } from '../testing/captured-logger.js';
import { watchEventLoop } from '../testing/event-loop-gaps.js';
import { ManualTimers } from '../testing/manual-timers.js';
import { holdWriteLock, openJournalWithStores, type JournalWithStores } from '../testing/beside-stores.js';
import { dropWhenSettled } from '../actions/kept-request.js';
import { writeBesideOp, type BesideOp, type BesideOpKind } from './beside-rows.js';
import { resultChunkBytes, ResultStore } from './result-store.js';
import { WriterThread } from './writer-thread.js';

/*
 * The hourly purges (results, recordings, expired kept requests) go through the journal's writer thread while it runs,
 * like the other writes beside the journal (Journal.writeBeside), so that a write lock held elsewhere (the thread's own
 * commits, mostly) is waited for on the thread, never in SQLite's busy handler on the loop.
 */

type Opened = JournalWithStores;

const opened: Opened[] = [];
const closers: (() => unknown)[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  for (const close of closers.splice(0).reverse()) await close();
  for (const o of opened.splice(0)) await o.close();
});

async function open(writerThread: boolean): Promise<Opened> {
  // Through the thread, every batch goes to it (a lone event too); inline, none does.
  const o = await openJournalWithStores(writerThread, 1);
  opened.push(o);
  return o;
}

/** A result of `n` stored at `createdAtMs`, two chunks of byte `fill`, on the store's own connection. */
function commitResult(o: Opened, n: number, createdAtMs: number, fill = n): string {
  const id = `res_act_purge_${n}_1`;
  const body = Buffer.alloc(resultChunkBytes + 5, fill);
  o.results.commit({
    result_id: id,
    action_id: `act_purge_${n}`,
    attempt: 1,
    summary: { status: 200 },
    body,
    total_bytes: body.length,
    truncated: false,
    digest: `sha256:${'ab'.repeat(32)}`,
    created_at_ms: createdAtMs,
  });
  return id;
}

const kept = (actionId: string, expiresAtMs: number) => ({
  action_id: actionId,
  route: 'docs',
  sealed: new Uint8Array([1, 2, 3, actionId.length]),
  kept_at_ms: 0,
  expires_at_ms: expiresAtMs,
});

/** The kinds of the ops posted to the writer thread (WriterThread.write) since `spy` began. */
function posted(spy: { mock: { calls: [readonly { kind: string }[], ...unknown[]][] } }): string[] {
  return spy.mock.calls.flatMap(([ops]) => ops.map((op) => op.kind));
}

const purgeKinds: readonly BesideOpKind[] = ['resultsPurged', 'recordingsPurged', 'expiredRequestsDropped'];

/** What the purges touch, read on a connection of its own. */
function purgedRows(path: string): unknown {
  const db = new Database(path, { readonly: true });
  try {
    return {
      results: db.prepare(`SELECT result_id, purged_at_ms FROM results ORDER BY result_id`).all(),
      resultChunks: db.prepare(`SELECT result_id, count(*) AS n FROM result_chunks GROUP BY 1 ORDER BY 1`).all(),
      recordings: db
        .prepare(
          `SELECT recording_id, complete, finished_at_ms, alive_at_ms, purged_at_ms FROM recordings
           ORDER BY recording_id`,
        )
        .all(),
      recordingChunks: db.prepare(`SELECT recording_id, count(*) AS n FROM recording_chunks GROUP BY 1`).all(),
      kept: db.prepare(`SELECT action_id, expires_at_ms FROM kept_requests ORDER BY action_id`).all(),
    };
  } finally {
    db.close();
  }
}

/**
 * The same script of purges: results, finished recordings, a running one, an earlier run's leftover and kept requests
 * at several ages, purged in small batches as time passes. Answers each call's count and the rows left.
 */
async function script(o: Opened): Promise<{ counts: number[]; rows: unknown }> {
  const retentionMs = 1_000;
  for (const [n, t] of [
    [1, 100],
    [2, 300],
    [3, 200],
    [4, 5_000],
    [5, 150],
  ] as const)
    commitResult(o, n, t);
  await o.results.recordings.start('act_rec_1', 50);
  await o.results.recordings.finish('rec_rec_1', Buffer.from('cast one'), false, 150);
  await o.results.recordings.start('act_rec_2', 60);
  await o.results.recordings.start('act_rec_3', 70);
  await o.results.recordings.finish('rec_rec_3', Buffer.from('cast three'), true, 4_500);
  // An earlier run's leftover (its broker died mid-command), started on a store of its own.
  const earlier = ResultStore.open(o.temp.path, o.temp.journal.rowCipher(), { role: 'broker' });
  await earlier.recordings.start('act_rec_4', 80);
  earlier.close();
  for (const [id, at] of [
    ['act_keep_1', 500],
    ['act_keep_2', 400],
    ['act_keep_3', 3_000],
    ['act_keep_4', 9_000],
  ] as const)
    await o.requests.keep(kept(id, at));
  const counts: number[] = [];
  for (const nowMs of [1_200, 1_250, 1_500, 1_500, 6_000, 6_000, 6_000]) {
    counts.push(await o.results.purgeExpired(nowMs, retentionMs, 2));
    counts.push(await o.requests.dropExpired(nowMs, 1));
  }
  return { counts, rows: purgedRows(o.temp.path) };
}

function fileBytes(path: string): Buffer {
  return Buffer.concat(
    ['', '-wal', '-shm'].map((suffix) => (existsSync(path + suffix) ? readFileSync(path + suffix) : Buffer.alloc(0))),
  );
}

describe('the retention purges with the writer thread running', () => {
  it('wait for a write lock held elsewhere on the thread: the loop keeps turning, and each purge lands once it is free', async () => {
    const o = await open(true);
    const stale = commitResult(o, 1, 100);
    const fresh = commitResult(o, 2, 5_000);
    await o.results.recordings.start('act_lock_1', 100);
    await o.results.recordings.finish('rec_lock_1', Buffer.from('cast'), false, 200);
    await o.requests.keep(kept('act_lock_2', 1_000));
    const thread = vi.spyOn(WriterThread.prototype, 'write');
    const released = holdWriteLock(o.temp.path, 300);
    const watched = await watchEventLoop(async () => {
      const purged = Promise.all([o.results.purgeExpired(3_000, 1_000, 10), o.requests.dropExpired(3_000, 10)]);
      await released;
      return purged;
    });
    // On the stores' own connections the loop sleeps in the busy handler for the lock's whole 300 ms (or fails busy).
    expect(watched.maxGapMs).toBeLessThan(100);
    expect(watched.tookMs).toBeGreaterThanOrEqual(290);
    // The result and the recording, and the kept request.
    expect(watched.value).toEqual([2, 1]);
    expect(o.results.head(stale)?.purged_at_ms).toBe(3_000);
    expect(o.results.head(fresh)?.purged_at_ms).toBeNull();
    expect(() => o.results.recordings.read('act_lock_1')).toThrow(expect.objectContaining({ code: 'RESULT_EXPIRED' }));
    expect(o.requests.read('act_lock_2', 0)).toBeUndefined();
    // The recordings' purge is posted once the results' is done (ResultStore.purgeExpired awaits one, then the other).
    expect(posted(thread)).toEqual(['resultsPurged', 'expiredRequestsDropped', 'recordingsPurged']);
  });

  it('leave the same rows as the stores purge inline, batch by batch', async () => {
    const inline = await script(await open(false));
    const o = await open(true);
    const thread = vi.spyOn(WriterThread.prototype, 'write');
    const onThread = await script(o);
    expect(onThread).toEqual(inline);
    expect(posted(thread).filter((kind) => purgeKinds.includes(kind as BesideOpKind))).toHaveLength(3 * 7);
    // The script does purge: every batch is bounded, running commands are kept, the leftover goes by its last mark.
    expect(inline.counts).toEqual([4, 1, 1, 1, 1, 0, 0, 0, 2, 1, 0, 0, 0, 0]);
    expect(inline.rows).toMatchObject({
      results: [
        { result_id: 'res_act_purge_1_1', purged_at_ms: 1_200 },
        { result_id: 'res_act_purge_2_1', purged_at_ms: 1_500 },
        { result_id: 'res_act_purge_3_1', purged_at_ms: 1_250 },
        { result_id: 'res_act_purge_4_1', purged_at_ms: 6_000 },
        { result_id: 'res_act_purge_5_1', purged_at_ms: 1_200 },
      ],
      resultChunks: [],
      recordings: [
        { recording_id: 'rec_rec_1', purged_at_ms: 1_200 },
        { recording_id: 'rec_rec_2', complete: 0, alive_at_ms: 6_000, purged_at_ms: null },
        { recording_id: 'rec_rec_3', purged_at_ms: 6_000 },
        { recording_id: 'rec_rec_4', alive_at_ms: 80, purged_at_ms: 1_200 },
      ],
      recordingChunks: [],
      kept: [{ action_id: 'act_keep_4' }],
    });
  });

  it('zero the sealed bytes they delete on the thread too (secure_delete for the purge)', async () => {
    const o = await open(true);
    const raw = new Database(o.temp.path);
    try {
      commitResult(o, 1, 7, 0x5a);
      const sealed = (raw.prepare(`SELECT bytes FROM result_chunks WHERE n = 0`).pluck().get() as Buffer).subarray(
        0,
        32,
      );
      // A recording's cast of ~200 KB (four sealed chunks, on overflow pages), purged by the second op of the batch.
      await o.results.recordings.start('act_zero_1', 7);
      await o.results.recordings.finish('rec_zero_1', Buffer.alloc(200_000, 0x41), false, 8);
      const sealedCast = (raw.prepare(`SELECT bytes FROM recording_chunks ORDER BY n`).pluck().all() as Buffer[]).map(
        (chunk) => chunk.subarray(1_000, 1_032),
      );
      expect(sealedCast).toHaveLength(4);
      raw.pragma('wal_checkpoint(TRUNCATE)');
      const before = fileBytes(o.temp.path);
      expect([sealed, ...sealedCast].map((bytes) => before.includes(bytes))).toEqual([true, true, true, true, true]);
      const thread = vi.spyOn(WriterThread.prototype, 'write');
      expect(await o.results.purgeExpired(10_000, 1_000, 1)).toBe(2);
      expect(posted(thread)).toEqual(['resultsPurged', 'recordingsPurged']);
      raw.pragma('wal_checkpoint(TRUNCATE)');
      const after = fileBytes(o.temp.path);
      expect([sealed, ...sealedCast].map((bytes) => after.includes(bytes))).toEqual([
        false,
        false,
        false,
        false,
        false,
      ]);
    } finally {
      raw.close();
    }
  });

  it('a purge the thread refuses rejects alone: the journal stays open, and the sweep logs its code and tries again next sweep', async () => {
    const o = await open(true);
    const stale = commitResult(o, 1, 100);
    const other = new Database(o.temp.path);
    other.exec(
      `CREATE TRIGGER refuse_mark BEFORE UPDATE OF purged_at_ms ON results BEGIN SELECT RAISE(ABORT, 'disk full'); END;`,
    );
    const thread = vi.spyOn(WriterThread.prototype, 'write');
    const timers = new ManualTimers(o.temp.clock);
    const { logger, lines } = createCapturedLogger();
    const sweep = startResultPurge({
      results: o.results,
      requests: o.requests,
      clock: o.temp.clock,
      retentionMs: 0,
      logger,
      timers,
    });
    closers.push(() => sweep.stop());
    await vi.waitFor(() => expect(timers.size).toBe(1));
    expect(lines.join('')).toContain('result purge failed');
    expect(lines.join('')).toContain('"code":"SQLITE_CONSTRAINT_TRIGGER"');
    expect(lines.join('')).not.toContain('disk full');
    expect(posted(thread)).toEqual(['resultsPurged', 'expiredRequestsDropped']);
    // Rolled back on the thread, nothing else touched: the chunks are whole, and the journal takes the next batch,
    // through the thread.
    expect(o.results.read(stale)?.body.length).toBe(resultChunkBytes + 5);
    expect(o.temp.journal.stats()).toMatchObject({ state: 'open', writer_thread: { state: 'running' } });
    const commits = vi.spyOn(WriterThread.prototype, 'commit');
    await o.temp.journal.append(actionPaths.sshExit23('act_refused_1')[0] as never);
    expect(commits).toHaveBeenCalledTimes(1);
    expect(o.temp.journal.getAction('act_refused_1')).toBeDefined();
    // The trigger gone: the next sweep purges it, through the thread.
    other.exec(`DROP TRIGGER refuse_mark`);
    other.close();
    timers.advance(60 * 60 * 1000);
    await vi.waitFor(() => expect(o.results.head(stale)?.purged_at_ms).not.toBeNull());
    expect(posted(thread).filter((kind) => kind === 'resultsPurged')).toHaveLength(2);
  });
});

describe('when a store is closed while the journal (and its writer thread) is still open', () => {
  /** A stale result, a finished recording and an expired kept request: what every purge here would take. */
  async function stale(o: Opened): Promise<void> {
    commitResult(o, 1, 100);
    await o.results.recordings.start('act_closed_1', 100);
    await o.results.recordings.finish('rec_closed_1', Buffer.from('cast'), false, 200);
    await o.requests.keep(kept('act_closed_2', 1_000));
  }

  it.each([
    ['through the writer thread', true],
    ['inline', false],
  ])(
    'a purge or a kept-request write on a closed store is refused SHUTTING_DOWN and changes no row (%s)',
    async (_mode, writerThread) => {
      const o = await open(writerThread);
      await stale(o);
      const rows = purgedRows(o.temp.path);
      const thread = vi.spyOn(WriterThread.prototype, 'write');
      o.results.close(1);
      o.requests.close();
      const shuttingDown = expect.objectContaining({ code: 'SHUTTING_DOWN' });
      await expect(o.results.purgeExpired(10_000, 1_000, 10)).rejects.toEqual(shuttingDown);
      await expect(o.requests.dropExpired(10_000, 10)).rejects.toEqual(shuttingDown);
      await expect(o.requests.drop('act_closed_2')).rejects.toEqual(shuttingDown);
      await expect(o.requests.keep(kept('act_closed_3', 9_000))).rejects.toEqual(shuttingDown);
      expect(posted(thread)).toEqual([]);
      expect(purgedRows(o.temp.path)).toEqual(rows);
    },
  );

  it('a results purge whose recording store alone is closed is refused before it purges any result', async () => {
    const o = await open(true);
    await stale(o);
    const rows = purgedRows(o.temp.path);
    const thread = vi.spyOn(WriterThread.prototype, 'write');
    o.results.recordings.close(1);
    await expect(o.results.purgeExpired(10_000, 1_000, 10)).rejects.toEqual(
      expect.objectContaining({ code: 'SHUTTING_DOWN' }),
    );
    expect(posted(thread)).toEqual([]);
    expect(purgedRows(o.temp.path)).toEqual(rows);
  });

  it('a results purge in flight when the store closes answers the results it purged, and leaves the recordings', async () => {
    const o = await open(true);
    await stale(o);
    const thread = vi.spyOn(WriterThread.prototype, 'write');
    const purged = o.results.purgeExpired(10_000, 1_000, 10);
    o.results.close(1);
    await expect(purged).resolves.toBe(1);
    expect(posted(thread)).toEqual(['resultsPurged']);
    expect(purgedRows(o.temp.path)).toMatchObject({
      results: [{ result_id: 'res_act_purge_1_1', purged_at_ms: 10_000 }],
      recordings: [{ recording_id: 'rec_closed_1', complete: 1, purged_at_ms: null }],
    });
  });
});

describe("a purge op on a connection without secure_delete (as the writer thread's)", () => {
  const purges: readonly BesideOp[] = [
    { kind: 'resultsPurged', nowMs: 10_000, cutoffMs: 9_000, limit: 10 },
    { kind: 'recordingsPurged', nowMs: 10_000, cutoffMs: 9_000, limit: 10, running: [], leftovers: true },
  ];

  it.each(purges.map((op) => [op.kind, op] as const))(
    'turns it on for the op alone (%s): OFF or FAST again after it, whether it succeeded or failed',
    async (kind, op) => {
      const o = await open(false);
      commitResult(o, 1, 100);
      await o.results.recordings.start('act_secure_1', 100);
      await o.results.recordings.finish('rec_secure_1', Buffer.from('cast'), false, 200);
      const db = new Database(o.temp.path);
      closers.push(() => db.close());
      const secureDelete = (): unknown => db.pragma('secure_delete', { simple: true });
      const run = (): unknown => db.transaction(() => writeBesideOp(db, op))();
      const table = kind === 'resultsPurged' ? 'results' : 'recordings';
      // Fails after its deletes, on the purge mark.
      db.exec(`CREATE TRIGGER refuse BEFORE UPDATE OF purged_at_ms ON ${table} BEGIN SELECT RAISE(ABORT, 'no'); END;`);
      for (const [mode, value] of [
        ['OFF', 0],
        ['FAST', 2],
      ] as const) {
        db.pragma(`secure_delete = ${mode}`);
        expect(run).toThrow('no');
        expect(secureDelete()).toBe(value);
      }
      db.exec('DROP TRIGGER refuse');
      db.pragma('secure_delete = OFF');
      expect(run()).toBe(1);
      expect(secureDelete()).toBe(0);
      // Purged already (nothing left to purge): FAST stays FAST.
      db.pragma('secure_delete = FAST');
      expect(run()).toBe(0);
      expect(secureDelete()).toBe(2);
    },
  );
});

describe('when an action settles after the kept-request store closed (the broker stopping)', () => {
  it('its answer is still its result: the failed drop is logged by code and the row expires with its key window', async () => {
    const o = await open(true);
    await o.requests.keep(kept('act_settled_late', 9_000));
    o.requests.close();
    const { logger, lines } = createCapturedLogger();
    const deps = {
      clock: o.temp.clock,
      journal: o.temp.journal,
      logger,
      requests: o.requests,
    } as unknown as Parameters<typeof dropWhenSettled>[0];
    const result = { effect: 'succeeded' };
    await expect(dropWhenSettled(deps, 'act_settled_late', result)).resolves.toBe(result);
    expect(lines.map((line) => JSON.parse(line) as Record<string, unknown>)).toEqual([
      expect.objectContaining({ action_id: 'act_settled_late', code: 'SHUTTING_DOWN', level: 40 }),
    ]);
    const rows = new Database(o.temp.path, { readonly: true });
    closers.push(() => rows.close());
    expect(rows.prepare(`SELECT count(*) AS n FROM kept_requests`).get()).toEqual({ n: 1 });
  });
});

describe('a kept request deleted (dropped when settled, expired, or kept again)', () => {
  /** A distinct 48-byte sealed stand-in per row: found in the file while the row is there. */
  const sealedOf = (tag: number): Uint8Array => new Uint8Array(48).fill(tag);
  const keptRow = (actionId: string, tag: number, expiresAtMs: number) => ({
    ...kept(actionId, expiresAtMs),
    sealed: sealedOf(tag),
  });

  it.each([
    ['through the writer thread', true],
    ['inline', false],
  ])('leaves none of its sealed bytes in the file (secure_delete, %s)', async (_mode, writerThread) => {
    const o = await open(writerThread);
    const raw = new Database(o.temp.path);
    closers.push(() => raw.close());
    await o.requests.keep(keptRow('act_kz_drop', 0xd1, 90_000));
    await o.requests.keep(keptRow('act_kz_expire', 0xe2, 1_000));
    await o.requests.keep(keptRow('act_kz_again', 0xa3, 90_000));
    raw.pragma('wal_checkpoint(TRUNCATE)');
    const inFile = (tag: number): boolean => fileBytes(o.temp.path).includes(Buffer.from(sealedOf(tag)));
    expect([0xd1, 0xe2, 0xa3].map(inFile)).toEqual([true, true, true]);
    // Each delete on its own, checked at once: a later write to the same page must not be what zeroes it.
    const checkpointed = (): void => void raw.pragma('wal_checkpoint(TRUNCATE)');
    await o.requests.drop('act_kz_drop');
    checkpointed();
    expect([0xd1, 0xe2, 0xa3].map(inFile)).toEqual([false, true, true]);
    expect(await o.requests.dropExpired(2_000, 10)).toBe(1);
    checkpointed();
    expect([0xe2, 0xa3].map(inFile)).toEqual([false, true]);
    await o.requests.keep(keptRow('act_kz_again', 0xb4, 90_000));
    checkpointed();
    expect([0xa3, 0xb4].map(inFile)).toEqual([false, true]);
  });
});
