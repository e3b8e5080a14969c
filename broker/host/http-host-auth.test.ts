import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createBrokerRuntime, type BrokerRuntime } from './broker-runtime.js';
import { guardConnections } from './connection-guard.js';
import { sessionPath, startOperatorHttpHost, type OperatorHttpHost, type OperatorHttpLimits } from './http-host.js';
import { sessionsMax } from './access-token.js';
import { createOperatorHandlers } from './operator-handlers.js';
import { sameOriginPath, signInDocument } from './sign-in-page.js';

/**
 * The operator host's sign-in and bounds, attacked: a replayed or stolen sign-in URL, a request
 * that tries to turn the sign-in into a redirect off the origin, malformed paths, and a flood of
 * silent connections. Real hosts on 127.0.0.1, a real runtime behind them.
 */
interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

function send(
  port: number,
  target: string,
  options: { headers?: Record<string, string>; method?: string; body?: string } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers = { Host: `127.0.0.1:${port}`, ...options.headers };
    const req = request(
      { host: '127.0.0.1', port, path: target, method: options.method ?? 'GET', headers, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

/** A request line sent as raw bytes, for targets node:http's client would refuse to send. */
function sendRaw(port: number, target: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () =>
      socket.end(`GET ${target} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n\r\n`),
    );
    let text = '';
    socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
    socket.on('end', () => resolve(text));
    socket.on('error', reject);
  });
}

const sessionIn = (page: string): string | undefined =>
  /name="postern-session" content="([A-Za-z0-9_-]{43})"/.exec(page)?.[1];
const nextIn = (page: string): string | undefined => /data-next="([^"]*)"/.exec(page)?.[1];
const postSession = (
  port: number,
  token: string,
  headers: Record<string, string> = { 'Content-Type': 'application/json' },
): Promise<Answer> => send(port, sessionPath, { method: 'POST', headers, body: JSON.stringify({ token }) });

const scratch = mkdtempSync(path.join(os.tmpdir(), 'postern-host-auth-'));
/** A built operator UI: the page the printed URL is answered with, the sign-in element added. */
const rendererDir = path.join(scratch, 'renderer');
const uiPage =
  '<!doctype html>\n<html lang="en">\n  <head>\n    <title>Postern</title>\n' +
  '    <script type="module" src="./assets/index.js"></script>\n  </head>\n  <body><div id="root"></div></body>\n</html>\n';
mkdirSync(rendererDir, { recursive: true });
writeFileSync(path.join(rendererDir, 'index.html'), uiPage);
const runtimes: BrokerRuntime[] = [];
const hosts: OperatorHttpHost[] = [];
afterAll(async () => {
  for (const host of hosts) await host.close();
  for (const runtime of runtimes) await runtime.close();
  rmSync(scratch, { recursive: true, force: true });
});

async function freshHost(
  limits: Partial<OperatorHttpLimits> = {},
  onSignIn?: (next: string) => void,
  ui: 'built' | 'not built' = 'built',
): Promise<OperatorHttpHost> {
  if (runtimes.length === 0)
    runtimes.push(
      await createBrokerRuntime({
        dataDir: path.join(scratch, 'data'),
        mode: 'headless',
        version: '1',
        startedAtMs: 0,
      }),
    );
  const handlers = createOperatorHandlers((runtimes[0] as BrokerRuntime).broker);
  const host = await startOperatorHttpHost({
    handlers,
    rendererDir: ui === 'built' ? rendererDir : path.join(scratch, 'no-renderer'),
    port: 0,
    limits,
    ...(onSignIn === undefined ? {} : { onSignIn }),
  });
  hosts.push(host);
  return host;
}

describe('when the printed URL is opened', () => {
  it("answers once with the UI's page holding a fresh session secret (no cookie, no redirect, not cached); the secret opens the API", async () => {
    const host = await freshHost();
    const page = await send(host.port, `/?token=${host.token}`);
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.headers['set-cookie']).toBeUndefined();
    expect(page.headers.location).toBeUndefined();
    expect(page.headers['cache-control']).toBe('no-store');
    expect(page.headers['referrer-policy']).toBe('no-referrer');
    // The UI's own page, the secret first in its head, so the UI's script finds it when it starts.
    const session = sessionIn(page.body);
    expect(page.body).toBe(signInDocument(uiPage, session ?? '', '/'));
    expect(page.body.indexOf('name="postern-session"')).toBeLessThan(page.body.indexOf('<title>'));
    expect(page.body.indexOf('name="postern-session"')).toBeGreaterThan(page.body.indexOf('<head>'));
    expect(session).toBeDefined();
    expect(session).not.toBe(host.token);
    expect(nextIn(page.body)).toBe('/');
    expect(
      (await send(host.port, '/api/status', { headers: { Authorization: `Bearer ${session ?? ''}` } })).status,
    ).toBe(200);
  });

  it('refuses the same URL a second time with a page that says it was used and what to do, and never hands out a second secret', async () => {
    const host = await freshHost();
    expect((await send(host.port, `/?token=${host.token}`)).status).toBe(200);
    const again = await send(host.port, `/?token=${host.token}`);
    expect(again.status).toBe(401);
    expect(again.headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(again.body).toContain('SIGN_IN_USED');
    expect(again.body).toContain('already used');
    expect(again.body).toContain('printed a new URL');
    expect(sessionIn(again.body)).toBeUndefined();
    const program = await postSession(host.port, host.token);
    expect(program.status).toBe(401);
    expect(JSON.parse(program.body)).toMatchObject({ ok: false, error: { code: 'SIGN_IN_USED' } });
  });

  it('tells the operator the next URL after each sign-in: a second tab signs in with it, once, and both tabs stay signed in', async () => {
    const told: string[] = [];
    const host = await freshHost({}, (next) => told.push(next));
    const first = sessionIn((await send(host.port, `/?token=${host.token}`)).body) ?? '';
    expect(told).toHaveLength(1);
    const next = new URL(told[0] ?? '');
    expect(next.origin).toBe(host.origin);
    const nextToken = next.searchParams.get('token') ?? '';
    expect(nextToken).not.toBe(host.token);
    expect(host.currentOperatorUrl()).toBe(told[0]);
    const second = sessionIn((await send(host.port, `/?token=${nextToken}`)).body) ?? '';
    expect(second).not.toBe(first);
    expect((await send(host.port, `/?token=${nextToken}`)).status).toBe(401);
    for (const session of [first, second]) {
      expect((await send(host.port, '/api/status', { headers: { Authorization: `Bearer ${session}` } })).status).toBe(
        200,
      );
    }
    expect((await send(host.port, '/api/status', { headers: { Authorization: `Bearer ${nextToken}` } })).status).toBe(
      401,
    );
  });

  it(`keeps at most ${sessionsMax} tabs signed in: one more signs the oldest out`, async () => {
    const host = await freshHost();
    const sessions: string[] = [];
    for (let i = 0; i <= sessionsMax; i += 1) {
      const token = new URL(host.currentOperatorUrl()).searchParams.get('token') ?? '';
      sessions.push(sessionIn((await send(host.port, `/?token=${token}`)).body) ?? '');
    }
    const status = (session: string): Promise<number> =>
      send(host.port, '/api/status', { headers: { Authorization: `Bearer ${session}` } }).then((r) => r.status);
    expect(await status(sessions[0] ?? '')).toBe(401);
    expect(await status(sessions.at(-1) ?? '')).toBe(200);
  });

  it('never accepts the sign-in token as an API credential, before or after its exchange', async () => {
    const host = await freshHost();
    const asBearer = { headers: { Authorization: `Bearer ${host.token}` } };
    expect((await send(host.port, '/api/status', asBearer)).status).toBe(401);
    expect((await send(host.port, `/?token=${host.token}`)).status).toBe(200);
    expect((await send(host.port, '/api/approvals.list', asBearer)).status).toBe(401);
  });

  it.each<[string, (host: OperatorHttpHost) => Promise<number>]>([
    ['a wrong token', async (h) => (await send(h.port, `/?token=${'A'.repeat(43)}`)).status],
    [
      'the right token behind a rebinding Host header',
      async (h) => (await send(h.port, `/?token=${h.token}`, { headers: { Host: `evil.example:${h.port}` } })).status,
    ],
    ['a POST of the URL', async (h) => (await send(h.port, `/?token=${h.token}`, { method: 'POST' })).status],
    [
      'the right token in a malformed target',
      async (h) => Number((await sendRaw(h.port, `//[?token=${h.token}`)).slice(9, 12)),
    ],
    [
      'the right token on a path that would leave the origin',
      async (h) => (await send(h.port, `/.//evil.example/x?token=${h.token}`)).status,
    ],
    [
      'a cross-origin program exchange',
      async (h) =>
        (await postSession(h.port, h.token, { 'Content-Type': 'application/json', Origin: 'http://127.0.0.1:1' }))
          .status,
    ],
    [
      'a text/plain program exchange',
      async (h) => (await postSession(h.port, h.token, { 'Content-Type': 'text/plain' })).status,
    ],
  ])('refuses %s and leaves the token unspent for the operator', async (_when, attempt) => {
    const host = await freshHost();
    expect(await attempt(host)).toBeGreaterThanOrEqual(400);
    const page = await send(host.port, `/?token=${host.token}`);
    expect(page.status).toBe(200);
    expect(sessionIn(page.body)).toBeDefined();
  });

  it('lets a program exchange the token by POST, once', async () => {
    const host = await freshHost();
    const first = await postSession(host.port, host.token);
    expect(first.status).toBe(200);
    const session = (JSON.parse(first.body) as { value: { session: string } }).value.session;
    expect(session).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect((await send(host.port, '/api/status', { headers: { Authorization: `Bearer ${session}` } })).status).toBe(
      200,
    );
    expect((await postSession(host.port, host.token)).status).toBe(401);
    expect((await send(host.port, `/?token=${host.token}`)).status).toBe(401);
  });
});

describe('where sign-in sends the browser next', () => {
  it.each([
    ['/?view=status&token=T', '/?view=status'],
    ['/?token=T', '/'],
    ['/a/../?token=T', '/'],
  ])('%s → %s, a path on this origin, and no Location header at all', async (target, next) => {
    const host = await freshHost();
    const page = await send(host.port, target.replace('token=T', `token=${host.token}`));
    expect(page.status).toBe(200);
    expect(page.headers.location).toBeUndefined();
    expect(nextIn(page.body)).toBe(next);
  });

  it.each(['/index.html?token=T', '/a/b?token=T'])(
    'answers %s, off the UI page\'s path (its assets are relative to "/"), with 404 and leaves the token unspent',
    async (target) => {
      const host = await freshHost();
      const answer = await send(host.port, target.replace('token=T', `token=${host.token}`));
      expect(answer.status).toBe(404);
      expect(answer.body).toContain('NOT_FOUND');
      expect(answer.body).not.toContain('postern-session');
      expect(sessionIn((await send(host.port, `/?token=${host.token}`)).body)).toBeDefined();
    },
  );

  it.each([
    '/.//evil.example/x?token=T',
    '//evil.example/x?token=T',
    '/%2e//evil.example/x?token=T',
    '/./%2e%2e//evil.example?token=T',
    '/a/..//evil.example?token=T',
    '/\\evil.example/x?token=T',
  ])('refuses %s, whose path would read as another host, with 400 and no Location', async (target) => {
    const host = await freshHost();
    const answer = await sendRaw(host.port, target.replace('token=T', `token=${host.token}`));
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(answer).toContain('MALFORMED_PATH');
    expect(answer.toLowerCase()).not.toContain('location:');
    expect(answer).not.toContain('postern-session');
  });

  it.each([
    ['/', ''],
    ['/a/b', '?c=d'],
    ['//evil.example/x', ''],
    ['/\\evil.example/x', ''],
    ['\\\\evil.example', ''],
    ['', '?x'],
  ])('sameOriginPath(%j, %j) starts with exactly one "/"', (pathname, search) => {
    const next = sameOriginPath(pathname, search);
    expect(next).toMatch(/^\/(?![/\\])/);
    if (/^\/(?![/\\])/.test(pathname)) expect(next).toBe(pathname + search);
    else expect(next).toBe('/');
  });

  it('answers the printed URL with RENDERER_NOT_BUILT while the UI is not built, and leaves the token for a program', async () => {
    const host = await freshHost({}, undefined, 'not built');
    const page = await send(host.port, `/?token=${host.token}`);
    expect(page.status).toBe(503);
    expect(page.body).toContain('RENDERER_NOT_BUILT');
    expect(page.body).not.toContain('postern-session');
    expect((await postSession(host.port, host.token)).status).toBe(200);
  });
});

describe('when the path is malformed', () => {
  it.each(['//[', '//[/x', '//a:b@[', '//', 'http://evil.example/', '*'])(
    'answers GET %s with 400 MALFORMED_PATH, not 500',
    async (target) => {
      const host = await freshHost();
      const answer = await sendRaw(host.port, target);
      expect(answer).toMatch(/^HTTP\/1\.1 400 /);
      expect(answer).toContain('MALFORMED_PATH');
    },
  );

  it('answers a path with odd characters that parses (/[::1) as any unknown path: 404', async () => {
    const host = await freshHost();
    const answer = await send(host.port, '/[::1', { headers: { Authorization: 'Bearer x' } });
    expect([404, 503]).toContain(answer.status);
  });
});

/** Opens `count` sockets that never send a byte; resolves once every one has connected. */
async function silentSockets(port: number, count: number, onClose: () => void): Promise<Socket[]> {
  return Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<Socket>((resolve, reject) => {
          const socket = connect(port, '127.0.0.1');
          // Read (and drop) whatever the host answers (a 408 at the timeout), so the end of the stream is seen.
          socket.resume();
          socket.once('connect', () => resolve(socket));
          socket.once('error', reject);
          socket.once('close', onClose);
        }),
    ),
  );
}

/** Resolves when `target()` turns true, checked on each call of the returned `poke`. */
function whenTrue(target: () => boolean): { poke: () => void; reached: Promise<void> } {
  let resolve = (): void => {};
  const reached = new Promise<void>((r) => (resolve = r));
  const poke = (): void => {
    if (target()) resolve();
  };
  return { poke, reached };
}

describe('when a local process floods the host with connections that never send a request', () => {
  const flood = 200;
  const limits = {
    connectionsMax: 64,
    headersTimeoutMs: 1_500,
    requestTimeoutMs: 3_000,
    idleTimeoutMs: 60_000,
    connectionsCheckingIntervalMs: 100,
  };
  // An API call during the flood answers within this bound: it takes a silent socket's place at once.
  const apiAnswerMsMax = 1_000;

  it(`holds at most ${limits.connectionsMax} open, still answers the operator within ${apiAnswerMsMax} ms, and closes the silent ones by the headers timeout`, async () => {
    const host = await freshHost(limits);
    const signedIn = await postSession(host.port, host.token);
    const auth = {
      Authorization: `Bearer ${(JSON.parse(signedIn.body) as { value: { session: string } }).value.session}`,
    };
    let closed = 0;
    const evictedAll = whenTrue(() => closed >= flood - limits.connectionsMax);
    const closedAll = whenTrue(() => closed >= flood);
    const started = process.hrtime.bigint();
    const sockets = await silentSockets(host.port, flood, () => {
      closed += 1;
      evictedAll.poke();
      closedAll.poke();
    });
    await evictedAll.reached;
    expect(host.connections()).toEqual({
      open: limits.connectionsMax,
      evicted: flood - limits.connectionsMax,
      dropped: 0,
    });

    const asked = process.hrtime.bigint();
    const answer = await send(host.port, '/api/approvals.list', { headers: auth });
    expect(answer.status).toBe(200);
    expect(Number(process.hrtime.bigint() - asked) / 1e6).toBeLessThan(apiAnswerMsMax);
    expect(host.connections().open).toBeLessThanOrEqual(limits.connectionsMax);

    await closedAll.reached;
    const allClosedMs = Number(process.hrtime.bigint() - started) / 1e6;
    // The server closed them (this test never does): no later than the headers timeout plus two checks and slack.
    expect(allClosedMs).toBeLessThan(limits.headersTimeoutMs + 2 * limits.connectionsCheckingIntervalMs + 1_000);
    expect(allClosedMs).toBeGreaterThanOrEqual(limits.headersTimeoutMs - 100);
    expect(sockets.every((s) => s.destroyed)).toBe(true);
    expect(host.connections()).toMatchObject({ open: 0, dropped: 0 });
  });

  it('closes a request whose body stalls by the request timeout', async () => {
    const host = await freshHost({ ...limits, requestTimeoutMs: 2_000, headersTimeoutMs: 1_000 });
    const { session } = (JSON.parse((await postSession(host.port, host.token)).body) as { value: { session: string } })
      .value;
    const socket = connect(host.port, '127.0.0.1');
    const closedAt = new Promise<number>((resolve) => socket.once('close', () => resolve(Date.now())));
    let text = '';
    socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    const sentAt = Date.now();
    // Signed in, so the host is reading this body for a real operator call when it stalls.
    const head = `POST /api/status HTTP/1.1\r\nHost: 127.0.0.1:${host.port}\r\nAuthorization: Bearer ${session}\r\n`;
    socket.write(`${head}Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"a":`);
    const elapsed = (await closedAt) - sentAt;
    expect(elapsed).toBeGreaterThanOrEqual(2_000 - 100);
    expect(elapsed).toBeLessThan(2_000 + 2 * limits.connectionsCheckingIntervalMs + 1_000);
    expect(text).toMatch(/^HTTP\/1\.1 408 /);
  });
});

describe('the connection guard, when every held connection is serving the operator', () => {
  it('drops the new connection at once and counts it; the held requests still finish', async () => {
    let release = (): void => {};
    const released = new Promise<void>((r) => (release = r));
    let arrived = 0;
    const bothArrived = whenTrue(() => arrived === 2);
    const server = createServer((req: IncomingMessage, res: ServerResponse) => {
      guard.hold(req.socket, res);
      arrived += 1;
      bothArrived.poke();
      void released.then(() => res.end('done'));
    });
    const guard = guardConnections(server, 2);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const port = (server.address() as AddressInfo).port;
    try {
      const held = [send(port, '/one'), send(port, '/two')];
      await bothArrived.reached;
      const third = connect(port, '127.0.0.1');
      await new Promise<void>((resolve) => third.once('close', () => resolve()));
      expect(guard.counts()).toEqual({ open: 2, evicted: 0, dropped: 1 });
      release();
      expect((await Promise.all(held)).map((a) => a.body)).toEqual(['done', 'done']);
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});
