import { afterEach, describe, expect, it, vi } from 'vitest';
import { startAgentSocket } from '../agent/index.js';
import type { JournalEvent } from '../contract/index.js';
import { RequestStore, ResultStore } from '../journal/index.js';
import { connectPostern, PosternActionError } from '../sdk/index.js';
import { createCapturedLogger } from '../testing/captured-logger.js';
import { FakeClock } from '../testing/fake-clock.js';
import { ManualTimers } from '../testing/manual-timers.js';
import { fixtureAgentBackend, openQueueFixture, type QueueFixture } from '../testing/queue-fixture.js';
import { createTempDir } from '../testing/temp-dir.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { resultPurgeBatch, resultPurgeBatchesPerSweepMax, startResultPurge, type ResultPurge } from './result-purge.js';

const hourMs = 3_600_000;
const closers: (() => unknown)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

function started(purge: ResultPurge): ResultPurge {
  closers.push(() => purge.stop());
  return purge;
}

/** A result store double that has `due` results past retention and purges them `limit` at a time. */
function backlogStore(due: number): {
  purgeExpired: (nowMs: number, retentionMs: number, limit: number) => Promise<number>;
  calls: Array<{ nowMs: number; limit: number }>;
} {
  let left = due;
  const calls: Array<{ nowMs: number; limit: number }> = [];
  return {
    calls,
    purgeExpired(nowMs, _retentionMs, limit) {
      calls.push({ nowMs, limit });
      const purged = Math.min(left, limit);
      left -= purged;
      return Promise.resolve(purged);
    },
  };
}

/** Lets the batches awaited so far settle (each purge is awaited before the next is scheduled). */
const settled = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * Runs every batch due now, and those each schedules, until none is left due: each time once the batch before is done
 * (a sweep always leaves a timer: the next batch's, or the next sweep's), through the writer thread or not.
 */
async function runDue(timers: ManualTimers): Promise<void> {
  do await vi.waitFor(() => expect(timers.size).toBeGreaterThan(0), { interval: 1 });
  while (timers.advance(0) > 0);
}

describe('the result purge sweep', () => {
  describe('when results past retention sit in a real journal file', () => {
    let temp: TempJournal;
    let store: ResultStore;
    const retentionMs = 7 * 24 * hourMs;
    const commit = (n: number, createdAtMs: number): string => {
      const id = `res_act_00000${n}_1`;
      store.commit({
        result_id: id,
        action_id: `act_00000${n}`,
        attempt: 1,
        summary: { status: 200 },
        body: Buffer.from(`body ${n}`),
        total_bytes: 6,
        truncated: false,
        digest: `sha256:${'cd'.repeat(32)}`,
        created_at_ms: createdAtMs,
      });
      return id;
    };

    it('drops kept requests past their key window in the same sweep, and keeps the live ones', async () => {
      temp = await openTempJournal();
      store = ResultStore.open(temp.path, temp.journal.rowCipher());
      const requests = RequestStore.open(temp.path);
      closers.push(
        () => temp.dispose(),
        () => store.close(),
        () => requests.close(),
      );
      const timers = new ManualTimers(temp.clock);
      const t0 = temp.clock.nowMs();
      await requests.keep({
        action_id: 'act_kept_old_1',
        route: 'docs',
        sealed: new Uint8Array([1, 2, 3]),
        kept_at_ms: t0 - 10,
        expires_at_ms: t0,
      });
      await requests.keep({
        action_id: 'act_kept_new_1',
        route: 'docs',
        sealed: new Uint8Array([4, 5, 6]),
        kept_at_ms: t0 - 10,
        expires_at_ms: t0 + hourMs + 1,
      });
      started(startResultPurge({ results: store, requests, clock: temp.clock, retentionMs, timers }));
      await runDue(timers);
      expect(await requests.dropExpired(t0, 10)).toBe(0);
      expect(requests.read('act_kept_new_1', t0)?.sealed).toEqual(new Uint8Array([4, 5, 6]));
      timers.advance(hourMs + 1);
      await runDue(timers);
      expect(requests.read('act_kept_new_1', t0)).toBeUndefined();
    });

    it('purges once at start, then on every interval: only what passed its retention', async () => {
      temp = await openTempJournal();
      store = ResultStore.open(temp.path, temp.journal.rowCipher());
      closers.push(
        () => temp.dispose(),
        () => store.close(),
      );
      const timers = new ManualTimers(temp.clock);
      const t0 = temp.clock.nowMs();
      const stale = commit(1, t0 - retentionMs);
      const fresh = commit(2, t0 - retentionMs + 2 * hourMs);
      const { logger, lines } = createCapturedLogger();

      started(startResultPurge({ results: store, clock: temp.clock, retentionMs, logger, timers }));
      await runDue(timers);
      expect(store.head(stale)?.purged_at_ms).toBe(t0);
      expect(store.head(fresh)?.purged_at_ms).toBeNull();
      expect(lines.join('')).toContain('"purged":1');

      // One hour later the fresh one is still inside its retention; two hours later it is not.
      expect(timers.advance(hourMs - 1)).toBe(0);
      expect(timers.advance(1)).toBe(1);
      await runDue(timers);
      expect(store.head(fresh)?.purged_at_ms).toBeNull();
      timers.advance(hourMs);
      await runDue(timers);
      expect(store.head(fresh)?.purged_at_ms).toBe(t0 + 2 * hourMs);
      expect(() => store.read(fresh)).toThrow(expect.objectContaining({ code: 'RESULT_EXPIRED' }));
      // The journal's events are never purged.
      expect(temp.journal.stats().events).toBe(0);
    });
  });

  it('works through a backlog in bounded batches, a turn of the event loop apart, and leaves the rest for the next sweep', async () => {
    const clock = new FakeClock();
    const timers = new ManualTimers(clock);
    const store = backlogStore(resultPurgeBatch * (resultPurgeBatchesPerSweepMax + 1) + 7);
    const { logger, lines } = createCapturedLogger();
    started(startResultPurge({ results: store, clock, retentionMs: 1_000, logger, timers }));
    expect(store.calls).toHaveLength(1);
    // Each further batch is its own timer turn (due now), scheduled once the one before it is done.
    expect(timers.size).toBe(0);
    await settled();
    expect(timers.size).toBe(1);
    await runDue(timers);
    expect(store.calls).toHaveLength(resultPurgeBatchesPerSweepMax);
    expect(store.calls.every((c) => c.limit === resultPurgeBatch)).toBe(true);
    expect(lines.join('')).toContain('"backlog":true');
    // The next sweep, an hour later, finishes it and then waits again.
    timers.advance(hourMs);
    await runDue(timers);
    expect(store.calls).toHaveLength(resultPurgeBatchesPerSweepMax + 2);
    expect(store.calls.at(-1)?.nowMs).toBe(clock.nowMs());
    expect(timers.size).toBe(1);
  });

  it('when a batch fails it logs its code, keeps the broker running and tries again at the next sweep', async () => {
    const clock = new FakeClock();
    const timers = new ManualTimers(clock);
    let failures = 1;
    let calls = 0;
    const store = {
      purgeExpired: (): Promise<number> => {
        calls += 1;
        if (failures-- > 0)
          return Promise.reject(Object.assign(new Error('database is locked: secret-ish'), { code: 'SQLITE_BUSY' }));
        return Promise.resolve(0);
      },
    };
    const { logger, lines } = createCapturedLogger();
    started(startResultPurge({ results: store, clock, retentionMs: 1_000, logger, timers }));
    await runDue(timers);
    expect(lines.join('')).toContain('result purge failed');
    expect(lines.join('')).toContain('"code":"SQLITE_BUSY"');
    expect(lines.join('')).not.toContain('secret-ish');
    expect(timers.size).toBe(1);
    timers.advance(hourMs);
    await runDue(timers);
    expect(calls).toBe(2);
  });

  it('after stop() no batch or sweep runs again, nor after a batch that was in flight at the stop', async () => {
    const clock = new FakeClock();
    const timers = new ManualTimers(clock);
    const store = backlogStore(resultPurgeBatch * 3);
    const { logger, lines } = createCapturedLogger();
    const purge = started(startResultPurge({ results: store, clock, retentionMs: 1_000, logger, timers }));
    await settled();
    expect(timers.size).toBe(1);
    purge.stop();
    expect(timers.size).toBe(0);
    timers.advance(hourMs * 3);
    expect(store.calls).toHaveLength(1);
    // Stopped while a batch awaits its purge: nothing is scheduled or logged once it settles, even a failure.
    let fail: (error: Error) => void = () => undefined;
    const stuck = {
      purgeExpired: (): Promise<number> => new Promise<number>((_resolve, reject) => (fail = reject)),
    };
    const inFlight = startResultPurge({ results: stuck, clock, retentionMs: 1_000, logger, timers });
    inFlight.stop();
    fail(Object.assign(new Error('the database connection is not open'), { code: 'INTERNAL' }));
    await settled();
    expect(timers.size).toBe(0);
    expect(lines.join('')).not.toContain('failed');
  });

  it('after stop() a batch that was in flight and then purged ends the sweep there: no drop, no log, no timer', async () => {
    const clock = new FakeClock();
    const timers = new ManualTimers(clock);
    const { logger, lines } = createCapturedLogger();
    let purged: (n: number) => void = () => undefined;
    const stuck = {
      purgeExpired: (): Promise<number> => new Promise<number>((resolve) => (purged = resolve)),
    };
    const requests = { dropped: 0, dropExpired: (): Promise<number> => Promise.resolve((requests.dropped += 1)) };
    const inFlight = startResultPurge({ results: stuck, requests, clock, retentionMs: 1_000, logger, timers });
    inFlight.stop();
    // Fewer than a batch: not stopped, the sweep would end now (drop the expired kept requests, log what it purged).
    purged(5);
    await settled();
    expect(requests.dropped).toBe(0);
    expect(timers.size).toBe(0);
    expect(lines).toEqual([]);
  });

  it('refuses a retention or an interval that is not whole milliseconds (programmer errors)', () => {
    const clock = new FakeClock();
    const results = backlogStore(0);
    expect(() => startResultPurge({ results, clock, retentionMs: -1 })).toThrow(RangeError);
    expect(() => startResultPurge({ results, clock, retentionMs: 1, intervalMs: 0 })).toThrow(RangeError);
    expect(results.calls).toHaveLength(0);
  });
});

describe('when an agent fetches a result the sweep purged', () => {
  const retentionSeconds = 3600;
  let f: QueueFixture;

  async function agentStack(
    configRetentionSeconds: number,
  ): Promise<{ fetch: (id: string) => Promise<unknown>; post: (marker: string) => Promise<string> }> {
    f = await openQueueFixture({ agentsYaml: '  session_approval: observe' });
    closers.push(() => f.dispose());
    const backend = await fixtureAgentBackend(f, 'boot-test', {
      config: { ...f.config, results: { retention_seconds: configRetentionSeconds } },
      processAlive: (pid) => pid === process.pid,
    });
    closers.push(() => backend.close());
    const dir = createTempDir('postern-purge-');
    closers.push(() => dir.remove());
    const socket = await startAgentSocket({ dataDir: dir.path, backend });
    closers.push(() => socket.close());
    const agent = await connectPostern({ socketPath: socket.path, clientName: 'purge-test' });
    closers.push(() => agent.close());
    return {
      post: async (marker) => {
        const id = (
          await agent.httpRequest({
            route: 'plain',
            method: 'POST',
            path: '/documents/3',
            body: JSON.stringify({ marker }),
          })
        ).invocation_id;
        // The answer's RESULT_DELIVERED lands after the reply: wait for it so later events are the fetch's alone.
        await vi.waitFor(() => expect(f.events(id).map((e) => e.kind)).toContain('RESULT_DELIVERED'));
        return id;
      },
      fetch: (id) =>
        agent.fetchResult(id).then(
          () => expect.unreachable('a purged result is an error'),
          (error: unknown) => error,
        ),
    };
  }

  it('fetch_result answers RESULT_EXPIRED exactly as for an expired one; nothing is journaled and the target sees no new request', async () => {
    const agent = await agentStack(retentionSeconds);
    const actionId = await agent.post('purged');
    const timers = new ManualTimers(f.h.temp.clock);
    started(
      startResultPurge({ results: f.h.results, clock: f.h.temp.clock, retentionMs: retentionSeconds * 1000, timers }),
    );
    await runDue(timers);
    const resultId = f.h.temp.journal.getAction(actionId)?.result_id ?? '';
    expect(f.h.results.head(resultId)?.purged_at_ms).toBeNull();

    timers.advance(hourMs);
    await runDue(timers);
    expect(f.h.results.head(resultId)?.purged_at_ms).toBe(f.h.temp.clock.nowMs());
    const before: JournalEvent[] = f.events(actionId);
    const expired = await agent.fetch(actionId);
    expect(expired).toBeInstanceOf(PosternActionError);
    const envelope = (expired as PosternActionError).envelope;
    expect(envelope).toMatchObject({
      invocation_id: actionId,
      effect: 'succeeded',
      error: { code: 'RESULT_EXPIRED', phase: 'result_delivery', outcome: 'committed', retry: 'never' },
    });
    expect(envelope).not.toHaveProperty('response');
    expect(f.events(actionId)).toEqual(before);
    expect(f.server.markers()).toEqual(['purged']);
  });

  it('a retention lengthened after the purge still answers RESULT_EXPIRED: the purged bytes are never handed over or called absent', async () => {
    // The sweep ran under one hour; the broker was then restarted with a week.
    const agent = await agentStack(7 * 24 * 3600);
    const actionId = await agent.post('lengthened');
    const timers = new ManualTimers(f.h.temp.clock);
    timers.advance(hourMs);
    started(
      startResultPurge({ results: f.h.results, clock: f.h.temp.clock, retentionMs: retentionSeconds * 1000, timers }),
    );
    await runDue(timers);

    const refused = await agent.fetch(actionId);
    expect(refused).toBeInstanceOf(PosternActionError);
    const envelope = (refused as PosternActionError).envelope;
    expect(envelope.error?.code).toBe('RESULT_EXPIRED');
    expect(envelope).not.toHaveProperty('response');
    expect(f.server.markers()).toEqual(['lengthened']);
    // The store's RESULT_EXPIRED reaches the agent as a coded refusal (not yet the expired envelope
    // with the action's outcome): fetch_result checks retention from the head, not purged_at_ms.
  });
});
