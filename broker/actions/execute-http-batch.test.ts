import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { JournalEvent } from '../contract/index.js';
import { AdversarialHttpServer, type Behavior } from '../testing/adversarial-http-server.js';
import {
  canary,
  localRouteConfig,
  openHttpActionHarness,
  type HttpActionHarness,
} from '../testing/http-action-harness.js';
import { abandonBlockedHeads } from '../testing/queue-waits.js';

let h: HttpActionHarness;
const servers: AdversarialHttpServer[] = [];

beforeAll(async () => {
  h = await openHttpActionHarness();
});
afterEach(async () => {
  await abandonBlockedHeads(h.queue);
  h.channel.close();
  h.channel = h.newChannel();
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});
afterAll(async () => {
  await h.dispose();
});

async function server(behavior: Behavior): Promise<AdversarialHttpServer> {
  const s = await AdversarialHttpServer.start({ journalPath: h.temp.path, script: () => behavior });
  servers.push(s);
  return s;
}

const batchShape = [
  '    batch:',
  '      request:',
  '        members: /changes',
  '        id: ref',
  '      response:',
  '        members: /results',
  '        id: ref',
  '        status: state',
  '        succeeded: [ok, created]',
  '        rejected: [invalid]',
].join('\n');
const contract =
  '    idempotency:\n      header: Idempotency-Key\n      scope: docs.account\n      retention_seconds: 3600\n      fingerprint: [method, path, body]';

const five = ['c1', 'c2', 'c3', 'c4', 'c5'];
const batchRequest = (ids: readonly string[] = five) => ({
  route: 'docs',
  method: 'POST',
  path: '/changes:batch',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ changes: ids.map((ref, i) => ({ ref, set: { title: `t${i}` } })) }),
});
const json = (value: unknown): Behavior => ({
  kind: 'respond',
  status: 200,
  body: JSON.stringify(value),
  headers: { 'content-type': 'application/json' },
  applyEffect: true,
});
// The complete response decides four of the five: three took effect, one was refused, c5 is not mentioned.
const fourOfFive = json({
  results: [
    { ref: 'c1', state: 'ok' },
    { ref: 'c2', state: 'created' },
    { ref: 'c3', state: 'ok' },
    { ref: 'c4', state: 'invalid', error: 'title too long' },
  ],
});

const committedEvent = (actionId: string): JournalEvent => {
  const events = h.events(actionId).filter((e) => e.kind === 'RESULT_COMMITTED');
  expect(events).toHaveLength(1);
  return events[0] as JournalEvent;
};

describe('when a five-member batch is answered for only four members', () => {
  it('without a key contract: five member outcomes, the silent one unknown/reconcile, the parent partial_effect with the three completed ids', async () => {
    const s = await server(fourOfFive);
    const { envelope } = await h.run(localRouteConfig(s.port, batchShape), batchRequest());
    // One request went out for the whole batch, and nothing was resent.
    expect(s.requests).toHaveLength(1);
    expect(envelope.error).toBeUndefined();
    expect(envelope).toMatchObject({ effect: 'partial_effect', outcome_basis: 'batch_partial_effect' });
    expect(envelope.evidence.response_status).toBe(200);
    expect(envelope.evidence.batch).toEqual({
      members: [
        { id: 'c1', outcome: 'committed', effect: 'succeeded', retry: 'never', status: 'ok' },
        { id: 'c2', outcome: 'committed', effect: 'succeeded', retry: 'never', status: 'created' },
        { id: 'c3', outcome: 'committed', effect: 'succeeded', retry: 'never', status: 'ok' },
        { id: 'c4', outcome: 'rejected', effect: 'rejected', retry: 'after_correction', status: 'invalid' },
        { id: 'c5', outcome: 'unknown', effect: 'unknown_effect', retry: 'reconcile' },
      ],
      completed_ids: ['c1', 'c2', 'c3'],
    });
    // The journal holds the same facts the agent was told.
    const event = committedEvent(envelope.invocation_id);
    expect(event.payload).toMatchObject({
      result_id: envelope.evidence.result_id,
      result_digest: envelope.evidence.result_digest,
      batch: envelope.evidence.batch,
    });
    expect(event.classification).toMatchObject({
      outcome: 'committed',
      effect: 'partial_effect',
      retry: 'never',
      outcome_basis: 'batch_partial_effect',
      source: 'remote_response',
      code: null,
    });
    expect(h.temp.journal.getAction(envelope.invocation_id)).toMatchObject({
      outcome: 'committed',
      effect: 'partial_effect',
      retry: 'never',
      outcome_basis: 'batch_partial_effect',
    });
    // The parent transport result is stored whole under the invocation id.
    expect(JSON.parse(h.results.read(envelope.evidence.result_id ?? '')?.body.toString() ?? 'null')).toMatchObject({
      results: [{ ref: 'c1' }, { ref: 'c2' }, { ref: 'c3' }, { ref: 'c4' }],
    });
  });

  it('under a declared contract with a key in its window: the silent member may be retried with the same key, the others may not', async () => {
    const s = await server(fourOfFive);
    const { envelope } = await h.run(localRouteConfig(s.port, `${batchShape}\n${contract}`), {
      ...batchRequest(),
      idempotency_key: 'batch-key-1',
    });
    expect(s.requests[0]?.headers['idempotency-key']).toBe('batch-key-1');
    expect(envelope.evidence.batch?.members.map((m) => [m.id, m.retry])).toEqual([
      ['c1', 'never'],
      ['c2', 'never'],
      ['c3', 'never'],
      ['c4', 'after_correction'],
      ['c5', 'same_idempotency_key'],
    ]);
    expect(envelope.evidence.batch?.completed_ids).toEqual(['c1', 'c2', 'c3']);
    expect(envelope.effect).toBe('partial_effect');
    expect(committedEvent(envelope.invocation_id).payload).toMatchObject({ batch: envelope.evidence.batch });
  });
});

describe('when every member is decided', () => {
  it('all succeeded: the parent is succeeded and every id is completed', async () => {
    const s = await server(json({ results: five.map((ref) => ({ ref, state: 'ok' })) }));
    const { envelope } = await h.run(localRouteConfig(s.port, batchShape), batchRequest());
    expect(envelope).toMatchObject({ effect: 'succeeded', outcome_basis: 'batch_all_members_succeeded' });
    expect(envelope.evidence.batch?.completed_ids).toEqual(five);
    expect(
      envelope.evidence.batch?.members.every(
        (m) => m.outcome === 'committed' && m.effect === 'succeeded' && m.retry === 'never',
      ),
    ).toBe(true);
    expect(committedEvent(envelope.invocation_id).classification).toMatchObject({
      effect: 'succeeded',
      outcome_basis: 'batch_all_members_succeeded',
    });
  });
});

describe('when the response cannot itemize the members', () => {
  it('a body that is not JSON: every member is unknown, the parent result stands and its basis says why', async () => {
    const s = await server({
      kind: 'respond',
      status: 200,
      body: 'all good',
      headers: { 'content-type': 'text/plain' },
      applyEffect: true,
    });
    const { envelope } = await h.run(localRouteConfig(s.port, batchShape), batchRequest());
    expect(envelope).toMatchObject({ effect: 'succeeded', outcome_basis: 'batch_response_not_json' });
    expect(envelope.evidence.batch?.members.map((m) => [m.id, m.outcome, m.effect, m.retry])).toEqual(
      five.map((id) => [id, 'unknown', 'unknown_effect', 'reconcile']),
    );
    expect(envelope.evidence.batch?.completed_ids).toEqual([]);
    const event = committedEvent(envelope.invocation_id);
    expect(event.payload).toMatchObject({ batch: envelope.evidence.batch });
    expect(event.classification).toMatchObject({
      outcome: 'committed',
      effect: 'succeeded',
      outcome_basis: 'batch_response_not_json',
    });
  });

  it('a complete response whose stored body was capped (truncated): no member is decided from a prefix', async () => {
    h.channel = h.newChannel({ limits: { resultBodyBytesMax: 40 } });
    const s = await server(fourOfFive);
    const { envelope, response } = await h.run(localRouteConfig(s.port, batchShape), batchRequest());
    expect(response?.truncated).toBe(true);
    expect(envelope.outcome_basis).toBe('batch_response_truncated');
    expect(envelope.evidence.batch?.members.every((m) => m.outcome === 'unknown')).toBe(true);
  });
});

describe('when the remote echoes a secret into a member status', () => {
  it('the status is scrubbed before it is recorded or answered', async () => {
    const s = await server(
      json({
        results: [
          { ref: 'c1', state: `denied for Bearer ${canary}` },
          { ref: 'c2', state: 'ok' },
        ],
      }),
    );
    const { envelope } = await h.run(localRouteConfig(s.port, batchShape), batchRequest(['c1', 'c2']));
    expect(envelope.evidence.batch?.members[0]).toEqual({
      id: 'c1',
      outcome: 'committed',
      effect: 'failed',
      retry: 'never',
      status: 'denied for Bearer [REDACTED]',
    });
    expect(JSON.stringify(envelope)).not.toContain(canary);
    expect(JSON.stringify(committedEvent(envelope.invocation_id).payload)).not.toContain(canary);
    expect(envelope.effect).toBe('partial_effect');
  });
});

describe('when the route declares no batch', () => {
  it('the same response records no member outcomes', async () => {
    const s = await server(fourOfFive);
    const { envelope } = await h.run(localRouteConfig(s.port), batchRequest());
    expect(envelope).toMatchObject({ effect: 'succeeded', outcome_basis: 'complete_response' });
    expect(envelope.evidence.batch).toBeUndefined();
    expect(committedEvent(envelope.invocation_id).payload).not.toHaveProperty('batch');
  });
});
