import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { PosternConfig } from '../config/index.js';
import type { JournalEvent } from '../contract/index.js';
import {
  canary,
  localRouteConfig,
  openHttpActionHarness,
  type HttpActionHarness,
} from '../testing/http-action-harness.js';
import { person } from '../testing/queue-fixture.js';
import { codedRefusal } from '../testing/queue-waits.js';
import { ApprovalQueue } from '../queue/approval-queue.js';
import { executeHttpAction } from './execute-http-action.js';
import { reconcileAction, type ReconcileDeps } from './reconcile-action.js';

/**
 * Reconciliation by the weaker correlations of article 003 (issue 7), against a real HTTP server
 * on loopback and the real executor: the provider's request id, seen in the response headers of a
 * response that was then lost, and a bounded read-back by the request's own declared fields when
 * the remote offers no id at all. Each lookup is its own recorded action; its answer is appended
 * to the original as RECONCILIATION_RESULT (source remote_query).
 */
interface Target {
  readonly port: number;
  /** Every request that reached the target, as `METHOD url`. */
  readonly arrivals: string[];
  /** How a POST is answered: headers then a lost body, dropped before any byte, or a full 201. */
  post: 'lost_after_headers' | 'dropped' | 'created';
  /** The X-Request-Id a POST's response carries; 'echo-token' repeats the request's bearer token. */
  requestId: string;
  /** Request ids the target's /requests/{id} knows. */
  readonly knownRequestIds: Set<string>;
  /** What GET /payments lists under `data`. */
  listing: unknown[];
  stop(): Promise<void>;
}

async function startTarget(): Promise<Target> {
  const t = {
    arrivals: [] as string[],
    post: 'lost_after_headers' as Target['post'],
    requestId: 'req-01J:7',
    knownRequestIds: new Set<string>(),
    listing: [] as unknown[],
  };
  const server: Server = createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      const url = request.url ?? '/';
      t.arrivals.push(`${request.method ?? ''} ${url}`);
      const json = (status: number, value: unknown): void => {
        const body = JSON.stringify(value);
        response
          .writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) })
          .end(body);
      };
      if (request.method === 'POST') {
        const requestId =
          t.requestId === 'echo-token' ? (request.headers.authorization ?? '').replace(/^Bearer /, '') : t.requestId;
        if (t.post === 'dropped') return void request.socket.destroy();
        if (t.post === 'created') return json(201, { id: 'pay_1' });
        // The status line and headers (with the request id) go out, then the body is cut short.
        response.writeHead(201, {
          'content-type': 'application/json',
          'content-length': 100,
          'x-request-id': requestId,
        });
        response.write('{"id":', () => request.socket.destroy());
        return;
      }
      const requests = /^\/api\/requests\/([^/?]+)$/.exec(url);
      if (requests !== null) {
        const id = decodeURIComponent(requests[1] ?? '');
        return t.knownRequestIds.has(id)
          ? json(200, { id, state: 'completed' })
          : json(404, { error: 'no such request' });
      }
      if (url.startsWith('/api/payments?')) return json(200, { data: t.listing });
      json(404, { error: 'not found' });
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return Object.assign(t, {
    port: (server.address() as AddressInfo).port,
    async stop() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  });
}

const providerId = [
  '    correlation:',
  '      provider_request_id_header: X-Request-Id',
  '    lookup:',
  '      method: GET',
  '      path: /requests/{provider_request_id}',
];
const readBackOnly = [
  '    correlation:',
  '      request_fields: [external_ref, customer]',
  '      read_back:',
  '        path: /payments',
  '        query: {external_ref: "{external_ref}", customer: "{customer}", limit: "10"}',
  '        items: /data',
  '        match: [external_ref, customer]',
  '        items_max: 3',
];
const keyedLookup = [
  '    idempotency:',
  '      header: Idempotency-Key',
  '      scope: pay.account',
  '      retention_seconds: 86400',
  '      fingerprint: [method, path, body]',
  '    lookup:',
  '      method: GET',
  '      path: /requests/{idempotency_key}',
];

/** Each payment number its own lane, so a second payment is not held behind the first unknown one. */
const laneEach = ['    lanes:', '      - methods: [POST]', '        path: /payments/{n}', '        lane: pay-{n}'];

let h: HttpActionHarness;
let target: Target;
afterEach(async () => {
  await target.stop();
  await h.dispose();
});

interface Setup {
  readonly deps: ReconcileDeps;
  /** POSTs a payment (to /payments, or /payments/N); returns its action id once its outcome is recorded. */
  pay(
    body: Record<string, unknown>,
    options?: { readonly key?: string; readonly n?: number },
  ): Promise<{ readonly id: string; readonly outcome: unknown }>;
}

/** One route `docs` (approval none) to the target, with `extra` YAML. */
async function setUp(extra: readonly string[]): Promise<Setup> {
  h = await openHttpActionHarness();
  target = await startTarget();
  const config: PosternConfig = localRouteConfig(target.port, extra.join('\n'));
  h.queue.close();
  const queue = ApprovalQueue.open({ journal: h.temp.journal, clock: h.temp.clock, config });
  h.queue = queue;
  const deps: ReconcileDeps = { ...h.executorDeps(config, queue), channel: h.channel };
  return {
    deps,
    async pay(body, { key, n } = {}) {
      const input = {
        route: 'docs',
        method: 'POST',
        path: n === undefined ? '/payments' : `/payments/${n}`,
        body: JSON.stringify(body),
        headers: { 'content-type': 'application/json' },
        ...(key === undefined ? {} : { idempotency_key: key }),
      };
      const result = await executeHttpAction(deps, input);
      return { id: result.envelope.invocation_id, outcome: result.envelope.error?.outcome ?? 'committed' };
    },
  };
}

const ofKind = <K extends JournalEvent['kind']>(id: string, kind: K): Array<Extract<JournalEvent, { kind: K }>> =>
  h.events(id).filter((e): e is Extract<JournalEvent, { kind: K }> => e.kind === kind);
const gets = (): string[] => target.arrivals.filter((a) => a.startsWith('GET '));

describe('when the provider request id was seen before the response was lost', () => {
  it('records it on REMOTE_RESPONSE_STARTED, and a {provider_request_id} lookup settles the unknown action committed', async () => {
    const s = await setUp(providerId);
    const a = await s.pay({ amount: 5 });
    // Headers arrived, the body did not: no complete result, so unknown — but the id was seen.
    expect(a.outcome).toBe('unknown');
    expect(h.temp.journal.getAction(a.id)).toMatchObject({ outcome: 'unknown', retry: 'reconcile' });
    expect(ofKind(a.id, 'REMOTE_RESPONSE_STARTED').map((e) => e.payload)).toEqual([
      { attempt: 1, status: 201, provider_request_id: 'req-01J:7' },
    ]);
    expect(ofKind(a.id, 'REMOTE_RESPONSE_COMPLETE')).toEqual([]);

    target.knownRequestIds.add('req-01J:7');
    const result = await reconcileAction(s.deps, a.id, person);
    expect(result).toMatchObject({
      action_id: a.id,
      correlation: 'provider_request_id',
      outcome: 'committed',
      effect: 'succeeded',
      outcome_basis: 'remote_query_found',
    });
    expect(result.note).toBeUndefined();
    // The id went out percent-encoded as one path segment, on the lookup's own recorded action.
    expect(gets()).toEqual(['GET /api/requests/req-01J%3A7']);
    expect(h.events(result.lookup_action_id)[0]).toMatchObject({
      kind: 'ACTION_ACCEPTED',
      payload: { approval: 'none', reconciles: a.id, target: 'route:docs GET /requests/req-01J%3A7' },
    });
    expect(h.temp.journal.getAction(a.id)).toMatchObject({
      outcome: 'committed',
      effect: 'succeeded',
      source: 'remote_query',
      outcome_basis: 'remote_query_found',
    });
    expect(h.events(a.id).at(-1)).toMatchObject({
      kind: 'RECONCILIATION_RESULT',
      seq: result.journal_seq,
      payload: { correlation: 'provider_request_id', lookup_action_id: result.lookup_action_id, actor: person },
    });
  });

  it('a 404 for the provider request id proves nothing: the action stays unknown', async () => {
    const s = await setUp(providerId);
    const a = await s.pay({ amount: 5 });
    const result = await reconcileAction(s.deps, a.id, person);
    expect(result).toMatchObject({
      correlation: 'provider_request_id',
      outcome: 'unknown',
      outcome_basis: 'remote_query_inconclusive',
    });
    expect(h.temp.journal.getAction(a.id)).toMatchObject({
      outcome: 'unknown',
      retry: 'reconcile',
      source: 'remote_query',
    });
  });

  it('records no id that echoes the request (here the injected token), and none when no header arrived; reconcile is then refused and sends nothing', async () => {
    const s = await setUp([...providerId, ...laneEach]);
    target.requestId = 'echo-token';
    const echoed = await s.pay({ amount: 5 }, { n: 1 });
    expect(echoed.outcome).toBe('unknown');
    const started = ofKind(echoed.id, 'REMOTE_RESPONSE_STARTED');
    expect(started).toHaveLength(1);
    expect(started[0]?.payload).toEqual({ attempt: 1, status: 201 });
    expect(JSON.stringify(h.events(echoed.id))).not.toContain(canary);

    target.post = 'dropped';
    const dropped = await s.pay({ amount: 6 }, { n: 2 });
    expect(dropped.outcome).toBe('unknown');
    expect(ofKind(dropped.id, 'REMOTE_RESPONSE_STARTED')).toEqual([]);

    const seq = h.temp.journal.stats().last_seq;
    for (const id of [echoed.id, dropped.id]) {
      expect(await codedRefusal(reconcileAction(s.deps, id, person))).toMatchObject({
        code: 'UNSUPPORTED_ACTION',
        field: 'lookup',
        message: expect.stringContaining('holds none'),
      });
    }
    expect(h.temp.journal.stats().last_seq).toBe(seq);
    expect(gets()).toEqual([]);
  });
});

const mine = { external_ref: 'inv-2024/0007', customer: 42 };

describe('when the route offers only a bounded read-back', () => {
  it('journals the declared fields at admission, and exactly one matching candidate settles it committed with a note', async () => {
    const s = await setUp(readBackOnly);
    target.post = 'dropped';
    const a = await s.pay({ ...mine, amount: 5, memo: 'not a correlation field' });
    expect(a.outcome).toBe('unknown');
    // Only the declared fields, a number as printed; nothing else of the body.
    expect(ofKind(a.id, 'PREFLIGHT_VALIDATED').map((e) => e.payload)).toEqual([
      { correlation_values: { external_ref: 'inv-2024/0007', customer: '42' } },
    ]);

    target.listing = [
      { external_ref: 'inv-2024/0008', customer: 42 },
      { ...mine, id: 'pay_7', amount: 5 },
    ];
    const result = await reconcileAction(s.deps, a.id, person);
    expect(result).toMatchObject({
      correlation: 'bounded_read_back',
      outcome: 'committed',
      effect: 'succeeded',
      outcome_basis: 'remote_read_back_match',
      read_back: { matched: 1, examined: 2 },
    });
    expect(result.note).toMatch(/exactly one of 2 candidates/);

    // The read-back was one GET with the recorded values as its filter, as its own recorded action.
    expect(gets()).toHaveLength(1);
    const sent = new URL(`http://x${(gets()[0] ?? '').slice('GET '.length)}`);
    expect(sent.pathname).toBe('/api/payments');
    expect(Object.fromEntries(sent.searchParams)).toEqual({
      external_ref: 'inv-2024/0007',
      customer: '42',
      limit: '10',
    });
    expect(h.events(result.lookup_action_id)[0]).toMatchObject({
      kind: 'ACTION_ACCEPTED',
      payload: { approval: 'none', reconciles: a.id, target: expect.stringMatching(/^route:docs GET \/payments/) },
    });
    expect(h.temp.journal.getAction(result.lookup_action_id)).toMatchObject({ outcome: 'committed', lane: null });

    expect(h.temp.journal.getAction(a.id)).toMatchObject({
      outcome: 'committed',
      effect: 'succeeded',
      retry: 'never',
      source: 'remote_query',
      outcome_basis: 'remote_read_back_match',
    });
    expect(h.events(a.id).at(-1)).toMatchObject({
      kind: 'RECONCILIATION_RESULT',
      seq: result.journal_seq,
      payload: {
        correlation: 'bounded_read_back',
        lookup_action_id: result.lookup_action_id,
        actor: person,
        note: result.note,
        read_back: { matched: 1, examined: 2 },
      },
    });
  });

  it.each([
    [
      'no candidate matches',
      [{ ...mine, customer: 43 }],
      'remote_read_back_no_match',
      { matched: 0, examined: 1 },
      /absence in a read-back is not proof of no effect/,
    ],
    [
      'two candidates match',
      [mine, { ...mine, id: 'pay_8' }],
      'remote_read_back_ambiguous',
      { matched: 2, examined: 2 },
      /2 of 2 candidates .* ambiguous/,
    ],
    [
      'more candidates than items_max',
      [mine, {}, {}, {}],
      'remote_read_back_unbounded',
      { matched: 1, examined: 4 },
      /more than items_max 3/,
    ],
  ])('when %s it stays unknown, saying why', async (_when, listing, basis, readBack, note) => {
    const s = await setUp(readBackOnly);
    target.post = 'dropped';
    const a = await s.pay(mine);
    target.listing = listing;
    const result = await reconcileAction(s.deps, a.id, person);
    expect(result).toMatchObject({
      correlation: 'bounded_read_back',
      outcome: 'unknown',
      effect: 'unknown_effect',
      outcome_basis: basis,
      read_back: readBack,
    });
    expect(result.note).toMatch(note);
    expect(h.temp.journal.getAction(a.id)).toMatchObject({
      outcome: 'unknown',
      retry: 'reconcile',
      code: 'REMOTE_OUTCOME_UNKNOWN',
      source: 'remote_query',
      outcome_basis: basis,
    });
    expect(h.events(a.id).at(-1)).toMatchObject({
      kind: 'RECONCILIATION_RESULT',
      payload: { correlation: 'bounded_read_back', note: result.note, read_back: readBack },
    });
  });

  it('is refused when the request body did not carry the fields, and records and sends nothing', async () => {
    const s = await setUp(readBackOnly);
    target.post = 'dropped';
    const a = await s.pay({ external_ref: 'inv-1', customer: { id: 42 } });
    expect(ofKind(a.id, 'PREFLIGHT_VALIDATED').map((e) => e.payload)).toEqual([
      { correlation_values: { external_ref: 'inv-1' } },
    ]);
    const seq = h.temp.journal.stats().last_seq;
    expect(await codedRefusal(reconcileAction(s.deps, a.id, person))).toMatchObject({
      code: 'UNSUPPORTED_ACTION',
      field: 'lookup',
      message: expect.stringContaining('needs customer'),
    });
    expect(h.temp.journal.stats().last_seq).toBe(seq);
    expect(gets()).toEqual([]);
  });
});

describe('when a route declares both a keyed lookup and a read-back', () => {
  it('uses the key when the record holds one, and falls back to the read-back only when no lookup applies', async () => {
    const s = await setUp([...keyedLookup, ...readBackOnly, ...laneEach]);
    target.post = 'dropped';
    const keyed = await s.pay(mine, { key: 'K-1', n: 1 });
    const unkeyed = await s.pay({ ...mine, external_ref: 'inv-2' }, { n: 2 });
    target.knownRequestIds.add('K-1');
    target.listing = [{ ...mine, external_ref: 'inv-2' }];

    expect(await reconcileAction(s.deps, keyed.id, person)).toMatchObject({
      correlation: 'idempotency_token',
      outcome: 'committed',
      outcome_basis: 'remote_query_found',
    });
    expect(gets()).toEqual(['GET /api/requests/K-1']);
    expect(h.events(keyed.id).at(-1)?.payload).not.toHaveProperty('note');

    expect(await reconcileAction(s.deps, unkeyed.id, person)).toMatchObject({
      correlation: 'bounded_read_back',
      outcome: 'committed',
      outcome_basis: 'remote_read_back_match',
    });
    expect(gets()).toHaveLength(2);
    expect(gets()[1]).toMatch(/^GET \/api\/payments\?/);
  });
});
