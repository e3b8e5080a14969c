import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { systemClock } from '../ports/index.js';
import { createPassphraseSource } from './control-proof.js';
import { createWebProof, webProofFor, type WebProof } from './web-proof.js';
import { Agent, request, type IncomingHttpHeaders } from 'node:http';
import { connect, createServer as createNetServer, type AddressInfo, type Server as NetServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { brokerApiMethods, brokerStatusSchema, CodedError, type BrokerStatus } from '../contract/index.js';
import { createBrokerRuntime, type BrokerRuntime, type BrokerRuntimeOptions } from './broker-runtime.js';
import {
  closeGraceMs,
  operatorHttpLimits,
  sessionPath,
  startOperatorHttpHost,
  type OperatorHttpHost,
} from './http-host.js';
import { createOperatorHandlers } from './operator-handlers.js';
import type { OperatorBroker } from './operator-broker.js';

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A real request on loopback with full control of the Host header (fetch would not allow it). */
function send(port: number, pathname: string, headers: Record<string, string> = {}, method = 'GET'): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path: pathname,
        method,
        headers: { Host: `127.0.0.1:${port}`, ...headers },
        agent: false,
      },
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
    req.end();
  });
}

/** HTTP/1.0 without a Host header, which node:http's client cannot send. */
function sendWithoutHost(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.end('GET / HTTP/1.0\r\n\r\n'));
    let text = '';
    socket.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
    socket.on('end', () => resolve(text));
    socket.on('error', reject);
  });
}

/** Spends the host's one-time sign-in token the way a program does, for the session secret. */
async function signIn(host: OperatorHttpHost): Promise<Record<string, string>> {
  const answer = await fetch(`${host.origin}${sessionPath}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ token: host.token, code: host.signInCode }),
  });
  const reply = (await answer.json()) as { ok: boolean; value: { session: string } };
  if (!reply.ok) throw new Error(`sign-in refused: ${answer.status}`);
  return { Authorization: `Bearer ${reply.value.session}` };
}

const scratch = mkdtempSync(path.join(os.tmpdir(), 'postern-host-'));
const rendererDir = path.join(scratch, 'renderer');
mkdirSync(path.join(rendererDir, 'assets'), { recursive: true });
writeFileSync(path.join(rendererDir, 'index.html'), '<!doctype html><title>Postern</title><div id="root"></div>');
writeFileSync(path.join(rendererDir, 'assets', 'app.js'), 'console.log(1);');
writeFileSync(path.join(rendererDir, '.secret'), 'dotfiles are never served');

const runtimes: BrokerRuntime[] = [];
/** A real runtime (real journal) in its own data directory under the scratch folder. */
async function runtimeFor(
  options: Omit<BrokerRuntimeOptions, 'dataDir'> & { dataDir?: string },
): Promise<BrokerRuntime> {
  const runtime = await createBrokerRuntime({
    dataDir: options.dataDir ?? mkdtempSync(path.join(scratch, 'data-')),
    ...options,
  });
  runtimes.push(runtime);
  return runtime;
}
const primaryDataDir = path.join(scratch, 'data-primary');

afterAll(async () => {
  for (const runtime of runtimes) await runtime.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('the operator HTTP host', () => {
  let host: OperatorHttpHost;
  let bearer: Record<string, string>;

  beforeAll(async () => {
    const runtime = await runtimeFor({
      dataDir: primaryDataDir,
      mode: 'headless',
      version: '9.9.9',
      startedAtMs: 1_700_000_000_000,
    });
    host = await startOperatorHttpHost({
      handlers: createOperatorHandlers(runtime.broker),
      proof: proofOf(runtime),
      rendererDir,
      port: 0,
    });
    bearer = await signIn(host);
  });
  afterAll(() => host.close());

  it('listens on 127.0.0.1 on an ephemeral port and hands out a tokened URL', () => {
    expect(host.port).toBeGreaterThan(0);
    expect(host.origin).toBe(`http://127.0.0.1:${host.port}`);
    expect(host.operatorUrl).toBe(`${host.origin}/?token=${host.token}`);
    expect(host.token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(host.rendererBuilt).toBe(true);
  });

  describe('when a request carries no credentials', () => {
    it.each(['/', '/index.html', '/assets/app.js'])(
      'serves %s: the renderer bundle is public code and holds no state',
      async (pathname) => {
        const answer = await send(host.port, pathname);
        expect(answer.status).toBe(200);
        expect(answer.headers['set-cookie']).toBeUndefined();
      },
    );

    it('refuses the API with a coded JSON reply', async () => {
      const answer = await send(host.port, '/api/status');
      expect(answer.status).toBe(401);
      expect(answer.headers['content-type']).toContain('application/json');
      expect(JSON.parse(answer.body)).toEqual({
        ok: false,
        error: { code: 'UNAUTHENTICATED', message: expect.any(String) },
      });
    });
  });

  describe('when the credentials are wrong', () => {
    it('refuses a wrong bearer secret', async () => {
      const answer = await send(host.port, '/api/status', { Authorization: `${bearer['Authorization'] ?? ''}x` });
      expect(answer.status).toBe(401);
    });

    it('refuses the sign-in token itself as a bearer, once it has been exchanged', async () => {
      const answer = await send(host.port, '/api/status', { Authorization: `Bearer ${host.token}` });
      expect(answer.status).toBe(401);
    });

    it('ignores cookies entirely, even one holding the session secret', async () => {
      const session = (bearer['Authorization'] ?? '').slice('Bearer '.length);
      const answer = await send(host.port, '/api/status', {
        Cookie: `postern_session_${host.port}=${session}; session=${session}`,
      });
      expect(answer.status).toBe(401);
    });
  });

  describe('when the Host header is not this host (DNS rebinding)', () => {
    it.each([
      ['another name', (port: number) => `evil.example:${port}`],
      ['the right address on another port', (port: number) => `127.0.0.1:${port + 1}`],
      ['no port', () => '127.0.0.1'],
      ['a suffix', (port: number) => `127.0.0.1:${port}.evil.example`],
    ])('refuses %s with 421, even with a valid token', async (_when, hostHeader) => {
      const answer = await send(host.port, '/api/status', { Host: hostHeader(host.port), ...bearer });
      expect(answer.status).toBe(421);
      expect(JSON.parse(answer.body)).toMatchObject({ ok: false, error: { code: 'HOST_NOT_ALLOWED' } });
      const exchange = await send(host.port, `/?token=${host.token}`, { Host: hostHeader(host.port) });
      expect(exchange.status).toBe(421);
      expect(exchange.body).not.toContain('postern-session');
    });

    it('refuses a request with no Host header at all', async () => {
      expect(await sendWithoutHost(host.port)).toMatch(/^HTTP\/1\.1 421 /);
    });

    it('accepts localhost:PORT', async () => {
      const answer = await send(host.port, '/api/status', { Host: `localhost:${host.port}`, ...bearer });
      expect(answer.status).toBe(200);
    });
  });

  describe('the operator API', () => {
    it('answers GET /api/status with a Reply holding a schema-valid status', async () => {
      const answer = await send(host.port, '/api/status', bearer);
      expect(answer.status).toBe(200);
      expect(answer.headers['cache-control']).toBe('no-store');
      const reply = JSON.parse(answer.body) as { ok: boolean; value: unknown };
      expect(reply.ok).toBe(true);
      const status = brokerStatusSchema.parse(reply.value);
      expect(status).toMatchObject({
        version: '9.9.9',
        mode: 'headless',
        data_dir: primaryDataDir,
        started_at_ms: 1_700_000_000_000,
      });
      expect(status.journal).toMatchObject({ state: 'open', events: 0 });
      expect(status.journal.schema_version).toBeGreaterThanOrEqual(1);
    });

    it.each(['/api/nope', '/api/__proto__', '/api/constructor', '/api/'])(
      'answers %s with 404 NOT_FOUND',
      async (pathname) => {
        const answer = await send(host.port, pathname, bearer);
        expect(answer.status).toBe(404);
        expect(JSON.parse(answer.body)).toMatchObject({ ok: false, error: { code: 'NOT_FOUND' } });
      },
    );

    it("refuses a state-changing call that is not JSON, or that a browser says came from another origin or site (403 CROSS_SITE_REFUSED); a same-origin JSON call gets past them (to the person's proof)", async () => {
      const post = (headers: Record<string, string>): Promise<Answer> =>
        new Promise((resolve, reject) => {
          const req = request(
            {
              host: '127.0.0.1',
              port: host.port,
              path: '/api/vault.lock',
              method: 'POST',
              headers: { Host: `127.0.0.1:${host.port}`, ...bearer, ...headers },
              agent: false,
            },
            (res) => {
              const chunks: Buffer[] = [];
              res.on('data', (chunk: Buffer) => chunks.push(chunk));
              res.on('end', () =>
                resolve({
                  status: res.statusCode ?? 0,
                  headers: res.headers,
                  body: Buffer.concat(chunks).toString('utf8'),
                }),
              );
            },
          );
          req.on('error', reject);
          req.end('{}');
        });
      const refused: Array<Record<string, string>> = [
        { 'Content-Type': 'text/plain' },
        { 'Content-Type': 'application/json', Origin: 'http://127.0.0.1:8080' },
        { 'Content-Type': 'application/json', 'Sec-Fetch-Site': 'same-site' },
      ];
      for (const headers of refused) {
        const answer = await post(headers);
        expect(answer.status, JSON.stringify(headers)).toBe(403);
        expect(JSON.parse(answer.body)).toMatchObject({ ok: false, error: { code: 'CROSS_SITE_REFUSED' } });
      }
      const same = await post({
        'Content-Type': 'application/json; charset=utf-8',
        Origin: `http://127.0.0.1:${host.port}`,
        'Sec-Fetch-Site': 'same-origin',
      });
      // Past the cross-site wall, the decision meets the person's proof: this data directory has no vault yet.
      expect(same.status).toBe(409);
      expect(JSON.parse(same.body)).toMatchObject({
        ok: false,
        error: { code: 'OPERATOR_PROOF_REQUIRED', proof_refusal: 'no_vault' },
      });
    });

    it('answers the wrong verb with 405 and says which one to use', async () => {
      const answer = await send(host.port, '/api/approvals.approve', bearer, 'GET');
      expect(answer.status).toBe(405);
      expect(answer.headers.allow).toBe('POST');
      expect(JSON.parse(answer.body)).toMatchObject({ ok: false, error: { code: 'METHOD_NOT_ALLOWED' } });
    });
  });

  describe('assets', () => {
    it.each(['/.secret', '/../renderer/index.html', '/%2e%2e/renderer/index.html', '/nope.js'])(
      'does not serve %s',
      async (pathname) => {
        const answer = await send(host.port, pathname, bearer);
        expect(answer.status).toBe(404);
        expect(answer.body).not.toContain('dotfiles');
      },
    );

    it('refuses writes to assets with 405', async () => {
      const answer = await send(host.port, '/index.html', bearer, 'PUT');
      expect(answer.status).toBe(405);
    });
  });

  it.each([
    ['a 401', '/api/status', false],
    ['a 200 page', '/', false],
    ['a 200 API reply', '/api/status', true],
    ['a 404', '/nope', false],
  ])('sends the security headers on %s', async (_when, pathname, signedIn) => {
    const answer = await send(host.port, pathname, signedIn ? bearer : {});
    expect(answer.headers['content-security-policy']).toContain(
      "default-src 'self'; script-src 'self'; object-src 'none'; frame-ancestors 'none'",
    );
    expect(answer.headers['x-content-type-options']).toBe('nosniff');
    expect(answer.headers['referrer-policy']).toBe('no-referrer');
    expect(answer.headers['cache-control']).toBe('no-store');
  });
});

describe('when the handlers fail', () => {
  let host: OperatorHttpHost | undefined;
  afterEach(async () => {
    await host?.close();
    host = undefined;
  });

  /** A broker whose status is scripted; every other method would be a test bug, so it throws. */
  async function hostFor(scripted: Pick<OperatorBroker, 'status'>): Promise<OperatorHttpHost> {
    const broker = Object.fromEntries(
      brokerApiMethods.map((m) => [
        m,
        () => {
          throw new Error(`unexpected ${m}`);
        },
      ]),
    );
    host = await startOperatorHttpHost({
      handlers: createOperatorHandlers({ ...broker, ...scripted } as OperatorBroker),
      // No vault: only reads are asked here, and a decision would be refused.
      proof: createWebProof({
        vault: { state: () => 'uninitialized', verifyPassphrase: () => Promise.resolve(false) },
        passphraseSource: createPassphraseSource(false),
        clock: systemClock,
      }),
      rendererDir,
      port: 0,
    });
    return host;
  }

  it('reports a bug as INTERNAL without its message', async () => {
    const h = await hostFor({
      status: () => {
        throw new Error('secret detail');
      },
    });
    const answer = await send(h.port, '/api/status', await signIn(h));
    expect(answer.status).toBe(500);
    expect(JSON.parse(answer.body)).toMatchObject({ ok: false, error: { code: 'INTERNAL' } });
    expect(answer.body).not.toContain('secret detail');
  });

  it('passes a coded operating error through with its code and field', async () => {
    const h = await hostFor({
      status: (): BrokerStatus => {
        throw new CodedError('JOURNAL_UNAVAILABLE', 'journal failed', { field: 'journal' });
      },
    });
    const answer = await send(h.port, '/api/status', await signIn(h));
    expect(answer.status).toBe(409);
    expect(JSON.parse(answer.body)).toEqual({
      ok: false,
      error: { code: 'JOURNAL_UNAVAILABLE', message: 'journal failed', field: 'journal' },
    });
  });
});

describe('when the renderer is not built', () => {
  it('says so on the page with 503 and still serves the API', async () => {
    const runtime = await runtimeFor({ mode: 'headless', version: '1', startedAtMs: 0 });
    const host = await startOperatorHttpHost({
      handlers: createOperatorHandlers(runtime.broker),
      proof: proofOf(runtime),
      rendererDir: path.join(scratch, 'missing'),
      port: 0,
    });
    try {
      expect(host.rendererBuilt).toBe(false);
      const auth = await signIn(host);
      const page = await send(host.port, '/', auth);
      expect(page.status).toBe(503);
      expect(page.body).toContain('RENDERER_NOT_BUILT');
      expect((await send(host.port, '/api/status', auth)).status).toBe(200);
    } finally {
      await host.close();
    }
  });
});

/** Binds `options` with a plain server: the bound server, or the bind's error code. */
function tryBind(options: { port: number; host: string; ipv6Only?: boolean }): Promise<NetServer | string> {
  const server = createNetServer();
  return new Promise((resolve) => {
    server.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? String(error)));
    server.listen(options, () => resolve(server));
  });
}
const closeNet = (server: NetServer): Promise<void> => new Promise((resolve) => server.close(() => resolve()));

describe("when another program tries to serve a look-alike page on the host's port (localhost on ::1)", () => {
  let host: OperatorHttpHost;
  let ipv6Loopback = false;
  beforeAll(async () => {
    const probe = await tryBind({ port: 0, host: '::1', ipv6Only: true });
    ipv6Loopback = typeof probe !== 'string';
    if (typeof probe !== 'string') await closeNet(probe);
    const runtime = await runtimeFor({ mode: 'headless', version: '1', startedAtMs: 0 });
    host = await startOperatorHttpHost({
      handlers: createOperatorHandlers(runtime.broker),
      proof: proofOf(runtime),
      rendererDir,
      port: 0,
    });
  });
  afterAll(() => host.close());
  const needsIpv6 = (ctx: { skip: (note: string) => void }): boolean => {
    if (!ipv6Loopback) ctx.skip('skipped: this machine has no IPv6 loopback (::1), so no program can bind it either');
    return ipv6Loopback;
  };

  it('no program can bind the port on ::1, on [::] IPv6-only, or on any IPv4 or dual-stack address', async (ctx) => {
    if (!needsIpv6(ctx)) return;
    for (const attempt of [
      { port: host.port, host: '::1', ipv6Only: true },
      { port: host.port, host: '::', ipv6Only: true },
      { port: host.port, host: '::' },
      { port: host.port, host: '0.0.0.0' },
      { port: host.port, host: '127.0.0.1' },
    ]) {
      const bound = await tryBind(attempt);
      if (typeof bound !== 'string') await closeNet(bound);
      expect({ ...attempt, bound: typeof bound === 'string' ? bound : 'bound' }).toEqual({
        ...attempt,
        bound: 'EADDRINUSE',
      });
    }
  });

  it('answers localhost:PORT on ::1 itself, with every check it runs on 127.0.0.1', async (ctx) => {
    if (!needsIpv6(ctx)) return;
    const viaV6 = (pathname: string, headers: Record<string, string>, method = 'GET', body?: string) =>
      new Promise<Answer>((resolve, reject) => {
        const req = request(
          { host: '::1', family: 6, port: host.port, path: pathname, method, headers, agent: false },
          (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (chunk: Buffer) => chunks.push(chunk));
            res.on('end', () =>
              resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString() }),
            );
          },
        );
        req.on('error', reject);
        req.end(body);
      });
    const local = { Host: `localhost:${host.port}` };
    expect((await viaV6('/', local)).body).toContain('<title>Postern</title>');
    expect((await viaV6('/api/status', local)).status).toBe(401);
    const rebound = await viaV6('/api/status', { Host: `evil.example:${host.port}` });
    expect(rebound.status).toBe(421);
    expect(JSON.parse(rebound.body)).toMatchObject({ ok: false, error: { code: 'HOST_NOT_ALLOWED' } });
    const json = { ...local, 'Content-Type': 'application/json' };
    const signedIn = await viaV6(
      sessionPath,
      json,
      'POST',
      JSON.stringify({ token: host.token, code: host.signInCode }),
    );
    expect(signedIn.status).toBe(200);
    const session = (JSON.parse(signedIn.body) as { value: { session: string } }).value.session;
    const status = await viaV6('/api/status', { ...local, Authorization: `Bearer ${session}` });
    expect(status.status).toBe(200);
  });

  it('refuses to start on a port another program holds on ::1 (EADDRINUSE naming ::1) and releases 127.0.0.1', async (ctx) => {
    if (!needsIpv6(ctx)) return;
    const squatter = await tryBind({ port: 0, host: '::1', ipv6Only: true });
    if (typeof squatter === 'string') throw new Error(`could not bind ::1: ${squatter}`);
    const port = (squatter.address() as AddressInfo).port;
    try {
      const runtime = await runtimeFor({ mode: 'headless', version: '1', startedAtMs: 0 });
      await expect(
        startOperatorHttpHost({
          handlers: createOperatorHandlers(runtime.broker),
          proof: proofOf(runtime),
          rendererDir,
          port,
        }),
      ).rejects.toMatchObject({ code: 'EADDRINUSE', address: '::1' });
      const v4 = await tryBind({ port, host: '127.0.0.1' });
      expect(typeof v4).not.toBe('string');
      if (typeof v4 !== 'string') await closeNet(v4);
    } finally {
      await closeNet(squatter);
    }
  });

  it('lets both loopbacks go when it closes', async (ctx) => {
    if (!needsIpv6(ctx)) return;
    const runtime = await runtimeFor({ mode: 'headless', version: '1', startedAtMs: 0 });
    const short = await startOperatorHttpHost({
      handlers: createOperatorHandlers(runtime.broker),
      proof: proofOf(runtime),
      rendererDir,
      port: 0,
    });
    await short.close();
    for (const address of ['::1', '127.0.0.1']) {
      const bound = await tryBind({ port: short.port, host: address, ipv6Only: address === '::1' });
      expect(typeof bound).not.toBe('string');
      if (typeof bound !== 'string') await closeNet(bound);
    }
  });
});

describe('when the host closes', () => {
  async function startHost(): Promise<OperatorHttpHost> {
    const runtime = await runtimeFor({ mode: 'headless', version: '1', startedAtMs: 0 });
    return startOperatorHttpHost({
      handlers: createOperatorHandlers(runtime.broker),
      proof: proofOf(runtime),
      rendererDir,
      port: 0,
    });
  }
  const elapsedMs = (since: bigint): number => Number(process.hrtime.bigint() - since) / 1e6;

  it('closes idle keep-alive connections at once and refuses new ones', async () => {
    const host = await startHost();
    const agent = new Agent({ keepAlive: true });
    const answer = await new Promise<number>((resolve, reject) => {
      request(
        { host: '127.0.0.1', port: host.port, path: '/', agent, headers: { Host: `127.0.0.1:${host.port}` } },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      )
        .on('error', reject)
        .end();
    });
    expect(answer).toBe(200);
    const closing = process.hrtime.bigint();
    await host.close();
    expect(elapsedMs(closing)).toBeLessThan(closeGraceMs);
    await expect(send(host.port, '/')).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    agent.destroy();
  });

  it('does not let a connection that never sends a request hold the close beyond its grace period', async () => {
    const host = await startHost();
    const silent = connect(host.port, '127.0.0.1');
    await new Promise<void>((resolve) => silent.once('connect', () => resolve()));
    const closed = new Promise<void>((resolve) => silent.once('close', () => resolve()));
    const closing = process.hrtime.bigint();
    await host.close();
    await closed;
    // Bounded by closeGraceMs, far below the 10 s headers timeout that would otherwise end it.
    expect(elapsedMs(closing)).toBeGreaterThanOrEqual(closeGraceMs - 50);
    expect(elapsedMs(closing)).toBeLessThan(operatorHttpLimits.headersTimeoutMs);
  });

  it('does not let a connection on ::1 that trickles a header hold the close beyond its grace period', async (ctx) => {
    const probe = await tryBind({ port: 0, host: '::1', ipv6Only: true });
    if (typeof probe === 'string') {
      ctx.skip('skipped: this machine has no IPv6 loopback (::1)');
      return;
    }
    await closeNet(probe);
    const host = await startHost();
    const slow = connect({ host: '::1', port: host.port });
    await new Promise<void>((resolve) => slow.once('connect', () => resolve()));
    slow.write(`GET / HTTP/1.1\r\nHost: localhost:${host.port}\r\n`);
    const trickle = setInterval(() => slow.write('X-a: b\r\n'), 300);
    const closed = new Promise<void>((resolve) => slow.once('close', () => resolve()));
    slow.on('error', () => undefined);
    try {
      const closing = process.hrtime.bigint();
      await host.close();
      await closed;
      expect(elapsedMs(closing)).toBeLessThan(closeGraceMs + 1_000);
    } finally {
      clearInterval(trickle);
      slow.destroy();
    }
  });

  it('refuses to start on a port that is taken, with the listen error', async () => {
    const runtime = await runtimeFor({ mode: 'headless', version: '1', startedAtMs: 0 });
    const first = await startOperatorHttpHost({
      handlers: createOperatorHandlers(runtime.broker),
      proof: proofOf(runtime),
      rendererDir,
      port: 0,
    });
    try {
      await expect(
        startOperatorHttpHost({
          handlers: createOperatorHandlers(runtime.broker),
          proof: proofOf(runtime),
          rendererDir,
          port: first.port,
        }),
      ).rejects.toMatchObject({
        code: 'EADDRINUSE',
      });
    } finally {
      await first.close();
    }
  });
});

/** The runtime's own web proof (its vault, its from-file latch), as the daemon builds it. */
function proofOf(runtime: BrokerRuntime): WebProof {
  return webProofFor(runtime, systemClock);
}
