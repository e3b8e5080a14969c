import { afterEach, describe, expect, it } from 'vitest';
import { actionPaths } from '../testing/action-paths.js';
import { DiskSyncGate } from '../testing/disk-sync-gate.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';

let t: TempJournal | undefined;
afterEach(async () => {
  await t?.dispose();
  t = undefined;
});

const idOf = (n: number): string => `act_sync_${String(n).padStart(4, '0')}`;
/** Until the next turn of the event loop: commits are flushed on setImmediate, answers follow. */
const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** A journal on Linux rules (sync-behind) with `count` actions authorized, the next step DISPATCH_STARTED. */
async function ready(count: number, gate: DiskSyncGate): Promise<TempJournal> {
  t = await openTempJournal({ platform: 'linux', beforeSync: gate.beforeSync });
  for (let n = 0; n < count; n += 1) await t.journal.appendBatch(actionPaths.httpNoApproval(idOf(n)).slice(0, 3));
  return t;
}

describe('when the disk is slow to sync (sync-behind)', () => {
  it('an admission answers at COMMIT; DISPATCH_STARTED answers only once a sync covers it; durable() waits too', async () => {
    const gate = new DiskSyncGate();
    const { journal } = await ready(1, gate);
    gate.hold();
    const asked = gate.nextRequest();
    // Admission of another action does not wait for the disk (event-durability.ts).
    const admitted = await journal.append(actionPaths.httpNoApproval(idOf(1))[0]!);
    let dispatched = false;
    const dispatch = journal.beginDispatch(idOf(0), 1, { connection: 'fresh' }).then((a) => {
      dispatched = true;
      return a;
    });
    let barrierPassed = false;
    const barrier = journal.durable().then(() => (barrierPassed = true));
    await asked;
    await nextTurn();
    // Committed (another connection reads it) but not yet on disk: nobody may act on it.
    const row = t
      ?.reader()
      .prepare(`SELECT kind FROM events WHERE action_id = ? AND kind = 'DISPATCH_STARTED'`)
      .get(idOf(0));
    expect(row).toEqual({ kind: 'DISPATCH_STARTED' });
    expect(dispatched).toBe(false);
    expect(barrierPassed).toBe(false);
    expect(journal.durableSeq()).toBeLessThan(admitted.event.seq);

    gate.release();
    const appended = await dispatch;
    await barrier;
    expect(journal.durableSeq()).toBeGreaterThanOrEqual(appended.event.seq);
  });

  it('one sync covers every commit written before it began: many commits, few syncs (group commit for the disk)', async () => {
    const gate = new DiskSyncGate();
    const { journal } = await ready(12, gate);
    const commitsBefore = journal.stats().commits;
    const syncsBefore = gate.syncs;
    gate.hold();
    const dispatches = [];
    // One dispatch per turn: twelve separate commits while the first sync is held.
    for (let n = 0; n < 12; n += 1) {
      dispatches.push(journal.beginDispatch(idOf(n), 1, { connection: 'fresh' }));
      // Its commit lands on this turn, or (on a writer thread) once the ack is heard.
      const deadline = performance.now() + 10_000;
      while (journal.stats().commits - commitsBefore <= n && performance.now() < deadline) await nextTurn();
    }
    expect(journal.stats().commits - commitsBefore).toBe(12);
    expect(gate.waiting()).toBe(1);
    gate.release();
    await Promise.all(dispatches);
    // The held sync covered the first commit; the next one covered the other eleven.
    expect(gate.syncs - syncsBefore).toBe(2);
  });

  it('a failed sync fails the journal closed: the waiting dispatch and every later append reject', async () => {
    const gate = new DiskSyncGate();
    const { journal } = await ready(2, gate);
    gate.fail();
    await expect(journal.beginDispatch(idOf(0), 1, { connection: 'fresh' })).rejects.toMatchObject({
      code: 'JOURNAL_UNAVAILABLE',
    });
    expect(journal.stats().state).toBe('failed');
    await expect(journal.beginDispatch(idOf(1), 1, { connection: 'fresh' })).rejects.toMatchObject({
      code: 'JOURNAL_UNAVAILABLE',
    });
    await expect(journal.durable()).rejects.toMatchObject({ code: 'JOURNAL_UNAVAILABLE' });
    // Nothing after the failed sync is ever called durable, not even by the sync at close.
    const durableBefore = journal.durableSeq();
    expect(durableBefore).toBeLessThan(journal.stats().last_seq);
    await journal.close();
    expect(journal.durableSeq()).toBe(durableBefore);
  });

  it('close syncs what is committed and answers the waiting dispatch', async () => {
    const gate = new DiskSyncGate();
    const { journal } = await ready(1, gate);
    gate.hold();
    const asked = gate.nextRequest();
    const dispatch = journal.beginDispatch(idOf(0), 1, { connection: 'fresh' });
    await asked;
    await journal.close();
    await expect(dispatch).resolves.toMatchObject({ event: { kind: 'DISPATCH_STARTED' } });
    gate.release();
  });

  it('onceDurable asks for no sync: it resolves when a sync other appends asked for covers it, before their callers go on', async () => {
    const gate = new DiskSyncGate();
    const { journal } = await ready(1, gate);
    await journal.durable();
    const syncsBefore = gate.syncs;
    const admitted = await journal.append(actionPaths.httpNoApproval(idOf(1))[0]!);
    const order: string[] = [];
    const watched = journal.onceDurable(admitted.event.seq).then(() => order.push('watcher'));
    // Turns pass and nothing syncs for the watcher alone.
    for (let turn = 0; turn < 5; turn += 1) await nextTurn();
    expect(order).toEqual([]);
    expect(gate.syncs).toBe(syncsBefore);
    expect(journal.durableSeq()).toBeLessThan(admitted.event.seq);

    // Another caller asks for a sync; it covers the admission too, and the watcher hears it first (so what the
    // watcher does comes before what a dispatch released by the same sync does next).
    const synced = journal.durable().then(() => order.push('asked for the sync'));
    await Promise.all([watched, synced]);
    expect(gate.syncs).toBe(syncsBefore + 1);
    expect(order).toEqual(['watcher', 'asked for the sync']);
    // Already durable: at once.
    await expect(journal.onceDurable(admitted.event.seq)).resolves.toBeUndefined();
  });

  it('onceDurable rejects once the journal has failed', async () => {
    const gate = new DiskSyncGate();
    const { journal } = await ready(2, gate);
    const first = await journal.append(actionPaths.httpNoApproval(idOf(2))[0]!);
    const failed = journal.onceDurable(first.event.seq);
    gate.fail();
    await expect(journal.beginDispatch(idOf(0), 1, { connection: 'fresh' })).rejects.toMatchObject({
      code: 'JOURNAL_UNAVAILABLE',
    });
    await expect(failed).rejects.toMatchObject({ code: 'JOURNAL_UNAVAILABLE' });
    await expect(journal.onceDurable(first.event.seq + 1)).rejects.toMatchObject({ code: 'JOURNAL_UNAVAILABLE' });
  });

  it('in commit mode (macOS rules) SQLite syncs inside COMMIT: the journal never asks for a sync of its own', async () => {
    const gate = new DiskSyncGate();
    t = await openTempJournal({ syncMode: 'commit', beforeSync: gate.beforeSync });
    const path = actionPaths.httpNoApproval(idOf(0));
    for (const event of path) await t.journal.append(event);
    await t.journal.durable();
    expect(gate.syncs).toBe(0);
    expect(t.journal.durableSeq()).toBe(path.length);
  });
});
