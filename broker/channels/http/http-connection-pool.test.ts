import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { PosternConfig } from '../../config/index.js';
import type { DispatchGate } from '../../ports/index.js';
import { localRouteConfig, openHttpActionHarness, type HttpActionHarness } from '../../testing/http-action-harness.js';

/**
 * Idle expiry of pooled connections against a plain node:http server on 127.0.0.1 (as bench/durable.ts's targets:
 * `keepAliveTimeout` 30 s, so the server never closes first). What the server saw is the ground truth: its
 * connections and the requests on each.
 */
let h: HttpActionHarness;
let server: Server;
let config: PosternConfig;
/** Requests per server-side connection, in order of accept. */
const perConnection: number[] = [];
let keepAliveHeader: string | undefined;

beforeAll(async () => {
  h = await openHttpActionHarness();
  server = createServer((req, res) => {
    const index = (req.socket as Socket & { index: number }).index;
    perConnection[index] = (perConnection[index] ?? 0) + 1;
    if (keepAliveHeader !== undefined) res.setHeader('keep-alive', keepAliveHeader);
    req.resume();
    req.on('end', () => res.end('{"ok":true}'));
  });
  server.keepAliveTimeout = 30_000;
  server.on('connection', (socket: Socket & { index?: number }) => {
    socket.index = perConnection.push(0) - 1;
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  // A lane per document (as the bench): an unknown outcome in one test blocks its own lane only.
  const lanes = ['    lanes:', "      - { methods: ['*'], path: '/documents/{id}', lane: 'doc-{id}' }"].join('\n');
  config = localRouteConfig((server.address() as AddressInfo).port, lanes);
});
afterEach(() => {
  perConnection.length = 0;
  keepAliveHeader = undefined;
  h.channel.close();
});
afterAll(async () => {
  server.closeAllConnections();
  server.close();
  await h.dispose();
});

const post = (n: number) => ({ route: 'docs', method: 'POST', path: `/documents/${n}`, body: '{"n":1}' });

/** The journal's gate, holding each DISPATCH_STARTED back `holdMs` after it is durable (a slow disk, a busy loop). */
function slowGate(holdMs: number): DispatchGate {
  return {
    beginDispatch: async (actionId, attempt, connection) => {
      const durable = await h.temp.journal.beginDispatch(actionId, attempt, connection);
      await sleep(holdMs);
      return durable;
    },
    append: (event) => h.temp.journal.append(event),
  };
}

function dispatchOf(actionId: string): unknown {
  return h.events(actionId).find((e) => e.kind === 'DISPATCH_STARTED')?.payload;
}

describe('idle expiry is the pool’s: a connection it hands out is not closed on this side before the write', () => {
  it('taken within keepAliveMs, it stays open while DISPATCH_STARTED is made durable past keepAliveMs', async () => {
    // Taken at ~300 ms of idle (keepAliveMs 1 s); the boundary then takes 1 s more, so the write happens ~1.3 s after
    // the last response. undici's own idle timer at keepAliveMs closed the socket in that wait: the request failed after
    // the boundary (unknown, reused_connection_broke_after_handoff) with not a byte of it written.
    h.channel = h.newChannel({ limits: { keepAliveMs: 1_000 }, gate: slowGate(1_000) });
    const first = await h.run(config, post(1));
    expect(first.envelope.error).toBeUndefined();
    await sleep(300);
    const second = await h.run(config, post(2));
    expect(second.envelope.error).toBeUndefined();
    expect(second.response?.status).toBe(200);
    expect(dispatchOf(second.envelope.invocation_id)).toMatchObject({ connection: 'reused' });
    expect(perConnection).toEqual([2]);
  });

  it('idle past keepAliveMs, the pool closes it and the next action opens a fresh connection', async () => {
    h.channel = h.newChannel({ limits: { keepAliveMs: 200 } });
    const first = await h.run(config, post(3));
    expect(first.envelope.error).toBeUndefined();
    await sleep(400);
    const second = await h.run(config, post(4));
    expect(second.envelope.error).toBeUndefined();
    expect(dispatchOf(second.envelope.invocation_id)).toMatchObject({ connection: 'fresh' });
    expect(perConnection).toEqual([1, 1]);
  });

  it("the server's Keep-Alive hint shortens the idle limit (timeout=3 → 1 s with the 2 s margin)", async () => {
    keepAliveHeader = 'timeout=3';
    h.channel = h.newChannel({ limits: { keepAliveMs: 4_000 } });
    const first = await h.run(config, post(5));
    expect(first.envelope.error).toBeUndefined();
    await sleep(1_300);
    const second = await h.run(config, post(6));
    expect(second.envelope.error).toBeUndefined();
    expect(dispatchOf(second.envelope.invocation_id)).toMatchObject({ connection: 'fresh' });
    expect(perConnection).toEqual([1, 1]);
  });

  it('within the hinted limit the connection is reused', async () => {
    keepAliveHeader = 'timeout=3';
    h.channel = h.newChannel({ limits: { keepAliveMs: 4_000 } });
    expect((await h.run(config, post(7))).envelope.error).toBeUndefined();
    await sleep(200);
    const second = await h.run(config, post(8));
    expect(second.envelope.error).toBeUndefined();
    expect(dispatchOf(second.envelope.invocation_id)).toMatchObject({ connection: 'reused' });
    expect(perConnection).toEqual([2]);
  });
});
