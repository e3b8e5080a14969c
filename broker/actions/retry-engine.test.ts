import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { JournalEvent } from '../contract/index.js';
import { AdversarialHttpServer } from '../testing/adversarial-http-server.js';
import { IdempotencyTarget, type IdempotencyBehaviour } from '../testing/idempotency-target.js';
import { localRouteConfig, openHttpActionHarness, type HttpActionHarness } from '../testing/http-action-harness.js';
import { RequestStore } from '../journal/index.js';
import { retryKeptRequest } from './retry-http.js';
import { createAutomaticReconcile } from './reconcile-action.js';

/**
 * The retry engine end to end (issue 7): the real executor, journal, vault and channel against a
 * scripted remote that applies the effect and loses the response, in each of the three idempotency
 * behaviours; counts the remote's real effects and checks every recorded outcome; then budgets,
 * the lease fence with a paused worker, and the agent's retry_of.
 */
let h: HttpActionHarness;
let target: IdempotencyTarget;
beforeEach(async () => {
  h = await openHttpActionHarness();
});
afterEach(async () => {
  await target.stop();
  await h.dispose();
});

const retentionSeconds = 3600;
function routeYaml(retry: { attempts_max: number; automatic: boolean; lease_seconds?: number }): string {
  return [
    '    idempotency:',
    '      header: Idempotency-Key',
    '      scope: docs.account',
    `      retention_seconds: ${retentionSeconds}`,
    '      fingerprint: [method, path, body]',
    '    lookup:',
    '      method: GET',
    '      path: /operations/{idempotency_key}',
    '    retry:',
    `      attempts_max: ${retry.attempts_max}`,
    `      automatic: ${retry.automatic}`,
    '      backoff_ms: 0',
    `      lease_seconds: ${retry.lease_seconds ?? 30}`,
  ].join('\n');
}
const post = {
  route: 'docs',
  method: 'POST',
  path: '/releases',
  body: '{"release":"r-1"}',
  idempotency_key: 'key-r-1',
};
const kinds = (events: JournalEvent[]): string[] => events.map((e) => e.kind);
const ofKind = <K extends JournalEvent['kind']>(
  events: JournalEvent[],
  kind: K,
): Array<Extract<JournalEvent, { kind: K }>> =>
  events.filter((e): e is Extract<JournalEvent, { kind: K }> => e.kind === kind);

/** What the retry engine and the automatic reconcile are built from: this harness's parts under `config`. */
function engineDeps(config: ReturnType<typeof localRouteConfig>) {
  return { ...h.executorDeps(config), channel: h.channel };
}

async function start(behaviour: IdempotencyBehaviour, loseResponses: number): Promise<void> {
  target = await IdempotencyTarget.start(behaviour, { loseResponses });
}

describe('when the response is lost after the effect and the route retries automatically under its key', () => {
  it('honours: one real effect; the second attempt under the same key and lease returns the first result, committed', async () => {
    await start('honours', 1);
    const result = await h.run(localRouteConfig(target.port, routeYaml({ attempts_max: 2, automatic: true })), post);
    const id = result.envelope.invocation_id;
    const events = h.events(id);

    expect(target.effectsOf(post.body)).toBe(1);
    expect(target.requests.map((r) => [r.key, r.body])).toEqual([
      ['key-r-1', post.body],
      ['key-r-1', post.body],
    ]);
    expect(result.envelope.error).toBeUndefined();
    expect(result.envelope.effect).toBe('succeeded');
    expect(result.response?.status).toBe(201);
    // Attempt 1: unknown, recorded; the lease (generation 1, same key); attempt 2 names it and commits.
    const recorded = ofKind(events, 'OUTCOME_RECORDED');
    expect(recorded[0]?.classification).toMatchObject({ outcome: 'unknown', retry: 'same_idempotency_key' });
    expect(ofKind(events, 'RETRY_LEASED').map((e) => e.payload)).toEqual([
      expect.objectContaining({
        generation: 1,
        decision: 'RETRY_SAME_KEY',
        requested_by: { kind: 'broker', id: 'retry-engine' },
      }),
    ]);
    expect(ofKind(events, 'DISPATCH_STARTED').map((e) => [e.payload.attempt, e.payload.generation])).toEqual([
      [1, undefined],
      [2, 1],
    ]);
    expect(ofKind(events, 'RESULT_COMMITTED')[0]?.classification).toMatchObject({
      outcome: 'committed',
      effect: 'succeeded',
    });
    const state = h.temp.journal.getAction(id);
    expect(state).toMatchObject({
      outcome: 'committed',
      retry_generation: 1,
      retry_budget: 2,
      lease: { generation: 1, open: false },
    });
    expect(state?.attempts.map((a) => a.n)).toEqual([1, 2]);
  });

  it('ignores: the same-key retry applies the effect twice — the record shows both dispatched attempts under one key, so a person can see the contract was false', async () => {
    await start('ignores', 1);
    const result = await h.run(localRouteConfig(target.port, routeYaml({ attempts_max: 2, automatic: true })), post);
    const events = h.events(result.envelope.invocation_id);
    expect(target.effectsOf(post.body)).toBe(2);
    expect(result.envelope.error).toBeUndefined();
    expect(ofKind(events, 'DISPATCH_STARTED')).toHaveLength(2);
    expect(target.requests.every((r) => r.key === 'key-r-1')).toBe(true);
    expect(kinds(events).filter((k) => k === 'RETRY_LEASED')).toHaveLength(1);
  });

  it('rejects_changed: the automatic retry resends the identical payload (one effect, committed); a changed payload under the key is refused locally, and the remote 422 is recorded as rejected when only the remote remembers the key', async () => {
    await start('rejects_changed', 1);
    const config = localRouteConfig(target.port, routeYaml({ attempts_max: 2, automatic: true }));
    const result = await h.run(config, post);
    expect(result.envelope.error).toBeUndefined();
    expect(target.effectsOf(post.body)).toBe(1);

    // The agent asks to retry with a changed body: refused before anything is recorded or sent.
    const before = h.events(result.envelope.invocation_id).length;
    await expect(
      h.run(config, { ...post, body: '{"release":"r-2"}', retry_of: result.envelope.invocation_id }),
    ).rejects.toMatchObject({ code: 'IDEMPOTENCY_MISMATCH' });
    expect(h.events(result.envelope.invocation_id)).toHaveLength(before);
    expect(target.requests).toHaveLength(2);

    // Past the broker's own (earliest safe) window the key can be bound again locally; the remote
    // still remembers it and answers 422: a complete refusal, nothing applied.
    h.temp.clock.advance((retentionSeconds + 1) * 1000);
    const changed = await h.run(config, { ...post, body: '{"release":"r-2"}' });
    expect(changed.envelope.error).toMatchObject({ outcome: 'rejected', code: 'REMOTE_REJECTED' });
    expect(changed.response?.status).toBe(422);
    expect(target.effects).toHaveLength(1);
  });
});

describe('when every response is lost', () => {
  it('spends exactly the recorded budget, then records RETRY_BUDGET_EXHAUSTED with retry reconcile and the last evidence; the budget holds across a reopened journal', async () => {
    await start('ignores', 10);
    const config = localRouteConfig(target.port, routeYaml({ attempts_max: 2, automatic: true }));
    const result = await h.run(config, post);
    const id = result.envelope.invocation_id;
    expect(target.requests).toHaveLength(3);
    expect(result.envelope.error).toMatchObject({
      code: 'RETRY_BUDGET_EXHAUSTED',
      outcome: 'unknown',
      retry: 'reconcile',
      phase: 'remote_execution',
    });
    expect(result.envelope.evidence.attempts.map((a) => a.n)).toEqual([1, 2, 3]);
    const events = h.events(id);
    expect(ofKind(events, 'RETRY_LEASED').map((e) => e.payload.generation)).toEqual([1, 2]);
    expect(events.at(-1)).toMatchObject({
      kind: 'OUTCOME_RECORDED',
      classification: { code: 'RETRY_BUDGET_EXHAUSTED', outcome_basis: 'retry_budget_exhausted' },
    });
    // Its card (a blocked head now) says it is a retried action, and how far the budget went.
    expect(h.queue.cards().find((c) => c.action_id === id)).toMatchObject({
      state: 'blocked_head',
      retries: { generation: 2, budget: 2 },
    });

    // Restart: the count lives in the record. An agent's retry_of now sends nothing.
    await h.temp.journal.close();
    const { Journal } = await import('../journal/index.js');
    const reopened = await Journal.open({ path: h.temp.path, clock: h.temp.clock, vault: h.temp.vault });
    try {
      expect(reopened.getAction(id)).toMatchObject({
        retry_generation: 2,
        retry_budget: 2,
        code: 'RETRY_BUDGET_EXHAUSTED',
      });
      // The journal itself refuses a third lease: the budget is enforced by the record, not by memory.
      await expect(
        reopened.append({
          kind: 'RETRY_LEASED',
          action_id: id,
          payload: {
            generation: 3,
            holder: 'w',
            expires_at_ms: h.temp.clock.nowMs() + 1000,
            decision: 'RETRY_SAME_KEY',
            requested_by: { kind: 'agent', id: 'a' },
          },
        }),
      ).rejects.toMatchObject({ code: 'IMPOSSIBLE_TRANSITION' });
    } finally {
      await reopened.close();
    }
    expect(target.requests).toHaveLength(3);
  });

  it('without `automatic`, nothing is resent by the broker; the agent may ask once with retry_of (same key, same body), and it keeps the ticket', async () => {
    await start('honours', 1);
    const config = localRouteConfig(target.port, routeYaml({ attempts_max: 1, automatic: false }));
    const first = await h.run(config, post);
    const id = first.envelope.invocation_id;
    expect(first.envelope.error).toMatchObject({ outcome: 'unknown', retry: 'same_idempotency_key' });
    expect(target.requests).toHaveLength(1);
    const ticket = h.temp.journal.getAction(id)?.ticket;

    const retried = await h.run(config, { ...post, retry_of: id });
    expect(retried.envelope.invocation_id).toBe(id);
    expect(retried.envelope.error).toBeUndefined();
    expect(target.effectsOf(post.body)).toBe(1);
    expect(target.requests).toHaveLength(2);
    expect(h.temp.journal.getAction(id)).toMatchObject({ ticket, outcome: 'committed', retry_generation: 1 });
    expect(ofKind(h.events(id), 'RETRY_LEASED')[0]?.payload.requested_by.kind).toBe('agent');
    // Settled: a further retry_of resends nothing and answers the record.
    const again = await h.run(config, { ...post, retry_of: id });
    expect(again.envelope.error).toBeUndefined();
    expect(target.requests).toHaveLength(2);
  });

  it('a retry_of after the route was re-pointed is refused: the same key is never sent to another server', async () => {
    await start('honours', 1);
    const config = localRouteConfig(target.port, routeYaml({ attempts_max: 1, automatic: false }));
    const first = await h.run(config, post);
    const id = first.envelope.invocation_id;
    expect(first.envelope.error).toMatchObject({ outcome: 'unknown', retry: 'same_idempotency_key' });
    const recorded = h.events(id).length;
    // A person re-points the route (a live configuration change) at another server, which keeps a log of its own.
    const other = await IdempotencyTarget.start('honours', { loseResponses: 0 });
    try {
      const moved = localRouteConfig(other.port, routeYaml({ attempts_max: 1, automatic: false }));
      await expect(h.run(moved, { ...post, retry_of: id })).rejects.toMatchObject({
        code: 'INVALID_TARGET',
        field: 'route',
      });
      expect(other.requests).toEqual([]);
      expect(target.requests).toHaveLength(1);
      expect(h.events(id)).toHaveLength(recorded);
      expect(h.temp.journal.getAction(id)).toMatchObject({ outcome: 'unknown' });
      // Pointed back where it was sent, the same retry goes through.
      const retried = await h.run(config, { ...post, retry_of: id });
      expect(retried.envelope.error).toBeUndefined();
      expect(target.effectsOf(post.body)).toBe(1);
    } finally {
      await other.stop();
    }
  });

  it('a retry_of on a route without a retry policy, or with another key, is a coded refusal that records nothing', async () => {
    await start('honours', 1);
    const plain = localRouteConfig(
      target.port,
      routeYaml({ attempts_max: 1, automatic: false }).split('\n    retry:')[0],
    );
    const first = await h.run(plain, post);
    const id = first.envelope.invocation_id;
    const recorded = h.events(id).length;
    await expect(h.run(plain, { ...post, retry_of: id })).rejects.toMatchObject({
      code: 'UNSUPPORTED_ACTION',
      field: 'retry_of',
    });
    const withPolicy = localRouteConfig(target.port, routeYaml({ attempts_max: 1, automatic: false }));
    await expect(h.run(withPolicy, { ...post, idempotency_key: 'other-key', retry_of: id })).rejects.toMatchObject({
      code: 'IDEMPOTENCY_MISMATCH',
      field: 'idempotency_key',
    });
    await expect(h.run(withPolicy, { ...post, retry_of: 'act_nosuchaction1' })).rejects.toMatchObject({
      code: 'NOT_FOUND',
    });
    expect(h.events(id)).toHaveLength(recorded);
    expect(target.requests).toHaveLength(1);
  });
});

describe('when another session asks to retry an action', () => {
  it('is NOT_FOUND while the owner session is not ended (another agent cannot resend what it did not send); the owner may', async () => {
    await start('honours', 1);
    const config = localRouteConfig(target.port, routeYaml({ attempts_max: 1, automatic: false }));
    const first = await h.run(config, post, { sessionId: 'ses_owner_000001' });
    const id = first.envelope.invocation_id;
    await expect(h.run(config, { ...post, retry_of: id }, { sessionId: 'ses_other_000001' })).rejects.toMatchObject({
      code: 'NOT_FOUND',
      field: 'retry_of',
    });
    expect(target.requests).toHaveLength(1);
    const own = await h.run(config, { ...post, retry_of: id }, { sessionId: 'ses_owner_000001' });
    expect(own.envelope.error).toBeUndefined();
    expect(ofKind(h.events(id), 'RETRY_LEASED')[0]?.payload.requested_by).toEqual({
      kind: 'agent',
      id: 'ses_owner_000001',
    });
  });
});

describe('when a worker pauses after taking its lease and the lease expires (competing workers)', () => {
  it('a second worker takes the next generation and sends; the resumed first worker is fenced before dispatch: exactly one retry reaches the target', async () => {
    await start('honours', 1);
    const config = localRouteConfig(target.port, routeYaml({ attempts_max: 3, automatic: true, lease_seconds: 5 }));
    let leasedFirst!: () => void;
    const firstLeased = new Promise<void>((resolve) => {
      leasedFirst = resolve;
    });
    let resumeFirst!: () => void;
    const firstResumes = new Promise<void>((resolve) => {
      resumeFirst = resolve;
    });
    let resumeSecond!: () => void;
    const secondResumes = new Promise<void>((resolve) => {
      resumeSecond = resolve;
    });
    let secondLeased!: () => void;
    const secondHasLease = new Promise<void>((resolve) => {
      secondLeased = resolve;
    });

    // Worker 1: the original call; its engine takes generation 1, then pauses.
    const one = h.run(config, post, {
      workerId: 'worker-1',
      onLeased: async () => {
        leasedFirst();
        await firstResumes;
      },
    });
    await firstLeased;
    const id = [...h.temp.journal.events()].find((e) => e.kind === 'ACTION_ACCEPTED')?.action_id ?? '';
    expect(target.requests).toHaveLength(1);

    // A live lease cannot be taken over.
    await expect(h.run(config, { ...post, retry_of: id }, { workerId: 'worker-early' })).resolves.toMatchObject({
      envelope: { error: { code: 'LEASE_LOST' } },
    });

    // The lease expires; worker 2 (the agent's retry_of) takes generation 2 and pauses too.
    h.temp.clock.advance(6_000);
    const two = h.run(
      config,
      { ...post, retry_of: id },
      {
        workerId: 'worker-2',
        onLeased: async () => {
          secondLeased();
          await secondResumes;
        },
      },
    );
    await secondHasLease;

    // Worker 1 resumes first: its DISPATCH_STARTED names generation 1 and is refused (LEASE_LOST).
    resumeFirst();
    const oneResult = await one;
    expect(target.requests).toHaveLength(1);
    expect(oneResult.envelope.invocation_id).toBe(id);

    resumeSecond();
    const twoResult = await two;
    expect(twoResult.envelope.error).toBeUndefined();
    expect(target.requests).toHaveLength(2);
    expect(target.effectsOf(post.body)).toBe(1);

    const events = h.events(id);
    expect(ofKind(events, 'RETRY_LEASED').map((e) => [e.payload.generation, e.payload.holder])).toEqual([
      [1, 'worker-1'],
      [2, 'worker-2'],
    ]);
    expect(ofKind(events, 'DISPATCH_STARTED').map((e) => e.payload.generation)).toEqual([undefined, 2]);
    expect(h.temp.journal.getAction(id)).toMatchObject({ outcome: 'committed', retry_generation: 2 });
  });

  it('a paused worker whose lease expired with nobody else around is fenced too: it never sends', async () => {
    await start('honours', 1);
    const config = localRouteConfig(target.port, routeYaml({ attempts_max: 3, automatic: true, lease_seconds: 5 }));
    const result = await h.run(config, post, {
      onLeased: () => {
        h.temp.clock.advance(5_000);
      },
    });
    expect(target.requests).toHaveLength(1);
    expect(result.envelope.error).toMatchObject({ outcome: 'unknown' });
    const events = h.events(result.envelope.invocation_id);
    expect(ofKind(events, 'DISPATCH_STARTED')).toHaveLength(1);
    expect(ofKind(events, 'RETRY_LEASED')).toHaveLength(1);
  });
});

describe('when an idempotent request is throttled (429, Retry-After) and the route retries automatically', () => {
  it('the retry after the backoff commits its own result over the throttled one; the lane is not left wedged', async () => {
    target = await IdempotencyTarget.start('honours');
    let arrivals = 0;
    const throttling = await AdversarialHttpServer.start({
      journalPath: h.temp.path,
      script: () =>
        (arrivals += 1) === 1
          ? { kind: 'respond', status: 429, headers: { 'retry-after': '0' }, body: '{"slow":"down"}' }
          : { kind: 'respond', status: 200, body: '{"ok":true}', applyEffect: true },
    });
    try {
      const config = localRouteConfig(
        throttling.port,
        ['    retry:', '      attempts_max: 2', '      automatic: true', '      backoff_ms: 0'].join('\n'),
      );
      const result = await h.run(config, { route: 'docs', method: 'PUT', path: '/documents/7', body: '{"v":1}' });
      const id = result.envelope.invocation_id;
      expect(result.envelope.error).toBeUndefined();
      expect(result.response?.status).toBe(200);
      expect(throttling.requests).toHaveLength(2);
      const committedEvents = ofKind(h.events(id), 'RESULT_COMMITTED');
      expect(committedEvents.map((e) => [e.payload.attempt, e.classification?.outcome])).toEqual([
        [1, 'rejected'],
        [2, 'committed'],
      ]);
      expect(ofKind(h.events(id), 'RETRY_LEASED')[0]?.payload.decision).toBe('RETRY_WHEN_ALLOWED');
      expect(h.temp.journal.getAction(id)).toMatchObject({
        outcome: 'committed',
        recorded: true,
        lease: { open: false },
      });
    } finally {
      await throttling.stop();
    }
  });
});

describe('when the vault is locked at retry time', () => {
  it('no lease is taken and nothing is spent from the budget: the record stands', async () => {
    await start('honours', 1);
    const config = localRouteConfig(target.port, routeYaml({ attempts_max: 1, automatic: false }));
    const first = await h.run(config, post);
    const id = first.envelope.invocation_id;
    h.vault.lock('test');
    const answer = await h.run(config, { ...post, retry_of: id });
    expect(answer.envelope.error).toMatchObject({ outcome: 'unknown' });
    expect(ofKind(h.events(id), 'RETRY_LEASED')).toHaveLength(0);
    expect(target.requests).toHaveLength(1);
  });
});

describe("when the key's window has passed", () => {
  it('nothing is resent: the route lookup runs as automation (no actor) and settles the action from the remote', async () => {
    await start('honours', 1);
    const config = localRouteConfig(target.port, routeYaml({ attempts_max: 2, automatic: false }));
    const first = await h.run(config, post);
    const id = first.envelope.invocation_id;
    expect(first.envelope.error).toMatchObject({ outcome: 'unknown', retry: 'same_idempotency_key' });

    h.temp.clock.advance((retentionSeconds + 1) * 1000);
    const reconcile = createAutomaticReconcile(engineDeps(config));
    const answer = await h.run(config, { ...post, retry_of: id }, { reconcile });

    expect(target.requests.map((r) => r.method)).toEqual(['POST', 'GET']);
    expect(target.effectsOf(post.body)).toBe(1);
    const events = h.events(id);
    expect(ofKind(events, 'RETRY_LEASED')).toHaveLength(0);
    const reconciled = ofKind(events, 'RECONCILIATION_RESULT');
    expect(reconciled).toHaveLength(1);
    expect(reconciled[0]?.payload).not.toHaveProperty('actor');
    expect(reconciled[0]?.classification).toMatchObject({ outcome: 'committed', source: 'remote_query' });
    expect(answer.envelope).toMatchObject({ invocation_id: id, effect: 'succeeded' });
  });
});

describe('when a person retries an unknown action with the same key (the kept request)', () => {
  it('the request was kept sealed (no plaintext on disk), the retry resends it under the next lease with the person as requested_by, and settling drops it', async () => {
    await start('honours', 1);
    const requests = RequestStore.open(h.temp.path, process.platform, h.temp.journal);
    try {
      const config = localRouteConfig(target.port, routeYaml({ attempts_max: 2, automatic: false }));
      const first = await h.run(config, post, { requests });
      const id = first.envelope.invocation_id;
      expect(first.envelope.error).toMatchObject({ outcome: 'unknown' });
      const kept = requests.read(id, h.temp.clock.nowMs());
      expect(kept?.route).toBe('docs');
      expect(Buffer.from(kept?.sealed ?? []).includes(Buffer.from('release'))).toBe(false);

      const deps = { ...engineDeps(config), requests };
      const retried = await retryKeptRequest(deps, id, { kind: 'person', id: 'ann' });
      expect(retried.envelope).toMatchObject({ invocation_id: id, effect: 'succeeded' });
      expect(target.requests.map((r) => [r.key, r.body])).toEqual([
        ['key-r-1', post.body],
        ['key-r-1', post.body],
      ]);
      expect(target.effectsOf(post.body)).toBe(1);
      expect(ofKind(h.events(id), 'RETRY_LEASED')[0]?.payload).toMatchObject({
        generation: 1,
        requested_by: { kind: 'person', id: 'ann' },
      });
      expect(requests.read(id, h.temp.clock.nowMs())).toBeUndefined();
      await expect(retryKeptRequest(deps, id, { kind: 'person', id: 'ann' })).rejects.toMatchObject({
        code: 'NOT_FOUND',
        field: 'action_id',
      });
    } finally {
      requests.close();
    }
  });

  it("the blocked head's card carries the key's window end (retry_until_ms): a retry one ms before it is taken, one at it is NOT_FOUND", async () => {
    await start('honours', 1);
    const requests = RequestStore.open(h.temp.path, process.platform, h.temp.journal);
    try {
      const config = localRouteConfig(target.port, routeYaml({ attempts_max: 3, automatic: false }));
      const deps = { ...engineDeps(config), requests };
      /** An unknown action under `key` and its card: the card's retry_until_ms, checked against the recorded key window. */
      const unknownWithCard = async (key: string, body: string): Promise<{ id: string; until: number }> => {
        const run = await h.run(config, { ...post, idempotency_key: key, body }, { requests });
        const id = run.envelope.invocation_id;
        expect(run.envelope.error).toMatchObject({ outcome: 'unknown' });
        const window = ofKind(h.events(id), 'PREFLIGHT_VALIDATED')[0]?.payload.idempotency?.expires_at_ms;
        expect(window).toBeGreaterThan(h.temp.clock.nowMs());
        const card = h.queue.cards().find((c) => c.action_id === id);
        expect(card).toMatchObject({ state: 'blocked_head', retry_possible: true, retry_until_ms: window });
        return { id, until: card?.retry_until_ms ?? 0 };
      };

      const a = await unknownWithCard('key-w-1', '{"release":"w-1"}');
      h.temp.clock.advance(a.until - 1 - h.temp.clock.nowMs());
      const retried = await retryKeptRequest(deps, a.id, { kind: 'person', id: 'ann' });
      expect(retried.envelope).toMatchObject({ invocation_id: a.id, effect: 'succeeded' });

      target.loseResponses = 1;
      const b = await unknownWithCard('key-w-2', '{"release":"w-2"}');
      h.temp.clock.advance(b.until - h.temp.clock.nowMs());
      await expect(retryKeptRequest(deps, b.id, { kind: 'person', id: 'ann' })).rejects.toMatchObject({
        code: 'NOT_FOUND',
      });
      expect(ofKind(h.events(b.id), 'RETRY_LEASED')).toHaveLength(0);
      expect(target.requests.map((r) => r.key)).toEqual(['key-w-1', 'key-w-1', 'key-w-2']);
    } finally {
      requests.close();
    }
  });

  it('nothing is kept on a route without a retry policy, or once the key window passed: NOT_FOUND, nothing sent', async () => {
    // The first action commits (an unknown one would block the lane the second one needs).
    await start('honours', 0);
    const requests = RequestStore.open(h.temp.path, process.platform, h.temp.journal);
    try {
      const noPolicy = localRouteConfig(
        target.port,
        routeYaml({ attempts_max: 1, automatic: false }).split('\n    retry:')[0],
      );
      const plain = await h.run(noPolicy, post, { requests });
      const deps = { ...engineDeps(noPolicy), requests };
      await expect(
        retryKeptRequest(deps, plain.envelope.invocation_id, { kind: 'person', id: 'ann' }),
      ).rejects.toMatchObject({ code: 'NOT_FOUND' });

      target.loseResponses = 1;
      const withPolicy = localRouteConfig(target.port, routeYaml({ attempts_max: 1, automatic: false }));
      const second = await h.run(
        withPolicy,
        { ...post, idempotency_key: 'key-r-2', body: '{"release":"r-2"}' },
        { requests },
      );
      h.temp.clock.advance((retentionSeconds + 1) * 1000);
      await expect(
        retryKeptRequest({ ...deps, config: withPolicy }, second.envelope.invocation_id, { kind: 'person', id: 'ann' }),
      ).rejects.toMatchObject({ code: 'NOT_FOUND' });
      expect(await requests.dropExpired(h.temp.clock.nowMs(), 10)).toBe(1);
      expect(target.requests).toHaveLength(2);
    } finally {
      requests.close();
    }
  });
});
