import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AdversarialHttpServer } from '../testing/adversarial-http-server.js';
import {
  localRouteConfig,
  openHttpActionHarness,
  retryPolicyYaml,
  type HttpActionHarness,
} from '../testing/http-action-harness.js';
import { ManualTimers } from '../testing/manual-timers.js';
import { codedRefusal } from '../testing/queue-waits.js';

/**
 * DESIGN §4 "Retries keep the ticket's place", performed with the real executor, queue, journal and channel: #1 (a PUT
 * on /documents/7) is answered 429 and its route retries automatically after a backoff; #2 (a PATCH of the same
 * document, the same lane) arrives while #1 waits. #2 must not reach the remote before #1's retry has: otherwise the
 * remote applies PATCH then PUT, the reverse of ticket order, and the retried PUT overwrites the later write.
 */
let h: HttpActionHarness;
let server: AdversarialHttpServer;
let puts = 0;
beforeEach(async () => {
  h = await openHttpActionHarness();
  puts = 0;
  server = await AdversarialHttpServer.start({
    script: (r) => {
      if (r.method === 'PUT' && ++puts === 1)
        return { kind: 'respond', status: 429, headers: { 'retry-after': '1' }, body: '{"slow":"down"}' };
      return { kind: 'respond', status: 200, body: '{"ok":true}', applyEffect: true };
    },
  });
});
afterEach(async () => {
  await server.stop();
  await h.dispose();
});

const retrying = retryPolicyYaml({ attempts_max: 2, automatic: true, backoff_ms: 0 });
const arrivals = (): string[] => server.requests.map((r) => `${r.method} ${r.path}`);
/** #1, and the later write of the same document (the same lane). */
const putA = { route: 'docs', method: 'PUT', path: '/documents/7', body: '{"v":"A"}' };
const patchB = { route: 'docs', method: 'PATCH', path: '/documents/7', body: '{"v":"B"}' };

/**
 * Sends #1 under the automatic policy; returns once its first attempt is recorded (rejected, backoff) and its engine
 * holds the backoff timer, which only the test's `timers` fires.
 */
async function putWaitingOutBackoff(): Promise<{ timers: ManualTimers; first: ReturnType<HttpActionHarness['run']> }> {
  const timers = new ManualTimers(h.temp.clock);
  const first = h.run(localRouteConfig(server.port, retrying), putA, { retryTimers: timers });
  await expect.poll(() => timers.size, { timeout: 10_000 }).toBe(1);
  return { timers, first };
}

/** A retry policy the agent drives (retry_of), never the executor: `automatic: false`, no backoff. */
const agentRetries = (attemptsMax: number): string =>
  retryPolicyYaml({ attempts_max: attemptsMax, automatic: false, backoff_ms: 0 });

/** A plain-HTTP remote that answers the first PUT 429 and holds back the answers `holds` picks until `release()`. */
interface HeldRemote {
  readonly port: number;
  /** `METHOD /path` of every request, in the order their bodies were read. */
  readonly arrivals: string[];
  release(): void;
  /** Releases what is held, drops the connections and closes the server. */
  close(): Promise<void>;
}

async function startHeldRemote(holds: (method: string) => boolean): Promise<HeldRemote> {
  const arrivals: string[] = [];
  let release: () => void = () => undefined;
  const held = new Promise<void>((resolve) => (release = resolve));
  let putCount = 0;
  const remote = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const method = req.method ?? '';
      arrivals.push(`${method} ${req.url ?? ''}`);
      const answer = (status: number): void =>
        void res.writeHead(status, { 'content-type': 'application/json' }).end('{}');
      if (method === 'PUT' && ++putCount === 1) answer(429);
      else if (holds(method)) void held.then(() => answer(200));
      else answer(200);
    });
  });
  await new Promise<void>((resolve) => remote.listen(0, '127.0.0.1', resolve));
  return {
    port: (remote.address() as AddressInfo).port,
    arrivals,
    release,
    close: async () => {
      release();
      remote.closeAllConnections();
      await new Promise<void>((resolve) => remote.close(() => resolve()));
    },
  };
}

describe('when the head of a lane waits out a backoff before its automatic retry', () => {
  it('a later ticket of the lane waits behind it ("waiting for #1") and reaches the remote only after the retry', async () => {
    const { timers, first } = await putWaitingOutBackoff();
    const config = localRouteConfig(server.port, retrying);
    const [a] = h.temp.journal.listActions({ fromTicket: 1, limit: 10 });
    expect(a).toMatchObject({ ticket: 1, outcome: 'rejected', retry: 'backoff', recorded: true });

    const second = h.run(config, patchB);
    await expect.poll(() => h.temp.journal.listActions({ fromTicket: 2, limit: 1 })[0]?.ticket).toBe(2);
    const b = h.temp.journal.listActions({ fromTicket: 2, limit: 1 })[0];
    await expect
      .poll(() => h.queue.position(b?.action_id ?? ''), { timeout: 5_000 })
      .toMatchObject({ ticket: 2, waiting: 'lane', waiting_for_ticket: 1, text: 'waiting for #1' });
    // Given every chance to go out, #2 stays put while #1 waits.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(arrivals()).toEqual(['PUT /api/documents/7']);

    expect(timers.advance(1_000)).toBe(1);
    const [retried, later] = await Promise.all([first, second]);
    expect(retried.envelope.error).toBeUndefined();
    expect(later.envelope.error).toBeUndefined();
    expect(arrivals()).toEqual(['PUT /api/documents/7', 'PUT /api/documents/7', 'PATCH /api/documents/7']);
    expect(server.effects).toEqual(['PUT /api/documents/7 {"v":"A"}', 'PATCH /api/documents/7 {"v":"B"}']);
  });

  it('once the retries end the lane moves on at once (the executor’s settled releases the next ticket)', async () => {
    const { timers, first } = await putWaitingOutBackoff();
    const config = localRouteConfig(server.port, retrying);
    timers.advance(1_000);
    await first;
    const next = await h.run(config, patchB);
    expect(next.envelope.error).toBeUndefined();
    expect(arrivals()).toEqual(['PUT /api/documents/7', 'PUT /api/documents/7', 'PATCH /api/documents/7']);
  });
});

describe('when an agent retries an earlier ticket (retry_of) while a later one of its lane is in flight', () => {
  it('the retry waits for it and reaches the remote after it, never beside it; tickets after it wait for the retry', async () => {
    // A remote that answers the first PUT 429 and holds every PATCH until the test lets it go.
    const held = await startHeldRemote((method) => method === 'PATCH');
    const { arrivals } = held;
    try {
      const config = localRouteConfig(held.port, agentRetries(2));
      const first = await h.run(config, putA);
      expect(first.envelope.error).toMatchObject({ outcome: 'rejected', retry: 'backoff' });
      const patch = h.run(config, patchB);
      await expect.poll(() => arrivals.length, { timeout: 10_000 }).toBe(2);
      const retried = h.run(config, { ...putA, retry_of: first.envelope.invocation_id });
      await new Promise((resolve) => setTimeout(resolve, 150));
      // The PATCH is in flight: the retry has not gone out beside it.
      expect(arrivals).toEqual(['PUT /api/documents/7', 'PATCH /api/documents/7']);
      // A third ticket of the lane arrives meanwhile: it goes after the retry, which holds the earlier place.
      const third = h.run(config, { route: 'docs', method: 'POST', path: '/documents/7/publish', body: '{}' });
      await new Promise((resolve) => setTimeout(resolve, 50));
      held.release();
      expect((await patch).envelope.error).toBeUndefined();
      expect((await retried).envelope.error).toBeUndefined();
      expect((await third).envelope.error).toBeUndefined();
      expect(arrivals).toEqual([
        'PUT /api/documents/7',
        'PATCH /api/documents/7',
        'PUT /api/documents/7',
        'POST /api/documents/7/publish',
      ]);
    } finally {
      await held.close();
    }
  });
});

describe('when the caller cancels or disconnects while an automatic retry waits out its backoff', () => {
  it.each([
    ['cancelled', 'CALLER_CANCELLED'],
    ['disconnected', 'CALLER_DISCONNECTED'],
  ] as const)(
    '%s: the recorded caller event ends the wait at once: the timer is cancelled, never fired, nothing more is sent, and the action answers its record',
    async (stop, event) => {
      const { timers, first } = await putWaitingOutBackoff();
      const id = h.temp.journal.listActions({ fromTicket: 1, limit: 1 })[0]?.action_id ?? '';
      expect(h.queue.isExecuting(id)).toBe(true);

      // No time passes: the caller's stop alone ends the backoff (cancel_action, notifications/cancelled and a closed
      // connection all come here).
      await h.queue.callerStopped(id, stop);
      expect(timers.size).toBe(0);
      const answered = await first;
      expect(answered.envelope.error).toMatchObject({ outcome: 'rejected', retry: 'backoff' });
      expect(timers.advance(60_000)).toBe(0);
      expect(arrivals()).toEqual(['PUT /api/documents/7']);
      const kinds = [...h.temp.journal.events()].filter((e) => e.action_id === id).map((e) => e.kind);
      expect(kinds).toContain(event);
      expect(kinds).not.toContain('RETRY_LEASED');
      expect(h.queue.isExecuting(id)).toBe(false);
    },
  );
});

describe("when the backoff ends while the caller's stop is being journaled", () => {
  it.each([
    ['cancelled', 'CALLER_CANCELLED'],
    ['disconnected', 'CALLER_DISCONNECTED'],
  ] as const)(
    "%s: the retry's timer firing before the caller event's commit starts no round: no RETRY_LEASED, no DISPATCH_STARTED after it, nothing more is sent",
    async (stop, event) => {
      const { timers, first } = await putWaitingOutBackoff();
      const id = h.temp.journal.listActions({ fromTicket: 1, limit: 1 })[0]?.action_id ?? '';
      const before = [...h.temp.journal.events()].filter((e) => e.action_id === id).length;
      // The caller event is queued for the next group commit (setImmediate): the backoff's timer fires first.
      const stopping = h.queue.callerStopped(id, stop);
      expect(timers.advance(60_000)).toBe(1);
      await stopping;
      const answered = await first;
      expect(answered.envelope.error).toMatchObject({ outcome: 'rejected', retry: 'backoff' });
      expect(arrivals()).toEqual(['PUT /api/documents/7']);
      const after = [...h.temp.journal.events()]
        .filter((e) => e.action_id === id)
        .slice(before)
        .map((e) => e.kind);
      expect(after).toEqual([event]);
      expect(h.queue.isExecuting(id)).toBe(false);
    },
  );
});

describe('when the broker stops (holdReleases) while a retry could still start', () => {
  const kindsOf = (actionId: string): string[] =>
    [...h.temp.journal.events()].filter((e) => e.action_id === actionId).map((e) => e.kind);

  it('an automatic retry waiting out its backoff when the drain begins stops waiting and is not sent: the action answers its record and leaves the drain', async () => {
    const { timers, first } = await putWaitingOutBackoff();
    expect(h.queue.releasedCount()).toBe(1);
    // The hold ends the wait (no time passes): the backoff's timer is cancelled, never fired.
    h.queue.holdReleases();
    expect(timers.size).toBe(0);
    expect(timers.advance(1_000)).toBe(0);
    const answered = await first;
    expect(answered.envelope.error).toMatchObject({ outcome: 'rejected', retry: 'backoff' });
    expect(arrivals()).toEqual(['PUT /api/documents/7']);
    expect(kindsOf(answered.envelope.invocation_id)).not.toContain('RETRY_LEASED');
    expect(h.queue.releasedCount()).toBe(0);
  });

  it('an agent’s retry_of asked for during the drain is refused SHUTTING_DOWN: nothing sent, nothing recorded', async () => {
    const config = localRouteConfig(server.port, agentRetries(2));
    const first = await h.run(config, putA);
    expect(first.envelope.error).toMatchObject({ outcome: 'rejected', retry: 'backoff' });
    const id = first.envelope.invocation_id;
    const before = kindsOf(id);
    h.queue.holdReleases();
    const refused = await codedRefusal(h.run(config, { ...putA, retry_of: id }));
    expect(refused).toMatchObject({ code: 'SHUTTING_DOWN', field: 'retry_of' });
    expect(refused.message).toContain('the broker is stopping');
    expect(arrivals()).toEqual(['PUT /api/documents/7']);
    expect(kindsOf(id)).toEqual(before);
    expect(h.queue.releasedCount()).toBe(0);
  });

  it('a retry_of refused SHUTTING_DOWN leaves the count of another retry of the same action in flight: the drain waits for it', async () => {
    // Every request here is a PUT: the first is answered 429, every later one is held until the test lets it go.
    const held = await startHeldRemote(() => true);
    const arrived = held.arrivals;
    try {
      const config = localRouteConfig(held.port, agentRetries(3));
      const first = await h.run(config, putA);
      const id = first.envelope.invocation_id;
      // The agent's retry is on the wire under its lease; the stop begins; a second retry_of of the same action comes.
      const retry = h.run(config, { ...putA, retry_of: id });
      await expect.poll(() => arrived.length, { timeout: 10_000 }).toBe(2);
      expect(h.queue.releasedCount()).toBe(1);
      h.queue.holdReleases();
      const refused = await codedRefusal(h.run(config, { ...putA, retry_of: id }));
      expect(refused).toMatchObject({ code: 'SHUTTING_DOWN', field: 'retry_of' });
      // The refused one never ran: the retry in flight still counts, so the drain waits for it rather than cut it.
      expect(h.queue.releasedCount()).toBe(1);
      expect(h.queue.isExecuting(id)).toBe(true);
      held.release();
      expect((await retry).envelope.error).toBeUndefined();
      expect(h.queue.releasedCount()).toBe(0);
      expect(arrived).toEqual(['PUT /api/documents/7', 'PUT /api/documents/7']);
    } finally {
      await held.close();
    }
  });

  it('a retry_of still waiting for its lane when the hold comes is refused SHUTTING_DOWN; the ticket in flight drains', async () => {
    const held = await startHeldRemote((method) => method === 'PATCH');
    const arrived = held.arrivals;
    try {
      const config = localRouteConfig(held.port, agentRetries(2));
      const first = await h.run(config, putA);
      const patch = h.run(config, patchB);
      await expect.poll(() => arrived.length, { timeout: 10_000 }).toBe(2);
      const retried = codedRefusal(h.run(config, { ...putA, retry_of: first.envelope.invocation_id }));
      // The retry waits behind the PATCH in flight (its place back at the lane's head): both count as released.
      await expect.poll(() => h.queue.releasedCount(), { timeout: 5_000 }).toBe(2);
      h.queue.holdReleases();
      expect(await retried).toMatchObject({ code: 'SHUTTING_DOWN', field: 'retry_of' });
      expect(h.queue.releasedCount()).toBe(1);
      held.release();
      expect((await patch).envelope.error).toBeUndefined();
      expect(h.queue.releasedCount()).toBe(0);
      expect(arrived).toEqual(['PUT /api/documents/7', 'PATCH /api/documents/7']);
      expect(kindsOf(first.envelope.invocation_id)).not.toContain('RETRY_LEASED');
    } finally {
      await held.close();
    }
  });
});
