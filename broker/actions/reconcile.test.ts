import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { PosternConfig } from '../config/index.js';
import type { NewEvent } from '../contract/index.js';
import { localRouteConfig, openHttpActionHarness, type HttpActionHarness } from '../testing/http-action-harness.js';
import { person } from '../testing/queue-fixture.js';
import { codedRefusal, waitForCards } from '../testing/queue-waits.js';
import { ApprovalQueue } from '../queue/approval-queue.js';
import { recoveryEvent } from '../journal/index.js';
import { sha256Of } from '../testing/action-paths.js';
import { executeHttpAction, type HttpActionResult } from './execute-http-action.js';
import { reconcileAction, type ReconcileDeps } from './reconcile-action.js';

/**
 * Reconciliation by the route's lookup (issue 7), triggered by a person. The target applies a
 * keyed POST and drops the connection (unknown, lane blocked); a person reconciles: the lookup
 * GET /operations/{idempotency_key} runs as its own recorded action (no approval, no lane), and
 * its answer is appended to the original as RECONCILIATION_RESULT (source remote_query).
 */
interface Target {
  readonly port: number;
  /** Every request that reached the target, as `METHOD path`. */
  readonly arrivals: string[];
  /** Writes that took effect (a POST's body marker). */
  readonly effects: string[];
  lookupStatus: number;
  stop(): Promise<void>;
}

async function startTarget(): Promise<Target> {
  const t = { arrivals: [] as string[], effects: [] as string[], lookupStatus: 200 };
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (c: Buffer) => chunks.push(c));
    request.on('end', () => {
      const path = request.url ?? '/';
      t.arrivals.push(`${request.method ?? ''} ${path}`);
      if (request.method === 'POST') {
        const marker = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { marker: string }).marker;
        t.effects.push(marker);
        // A applies its effect and the connection dies before any response byte: unknown.
        if (marker === 'A') return void request.socket.destroy();
      }
      const status = request.method === 'GET' && path.startsWith('/api/operations/') ? t.lookupStatus : 200;
      const body = JSON.stringify({ ok: status < 300 });
      response
        .writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) })
        .end(body);
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

const contract = [
  '    idempotency:',
  '      header: Idempotency-Key',
  '      scope: docs.account',
  '      retention_seconds: 86400',
  '      fingerprint: [method, path, body]',
];
const lookupGet = ['    lookup:', '      method: GET', '      path: /operations/{idempotency_key}'];

let h: HttpActionHarness;
let target: Target;
afterEach(async () => {
  await target.stop();
  await h.dispose();
});

interface Setup {
  readonly deps: ReconcileDeps;
  submit(marker: string, key?: string): { readonly run: Promise<HttpActionResult>; readonly admitted: Promise<string> };
}

/** One route (approval none, every request in lane route:docs) to the target, with `extra` YAML. */
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
    submit(marker, key) {
      let admit: (id: string) => void = () => undefined;
      const admitted = new Promise<string>((resolve) => (admit = resolve));
      const input = {
        route: 'docs',
        method: 'POST',
        path: '/documents/7',
        body: JSON.stringify({ marker }),
        headers: { 'content-type': 'application/json' },
        ...(key === undefined ? {} : { idempotency_key: key }),
      };
      return { run: executeHttpAction({ ...deps, onAdmitted: admit }, input), admitted };
    },
  };
}

/** A (keyed) is unknown and heads the lane; B waits behind it. */
async function unknownHeadWithB(
  s: Setup,
  key: string | undefined,
): Promise<{ idA: string; idB: string; b: Promise<HttpActionResult> }> {
  const a = await s.submit('A', key).run;
  expect(a.envelope.error).toMatchObject({ outcome: 'unknown' });
  const b = s.submit('B');
  const idB = await b.admitted;
  await waitForCards(h.queue, (cards) => cards.some((c) => c.action_id === idB), 'B in the lane');
  expect(h.queue.position(idB)).toMatchObject({ waiting: 'lane_blocked' });
  return { idA: a.envelope.invocation_id, idB, b: b.run };
}

describe('when a person reconciles an unknown head by the route lookup', () => {
  it('a 200 lookup settles it committed (remote_query), releases the lane, and the effect happened once', async () => {
    const s = await setUp([...contract, ...lookupGet]);
    const { idA, idB, b } = await unknownHeadWithB(s, 'order#7?v=1');
    const before = h.temp.journal.getAction(idA);

    const result = await reconcileAction(s.deps, idA, person);
    expect(result).toMatchObject({
      action_id: idA,
      correlation: 'idempotency_token',
      outcome: 'committed',
      effect: 'succeeded',
      outcome_basis: 'remote_query_found',
    });
    // The lookup went to its own path, the key percent-encoded as one segment.
    expect(target.arrivals).toContain('GET /api/operations/order%237%3Fv%3D1');
    expect(h.temp.journal.getAction(idA)).toMatchObject({
      outcome: 'committed',
      effect: 'succeeded',
      source: 'remote_query',
      outcome_basis: 'remote_query_found',
      retry: 'never',
      caller_disposition: before?.caller_disposition ?? null,
    });
    const observation = h.events(idA).at(-1);
    expect(observation).toMatchObject({
      kind: 'RECONCILIATION_RESULT',
      seq: result.journal_seq,
      payload: { correlation: 'idempotency_token', lookup_action_id: result.lookup_action_id, actor: person },
    });

    // The lookup is its own recorded action: approval none, no lane, linked to A, its own ticket.
    const lookup = h.temp.journal.getAction(result.lookup_action_id);
    expect(lookup).toMatchObject({ lane: null, approval: 'none', outcome: 'committed', channel: 'http' });
    expect(lookup?.ticket).toBeGreaterThan(h.temp.journal.getAction(idB)?.ticket ?? Infinity);
    expect(h.events(result.lookup_action_id)[0]).toMatchObject({
      kind: 'ACTION_ACCEPTED',
      payload: { approval: 'none', reconciles: idA },
    });
    expect(h.events(result.lookup_action_id).map((e) => e.kind)).toContain('CREDENTIAL_AUTHORIZED');

    // The lane moves on: B is sent. A's effect happened exactly once; the lookup was a GET.
    expect((await b).envelope.error).toBeUndefined();
    expect(target.effects).toEqual(['A', 'B']);
    expect(target.arrivals.filter((a) => a.startsWith('GET'))).toHaveLength(1);

    // Settled now: a second reconciliation is refused and sends nothing.
    expect(await codedRefusal(reconcileAction(s.deps, idA, person))).toMatchObject({
      code: 'DECISION_CONFLICT',
      field: 'action_id',
      message: expect.stringContaining('already settled'),
    });
    expect(target.arrivals.filter((a) => a.startsWith('GET'))).toHaveLength(1);
  });

  it('a 404 asked right after the attempt ended is no proof (the remote may still be processing it): recorded inconclusive, with why; the effect it then reports settles it', async () => {
    const s = await setUp([...contract, ...lookupGet]);
    const { idA, idB, b } = await unknownHeadWithB(s, 'K');
    // The remote has A (applied as the connection died) but answers "no record" at first: it records keys late.
    target.lookupStatus = 404;
    h.temp.clock.advance(59_000);
    const early = await reconcileAction(s.deps, idA, person);
    expect(early).toMatchObject({ outcome: 'unknown', outcome_basis: 'remote_query_inconclusive' });
    expect(h.temp.journal.getAction(idA)).toMatchObject({ outcome: 'unknown', retry: 'reconcile' });
    expect(h.events(idA).at(-1)).toMatchObject({
      kind: 'RECONCILIATION_RESULT',
      payload: { note: expect.stringMatching(/asked 59 s after the original's last attempt ended.*from 60 s/) },
    });
    expect(h.queue.position(idB)).toMatchObject({ waiting: 'lane_blocked' });
    // Now the remote reports the operation: committed, never "no effect".
    target.lookupStatus = 200;
    expect(await reconcileAction(s.deps, idA, person)).toMatchObject({ outcome: 'committed', effect: 'succeeded' });
    await b;
    expect(target.effects).toEqual(['A', 'B']);
  });

  it("a 404 lookup under the key within its retention, asked once the route's wait passed, settles it rejected with no effect", async () => {
    const s = await setUp([...contract, ...lookupGet]);
    const { idA, b } = await unknownHeadWithB(s, 'K');
    target.lookupStatus = 404;
    // The default wait (lookup.not_found_after_seconds 60) after A's last recorded event; an earlier lookup's own
    // RECONCILIATION_RESULT does not restart it.
    h.temp.clock.advance(30_000);
    expect(await reconcileAction(s.deps, idA, person)).toMatchObject({ outcome: 'unknown' });
    h.temp.clock.advance(30_000);
    const result = await reconcileAction(s.deps, idA, person);
    expect(result).toMatchObject({ outcome: 'rejected', effect: 'no_effect', outcome_basis: 'remote_query_no_record' });
    expect(h.temp.journal.getAction(idA)).toMatchObject({
      outcome: 'rejected',
      effect: 'no_effect',
      source: 'remote_query',
      code: 'REMOTE_REJECTED',
    });
    await b;
    expect(target.effects).toEqual(['A', 'B']);
  });

  it('a route that declares lookup.not_found_after_seconds 0 trusts a 404 at once', async () => {
    const s = await setUp([...contract, ...lookupGet, '      not_found_after_seconds: 0']);
    const { idA, b } = await unknownHeadWithB(s, 'K');
    target.lookupStatus = 404;
    expect(await reconcileAction(s.deps, idA, person)).toMatchObject({
      outcome: 'rejected',
      effect: 'no_effect',
      outcome_basis: 'remote_query_no_record',
    });
    expect(h.events(idA).at(-1)?.payload).not.toHaveProperty('note');
    await b;
  });

  it('a 404 after the declared key retention proves nothing: the action stays unknown', async () => {
    const s = await setUp([...contract, ...lookupGet]);
    const { idA, idB } = await unknownHeadWithB(s, 'K');
    target.lookupStatus = 404;
    h.temp.clock.advance(86_400_000 + 1);
    expect(await reconcileAction(s.deps, idA, person)).toMatchObject({
      outcome: 'unknown',
      outcome_basis: 'remote_query_inconclusive',
    });
    expect(h.queue.position(idB)).toMatchObject({ waiting: 'lane_blocked' });
  });

  it('a 500 lookup is recorded as an inconclusive observation; the action stays unknown and the lane blocked', async () => {
    const s = await setUp([...contract, ...lookupGet]);
    const { idA, idB } = await unknownHeadWithB(s, 'K');
    target.lookupStatus = 500;
    const result = await reconcileAction(s.deps, idA, person);
    expect(result).toMatchObject({
      outcome: 'unknown',
      effect: 'unknown_effect',
      outcome_basis: 'remote_query_inconclusive',
    });
    expect(h.temp.journal.getAction(idA)).toMatchObject({
      outcome: 'unknown',
      retry: 'reconcile',
      source: 'remote_query',
      outcome_basis: 'remote_query_inconclusive',
    });
    expect(h.events(idA).at(-1)).toMatchObject({
      kind: 'RECONCILIATION_RESULT',
      payload: { lookup_action_id: result.lookup_action_id },
    });
    expect(h.queue.position(idB)).toMatchObject({ waiting: 'lane_blocked' });
    expect(target.effects).toEqual(['A']);
    // Still unknown: a later lookup may settle it.
    target.lookupStatus = 200;
    expect(await reconcileAction(s.deps, idA, person)).toMatchObject({ outcome: 'committed' });
    await waitForCards(h.queue, (cards) => !cards.some((c) => c.action_id === idB), 'B sent');
  });

  it('is refused without a lookup, without a correlation, for a never-dispatched or unknown action, and records nothing', async () => {
    const noLookup = await setUp(contract);
    const a = (await noLookup.submit('A', 'K').run).envelope.invocation_id;
    const seq = h.temp.journal.stats().last_seq;
    expect(await codedRefusal(reconcileAction(noLookup.deps, a, person))).toMatchObject({
      code: 'UNSUPPORTED_ACTION',
      field: 'lookup',
      message: expect.stringContaining('declares no lookup'),
    });
    expect(await codedRefusal(reconcileAction(noLookup.deps, 'act_nosuchaction', person))).toMatchObject({
      code: 'NOT_FOUND',
      field: 'action_id',
    });
    expect(h.temp.journal.stats().last_seq).toBe(seq);
    await target.stop();
    await h.dispose();

    const noKey = await setUp([...contract, ...lookupGet]);
    const { idA, idB } = await unknownHeadWithB(noKey, undefined);
    expect(await codedRefusal(reconcileAction(noKey.deps, idA, person))).toMatchObject({
      code: 'UNSUPPORTED_ACTION',
      field: 'lookup',
      message: expect.stringContaining('holds none'),
    });
    // B was never dispatched: there is nothing to reconcile.
    expect(await codedRefusal(reconcileAction(noKey.deps, idB, person))).toMatchObject({
      code: 'DECISION_CONFLICT',
      message: expect.stringContaining('never dispatched'),
    });
    expect(target.arrivals.filter((x) => x.startsWith('GET'))).toEqual([]);
  });
});

describe("when a person reconciles an action a quarantined journal's recovery left unknown before dispatch", () => {
  /**
   * What the journal holds after such a start: a keyed POST admitted (its key bound with PREFLIGHT_VALIDATED, before
   * any byte could be sent), no DISPATCH_STARTED — the restored copy may have lost it — and recovery's own record.
   */
  async function quarantinedUnknown(key: string): Promise<string> {
    const id = 'act_quarantined_0001';
    const journal = h.temp.journal;
    const admitted: NewEvent[] = [
      {
        kind: 'ACTION_ACCEPTED',
        action_id: id,
        session_id: 'ses_test',
        lane: 'route:docs',
        payload: {
          channel: 'http',
          target: 'route:docs POST /documents/7',
          request_fingerprint: sha256Of(0xf1),
          approval: 'none',
          idempotent: false,
        },
      },
      {
        kind: 'PREFLIGHT_VALIDATED',
        action_id: id,
        payload: {
          idempotency: {
            route: 'docs',
            scope: 'docs.account',
            key,
            fingerprint: sha256Of(0xf2),
            expires_at_ms: h.temp.clock.nowMs() + 86_400_000,
          },
        },
      },
    ];
    for (const event of admitted) await journal.append(event);
    const state = journal.getAction(id);
    const recovered = state === undefined ? undefined : recoveryEvent(state, h.temp.clock.nowMs(), 'quarantined');
    if (recovered === undefined) throw new Error('recovery recorded nothing');
    await journal.append(recovered);
    expect(journal.getAction(id)).toMatchObject({
      dispatch_seq: null,
      outcome: 'unknown',
      outcome_basis: 'broker_restart_journal_quarantined',
    });
    return id;
  }

  it('a 200 lookup by the key bound at admission settles it committed, and nothing is resent', async () => {
    const s = await setUp([...contract, ...lookupGet]);
    const id = await quarantinedUnknown('K-quarantined');
    const result = await reconcileAction(s.deps, id, person);
    expect(result).toMatchObject({ correlation: 'idempotency_token', outcome: 'committed', effect: 'succeeded' });
    expect(target.arrivals).toEqual(['GET /api/operations/K-quarantined']);
    expect(h.temp.journal.getAction(id)).toMatchObject({
      dispatch_seq: null,
      outcome: 'committed',
      source: 'remote_query',
      outcome_basis: 'remote_query_found',
    });
    expect(h.events(id).at(-1)).toMatchObject({ kind: 'RECONCILIATION_RESULT', payload: { actor: person } });
  });

  it('a 404 under the key within its retention settles it rejected with no effect', async () => {
    const s = await setUp([...contract, ...lookupGet]);
    const id = await quarantinedUnknown('K-absent');
    target.lookupStatus = 404;
    // Asked once the route's wait (60 s by default) passed since the record's last word on the action.
    h.temp.clock.advance(60_000);
    expect(await reconcileAction(s.deps, id, person)).toMatchObject({ outcome: 'rejected', effect: 'no_effect' });
    expect(h.temp.journal.getAction(id)).toMatchObject({ outcome: 'rejected', code: 'REMOTE_REJECTED' });
    expect(target.effects).toEqual([]);
  });
});
