import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { systemClock } from '../ports/index.js';
import { webProofFor } from './web-proof.js';
import { createServer, request, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createBrokerRuntime, type BrokerRuntime } from './broker-runtime.js';
import { guardConnections } from './connection-guard.js';
import {
  sessionPath,
  startOperatorHttpHost,
  type OperatorHttpHost,
  type OperatorHttpHostOptions,
  type OperatorHttpLimits,
  type SignInLink,
} from './http-host.js';
import { signInCodeAttemptsMax, sessionsMax } from './access-token.js';
import { createOperatorHandlers } from './operator-handlers.js';

/**
 * The operator host's sign-in and bounds, attacked: a replayed or stolen sign-in URL (read from a browser's command
 * line, where every process of the user can), guessed codes, malformed paths, and a flood of silent connections. Real
 * hosts on 127.0.0.1, a real runtime behind them.
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

const postSession = (
  port: number,
  signIn: { token: string; code?: string },
  headers: Record<string, string> = { 'Content-Type': 'application/json' },
): Promise<Answer> => send(port, sessionPath, { method: 'POST', headers, body: JSON.stringify(signIn) });
/** The session secret a sign-in answered, or undefined when it was refused. */
const sessionOf = (answer: Answer): string | undefined =>
  answer.status === 200 ? (JSON.parse(answer.body) as { value: { session: string } }).value.session : undefined;
/** The sign-in the host expects now (its token from the current URL, and the code printed beside it). */
const currentOf = (host: OperatorHttpHost): { token: string; code: string } => {
  const { url, code } = host.currentSignIn();
  return { token: new URL(url).searchParams.get('token') ?? '', code };
};
const signInNow = async (host: OperatorHttpHost): Promise<string | undefined> =>
  sessionOf(await postSession(host.port, currentOf(host)));

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
  told: Pick<OperatorHttpHostOptions, 'onSignIn' | 'onWrongCode'> = {},
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
    proof: webProofFor(runtimes[0] as BrokerRuntime, systemClock),
    rendererDir: ui === 'built' ? rendererDir : path.join(scratch, 'no-renderer'),
    port: 0,
    limits,
    ...told,
  });
  hosts.push(host);
  return host;
}

describe('when the printed URL is opened', () => {
  it("answers the UI's own page as built, with no session in it, no cookie, no redirect, not cached; nothing is spent", async () => {
    const host = await freshHost();
    const page = await send(host.port, `/?token=${host.token}`);
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.body).toBe(uiPage);
    expect(page.body).not.toContain(host.signInCode);
    expect(page.body).not.toContain(host.signInCode.replace('-', ''));
    expect(page.headers['set-cookie']).toBeUndefined();
    expect(page.headers.location).toBeUndefined();
    expect(page.headers['cache-control']).toBe('no-store');
    expect(page.headers['referrer-policy']).toBe('no-referrer');
    // Opening it again (a reload before the code was typed) still shows the page, and the sign-in still works.
    expect((await send(host.port, `/?token=${host.token}`)).status).toBe(200);
    const session = sessionOf(await postSession(host.port, { token: host.token, code: host.signInCode }));
    expect(session).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(session).not.toBe(host.token);
    expect(
      (await send(host.port, '/api/status', { headers: { Authorization: `Bearer ${session ?? ''}` } })).status,
    ).toBe(200);
  });

  it(`signs nothing in with the URL alone: a program that read it from a command line gets ${signInCodeAttemptsMax} guesses at the code, each told to the operator, and the last spends the URL`, async () => {
    const spent: SignInLink[] = [];
    const wrong: number[] = [];
    const host = await freshHost({}, { onSignIn: (next) => spent.push(next), onWrongCode: (left) => wrong.push(left) });
    const stolen = host.token;
    const noCode = await send(host.port, sessionPath, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ token: stolen }),
    });
    expect(noCode.status).toBe(400);
    expect(JSON.parse(noCode.body)).toMatchObject({ ok: false, error: { code: 'INVALID_ARGUMENT' } });
    expect(JSON.parse(noCode.body).error.message).toContain('code is missing');
    // Guesses that differ from the printed code in their last digit, typed in each accepted shape.
    const digits = host.signInCode.replace('-', '');
    const guessed = (n: number): string => digits.slice(0, 7) + String((Number(digits.slice(7)) + n) % 10);
    const guesses = [guessed(1), `${guessed(2).slice(0, 4)}-${guessed(2).slice(4)}`, ` ${guessed(3)} `];
    const answers: Answer[] = [];
    for (const guess of guesses) answers.push(await postSession(host.port, { token: stolen, code: guess }));
    expect(answers.map((a) => [a.status, (JSON.parse(a.body) as { error: { code: string } }).error.code])).toEqual([
      [401, 'SIGN_IN_CODE_WRONG'],
      [401, 'SIGN_IN_CODE_WRONG'],
      [401, 'SIGN_IN_CODE_SPENT'],
    ]);
    expect(answers[0]?.body).toContain('2 more tries');
    expect(answers.at(-1)?.body).toContain('spent');
    // No answer carries the code, in either shape.
    for (const answer of answers) {
      expect(answer.body).not.toContain(host.signInCode);
      expect(answer.body).not.toContain(digits);
    }
    expect(wrong).toEqual([2, 1, 0]);
    // Spent: the right code no longer opens it, for the program or for the person; the operator was told the next one.
    expect(JSON.parse((await postSession(host.port, { token: stolen, code: host.signInCode })).body)).toMatchObject({
      error: { code: 'SIGN_IN_USED' },
    });
    expect((await send(host.port, `/?token=${stolen}`)).status).toBe(401);
    expect(spent).toHaveLength(1);
    expect(spent[0]?.url).not.toContain(stolen);
    expect(spent[0]?.url).not.toContain(spent[0]?.code ?? '-');
    expect(spent[0]?.url).not.toContain(spent[0]?.code.replace('-', '') ?? '-');
    expect(spent[0]).toEqual(host.currentSignIn());
    expect(await signInNow(host)).toBeDefined();
  });

  it('refuses a used URL a second time with a page that says it was used and what to do, and never hands out a second secret', async () => {
    const host = await freshHost();
    expect(await signInNow(host)).toBeDefined();
    const again = await send(host.port, `/?token=${host.token}`);
    expect(again.status).toBe(401);
    expect(again.headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(again.body).toContain('SIGN_IN_USED');
    expect(again.body).toContain('already used');
    expect(again.body).toContain('printed a new URL');
    const program = await postSession(host.port, { token: host.token, code: host.signInCode });
    expect(program.status).toBe(401);
    expect(JSON.parse(program.body)).toMatchObject({ ok: false, error: { code: 'SIGN_IN_USED' } });
  });

  it('tells the operator the next URL and code after each sign-in: a second tab signs in with them, once, and both tabs stay signed in', async () => {
    const told: SignInLink[] = [];
    const host = await freshHost({}, { onSignIn: (next) => told.push(next) });
    const first = sessionOf(await postSession(host.port, { token: host.token, code: host.signInCode })) ?? '';
    expect(told).toHaveLength(1);
    const next = new URL(told[0]?.url ?? '');
    expect(next.origin).toBe(host.origin);
    const nextToken = next.searchParams.get('token') ?? '';
    expect(nextToken).not.toBe(host.token);
    expect(told[0]?.code).toMatch(/^\d{4}-\d{4}$/);
    expect(host.currentSignIn()).toEqual(told[0]);
    // The first URL's code does not open the next URL.
    if (told[0]?.code !== host.signInCode)
      expect((await postSession(host.port, { token: nextToken, code: host.signInCode })).status).toBe(401);
    const second = sessionOf(await postSession(host.port, { token: nextToken, code: told.at(-1)?.code ?? '' })) ?? '';
    expect(second).toMatch(/^[A-Za-z0-9_-]{43}$/);
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
    for (let i = 0; i <= sessionsMax; i += 1) sessions.push((await signInNow(host)) ?? '');
    const status = (session: string): Promise<number> =>
      send(host.port, '/api/status', { headers: { Authorization: `Bearer ${session}` } }).then((r) => r.status);
    expect(await status(sessions[0] ?? '')).toBe(401);
    expect(await status(sessions.at(-1) ?? '')).toBe(200);
  });

  it('never accepts the sign-in token or code as an API credential, before or after its exchange', async () => {
    const host = await freshHost();
    const asBearer = { headers: { Authorization: `Bearer ${host.token}` } };
    expect((await send(host.port, '/api/status', asBearer)).status).toBe(401);
    expect(
      (await send(host.port, '/api/status', { headers: { Authorization: `Bearer ${host.signInCode}` } })).status,
    ).toBe(401);
    expect(await signInNow(host)).toBeDefined();
    expect((await send(host.port, '/api/approvals.list', asBearer)).status).toBe(401);
  });

  it.each<[string, (host: OperatorHttpHost) => Promise<number>]>([
    ['a wrong token', async (h) => (await send(h.port, `/?token=${'A'.repeat(43)}`)).status],
    [
      'a wrong token with the right code',
      async (h) => (await postSession(h.port, { token: 'A'.repeat(43), code: h.signInCode })).status,
    ],
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
      'a cross-origin exchange',
      async (h) =>
        (
          await postSession(
            h.port,
            { token: h.token, code: h.signInCode },
            { 'Content-Type': 'application/json', Origin: 'http://127.0.0.1:1' },
          )
        ).status,
    ],
    [
      'a text/plain exchange',
      async (h) =>
        (await postSession(h.port, { token: h.token, code: h.signInCode }, { 'Content-Type': 'text/plain' })).status,
    ],
  ])('refuses %s and leaves the URL and all its tries for the operator', async (_when, attempt) => {
    const host = await freshHost();
    expect(await attempt(host)).toBeGreaterThanOrEqual(400);
    expect((await send(host.port, `/?token=${host.token}`)).status).toBe(200);
    for (let miss = 1; miss < signInCodeAttemptsMax; miss += 1)
      expect((await postSession(host.port, { token: host.token, code: 'x' })).status).toBe(401);
    expect(sessionOf(await postSession(host.port, { token: host.token, code: host.signInCode }))).toBeDefined();
  });
});

describe('which addresses open the sign-in', () => {
  it.each(['/index.html?token=T', '/a/b?token=T'])(
    'answers %s, off the UI page\'s path (its assets are relative to "/"), with 404 and leaves the token unspent',
    async (target) => {
      const host = await freshHost();
      const answer = await send(host.port, target.replace('token=T', `token=${host.token}`));
      expect(answer.status).toBe(404);
      expect(answer.body).toContain('NOT_FOUND');
      expect(await signInNow(host)).toBeDefined();
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
  });

  it('answers the printed URL with RENDERER_NOT_BUILT while the UI is not built, and leaves the token for a program', async () => {
    const host = await freshHost({}, {}, 'not built');
    const page = await send(host.port, `/?token=${host.token}`);
    expect(page.status).toBe(503);
    expect(page.body).toContain('RENDERER_NOT_BUILT');
    expect(await signInNow(host)).toBeDefined();
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
    const signedIn = await postSession(host.port, { token: host.token, code: host.signInCode });
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
    const { session } = (
      JSON.parse((await postSession(host.port, { token: host.token, code: host.signInCode })).body) as {
        value: { session: string };
      }
    ).value;
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
