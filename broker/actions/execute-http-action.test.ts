import { readdirSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { JournalEvent } from '../contract/index.js';
import type { HttpChannel } from '../channels/http/index.js';
import type { DispatchGate } from '../ports/index.js';
import {
  AdversarialHttpServer,
  type AdversarialServerOptions,
  type Behavior,
} from '../testing/adversarial-http-server.js';
import {
  canary,
  canaryLeaks,
  localRouteConfig,
  openHttpActionHarness,
  type HttpActionHarness,
} from '../testing/http-action-harness.js';
import { abandonBlockedHeads, waitForCardCount } from '../testing/queue-waits.js';
import { DiskSyncGate } from '../testing/disk-sync-gate.js';

let h: HttpActionHarness;
const servers: AdversarialHttpServer[] = [];

beforeAll(async () => {
  h = await openHttpActionHarness();
});
afterEach(async () => {
  // An unknown outcome blocks lane route:docs (by design); the next case needs it released.
  await abandonBlockedHeads(h.queue);
  h.channel.close();
  h.channel = h.newChannel();
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});

async function server(
  script: Behavior | ((onConnection: number) => Behavior),
  options: Omit<AdversarialServerOptions, 'script'> = {},
): Promise<AdversarialHttpServer> {
  return serverFor(h, script, options);
}

/** A scripted server whose log reads `harness`'s journal; stopped after each case. */
async function serverFor(
  harness: HttpActionHarness,
  script: Behavior | ((onConnection: number) => Behavior),
  options: Omit<AdversarialServerOptions, 'script'> = {},
): Promise<AdversarialHttpServer> {
  const s = await AdversarialHttpServer.start({
    journalPath: harness.temp.path,
    script: (request) => (typeof script === 'function' ? script(request.onConnection) : script),
    ...options,
  });
  servers.push(s);
  return s;
}

const post = { route: 'docs', method: 'POST', path: '/documents/7', body: '{"title":"x"}' };
const kinds = (events: JournalEvent[]) => events.map((e) => e.kind);

/** A channel whose DNS answer locks `harness`'s vault first: the action stops during setup, before the boundary. */
function vaultLockingChannel(harness: HttpActionHarness): HttpChannel {
  return harness.newChannel({
    lookup: async () => {
      harness.vault.lock('idle');
      return [{ address: '127.0.0.1', family: 4 }];
    },
  });
}

/** Every request the server saw began only after its DISPATCH_STARTED was visible to another connection. */
function expectDispatchDurableBeforeBytes(s: AdversarialHttpServer): void {
  for (const entry of s.log) {
    if (entry.event !== 'first_byte') continue;
    expect(entry.dispatchRowsVisible).toBeGreaterThanOrEqual(entry.requestsStarted);
  }
}

describe("when the channel's observations ride in the settlement's commit", () => {
  // Held observations wait for the settlement, not for the timer: a loaded machine cannot split the commit.
  let r: HttpActionHarness;
  beforeAll(async () => {
    r = await openHttpActionHarness({ laterFlushMs: 60_000 });
  });
  afterEach(async () => {
    await abandonBlockedHeads(r.queue);
    r.channel.close();
    r.channel = r.newChannel();
  });
  afterAll(async () => {
    await r.dispose();
  });

  it("the channel's observations ride in the settlement's commit: one commit from REQUEST_SENT to RESULT_COMMITTED", async () => {
    const s = await serverFor(r, { kind: 'respond', status: 200, body: '{"id":7}', applyEffect: true });
    const commits: string[][] = [];
    const stop = r.temp.journal.onCommit((commit) => commits.push([...commit.kinds]));
    try {
      const { envelope } = await r.run(localRouteConfig(s.port), post);
      expect(envelope).toMatchObject({ effect: 'succeeded', outcome_basis: 'complete_response' });
    } finally {
      stop();
    }
    expect(commits).toContainEqual([
      'REQUEST_SENT',
      'REMOTE_RESPONSE_STARTED',
      'REMOTE_RESPONSE_COMPLETE',
      'RESULT_COMMITTED',
    ]);
    expect(commits.filter((kinds) => kinds.includes('REQUEST_SENT'))).toHaveLength(1);
  });

  it('stopped before dispatch (the vault locked during setup), the answer does not wait for the held authorization to be flushed by the timer', async () => {
    // Here the timer is 60 s away: a case that waited for it would time out.
    const s = await serverFor(r, { kind: 'respond', status: 200, applyEffect: true });
    r.channel = vaultLockingChannel(r);
    const { envelope } = await r.run(localRouteConfig(s.port, '', { host: 'localhost' }), post);
    expect(envelope.error).toMatchObject({ code: 'VAULT_LOCKED', outcome: 'not_attempted' });
    expect(kinds(r.events(envelope.invocation_id))).toContain('CREDENTIAL_AUTHORIZED');
    expect(s.log).toHaveLength(0);
    await r.vault.unlock(Buffer.from('correct horse battery staple'));
  });

  /**
   * A misbehaving gate: its held `kind` observation names attempt 9, which never crossed the boundary, so the journal
   * refuses it; with `commitAtOnce` that observation is committed (and refused) before the response ends.
   */
  function misnamingGate(kind: 'REQUEST_SENT' | 'REMOTE_RESPONSE_COMPLETE', commitAtOnce: boolean): DispatchGate {
    const journal = r.temp.journal;
    return {
      append: (event) => journal.append(event),
      appendLater: (event) => {
        if (event.kind !== kind) return journal.appendLater(event);
        const appended = journal.appendLater({ ...event, payload: { ...event.payload, attempt: 9 } } as typeof event);
        if (commitAtOnce) journal.commitHeld();
        return appended;
      },
      commitHeld: () => journal.commitHeld(),
      beginDispatch: (actionId, attempt, connection) => journal.beginDispatch(actionId, attempt, connection),
    };
  }

  /** Runs one POST through `gate`, which must fail it; the action's event kinds. */
  async function refusedRun(gate: DispatchGate): Promise<{ actionId: string; events: string[] }> {
    const s = await serverFor(r, { kind: 'respond', status: 200, body: '{"id":7}', applyEffect: true });
    r.channel = r.newChannel({ gate });
    const ids: string[] = [];
    const run = r.run(localRouteConfig(s.port), post, { onAdmitted: (id) => ids.push(id) });
    await expect(run).rejects.toMatchObject({ code: 'IMPOSSIBLE_TRANSITION' });
    expect(s.effects).toHaveLength(1);
    const actionId = ids[0] ?? '';
    expect(r.temp.journal.getAction(actionId)).toMatchObject({ outcome: 'unknown' });
    return { actionId, events: kinds(r.events(actionId)) };
  }

  it('an observation the journal refuses refuses the settlement it rides with: no result is recorded over it', async () => {
    const { events } = await refusedRun(misnamingGate('REMOTE_RESPONSE_COMPLETE', false));
    expect(events).not.toContain('RESULT_COMMITTED');
    expect(events).not.toContain('REMOTE_RESPONSE_COMPLETE');
  });

  it('an observation refused in an earlier commit (before the settlement was queued) refuses it too: settle checks', async () => {
    const { events } = await refusedRun(misnamingGate('REQUEST_SENT', true));
    expect(events).not.toContain('RESULT_COMMITTED');
    expect(events).not.toContain('REQUEST_SENT');
  });
});

describe('when the remote answers completely', () => {
  it('a 200 to a POST is committed/succeeded, stored under the invocation id before RESULT_COMMITTED, and the server saw DISPATCH_STARTED first', async () => {
    const s = await server({
      kind: 'respond',
      status: 200,
      body: '{"id":7}',
      headers: { 'content-type': 'application/json', 'set-cookie': 'session=abc', 'x-request-id': 'req-1' },
      applyEffect: true,
    });
    const { envelope, response } = await h.run(localRouteConfig(s.port), post);
    expect(envelope.error).toBeUndefined();
    expect(envelope).toMatchObject({
      effect: 'succeeded',
      outcome_basis: 'complete_response',
      caller_disposition: 'completed',
    });
    expect(envelope.evidence).toMatchObject({
      dispatch_started: true,
      request_complete: true,
      response_headers_received: true,
      response_complete: true,
      response_status: 200,
      dispatch_evidence: 'remote_receipt',
    });
    expect(kinds(h.events(envelope.invocation_id))).toEqual([
      'ACTION_ACCEPTED',
      'PREFLIGHT_VALIDATED',
      'CREDENTIAL_AUTHORIZED',
      'DISPATCH_STARTED',
      'REQUEST_SENT',
      'REMOTE_RESPONSE_STARTED',
      'REMOTE_RESPONSE_COMPLETE',
      'RESULT_COMMITTED',
    ]);
    const state = h.temp.journal.getAction(envelope.invocation_id);
    expect(state).toMatchObject({
      outcome: 'committed',
      effect: 'succeeded',
      stage: 'result_committed',
      lane: 'route:docs',
      result_id: envelope.evidence.result_id,
    });
    const stored = h.results.read(envelope.evidence.result_id ?? '');
    expect(stored?.body.toString()).toBe('{"id":7}');
    expect(stored?.digest).toBe(envelope.evidence.result_digest);
    expect(stored?.summary.headers).toEqual({
      'content-type': 'application/json',
      'content-length': '8',
      'x-request-id': 'req-1',
    });
    expect(response?.headers['set-cookie']).toBeUndefined();
    // Ground truth: one request, with the credential, the agent's path under the route's base, effect applied once.
    expect(s.requests).toHaveLength(1);
    expect(s.requests[0]).toMatchObject({ method: 'POST', path: '/api/documents/7', body: '{"title":"x"}' });
    expect(s.requests[0]?.headers.authorization).toBe(`Bearer ${canary}`);
    expect(s.effects).toHaveLength(1);
    expectDispatchDurableBeforeBytes(s);
  });

  it('an informational 103 before the final 200 never settles anything: the 200 does', async () => {
    const s = await server({ kind: 'respond', status: 200, body: 'done', earlyHints: true, applyEffect: true });
    const { envelope } = await h.run(localRouteConfig(s.port), post);
    expect(envelope.error).toBeUndefined();
    expect(envelope.evidence.response_status).toBe(200);
    expect(
      h
        .events(envelope.invocation_id)
        .filter((e) => e.kind === 'REMOTE_RESPONSE_STARTED')
        .map((e) => e.payload),
    ).toEqual([
      { attempt: 1, status: 103 },
      { attempt: 1, status: 200 },
    ]);
  });

  it('a 500 after applying is committed with effect failed, never a licence to replay the POST', async () => {
    const s = await server({ kind: 'respond', status: 500, body: 'boom', applyEffect: true });
    const { envelope } = await h.run(localRouteConfig(s.port), post);
    expect(envelope.error).toMatchObject({
      code: 'REMOTE_ERROR_STATUS',
      phase: 'remote_execution',
      outcome: 'committed',
      retry: 'never',
    });
    expect(envelope.effect).toBe('failed');
    expect(h.results.read(envelope.evidence.result_id ?? '')?.body.toString()).toBe('boom');
    expect(s.effects).toHaveLength(1);
  });

  it('a 401 is rejected and never retried with the same credential', async () => {
    const s = await server({ kind: 'respond', status: 401, headers: { 'www-authenticate': 'Bearer realm="x"' } });
    const { envelope, response } = await h.run(localRouteConfig(s.port), post);
    expect(envelope.error).toMatchObject({ code: 'REMOTE_AUTH_REJECTED', outcome: 'rejected', retry: 'never' });
    expect(envelope.effect).toBe('rejected');
    expect(response?.headers['www-authenticate']).toBeUndefined();
    expect(h.temp.journal.getAction(envelope.invocation_id)?.outcome).toBe('rejected');
  });

  it('a 429 with Retry-After gives backoff for an idempotent GET (honouring the delay) and never for a POST', async () => {
    const s = await server({ kind: 'respond', status: 429, headers: { 'retry-after': '2' } });
    const get = await h.run(localRouteConfig(s.port), { route: 'docs', method: 'GET', path: '/documents/7' });
    expect(get.envelope.error).toMatchObject({
      code: 'REMOTE_THROTTLED',
      outcome: 'rejected',
      retry: 'backoff',
      retry_after_ms: 2000,
    });
    const p = await h.run(localRouteConfig(s.port), post);
    expect(p.envelope.error).toMatchObject({ code: 'REMOTE_THROTTLED', outcome: 'rejected', retry: 'never' });
    expect(p.envelope.error?.retry_after_ms).toBeUndefined();
  });

  it('a 503 with an HTTP-date Retry-After gives a bounded backoff for a GET', async () => {
    const at = new Date(h.temp.clock.nowMs() + 30_000).toUTCString();
    const s = await server({ kind: 'respond', status: 503, headers: { 'retry-after': at } });
    const { envelope } = await h.run(localRouteConfig(s.port), { route: 'docs', method: 'GET', path: '/x' });
    expect(envelope.error).toMatchObject({ code: 'REMOTE_THROTTLED', retry: 'backoff', retry_after_ms: 30_000 });
  });

  it('a 202 is a committed submission; the job id and Location are recorded for separate tracking', async () => {
    const s = await server({
      kind: 'respond',
      status: 202,
      body: '{"job_id":"job-42"}',
      headers: { 'content-type': 'application/json', location: '/api/jobs/job-42' },
      applyEffect: true,
    });
    const { envelope } = await h.run(localRouteConfig(s.port), post);
    expect(envelope).toMatchObject({ effect: 'succeeded', outcome_basis: 'submission_accepted_track_job_separately' });
    expect(h.results.read(envelope.evidence.result_id ?? '')?.summary.submission).toEqual({
      location: '/api/jobs/job-42',
      job_id: 'job-42',
    });
    const kinds = [...h.temp.journal.events()].filter((e) => e.action_id === envelope.invocation_id).map((e) => e.kind);
    expect(kinds.slice(-2)).toEqual(['RESULT_COMMITTED', 'OPERATION_SUBMITTED']);
    const submitted = [...h.temp.journal.events()].find(
      (e) => e.action_id === envelope.invocation_id && e.kind === 'OPERATION_SUBMITTED',
    );
    expect(submitted?.payload).toEqual({
      attempt: 1,
      result_id: envelope.evidence.result_id,
      job_id: 'job-42',
      status_location: '/api/jobs/job-42',
    });
  });

  it.each([
    ['an empty job id', { 'content-type': 'application/json' }, '{"id":""}', null],
    ['an empty Location', { location: '', 'content-type': 'application/json' }, '{"job_id":"job-9"}', 'job-9'],
    [
      'a blank job id and an empty Location',
      { location: '', 'content-type': 'application/json' },
      '{"job_id":"  "}',
      null,
    ],
  ])(
    'a 202 with %s records the submission and skips the empty handle (its OPERATION_SUBMITTED would be refused)',
    async (_what, headers, body, jobId) => {
      const s = await server({ kind: 'respond', status: 202, body, headers, applyEffect: true });
      const { envelope } = await h.run(localRouteConfig(s.port), post);
      expect(envelope).toMatchObject({
        effect: 'succeeded',
        outcome_basis: 'submission_accepted_track_job_separately',
      });
      const submitted = h.events(envelope.invocation_id).filter((e) => e.kind === 'OPERATION_SUBMITTED');
      expect(submitted.map((e) => e.payload)).toEqual(
        jobId === null ? [] : [expect.objectContaining({ job_id: jobId })],
      );
      expect(submitted.map((e) => e.payload)).not.toContainEqual(
        expect.objectContaining({ status_location: expect.anything() }),
      );
      expect(h.results.read(envelope.evidence.result_id ?? '')?.summary.submission).not.toHaveProperty('location');
    },
  );

  it('a 307 to another origin is never followed: REDIRECT_BLOCKED, never an effect that succeeded; follow_redirects is no field of the tool', async () => {
    const other = await server({ kind: 'respond', status: 200, applyEffect: true });
    const s = await server({
      kind: 'respond',
      status: 307,
      headers: { location: `http://127.0.0.1:${other.port}/steal` },
    });
    const plain = await h.run(localRouteConfig(s.port), post);
    expect(plain.envelope.error).toMatchObject({
      code: 'REDIRECT_BLOCKED',
      phase: 'remote_execution',
      outcome: 'committed',
      retry: 'after_correction',
    });
    expect(plain.envelope.effect).not.toBe('succeeded');
    expect(plain.envelope.evidence.response_status).toBe(307);
    expect(h.results.read(plain.envelope.evidence.result_id ?? '')?.summary.redirect).toMatchObject({
      cross_origin: true,
      followed: false,
    });
    const follow = await h.run(localRouteConfig(s.port), { ...post, follow_redirects: true });
    expect(follow.envelope.error).toMatchObject({
      code: 'INVALID_ARGUMENT',
      phase: 'validation',
      outcome: 'not_attempted',
      field: 'follow_redirects',
    });
    expect(other.log.filter((e) => e.event === 'accepted')).toHaveLength(0);
    expect(s.requests).toHaveLength(1);
  });

  it('a same-origin 3xx is the remote answer, returned as it is and not followed', async () => {
    const s = await server({ kind: 'respond', status: 303, headers: { location: '/api/elsewhere' } });
    const { envelope } = await h.run(localRouteConfig(s.port), post);
    expect(envelope.error).toBeUndefined();
    expect(envelope.evidence.response_status).toBe(303);
    expect(h.results.read(envelope.evidence.result_id ?? '')?.summary.redirect).toMatchObject({
      cross_origin: false,
      followed: false,
    });
  });

  it('a same-origin 307 or 308 is returned as it is and not followed, never recorded as a success: the request was not carried out there', async () => {
    for (const status of [307, 308]) {
      const s = await server({ kind: 'respond', status, headers: { location: '/api/moved' } });
      const { envelope, response } = await h.run(localRouteConfig(s.port), post);
      expect(envelope.effect).toBe('failed');
      expect(envelope.error).toMatchObject({
        code: 'REDIRECT_NOT_FOLLOWED',
        outcome: 'committed',
        retry: 'after_correction',
      });
      expect(response?.status).toBe(status);
      expect(response?.headers.location).toBe('/api/moved');
      expect(s.requests).toHaveLength(1);
    }
  });

  it('bytes as a body and any other undocumented field are refused, named, before anything is sent', async () => {
    const s = await server({ kind: 'respond', status: 200, applyEffect: true });
    const bytes = await h.run(localRouteConfig(s.port), { ...post, body: new Uint8Array([1, 2, 3]) });
    expect(bytes.envelope.error).toMatchObject({ code: 'INVALID_ARGUMENT', outcome: 'not_attempted', field: 'body' });
    const extra = await h.run(localRouteConfig(s.port), { ...post, host: 'evil.example' });
    expect(extra.envelope.error).toMatchObject({ code: 'INVALID_ARGUMENT', outcome: 'not_attempted', field: 'host' });
    expect(extra.envelope.error?.message).toContain('host is not a field of this tool');
    expect(s.requests).toHaveLength(0);
  });

  it('a response over the result cap is stored truncated, flagged, with the count of everything received and the digest of what is delivered', async () => {
    h.channel = h.newChannel({ limits: { resultBodyBytesMax: 10 } });
    const body = 'x'.repeat(1000);
    const s = await server({ kind: 'respond', status: 200, body });
    const { envelope, response } = await h.run(localRouteConfig(s.port), post);
    expect(response).toMatchObject({ truncated: true, total_bytes: 1000 });
    expect(response?.body.length).toBe(10);
    const { createHash } = await import('node:crypto');
    // Computed from the bytes the agent receives, never from bytes it does not (a digest oracle for a cut secret).
    expect(envelope.evidence.result_digest).toBe(
      `sha256:${createHash('sha256').update(body.slice(0, 10)).digest('hex')}`,
    );
    expect(h.results.read(envelope.evidence.result_id ?? '')).toMatchObject({
      truncated: true,
      total_bytes: 1000,
      stored_bytes: 10,
    });
  });
});

describe('when the remote breaks after dispatch', () => {
  it.each<
    [string, Behavior, { code: string; basis: string; requestComplete: boolean; headers: boolean; effects: number }]
  >([
    [
      'it reads the headers then closes',
      { kind: 'close_after_headers' },
      {
        code: 'REMOTE_OUTCOME_UNKNOWN',
        basis: 'response_not_observed_after_dispatch',
        requestComplete: true,
        headers: false,
        effects: 0,
      },
    ],
    [
      'it applies the effect then closes without a response',
      { kind: 'apply_then_close' },
      {
        code: 'REMOTE_OUTCOME_UNKNOWN',
        basis: 'response_not_observed_after_dispatch',
        requestComplete: true,
        headers: false,
        effects: 1,
      },
    ],
    [
      'it sends headers then closes mid-body (short Content-Length)',
      { kind: 'apply_then_close_mid_body', status: 200, announced: 100, sent: '{"partial":' },
      {
        code: 'REMOTE_RESULT_INCOMPLETE',
        basis: 'response_framing_incomplete',
        requestComplete: true,
        headers: true,
        effects: 1,
      },
    ],
    [
      'it sends only a 1xx then closes',
      { kind: 'apply_then_informational_then_close' },
      {
        code: 'REMOTE_OUTCOME_UNKNOWN',
        basis: 'response_not_observed_after_dispatch',
        requestComplete: true,
        headers: false,
        effects: 1,
      },
    ],
    [
      'it sends bad chunked framing',
      { kind: 'apply_then_bad_chunked', status: 200 },
      {
        code: 'REMOTE_RESULT_INCOMPLETE',
        basis: 'response_framing_incomplete',
        requestComplete: true,
        headers: true,
        effects: 1,
      },
    ],
  ])(
    '%s: remote_execution/unknown, never not_attempted, and the record matches the server log',
    async (_when, behavior, want) => {
      const s = await server(behavior);
      const { envelope, response, diagnostic } = await h.run(localRouteConfig(s.port), post);
      expect(envelope.error).toMatchObject({
        code: want.code,
        phase: 'remote_execution',
        outcome: 'unknown',
        retry: 'reconcile',
      });
      expect(envelope).toMatchObject({ effect: 'unknown_effect', outcome_basis: want.basis });
      expect(envelope.evidence).toMatchObject({
        dispatch_started: true,
        response_headers_received: want.headers,
        response_complete: false,
      });
      expect(envelope.evidence.result_id).toBeUndefined();
      expect(response).toBeUndefined();
      if (want.headers) {
        // The partial body is only a marked, capped diagnostic.
        expect(diagnostic?.kind).toBe('incomplete_response_partial_body');
      }
      const state = h.temp.journal.getAction(envelope.invocation_id);
      expect(state).toMatchObject({ outcome: 'unknown', result_id: null });
      expect(state?.dispatch_seq).not.toBeNull();
      expect(s.effects).toHaveLength(want.effects);
      expect(s.requests.length).toBe(1);
      expectDispatchDurableBeforeBytes(s);
    },
  );

  it('after apply-then-close, an idempotent PUT may back off and a POST under a declared key contract may retry with the same key', async () => {
    const s = await server({ kind: 'apply_then_close' });
    const contract =
      '    idempotency:\n      header: Idempotency-Key\n      scope: docs.account\n      retention_seconds: 3600\n      fingerprint: [method, path, body]';
    const put = await h.run(localRouteConfig(s.port), { ...post, method: 'PUT' });
    expect(put.envelope.error).toMatchObject({ outcome: 'unknown', retry: 'backoff' });
    // The unknown PUT blocks lane route:docs until a person abandons it (DESIGN §4).
    expect(await abandonBlockedHeads(h.queue)).toBe(1);
    const keyed = await h.run(localRouteConfig(s.port, contract), { ...post, idempotency_key: 'key-1' });
    expect(keyed.envelope.error).toMatchObject({ outcome: 'unknown', retry: 'same_idempotency_key' });
    expect(keyed.envelope.evidence.idempotency).toMatchObject({
      key: 'key-1',
      scope: 'docs.account',
      remote_contract: 'configured',
    });
    expect(s.requests.at(-1)?.headers['idempotency-key']).toBe('key-1');
  });

  it('a plain-HTTP server that accepts then closes before reading: dispatched, so unknown — the server log shows nothing arrived', async () => {
    const s = await server({ kind: 'respond', status: 200 }, { onAccept: () => 'close' });
    const { envelope } = await h.run(localRouteConfig(s.port), post);
    expect(envelope.error).toMatchObject({ phase: 'remote_execution', outcome: 'unknown' });
    expect(s.requests).toHaveLength(0);
    expect(s.effects).toHaveLength(0);
  });

  it('a response beyond the read limit is aborted and stays unknown (REMOTE_RESULT_INCOMPLETE), never a truncated "result"', async () => {
    h.channel = h.newChannel({ limits: { responseBytesMax: 100, resultBodyBytesMax: 10 } });
    const s = await server({ kind: 'respond', status: 200, body: 'y'.repeat(5000), applyEffect: true });
    const { envelope, response, diagnostic } = await h.run(localRouteConfig(s.port), post);
    expect(envelope.error).toMatchObject({ code: 'REMOTE_RESULT_INCOMPLETE', outcome: 'unknown' });
    expect(response).toBeUndefined();
    expect(diagnostic?.body.length).toBeLessThanOrEqual(10);
  });

  it("when the route's operation deadline passes after dispatch: OPERATION_TIMEOUT, unknown, never a caller event", async () => {
    const s = await server({ kind: 'apply_then_hang' });
    const { envelope } = await h.run(localRouteConfig(s.port, '    timeout_ms: 300'), post);
    expect(envelope.error).toMatchObject({
      code: 'OPERATION_TIMEOUT',
      outcome: 'unknown',
      phase: 'remote_execution',
      retry: 'reconcile',
    });
    expect(envelope.caller_disposition).toBe('completed');
    expect(kinds(h.events(envelope.invocation_id))).not.toContain('CALLER_DEADLINE_EXCEEDED');
    expect(h.temp.journal.getAction(envelope.invocation_id)).toMatchObject({
      code: 'OPERATION_TIMEOUT',
      outcome: 'unknown',
      caller_disposition: null,
    });
    expect(s.effects).toHaveLength(1);
  });

  it("an agent's timeout_ms is its wait, never the operation deadline: the executor never reads it", async () => {
    const s = await server({ kind: 'respond', status: 200, applyEffect: true });
    const { envelope } = await h.run(localRouteConfig(s.port), { ...post, timeout_ms: 1 });
    expect(envelope.error).toBeUndefined();
    expect(h.temp.journal.getAction(envelope.invocation_id)).toMatchObject({
      outcome: 'committed',
      effect: 'succeeded',
    });
  });
});

describe('when the journal is slow to make DISPATCH_STARTED durable', () => {
  /**
   * A gate that holds each DISPATCH_STARTED back until the server has had every chance to read
   * bytes already sent (a loopback round trip on another connection), then commits it. A channel
   * that wrote before the row was durable would show the server a first byte with the row missing.
   */
  function slowGate(s: AdversarialHttpServer): DispatchGate {
    return {
      append: (event) => h.temp.journal.append(event),
      beginDispatch: async (actionId, attempt, connection) => {
        await loopbackRoundTrip(s.port);
        await loopbackRoundTrip(s.port);
        return h.temp.journal.beginDispatch(actionId, attempt, connection);
      },
    };
  }

  it('no byte reaches the server before the row is visible from its own SQLite connection, on fresh and reused connections', async () => {
    const s = await server({ kind: 'respond', status: 200, body: 'ok', applyEffect: true });
    h.channel = h.newChannel({ gate: slowGate(s) });
    const config = localRouteConfig(s.port);
    await h.run(config, post);
    await h.run(config, post);
    const firstBytes = s.log.filter((e) => e.event === 'first_byte');
    expect(firstBytes).toHaveLength(2);
    expect(s.requests.map((r) => r.onConnection)).toEqual([0, 1]);
    expectDispatchDurableBeforeBytes(s);
  });
});

describe('when something stops the request while DISPATCH_STARTED is being made durable', () => {
  const timeoutMs = 300;
  const cases = [
    {
      what: 'a person locks the vault',
      extraConfig: undefined,
      // The lock lands while beginDispatch is pending.
      stop: (held: HttpActionHarness) => Promise.resolve(held.vault.lock('operator')),
      error: { code: 'REMOTE_OUTCOME_UNKNOWN' },
      envelope: { effect: 'unknown_effect', outcome_basis: 'vault_locked_after_dispatch_started' },
    },
    {
      what: "the route's operation deadline passes",
      extraConfig: `    timeout_ms: ${timeoutMs}`,
      // The channel armed its deadline before asking for DISPATCH_STARTED, so it has fired once this longer wait ends.
      stop: () => sleep(timeoutMs + 100),
      error: { code: 'OPERATION_TIMEOUT' },
      envelope: {},
    },
  ];
  it.each(cases.map((c) => [c.what, c] as const))(
    '%s: the request is never handed to the connection, unknown (the row is durable), nothing reached the server',
    async (_what, { extraConfig, stop, error, envelope: expected }) => {
      const disk = new DiskSyncGate();
      const held = await openHttpActionHarness({ beforeSync: disk.beforeSync });
      const journal = held.temp.journal;
      // The real journal, its disk held from the moment DISPATCH_STARTED is asked for: beginDispatch stays pending.
      held.channel = held.newChannel({
        gate: {
          append: (event) => journal.append(event),
          appendLater: (event) => journal.appendLater(event),
          commitHeld: () => journal.commitHeld(),
          beginDispatch: (actionId, attempt, connection) => {
            disk.hold();
            return journal.beginDispatch(actionId, attempt, connection);
          },
        },
      });
      try {
        const s = await serverFor(held, { kind: 'respond', status: 200, applyEffect: true });
        const run = held.run(localRouteConfig(s.port, extraConfig), post);
        while (disk.waiting() === 0) await disk.nextRequest();
        await stop(held);
        disk.release();
        const { envelope } = await run;
        expect(envelope.error).toMatchObject({
          ...error,
          phase: 'remote_execution',
          outcome: 'unknown',
          retry: 'reconcile',
        });
        expect(envelope).toMatchObject(expected);
        expect(envelope.evidence).toMatchObject({ dispatch_started: true, request_complete: false });
        const recorded = kinds(held.events(envelope.invocation_id));
        expect(recorded).toContain('DISPATCH_STARTED');
        expect(recorded).not.toContain('REQUEST_SENT');
        expect(journal.getAction(envelope.invocation_id)).toMatchObject({ outcome: 'unknown' });
        // A byte sent would have reached the server by a round trip on another connection.
        await loopbackRoundTrip(s.port);
        expect(s.log.filter((e) => e.event === 'first_byte')).toEqual([]);
        expect(s.effects).toHaveLength(0);
      } finally {
        disk.release();
        await abandonBlockedHeads(held.queue);
        await held.dispose();
      }
    },
  );
});

describe('when connections are pooled', () => {
  it('the second action reuses the keep-alive connection, with its own DISPATCH_STARTED durable before its first byte', async () => {
    const s = await server({ kind: 'respond', status: 200, body: 'ok', applyEffect: true });
    const config = localRouteConfig(s.port);
    const first = await h.run(config, post);
    const second = await h.run(config, post);
    const d1 = h.events(first.envelope.invocation_id).find((e) => e.kind === 'DISPATCH_STARTED');
    const d2 = h.events(second.envelope.invocation_id).find((e) => e.kind === 'DISPATCH_STARTED');
    expect(d1?.payload).toMatchObject({ connection: 'fresh' });
    expect(d2?.payload).toMatchObject({
      connection: 'reused',
      connection_id: (d1?.payload as { connection_id: string }).connection_id,
    });
    expect(s.requests.map((r) => [r.conn, r.onConnection])).toEqual([
      [1, 0],
      [1, 1],
    ]);
    expectDispatchDurableBeforeBytes(s);
    expect(s.log.filter((e) => e.event === 'first_byte')).toHaveLength(2);
  });

  it('when a reused connection breaks after the request was handed over: unknown (reused_connection_broke_after_handoff)', async () => {
    const s = await server((n) =>
      n === 0 ? { kind: 'respond', status: 200, body: 'ok', applyEffect: true } : { kind: 'apply_then_close' },
    );
    const config = localRouteConfig(s.port);
    await h.run(config, post);
    const { envelope } = await h.run(config, post);
    expect(envelope.error).toMatchObject({ code: 'REMOTE_OUTCOME_UNKNOWN', outcome: 'unknown', retry: 'reconcile' });
    expect(envelope.outcome_basis).toBe('reused_connection_broke_after_handoff');
    expect(s.effects).toHaveLength(2);
  });

  it('when the server closed the idle connection (Connection: close), the next action opens a fresh one', async () => {
    const s = await server({ kind: 'respond', status: 200, body: 'ok', close: true });
    const config = localRouteConfig(s.port);
    await h.run(config, post);
    const { envelope } = await h.run(config, post);
    expect(envelope.error).toBeUndefined();
    expect(h.events(envelope.invocation_id).find((e) => e.kind === 'DISPATCH_STARTED')?.payload).toMatchObject({
      connection: 'fresh',
    });
    expect(s.requests.map((r) => r.conn)).toEqual([1, 2]);
  });
});

describe('when connection setup fails (provably not_attempted)', () => {
  it('a refused connection is retried within the bound, each attempt recorded, then after_correction', async () => {
    const s = await AdversarialHttpServer.start();
    const port = s.port;
    await s.stop();
    const { envelope } = await h.run(localRouteConfig(port), post);
    expect(envelope.error).toMatchObject({
      code: 'CONNECT_REFUSED',
      phase: 'connection_setup',
      outcome: 'not_attempted',
      retry: 'after_correction',
    });
    expect(envelope.effect).toBe('no_effect');
    expect(envelope.evidence.attempts).toEqual(
      [1, 2, 3].map((n) => ({ n, stage: 'tcp_connect', outcome: 'not_attempted', code: 'CONNECT_REFUSED' })),
    );
    const events = h.events(envelope.invocation_id);
    expect(kinds(events)).toEqual([
      'ACTION_ACCEPTED',
      'PREFLIGHT_VALIDATED',
      'CREDENTIAL_AUTHORIZED',
      'SETUP_ATTEMPT_FAILED',
      'SETUP_ATTEMPT_FAILED',
      'SETUP_ATTEMPT_FAILED',
      'OUTCOME_RECORDED',
    ]);
    expect(events[3]?.payload).toEqual({ attempt: 1, stage: 'tcp_connect', detail: 'ECONNREFUSED' });
    expect(h.temp.journal.getAction(envelope.invocation_id)).toMatchObject({
      outcome: 'not_attempted',
      dispatch_seq: null,
    });
  });
});

describe('when preflight refuses (before any secret or host is touched)', () => {
  it.each<[string, Record<string, unknown>, { code: string; field: string; message?: unknown }]>([
    ['an unknown route', { route: 'nope' }, { code: 'INVALID_TARGET', field: 'route' }],
    ['a path escaping the base', { path: '/../admin' }, { code: 'INVALID_TARGET', field: 'path' }],
    ['an encoded dot segment', { path: '/%2e%2e/admin' }, { code: 'INVALID_TARGET', field: 'path' }],
    ['an absolute URL', { path: 'http://169.254.169.254/latest' }, { code: 'INVALID_TARGET', field: 'path' }],
    ['a //host path', { path: '//evil.example/x' }, { code: 'INVALID_TARGET', field: 'path' }],
    ['a backslash', { path: '/a\\..\\b' }, { code: 'INVALID_TARGET', field: 'path' }],
    [
      'a query written into path',
      { path: '/slow?delay=30000' },
      {
        code: 'INVALID_TARGET',
        field: 'path',
        message: expect.stringContaining('"?": a query goes in the query field'),
      },
    ],
    ['an unsupported method', { method: 'TRACE' }, { code: 'UNSUPPORTED_ACTION', field: 'method' }],
    [
      'an agent-set Authorization (with the canary)',
      { headers: { Authorization: `Bearer ${canary}` } },
      { code: 'FORBIDDEN_HEADER', field: 'headers.authorization' },
    ],
    ['an agent-set Host', { headers: { Host: 'evil.example' } }, { code: 'FORBIDDEN_HEADER', field: 'headers.host' }],
    ['an agent-set Cookie', { headers: { Cookie: 'a=b' } }, { code: 'FORBIDDEN_HEADER', field: 'headers.cookie' }],
    [
      'an agent-set Proxy-Authorization',
      { headers: { 'Proxy-Authorization': 'x' } },
      { code: 'FORBIDDEN_HEADER', field: 'headers.proxy-authorization' },
    ],
    ['a body over the limit', { body: 'x'.repeat(1024 * 1024 + 1) }, { code: 'PAYLOAD_LIMIT', field: 'body' }],
    ['a URL over the limit', { query: { q: 'x'.repeat(9000) } }, { code: 'PAYLOAD_LIMIT', field: 'path' }],
    ['a malformed request', { method: 7 }, { code: 'INVALID_ARGUMENT', field: 'method' }],
  ])(
    '%s: validation/not_attempted/after_correction with the field, no secret used, no connection',
    async (_when, over, want) => {
      const s = await server({ kind: 'respond', status: 200, applyEffect: true });
      const before = h.secretUses.count;
      const { envelope } = await h.run(localRouteConfig(s.port), { ...post, ...over });
      expect(envelope.error).toMatchObject({
        ...want,
        phase: 'validation',
        outcome: 'not_attempted',
        retry: 'after_correction',
      });
      expect(kinds(h.events(envelope.invocation_id))).toEqual(['ACTION_ACCEPTED', 'PREFLIGHT_FAILED']);
      expect(h.secretUses.count).toBe(before);
      expect(s.log).toHaveLength(0);
    },
  );

  it('an unknown credential reference is refused without echoing its name', async () => {
    const s = await server({ kind: 'respond', status: 200 });
    const { envelope } = await h.run(localRouteConfig(s.port, '', { credential: 'secret-project-falcon' }), post);
    expect(envelope.error).toMatchObject({ code: 'UNKNOWN_CREDENTIAL', phase: 'validation', outcome: 'not_attempted' });
    expect(JSON.stringify(envelope)).not.toContain('falcon');
    expect(JSON.stringify(h.events(envelope.invocation_id))).not.toContain('falcon');
  });

  it('the route’s injected header set by the agent is FORBIDDEN_HEADER', async () => {
    const s = await server({ kind: 'respond', status: 200 });
    const { envelope } = await h.run(localRouteConfig(s.port, '', { credential: 'docs-header', injection: 'header' }), {
      ...post,
      headers: { 'x-api-key': 'guess' },
    });
    expect(envelope.error).toMatchObject({ code: 'FORBIDDEN_HEADER', field: 'headers.x-api-key' });
  });

  it('a route that needs approval waits for a decision: rejected, nothing is sent', async () => {
    const s = await server({ kind: 'respond', status: 200 });
    const config = localRouteConfig(s.port);
    const route = config.routes.get('docs');
    if (route === undefined) throw new Error('no route');
    const perCall = { ...config, routes: new Map([['docs', { ...route, approval: 'per_call' as const }]]) };
    const run = h.run(perCall, post);
    const [card] = await waitForCardCount(h.queue, 1);
    expect(card).toMatchObject({ state: 'pending', approval: 'per_call', method: 'POST', credential: 'docs-token' });
    await h.queue.reject(card?.ticket ?? 0, { kind: 'person', id: 'tester' }, 'not now');
    const { envelope } = await run;
    expect(envelope.error).toMatchObject({ code: 'APPROVAL_DENIED', outcome: 'not_attempted', retry: 'never' });
    expect(s.log).toHaveLength(0);
  });
});

describe('when the credential cannot be used', () => {
  it('a credential of another kind than the injection mode: credential_injection/CREDENTIAL_MISSING, nothing sent', async () => {
    const s = await server({ kind: 'respond', status: 200 });
    const { envelope } = await h.run(
      localRouteConfig(s.port, '', { credential: 'docs-token', injection: 'basic' }),
      post,
    );
    expect(envelope.error).toMatchObject({
      code: 'CREDENTIAL_MISSING',
      phase: 'credential_injection',
      outcome: 'not_attempted',
      retry: 'after_correction',
    });
    expect(s.log).toHaveLength(0);
  });

  it('a credential not bound to the route or its host is never sent there', async () => {
    const s = await server({ kind: 'respond', status: 200 });
    const { envelope } = await h.run(localRouteConfig(s.port, '', { credential: 'unbound-token' }), post);
    expect(envelope.error).toMatchObject({ code: 'CREDENTIAL_MISSING', outcome: 'not_attempted' });
    expect(s.log).toHaveLength(0);
  });

  it('a locked vault: credential_injection/not_attempted/VAULT_LOCKED, retry backoff; unlocking makes the same call go through', async () => {
    const s = await server({ kind: 'respond', status: 200, applyEffect: true });
    h.vault.lock('test');
    const locked = await h.run(localRouteConfig(s.port), post);
    // Nothing was sent and nothing in the call is wrong: the same call is safe once a person unlocks (never
    // after_correction, which would ask the agent to change it).
    expect(locked.envelope.error).toMatchObject({
      code: 'VAULT_LOCKED',
      phase: 'credential_injection',
      outcome: 'not_attempted',
      retry: 'backoff',
    });
    expect(kinds(h.events(locked.envelope.invocation_id))).toEqual([
      'ACTION_ACCEPTED',
      'PREFLIGHT_VALIDATED',
      'OUTCOME_RECORDED',
    ]);
    await h.vault.unlock(Buffer.from('correct horse battery staple'));
    expect((await h.run(localRouteConfig(s.port), post)).envelope.error).toBeUndefined();
    expect(s.effects).toHaveLength(1);
  });

  it('when the vault locks during connection setup, the action is cancelled before dispatch with VAULT_LOCKED', async () => {
    const s = await server({ kind: 'respond', status: 200, applyEffect: true });
    h.channel = vaultLockingChannel(h);
    const { envelope } = await h.run(localRouteConfig(s.port, '', { host: 'localhost' }), post);
    expect(envelope.error).toMatchObject({ code: 'VAULT_LOCKED', outcome: 'not_attempted' });
    expect(h.temp.journal.getAction(envelope.invocation_id)?.dispatch_seq).toBeNull();
    expect(s.log).toHaveLength(0);
    await h.vault.unlock(Buffer.from('correct horse battery staple'));
  });
});

describe('when the vault locks or the deadline passes around the boundary', () => {
  it('a lock after dispatch does not cancel: the request was already handed over and completes', async () => {
    const s = await AdversarialHttpServer.start({
      journalPath: h.temp.path,
      script: () => {
        h.vault.lock('idle');
        return { kind: 'respond', status: 200, body: 'ok', applyEffect: true };
      },
    });
    servers.push(s);
    const { envelope } = await h.run(localRouteConfig(s.port), post);
    expect(h.vault.state()).toBe('locked');
    expect(envelope.error).toBeUndefined();
    expect(h.temp.journal.getAction(envelope.invocation_id)?.outcome).toBe('committed');
    await h.vault.unlock(Buffer.from('correct horse battery staple'));
  });

  it('an operation deadline that passes during DNS: nothing sent, OPERATION_TIMEOUT, not_attempted', async () => {
    const s = await server({ kind: 'respond', status: 200, applyEffect: true });
    let release: (() => void) | undefined;
    h.channel = h.newChannel({
      lookup: () =>
        new Promise((resolve) => {
          release = () => resolve([{ address: '127.0.0.1', family: 4 }]);
        }),
    });
    const { envelope } = await h.run(localRouteConfig(s.port, '    timeout_ms: 100', { host: 'localhost' }), post);
    release?.();
    expect(envelope.error).toMatchObject({
      code: 'OPERATION_TIMEOUT',
      phase: 'connection_setup',
      outcome: 'not_attempted',
      retry: 'backoff',
    });
    expect(envelope.caller_disposition).toBe('completed');
    expect(h.temp.journal.getAction(envelope.invocation_id)?.dispatch_seq).toBeNull();
    expect(s.log).toHaveLength(0);
  });
});

describe('when the canary credential goes through other injection modes', () => {
  it.each([
    ['header', 'docs-header', (r: Record<string, string>) => r['x-api-key'] === `Key ${canary}`],
    [
      'basic',
      'docs-basic',
      (r: Record<string, string>) =>
        r.authorization === `Basic ${Buffer.from(`canary-user:${canary}`).toString('base64')}`,
    ],
  ])('%s injection reaches the server and nowhere else', async (injection, credential, sawIt) => {
    const s = await server({ kind: 'respond', status: 200, body: 'fine' });
    const ok = await h.run(localRouteConfig(s.port, '', { credential, injection }), post);
    expect(ok.envelope.error).toBeUndefined();
    expect(sawIt(s.requests[0]?.headers ?? {})).toBe(true);
  });

  it('query injection puts the secret in the query, and a remote echoing it back is scrubbed from the result', async () => {
    const s = await server({
      kind: 'respond',
      status: 307,
      body: `echo ${canary}`,
      headers: { location: `/api/next?api_key=${canary}` },
    });
    const { envelope, response } = await h.run(
      localRouteConfig(s.port, '', { credential: 'docs-query', injection: 'query' }),
      { ...post, query: { a: '1' } },
    );
    expect(s.requests[0]?.path).toBe(`/api/documents/7?a=1&api_key=${canary}`);
    expect(envelope.evidence.response_status).toBe(307);
    expect(response?.redacted).toBe(true);
    expect(response?.body.toString()).toBe('echo [REDACTED]');
  });
});

describe('secret hygiene (runs last over everything above)', () => {
  afterAll(async () => {
    await h.dispose();
  });

  it('the canary never appears in the journal files (as bytes, WAL included), the logs, or any envelope or returned result', async () => {
    const s = await server({ kind: 'respond', status: 200 });
    await h.run(localRouteConfig(s.port), post);
    // While open (the WAL holds the recent commits) and after close (checkpointed into the main file).
    const searchedOpen: string[] = [];
    expect(canaryLeaks(h, searchedOpen)).toEqual([]);
    expect(searchedOpen.some((f) => f.endsWith('journal.sqlite-wal'))).toBe(true);
    await h.temp.journal.close();
    h.results.close();
    expect(readdirSync(h.temp.dir.path)).toEqual(expect.arrayContaining(['journal.sqlite']));
    expect(h.logLines.length).toBeGreaterThan(10);
    expect(h.envelopes.length).toBeGreaterThan(20);
    expect(canaryLeaks(h)).toEqual([]);
  });
});

/** Connects to the server and waits for it to accept and close (close_on_accept is not needed: we end). */
function loopbackRoundTrip(port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('connect', () => socket.end());
    socket.once('close', () => resolve());
    socket.once('error', reject);
  });
}
