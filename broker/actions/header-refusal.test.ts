import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Client, errors } from 'undici';
import type { HttpChannel, HttpWireRequest } from '../channels/http/index.js';
import type { DispatchGate } from '../ports/index.js';
import { AdversarialHttpServer } from '../testing/adversarial-http-server.js';
import {
  canary,
  localRouteConfig,
  openHttpActionHarness,
  type HttpActionHarness,
} from '../testing/http-action-harness.js';
import { abandonBlockedHeads } from '../testing/queue-waits.js';

// A hostile agent must not wedge a lane: a request the HTTP client would refuse is refused at
// validation, before DISPATCH_STARTED (not_attempted, lane free), never by undici after it
// (unknown, lane blocked until a person abandons it).

let h: HttpActionHarness;
const servers: AdversarialHttpServer[] = [];

beforeAll(async () => {
  h = await openHttpActionHarness();
});
afterEach(async () => {
  // Only a regression leaves a blocked head (an unknown outcome); released so it fails one case, not the rest.
  await abandonBlockedHeads(h.queue);
  h.channel.close();
  h.channel = h.newChannel();
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});
afterAll(async () => {
  await h.dispose();
});

async function server(): Promise<AdversarialHttpServer> {
  const s = await AdversarialHttpServer.start({
    journalPath: h.temp.path,
    script: () => ({ kind: 'respond', status: 200, body: 'ok', applyEffect: true }),
  });
  servers.push(s);
  return s;
}

const post = { route: 'docs', method: 'POST', path: '/documents/7', body: '{"title":"x"}' };
const label = (value: string): string =>
  [...value].map((c) => `U+${(c.codePointAt(0) ?? 0).toString(16).padStart(4, '0')}`).join(' ');
const controls = Array.from({ length: 0x20 }, (_, i) => i)
  .filter((i) => i !== 0x09)
  .map((i) => String.fromCharCode(i));
/** Every non-compliant value: each control but HTAB, DEL, obs-text, beyond Latin-1, header injection, edge whitespace. */
const badValues: string[] = [
  ...controls.map((c) => `a${c}b`),
  'a\u007fb',
  'a\u0080b',
  'a\u00ffb',
  'a\u0100b',
  'a😀b',
  'a\ud800b',
  'a\r\nx-injected: 1',
  `Bearer ${canary}\n`,
  ' leading',
  'trailing ',
  '\tleading-tab',
  'trailing-tab\t',
];

/** The lane is free: the same route's next valid action is dispatched and committed, and is the only thing the server ever saw. */
async function expectLaneFree(s: AdversarialHttpServer, refusedId: string): Promise<void> {
  const next = await h.run(localRouteConfig(s.port), post);
  expect(next.envelope.error).toBeUndefined();
  const state = h.temp.journal.getAction(next.envelope.invocation_id);
  expect(state).toMatchObject({ outcome: 'committed', lane: 'route:docs' });
  expect(h.temp.journal.getAction(refusedId)?.lane).toBe('route:docs');
  expect(s.requests.map((r) => r.path)).toEqual(['/api/documents/7']);
}

function expectRefusedBeforeDispatch(actionId: string): void {
  const events = h.events(actionId);
  expect(events.map((e) => e.kind)).toEqual(['ACTION_ACCEPTED', 'PREFLIGHT_FAILED']);
  expect(h.temp.journal.getAction(actionId)).toMatchObject({ outcome: 'not_attempted', dispatch_seq: null });
}

describe('when an agent sets a header value that is not an RFC 9110 field-value', () => {
  const cases = badValues.map((v) => [label(v), v]);
  it.each(cases)(
    '%s is refused at validation, nothing reaches the server, the lane stays free',
    async (_label, value) => {
      const s = await server();
      const before = h.secretUses.count;
      const { envelope } = await h.run(localRouteConfig(s.port), { ...post, headers: { 'X-Probe': value } });
      const want = {
        code: 'INVALID_ARGUMENT',
        field: 'headers.x-probe',
        phase: 'validation',
        outcome: 'not_attempted',
      };
      expect(envelope.error).toMatchObject(want);
      expect(JSON.stringify(envelope)).not.toContain(canary);
      expect(h.secretUses.count).toBe(before);
      expectRefusedBeforeDispatch(envelope.invocation_id);
      expect(s.log).toHaveLength(0);
      await expectLaneFree(s, envelope.invocation_id);
    },
  );

  it('every value undici itself refuses is in the table (ours is at least as strict)', async () => {
    const s = await server();
    const client = new Client(`http://127.0.0.1:${s.port}`);
    try {
      const refusedByUndici: string[] = [];
      for (const value of badValues) {
        try {
          const answer = await client.request({ path: '/probe', method: 'GET', headers: { 'x-probe': value } });
          await answer.body.dump();
        } catch (error) {
          expect(error).toBeInstanceOf(errors.InvalidArgumentError);
          refusedByUndici.push(value);
        }
      }
      // undici refuses the controls, DEL and beyond Latin-1 (at dispatch, i.e. after our boundary) and
      // lets obs-text and edge whitespace through; we refuse all of them before it.
      expect(refusedByUndici.length).toBeGreaterThanOrEqual(controls.length + 2);
      expect(refusedByUndici).toEqual(
        expect.arrayContaining(['a\u0000b', 'a\u0001b', 'a\u007fb', 'a\u0100b', 'a\r\nx-injected: 1']),
      );
      expect(s.requests.length).toBe(badValues.length - refusedByUndici.length);
    } finally {
      await client.close();
    }
  });
});

describe('when an agent tries to steer the remote into encoding or slicing a reflected secret', () => {
  it.each([
    ['Accept-Encoding', 'gzip', 'content coding'],
    ['Accept-Encoding', 'identity', 'content coding'],
    ['Range', 'bytes=0-7', 'slices'],
    ['If-Range', '"v1"', 'slices'],
  ])('%s: %s is FORBIDDEN_HEADER before dispatch, the lane stays free', async (name, value, why) => {
    const s = await server();
    const { envelope } = await h.run(localRouteConfig(s.port), { ...post, headers: { [name]: value } });
    expect(envelope.error).toMatchObject({
      code: 'FORBIDDEN_HEADER',
      field: `headers.${name.toLowerCase()}`,
      outcome: 'not_attempted',
    });
    expect(envelope.error?.message).toContain(why);
    expectRefusedBeforeDispatch(envelope.invocation_id);
    expect(s.log).toHaveLength(0);
    await expectLaneFree(s, envelope.invocation_id);
  });
});

describe('when an agent sends its own spelling of the credential query parameter', () => {
  const queryRoute = (port: number) => localRouteConfig(port, '', { credential: 'docs-query', injection: 'query' });
  const spellings = ['API_KEY', 'Api_Key', 'api%5Fkey', 'API%255FKEY', 'api.key'];
  it.each(spellings)('%s next to the injected api_key is FORBIDDEN_HEADER', async (name) => {
    const s = await server();
    const { envelope } = await h.run(queryRoute(s.port), { ...post, query: { [name]: 'guess' } });
    expect(envelope.error).toMatchObject({
      code: 'FORBIDDEN_HEADER',
      field: `query.${name}`,
      outcome: 'not_attempted',
    });
    expectRefusedBeforeDispatch(envelope.invocation_id);
    expect(s.log).toHaveLength(0);
  });

  it('another parameter passes and the credential is injected once', async () => {
    const s = await server();
    const { envelope } = await h.run(queryRoute(s.port), { ...post, query: { api_keys: 'x' } });
    expect(envelope.error).toBeUndefined();
    expect(s.requests[0]?.path).toBe(`/api/documents/7?api_keys=x&api_key=${canary}`);
  });
});

describe('when the wire request itself would be refused by undici (defence in depth in the channel)', () => {
  /** The journal as the channel's gate, counting boundary crossings. */
  function countingGate(): { gate: DispatchGate; crossings: { count: number } } {
    const crossings = { count: 0 };
    const journal = h.temp.journal;
    const gate: DispatchGate = {
      beginDispatch: (...args) => {
        crossings.count += 1;
        return journal.beginDispatch(...args);
      },
      append: (event) => journal.append(event),
    };
    return { gate, crossings };
  }

  function wire(s: AdversarialHttpServer, over: Partial<HttpWireRequest>): HttpWireRequest {
    const origin = `http://127.0.0.1:${s.port}`;
    return {
      actionId: 'act_wire_refused_never_journaled',
      target: {
        protocol: 'http:',
        hostname: '127.0.0.1',
        port: s.port,
        caPem: undefined,
        pins: undefined,
        origin,
        poolKey: origin,
      },
      method: 'POST',
      path: '/api/documents/7',
      headers: [['authorization', `Bearer ${canary}`]],
      body: undefined,
      timeoutMs: 5_000,
      beforeDispatch: new AbortController().signal,
      ...over,
    };
  }

  it.each<[string, Partial<HttpWireRequest>, string]>([
    [
      'an injected value with a control character',
      { headers: [['authorization', `Bearer ${canary}\u0001`]] },
      'headers.authorization',
    ],
    ['an injected value beyond Latin-1', { headers: [['x-api-key', `${canary}\u20ac`]] }, 'headers.x-api-key'],
    ['an injected value with trailing whitespace', { headers: [['x-api-key', `Key ${canary} `]] }, 'headers.x-api-key'],
    ['a header undici will not send', { headers: [['expect', '100-continue']] }, 'headers.expect'],
    ['a query secret with a space', { path: `/api/x?api_key=${canary} x` }, 'path'],
    ['a method that is no token', { method: 'PO ST' }, 'method'],
  ])(
    '%s: no boundary crossed, no connection made, reported as request_refused without the value',
    async (_when, over, field) => {
      const s = await server();
      const { gate, crossings } = countingGate();
      const channel: HttpChannel = h.newChannel({ gate });
      try {
        const report = await channel.perform(wire(s, over));
        expect(report).toMatchObject({ stoppedBeforeDispatch: 'request_refused', requestRefused: { field } });
        expect(report).toMatchObject({ dispatchStarted: false, handedToTransport: false });
        expect(report.attempts).toEqual([expect.objectContaining({ n: 1, stage: 'request_build', dispatched: false })]);
        expect(crossings.count).toBe(0);
        expect(s.log).toHaveLength(0);
        expect(JSON.stringify(report)).not.toContain(canary);
      } finally {
        channel.close();
      }
    },
  );

  it('on a reused connection too: the idle connection is left idle and untouched', async () => {
    const s = await server();
    const { gate, crossings } = countingGate();
    h.channel = h.newChannel({ gate });
    const config = localRouteConfig(s.port);
    const first = await h.run(config, post);
    expect(first.envelope.error).toBeUndefined();
    // The executor's pool key for a route without pins or CA (execute-http-action.ts poolKey).
    const poolKey = ['docs', config.routes.get('docs')?.origin, '', ''].join('|');
    expect(h.channel.idleConnections(poolKey)).toBe(1);
    expect(crossings.count).toBe(1);
    const target = { ...wire(s, {}).target, poolKey };
    const report = await h.channel.perform(wire(s, { headers: [['authorization', `Bearer ${canary}\u0000`]], target }));
    expect(report).toMatchObject({
      stoppedBeforeDispatch: 'request_refused',
      requestRefused: { field: 'headers.authorization' },
    });
    expect(crossings.count).toBe(1);
    expect(h.channel.idleConnections(poolKey)).toBe(1);
    expect(s.requests).toHaveLength(1);
  });
});

describe('when a vault value would make undici refuse the wire request (through the executor)', () => {
  // The executor maps the channel's stoppedBeforeDispatch 'request_refused' to a validation gate: built, never sent.
  it('a header credential named Expect: not_attempted, lane free', async () => {
    const bindings = ['docs', '127.0.0.1'];
    await h.vault.add({ name: 'docs-expect', kind: 'header', secret: Buffer.from(canary), bindings, header: 'Expect' });
    const s = await server();
    const { envelope } = await h.run(
      localRouteConfig(s.port, '', { credential: 'docs-expect', injection: 'header' }),
      post,
    );
    expect(envelope.error).toMatchObject({
      code: 'INVALID_ARGUMENT',
      field: 'headers.expect',
      outcome: 'not_attempted',
    });
    expect(h.events(envelope.invocation_id).map((e) => e.kind)).not.toContain('DISPATCH_STARTED');
    expect(h.temp.journal.getAction(envelope.invocation_id)).toMatchObject({
      outcome: 'not_attempted',
      dispatch_seq: null,
    });
    expect(JSON.stringify(envelope)).not.toContain(canary);
    expect(s.log).toHaveLength(0);
    await expectLaneFree(s, envelope.invocation_id);
  });
});
