import Database from 'better-sqlite3';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { isCodedError } from '../contract/index.js';
import { actionPaths } from '../testing/action-paths.js';
import { watchEventLoop } from '../testing/event-loop-gaps.js';
import { holdWriteLock, openJournalWithStores, type JournalWithStores } from '../testing/beside-stores.js';
import { recordingChunkBytes } from './recording-store.js';
import { WriterThread } from './writer-thread.js';

/*
 * The writes beside the journal's tables (an SSH recording's rows, a kept request: beside-rows.ts) go through the
 * journal's writer thread while it runs (Journal.writeBeside), so that a write lock someone else holds (the thread's
 * own commits, mostly) is waited for on the thread, never in SQLite's busy handler on the loop.
 */

type Opened = JournalWithStores;

const opened: Opened[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  for (const o of opened.splice(0)) await o.close();
});

async function open(writerThread: boolean): Promise<Opened> {
  const o = await openJournalWithStores(writerThread);
  opened.push(o);
  return o;
}

const kept = (actionId: string, t: number) => ({
  action_id: actionId,
  route: 'docs',
  sealed: new Uint8Array([1, 2, 3, actionId.length]),
  kept_at_ms: t,
  expires_at_ms: t + 60_000,
});

/** The same script of writes beside the journal; answers what the tables hold after it (and the casts read back). */
async function script(o: Opened): Promise<unknown> {
  const { results, requests } = o;
  const cast = Buffer.alloc(recordingChunkBytes + 100, 0x61);
  await results.recordings.start('act_beside_001', 10);
  await results.recordings.finish('rec_beside_001', cast, true, 20);
  await results.recordings.start('act_beside_002', 30);
  await results.recordings.forget('rec_beside_002', 40);
  await results.recordings.start('act_beside_003', 50);
  await expect(results.recordings.finish('rec_nope', Buffer.from('x'), false, 60)).rejects.toMatchObject({
    code: 'INTERNAL',
  });
  await requests.keep(kept('act_beside_001', 70));
  await requests.keep(kept('act_beside_002', 80));
  await requests.drop('act_beside_001');
  await requests.drop('act_none');
  const db = new Database(o.temp.path, { readonly: true });
  try {
    return {
      recordings: db
        .prepare(
          `SELECT recording_id, action_id, started_at_ms, complete, truncated, cast_bytes, chunks, finished_at_ms,
             alive_at_ms, purged_at_ms FROM recordings ORDER BY recording_id`,
        )
        .all(),
      chunks: db.prepare(`SELECT recording_id, n, length(bytes) AS bytes FROM recording_chunks ORDER BY 1, 2`).all(),
      kept: db.prepare(`SELECT * FROM kept_requests ORDER BY action_id`).all(),
      cast: results.recordings.read('act_beside_001').cast.equals(cast),
      reads: ['act_beside_002', 'act_beside_003'].map((id) => {
        try {
          return results.recordings.read(id);
        } catch (error) {
          return isCodedError(error) ? error.code : String(error);
        }
      }),
    };
  } finally {
    db.close();
  }
}

describe('writes beside the journal (recordings, kept requests) with the writer thread running', () => {
  it('wait for a write lock held elsewhere on the thread: the loop keeps turning, and each write lands once it is free', async () => {
    const o = await open(true);
    const thread = vi.spyOn(WriterThread.prototype, 'write');
    await o.results.recordings.start('act_lock_0001', 1);
    const released = holdWriteLock(o.temp.path, 300);
    const watched = await watchEventLoop(async () => {
      const written = Promise.all([
        o.results.recordings.start('act_lock_0002', 2),
        o.results.recordings.finish('rec_lock_0001', Buffer.from('cast'), false, 3),
        o.requests.keep(kept('act_lock_0003', 4)),
      ]);
      await released;
      return written;
    });
    await o.requests.drop('act_lock_0003');
    // A store's own connection sleeps in the busy handler on the loop for the lock's whole 300 ms (or fails busy).
    expect(watched.maxGapMs).toBeLessThan(100);
    expect(watched.tookMs).toBeGreaterThanOrEqual(290);
    expect(watched.value[0]).toBe('rec_lock_0002');
    expect(o.results.recordings.read('act_lock_0001').cast.toString()).toBe('cast');
    expect(o.requests.read('act_lock_0003', 5)).toBeUndefined();
    expect(thread.mock.calls.flatMap(([ops]) => ops.map((op) => op.kind))).toEqual([
      'recordingStarted',
      'recordingStarted',
      'recordingFinished',
      'requestKept',
      'requestDropped',
    ]);
  });

  it('leave the same rows as the stores write inline (the casts sealed on the loop, read back equal)', async () => {
    const inline = await script(await open(false));
    const onThread = await script(await open(true));
    expect(onThread).toEqual(inline);
    expect(inline).toMatchObject({
      cast: true,
      reads: ['RECORDING_INCOMPLETE', 'RECORDING_IN_PROGRESS'],
      kept: [expect.objectContaining({ action_id: 'act_beside_002' })],
    });
  });

  it("come before what the journal commits after them: a settlement appended after a recording's seal follows it", async () => {
    const o = await open(true);
    const commits = vi.spyOn(WriterThread.prototype, 'commit');
    await o.results.recordings.start('act_order_0001', 1);
    const events = actionPaths.sshExit23('act_order_0001');
    const last = events.pop();
    if (last === undefined) throw new Error('no event');
    await o.temp.journal.appendBatch(events);
    commits.mockClear();
    const released = holdWriteLock(o.temp.path, 40);
    // As the SSH executor records: the seal posted, then (on the same turn) the settlement appended, one small batch
    // that would commit inline on the loop with nothing in flight.
    const sealed = o.results.recordings.finish('rec_order_0001', Buffer.from('cast'), false, 2);
    const settled = o.temp.journal.append(last);
    await settled;
    const db = new Database(o.temp.path, { readonly: true });
    const row = db.prepare(`SELECT complete FROM recordings WHERE recording_id = 'rec_order_0001'`).get();
    db.close();
    expect(row).toEqual({ complete: 1 });
    expect(commits).toHaveBeenCalledTimes(1);
    await sealed;
    await released;
  });

  it('a write the thread refuses refuses only itself, as on the store’s own connection: the journal stays open', async () => {
    const o = await open(true);
    const other = new Database(o.temp.path);
    other.exec(`ALTER TABLE kept_requests RENAME TO kept_requests_moved`);
    const thread = vi.spyOn(WriterThread.prototype, 'write');
    await expect(o.requests.keep(kept('act_fail_0001', 1))).rejects.toThrow(/kept_requests/);
    expect(thread).toHaveBeenCalledTimes(1);
    // Rolled back on the thread, nothing else touched: the journal takes the next batch, through the thread.
    expect(o.temp.journal.stats()).toMatchObject({ state: 'open', writer_thread: { state: 'running' } });
    await o.temp.journal.append(actionPaths.sshExit23('act_fail_0002')[0] as never);
    expect(o.temp.journal.getAction('act_fail_0002')).toBeDefined();
    // The table back: the same write through the thread now lands, and so do a recording's.
    other.exec(`ALTER TABLE kept_requests_moved RENAME TO kept_requests`);
    other.close();
    await o.requests.keep(kept('act_fail_0001', 1));
    await o.results.recordings.start('act_fail_0003', 2);
    await o.results.recordings.finish('rec_fail_0003', Buffer.from('cast'), false, 3);
    expect(o.results.recordings.read('act_fail_0003').cast.toString()).toBe('cast');
    expect(thread).toHaveBeenCalledTimes(4);
  });

  it('a recording start that lands after the store closed is refused: no command starts once the broker stops', async () => {
    const o = await open(true);
    const started = o.results.recordings.start('act_close_0001', 1);
    // The stop closes the store while the open row waits for the thread (inline, start wrote it before returning).
    o.results.close(2);
    await expect(started).rejects.toMatchObject({ code: 'SHUTTING_DOWN' });
    const db = new Database(o.temp.path, { readonly: true });
    // The row is there, open and without DISPATCH_STARTED: the next start seals it as never sent.
    expect(db.prepare(`SELECT complete FROM recordings WHERE action_id = 'act_close_0001'`).get()).toEqual({
      complete: 0,
    });
    db.close();
  });

  it('ops that cannot cross to the thread reject, and leave nothing waiting or in flight', async () => {
    const o = await open(true);
    const write = vi.spyOn(WriterThread.prototype, 'write');
    const uncloneable = { kind: 'requestDropped', actionId: () => 'act_x' } as never;
    await expect(o.temp.journal.writeBeside([uncloneable])).rejects.toThrow(/could not be cloned/);
    const thread = write.mock.contexts[0] as WriterThread;
    expect(thread.busy).toBe(false);
    expect((o.temp.journal as unknown as { besideInFlight: number }).besideInFlight).toBe(0);
    // The journal goes on, and a read that waits for the thread returns at once.
    await o.temp.journal.append(actionPaths.sshExit23('act_cross_0001')[0] as never);
    const started = performance.now();
    expect(o.temp.journal.subjectEvents('act_cross_0001')).toHaveLength(1);
    expect(performance.now() - started).toBeLessThan(5_000);
  });
});

describe("writes beside the journal on the store's own connection (no writer thread)", () => {
  it('a write that fails rolls its own transaction back: the connection holds no lock after it, and the next write lands', async () => {
    const o = await open(false);
    // Waits 100 ms at most for a lock: a store connection left in its transaction would make it fail busy.
    const other = new Database(o.temp.path, { timeout: 100 });
    other.exec(`ALTER TABLE kept_requests RENAME TO kept_requests_moved`);
    other.exec(`ALTER TABLE recordings RENAME TO recordings_moved`);
    await expect(o.requests.keep(kept('act_own_0001', 1))).rejects.toThrow(/kept_requests/);
    await expect(o.results.recordings.start('act_own_0002', 2)).rejects.toThrow(/recordings/);
    // Both stores (one connection for results and recordings, one for kept requests) are out of any transaction.
    other.exec(`ALTER TABLE kept_requests_moved RENAME TO kept_requests`);
    other.exec(`ALTER TABLE recordings_moved RENAME TO recordings`);
    other.close();
    await o.requests.keep(kept('act_own_0001', 1));
    await o.results.recordings.start('act_own_0002', 2);
    await o.results.recordings.finish('rec_own_0002', Buffer.from('cast'), false, 3);
    expect(o.requests.read('act_own_0001', 2)?.route).toBe('docs');
    expect(o.results.recordings.read('act_own_0002').cast.toString()).toBe('cast');
    // The journal's own connection commits as ever.
    await o.temp.journal.append(actionPaths.sshExit23('act_own_0003')[0] as never);
    expect(o.temp.journal.getAction('act_own_0003')).toBeDefined();
  });
});
