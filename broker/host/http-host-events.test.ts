import { mkdtempSync, rmSync } from 'node:fs';
import { webProofFor } from './web-proof.js';
import { request, type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../ports/index.js';
import { openVault } from '../vault/index.js';
import { createBrokerRuntime, type BrokerRuntime } from './broker-runtime.js';
import {
  closeGraceMs,
  eventsPath,
  operatorHttpLimits,
  sessionPath,
  startOperatorHttpHost,
  type OperatorHttpHost,
  type OperatorHttpLimits,
} from './http-host.js';
import { createOperatorHandlers } from './operator-handlers.js';

const waitMsMax = 5_000;
const scratch = mkdtempSync(path.join(os.tmpdir(), 'postern-events-'));
const passphrase = 'events test passphrase';
let runtime: BrokerRuntime;
const hosts: OperatorHttpHost[] = [];

beforeAll(async () => {
  const vault = await openVault({ dataDir: scratch, clock: systemClock, kdf: 'min' });
  await vault.init(Buffer.from(passphrase));
  await vault.close();
  runtime = await createBrokerRuntime({
    dataDir: scratch,
    mode: 'headless',
    version: '0.0.0-test',
    startedAtMs: 1,
    vaultKdf: 'min',
    vaultPassphrase: Buffer.from(passphrase),
    logger: pino({ level: 'silent' }),
  });
});
afterAll(async () => {
  for (const host of hosts) await host.close();
  await runtime.close();
  rmSync(scratch, { recursive: true, force: true });
});

async function hostWith(
  limits: Partial<OperatorHttpLimits> = {},
  withFeed = true,
): Promise<{ host: OperatorHttpHost; bearer: Record<string, string> }> {
  const host = await startOperatorHttpHost({
    handlers: createOperatorHandlers(runtime.broker),
    proof: webProofFor(runtime, systemClock),
    rendererDir: path.join(scratch, 'no-renderer'),
    port: 0,
    limits,
    ...(withFeed ? { changes: runtime.changes } : {}),
  });
  hosts.push(host);
  const answer = await fetch(`${host.origin}${sessionPath}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ token: host.token, code: host.signInCode }),
  });
  const reply = (await answer.json()) as { ok: boolean; value: { session: string } };
  if (!reply.ok) throw new Error(`sign-in refused: ${answer.status}`);
  return { host, bearer: { Authorization: `Bearer ${reply.value.session}` } };
}

/** One GET /api/events over a real socket: everything it received, and ways to wait on it (bounded, no sleeps). */
interface Stream {
  status: number;
  headers: IncomingHttpHeaders;
  text(): string;
  /** Resolves once the received text satisfies `check`; rejects after waitMsMax. */
  until(check: (text: string) => boolean, what: string): Promise<string>;
  ended: Promise<void>;
  close(): void;
}

function openStream(port: number, headers: Record<string, string> = {}, method = 'GET'): Promise<Stream> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path: eventsPath,
        method,
        headers: { Host: `127.0.0.1:${port}`, ...headers },
        agent: false,
      },
      (res: IncomingMessage) => {
        let received = '';
        const waiters = new Set<() => void>();
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          received += chunk;
          for (const waiter of [...waiters]) waiter();
        });
        const ended = new Promise<void>((done) => res.once('close', () => done()));
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          text: () => received,
          ended,
          close: () => req.destroy(),
          until: (check, what) =>
            new Promise((found, failed) => {
              const timer = setTimeout(() => {
                waiters.delete(look);
                failed(new Error(`no ${what} within ${waitMsMax} ms; received ${JSON.stringify(received)}`));
              }, waitMsMax);
              function look(): void {
                if (!check(received)) return;
                clearTimeout(timer);
                waiters.delete(look);
                found(received);
              }
              waiters.add(look);
              look();
            }),
        });
      },
    );
    req.on('error', reject);
    req.end();
  });
}

function notices(text: string): unknown[] {
  return text
    .split('\n')
    .filter((line) => line.startsWith('data: '))
    .map((line) => JSON.parse(line.slice('data: '.length)) as unknown);
}

async function waitUntil(check: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + waitMsMax;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`not ${what} within ${waitMsMax} ms`);
    await new Promise((resolve) => setImmediate(resolve));
  }
}

describe('GET /api/events', () => {
  it('without the session secret answers 401 with a coded JSON reply and no stream', async () => {
    const { host } = await hostWith();
    const stream = await openStream(host.port);
    await stream.ended;
    expect(stream.status).toBe(401);
    expect(stream.headers['content-type']).toContain('application/json');
    expect(JSON.parse(stream.text())).toEqual({
      ok: false,
      error: { code: 'UNAUTHENTICATED', message: expect.any(String) },
    });
    expect(host.eventStreams()).toBe(0);
  });

  it('with a wrong secret, or a method other than GET, opens no stream either', async () => {
    const { host, bearer } = await hostWith();
    const wrong = await openStream(host.port, { Authorization: `${bearer['Authorization'] ?? ''}x` });
    const posted = await openStream(host.port, bearer, 'POST');
    await Promise.all([wrong.ended, posted.ended]);
    expect([wrong.status, posted.status]).toEqual([401, 405]);
    expect(posted.headers['allow']).toBe('GET');
  });

  it('streams a notice after a journal append: position and topics only, never the subject; with the security headers', async () => {
    const { host, bearer } = await hostWith();
    const stream = await openStream(host.port, bearer);
    expect(stream.status).toBe(200);
    expect(stream.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    expect(stream.headers['content-security-policy']).toContain("default-src 'self'");
    expect(stream.headers['x-content-type-options']).toBe('nosniff');
    expect(stream.headers['cache-control']).toBe('no-store');
    await stream.until((text) => text.includes(': ready'), 'ready comment');
    const sessionId = 'ses_liveevents01';
    const appended = await runtime.journal.appendSession({
      kind: 'SESSION_STARTED',
      action_id: sessionId,
      payload: {
        pid: 4242,
        uid: 1000,
        start_time: '424200',
        ppid: 1,
        exe: '/usr/bin/node',
        cwd: '/tmp',
        parent_exe: null,
        client_name: 'events-test',
        client_version: '1',
      },
    });
    await stream.until((text) => notices(text).length > 0, 'notice');
    expect(notices(stream.text())).toEqual([
      { seq: appended.event.seq, topics: ['approvals', 'sessions', 'activity'] },
    ]);
    expect(stream.text()).not.toContain(sessionId);
    expect(stream.text()).not.toContain('events-test');
    stream.close();
  });

  it('streams a vault notice when the vault locks and unlocks; the unlock also names what shows a session record', async () => {
    const { host, bearer } = await hostWith();
    const stream = await openStream(host.port, bearer);
    await stream.until((text) => text.includes(': ready'), 'ready comment');
    runtime.vault.lock('operator');
    await stream.until((text) => notices(text).length > 0, 'lock notice');
    await runtime.vault.unlock(Buffer.from(passphrase));
    await stream.until((text) => notices(text).length > 1, 'unlock notice');
    // After an unlock an earlier run's sessions can be confirmed from their events, which commits nothing: the views
    // showing a session's record read again.
    expect(notices(stream.text())).toEqual([
      expect.objectContaining({ topics: ['vault'] }),
      expect.objectContaining({ topics: ['approvals', 'sessions', 'vault', 'credential_requests'] }),
    ]);
    expect(stream.text()).not.toContain(passphrase);
    stream.close();
  });

  it('sends a heartbeat comment line while nothing changes', async () => {
    const { host, bearer } = await hostWith({ eventHeartbeatMs: 30 });
    const stream = await openStream(host.port, bearer);
    await stream.until((text) => text.split(': \n\n').length > 2, 'two heartbeats');
    expect(notices(stream.text())).toEqual([]);
    stream.close();
  });

  it('ends every stream when the host closes, without waiting out the grace period', async () => {
    const { host, bearer } = await hostWith();
    const stream = await openStream(host.port, bearer);
    await stream.until((text) => text.includes(': ready'), 'ready comment');
    expect(host.eventStreams()).toBe(1);
    const started = Date.now();
    await host.close();
    await stream.ended;
    expect(Date.now() - started).toBeLessThan(closeGraceMs);
    expect(host.eventStreams()).toBe(0);
  });

  it('holds at most eventStreamsMax streams (503 EVENT_STREAMS_LIMIT beyond), frees a place when one ends, and stays under the connection cap', async () => {
    const { host, bearer } = await hostWith({ eventStreamsMax: 2, connectionsMax: 4 });
    const first = await openStream(host.port, bearer);
    const second = await openStream(host.port, bearer);
    const third = await openStream(host.port, bearer);
    await third.ended;
    expect([first.status, second.status, third.status]).toEqual([200, 200, 503]);
    expect(JSON.parse(third.text())).toMatchObject({ ok: false, error: { code: 'EVENT_STREAMS_LIMIT' } });
    // The operator's ordinary calls still get through beside the held streams.
    expect((await fetch(`${host.origin}/api/status`, { headers: bearer })).status).toBe(200);
    first.close();
    await waitUntil(() => host.eventStreams() === 1, 'one stream left');
    const again = await openStream(host.port, bearer);
    expect(again.status).toBe(200);
    expect(host.connections().open).toBeLessThanOrEqual(4);
    second.close();
    again.close();
  });

  it('is a 404 on a host started without a change feed', async () => {
    const { host, bearer } = await hostWith({}, false);
    const stream = await openStream(host.port, bearer);
    await stream.ended;
    expect(stream.status).toBe(404);
  });

  it('keeps its bounds inside the connection cap by default', () => {
    expect(operatorHttpLimits.eventStreamsMax).toBeLessThan(operatorHttpLimits.connectionsMax / 2);
    expect(operatorHttpLimits.eventHeartbeatMs).toBeLessThan(operatorHttpLimits.idleTimeoutMs);
  });
});
