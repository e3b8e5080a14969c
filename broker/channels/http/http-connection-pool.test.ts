import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { PosternConfig } from '../../config/index.js';
import type { DispatchGate } from '../../ports/index.js';
import { localRouteConfig, openHttpActionHarness, type HttpActionHarness } from '../../testing/http-action-harness.js';
import { HttpConnection } from './http-connection.js';
import { HttpConnectionPool } from './http-connection-pool.js';
import { defaultHttpLimits } from './http-limits.js';

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
/** The server's side of each connection, in order of accept. */
const accepted: Socket[] = [];
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
    accepted.push(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  // A lane per document (as the bench): an unknown outcome in one test blocks its own lane only.
  const lanes = ['    lanes:', "      - { methods: ['*'], path: '/documents/{id}', lane: 'doc-{id}' }"].join('\n');
  config = localRouteConfig((server.address() as AddressInfo).port, lanes);
});
afterEach(() => {
  perConnection.length = 0;
  accepted.length = 0;
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

/**
 * Milliseconds until the server sees `socket` closed (the pool closed the connection on its side), or a failure after
 * `boundMs`: a bounded wait for the event instead of a fixed sleep.
 */
async function closedWithin(socket: Socket | undefined, boundMs: number): Promise<number> {
  if (socket === undefined) throw new Error('no such server-side connection');
  const startMs = performance.now();
  if (socket.closed) return 0;
  return new Promise((resolve, reject) => {
    const bound = setTimeout(() => reject(new Error(`the connection was still open after ${boundMs} ms`)), boundMs);
    socket.once('close', () => {
      clearTimeout(bound);
      resolve(performance.now() - startMs);
    });
  });
}

function dispatchOf(actionId: string): unknown {
  return h.events(actionId).find((e) => e.kind === 'DISPATCH_STARTED')?.payload;
}

describe('idle expiry is the pool’s: a connection it hands out is not closed on this side before the write', () => {
  it('taken within keepAliveMs, it stays open while DISPATCH_STARTED is made durable past keepAliveMs', async () => {
    // Taken at once (keepAliveMs 300 ms); the boundary then takes 500 ms, so the write happens past keepAliveMs after
    // the last response, and the pool's sweep comes due in that wait. undici's own idle timer at keepAliveMs closed the
    // socket there: the request failed after the boundary (unknown, reused_connection_broke_after_handoff) with not a
    // byte of it written. The sweep must not touch a connection it no longer holds.
    h.channel = h.newChannel({ limits: { keepAliveMs: 300 }, gate: slowGate(500) });
    const first = await h.run(config, post(1));
    expect(first.envelope.error).toBeUndefined();
    const second = await h.run(config, post(2));
    expect(second.envelope.error).toBeUndefined();
    expect(second.response?.status).toBe(200);
    expect(dispatchOf(second.envelope.invocation_id)).toMatchObject({ connection: 'reused' });
    expect(perConnection).toEqual([2]);
  });

  it('idle past keepAliveMs, the pool closes it and the next action opens a fresh connection', async () => {
    h.channel = h.newChannel({ limits: { keepAliveMs: 100 } });
    const first = await h.run(config, post(3));
    expect(first.envelope.error).toBeUndefined();
    await closedWithin(accepted[0], 2_000);
    const second = await h.run(config, post(4));
    expect(second.envelope.error).toBeUndefined();
    expect(dispatchOf(second.envelope.invocation_id)).toMatchObject({ connection: 'fresh' });
    expect(perConnection).toEqual([1, 1]);
  });

  it("the server's Keep-Alive hint shortens the idle limit (timeout=1 → 200 ms with an 800 ms margin)", async () => {
    // keepAliveMs 30 s: a close within the bound is the hint's doing.
    keepAliveHeader = 'timeout=1';
    h.channel = h.newChannel({ limits: { keepAliveMs: 30_000, keepAliveHintMarginMs: 800 } });
    const first = await h.run(config, post(5));
    expect(first.envelope.error).toBeUndefined();
    await closedWithin(accepted[0], 3_000);
    const second = await h.run(config, post(6));
    expect(second.envelope.error).toBeUndefined();
    expect(dispatchOf(second.envelope.invocation_id)).toMatchObject({ connection: 'fresh' });
    expect(perConnection).toEqual([1, 1]);
  });

  it('within the hinted limit the connection is reused', async () => {
    keepAliveHeader = 'timeout=3';
    h.channel = h.newChannel({ limits: { keepAliveMs: 4_000 } });
    expect((await h.run(config, post(7))).envelope.error).toBeUndefined();
    const second = await h.run(config, post(8));
    expect(second.envelope.error).toBeUndefined();
    expect(dispatchOf(second.envelope.invocation_id)).toMatchObject({ connection: 'reused' });
    expect(perConnection).toEqual([2]);
  });
});

describe('one sweep timer per pool, not one per released connection', () => {
  /** A real connection to the test server (an undici Client over a socket opened here), idle for `idleLimitMs`. */
  async function connection(idleLimitMs: number): Promise<{ connection: HttpConnection; server: Socket }> {
    const port = (server.address() as AddressInfo).port;
    const socket = connect(port, '127.0.0.1');
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    const deadline = performance.now() + 2_000;
    let seen: Socket | undefined;
    while ((seen = accepted.find((s) => s.remotePort === socket.localPort)) === undefined) {
      if (performance.now() > deadline) throw new Error('the server did not accept the connection');
      await sleep(1);
    }
    const opened = { socket, address: '127.0.0.1', peerFingerprint: undefined, stages: [] };
    const made = new HttpConnection(opened, `http://127.0.0.1:${port}`, {
      ...defaultHttpLimits,
      keepAliveMs: idleLimitMs,
    });
    return { connection: made, server: seen };
  }

  let pool: HttpConnectionPool;
  afterEach(() => pool.closeAll());

  it('a thousand hand-outs and releases arm one timer', async () => {
    pool = new HttpConnectionPool(4);
    const { connection: c } = await connection(60_000);
    const timers = vi.spyOn(globalThis, 'setTimeout');
    let armed: number;
    try {
      for (let i = 0; i < 1_000; i++) {
        pool.release('k', c);
        expect(pool.take('k')).toBe(c);
      }
    } finally {
      armed = timers.mock.calls.length;
      timers.mockRestore();
    }
    expect(armed).toBe(1);
  });

  it('a connection with a shorter limit, released later, brings the sweep forward; the longer one stays', async () => {
    pool = new HttpConnectionPool(4);
    const long = await connection(60_000);
    const short = await connection(100);
    pool.release('a', long.connection);
    pool.release('b', short.connection);
    await closedWithin(short.server, 2_000);
    expect(pool.idleCount('b')).toBe(0);
    expect(pool.idleCount('a')).toBe(1);
    expect(long.server.closed).toBe(false);
  });

  it('the sweep re-arms for the connections still idle and closes each at its own limit', async () => {
    pool = new HttpConnectionPool(4);
    const first = await connection(100);
    const second = await connection(400);
    pool.release('k', first.connection);
    pool.release('k', second.connection);
    await closedWithin(first.server, 2_000);
    expect(second.server.closed).toBe(false);
    expect(pool.idleCount('k')).toBe(1);
    await closedWithin(second.server, 2_000);
    expect(pool.idleCount('k')).toBe(0);
  });

  it('never hands out a connection past its idle limit, even while the sweep is held up by a busy loop', async () => {
    pool = new HttpConnectionPool(4);
    const { connection: c, server: seen } = await connection(20);
    pool.release('k', c);
    const busyUntil = performance.now() + 40;
    while (performance.now() < busyUntil); // the sweep cannot run: this is one synchronous turn
    expect(pool.take('k')).toBeUndefined();
    expect(c.alive()).toBe(false);
    await closedWithin(seen, 2_000);
  });
});
