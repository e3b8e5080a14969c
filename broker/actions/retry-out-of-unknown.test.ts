import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { JournalEvent } from '../contract/index.js';
import { AdversarialHttpServer, type Behavior } from '../testing/adversarial-http-server.js';
import { localRouteConfig, openHttpActionHarness, type HttpActionHarness } from '../testing/http-action-harness.js';

/*
 * A retry out of unknown answered with a refusal or an error status (DESIGN §3): the first attempt applied its effect
 * and lost its response, the route's automatic retries (idempotent repeats, or same-key retries under a declared
 * contract) are answered 404, 409, 429 or 500. Those answers are the retries', not the first attempt's: the action
 * stays unknown until the budget is spent (then RETRY_BUDGET_EXHAUSTED, retry reconcile) and the lane stays held, never `rejected` (released as if nothing had happened) while the remote's effect
 * log holds the first attempt's effect. A success of the retry still settles it (retry-engine.test.ts).
 */
let h: HttpActionHarness;
let remote: AdversarialHttpServer | undefined;
beforeEach(async () => {
  h = await openHttpActionHarness();
});
afterEach(async () => {
  await remote?.stop();
  remote = undefined;
  await h.dispose();
});

const sameKeyRoute = [
  '    idempotency:',
  '      header: Idempotency-Key',
  '      scope: docs.account',
  '      retention_seconds: 3600',
  '      fingerprint: [method, path, body]',
  '    retry:',
  '      attempts_max: 2',
  '      automatic: true',
  '      backoff_ms: 0',
].join('\n');
const repeatRoute = ['    retry:', '      attempts_max: 2', '      automatic: true', '      backoff_ms: 0'].join('\n');

/** The remote: the first request applied and its response lost, every later one answered `then`. */
async function firstLostThen(then: Behavior): Promise<AdversarialHttpServer> {
  let n = 0;
  remote = await AdversarialHttpServer.start({
    script: () => (n++ === 0 ? { kind: 'apply_then_close' } : then),
  });
  return remote;
}

const recorded = (events: JournalEvent[]) =>
  events.flatMap((e) => (e.kind === 'OUTCOME_RECORDED' || e.kind === 'RESULT_COMMITTED' ? [e.classification] : []));

describe('when the retry out of unknown is answered with a refusal or an error status', () => {
  const cases: Array<{ name: string; route: string; request: Record<string, unknown>; then: Behavior }> = [
    {
      name: "a DELETE's idempotent repeat answered 404 (the first one deleted it)",
      route: repeatRoute,
      request: { route: 'docs', method: 'DELETE', path: '/documents/7' },
      then: { kind: 'respond', status: 404, body: '{"error":"no such document"}' },
    },
    {
      name: 'a same-key POST answered 409 (the first one still in progress)',
      route: sameKeyRoute,
      request: { route: 'docs', method: 'POST', path: '/releases', body: '{"r":1}', idempotency_key: 'key-409' },
      then: { kind: 'respond', status: 409, body: '{"error":"request in progress"}' },
    },
    {
      name: 'a same-key POST answered 429',
      route: sameKeyRoute,
      request: { route: 'docs', method: 'POST', path: '/releases', body: '{"r":2}', idempotency_key: 'key-429' },
      then: { kind: 'respond', status: 429, headers: { 'retry-after': '1' }, body: '{"error":"slow down"}' },
    },
    {
      name: "a PUT's idempotent repeat answered 500",
      route: repeatRoute,
      request: { route: 'docs', method: 'PUT', path: '/documents/8', body: '{"v":2}' },
      then: { kind: 'respond', status: 500, body: '{"error":"internal"}' },
    },
  ];
  for (const c of cases) {
    it(`${c.name}: the action stays unknown until its retry budget is spent, its effect unknown`, async () => {
      const server = await firstLostThen(c.then);
      const result = await h.run(localRouteConfig(server.port, c.route), c.request);
      const id = result.envelope.invocation_id;
      const status = (c.then as { status: number }).status;
      // The first attempt's effect happened; each retry (the route's budget: two) reached the remote and was answered.
      expect(server.effects).toHaveLength(1);
      expect(server.requests).toHaveLength(3);
      const events = h.events(id);
      expect(events.filter((e) => e.kind === 'DISPATCH_STARTED')).toHaveLength(3);
      const [first, ...retries] = recorded(events);
      expect(first).toMatchObject({ outcome: 'unknown', outcome_basis: 'response_not_observed_after_dispatch' });
      const exhausted = retries.pop();
      expect(retries).toHaveLength(2);
      for (const retry of retries)
        expect(retry).toMatchObject({
          outcome: 'unknown',
          effect: 'unknown_effect',
          code: 'REMOTE_OUTCOME_UNKNOWN',
          outcome_basis: 'retry_answer_does_not_settle_earlier_attempt',
          source: 'remote_response',
        });
      // The budget spent, a lookup or a person decides: never a refusal claimed for the first attempt's effect.
      expect(exhausted).toMatchObject({ outcome: 'unknown', code: 'RETRY_BUDGET_EXHAUSTED', retry: 'reconcile' });
      const state = h.temp.journal.getAction(id);
      expect(state).toMatchObject({ outcome: 'unknown', effect: 'unknown_effect', retry: 'reconcile' });
      // Each retry's status is kept as evidence of that attempt.
      expect(state?.attempts.map((a) => a.response_status)).toEqual([null, status, status]);
      expect(result.envelope.error).toMatchObject({ outcome: 'unknown', retry: 'reconcile' });
      expect(result.envelope.effect).toBe('unknown_effect');
    });
  }

  it('a throttled first attempt (429, nothing applied) retried and refused again is rejected: nothing was left unknown', async () => {
    let n = 0;
    remote = await AdversarialHttpServer.start({
      script: () =>
        n++ === 0
          ? { kind: 'respond', status: 429, headers: { 'retry-after': '0' }, body: '{"error":"slow down"}' }
          : { kind: 'respond', status: 409, body: '{"error":"conflict"}' },
    });
    const result = await h.run(localRouteConfig(remote.port, repeatRoute), {
      route: 'docs',
      method: 'PUT',
      path: '/documents/9',
      body: '{"v":3}',
    });
    expect(remote.requests).toHaveLength(2);
    expect(remote.effects).toHaveLength(0);
    expect(h.temp.journal.getAction(result.envelope.invocation_id)).toMatchObject({
      outcome: 'rejected',
      effect: 'rejected',
    });
    expect(result.envelope.error).toMatchObject({ outcome: 'rejected', code: 'REMOTE_REJECTED' });
  });
});
