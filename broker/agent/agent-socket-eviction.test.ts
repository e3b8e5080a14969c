import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ToolAnswer } from '../ports/index.js';
import { SocketClientTransport } from '../sdk/socket-client-transport.js';
import { connectRawLines, initializeFrame, type RawLineClient } from '../testing/malformed-mcp.js';
import { envelopeAnswer, scriptedEnvelope, ScriptedAgentBackend } from '../testing/scripted-agent-backend.js';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import { agentLimitsDefault, type AgentLimits } from './agent-limits.js';
import { startAgentSocket, type AgentSocket } from './agent-socket.js';

let dir: TempDir;
let backend: ScriptedAgentBackend;
const open: { close(): Promise<void> }[] = [];

beforeEach(() => {
  dir = createTempDir('postern-evict-');
  backend = new ScriptedAgentBackend();
});
afterEach(async () => {
  for (const item of open.splice(0).reverse()) await item.close().catch(() => undefined);
  dir.remove();
});

async function start(limits?: Partial<AgentLimits>): Promise<AgentSocket> {
  const socket = await startAgentSocket({ dataDir: dir.path, backend, ...(limits ? { limits } : {}) });
  open.push(socket);
  return socket;
}

/** A real MCP SDK client on the socket (no shim), with its transport (which keeps a connection-level error line). */
async function mcpClient(socketPath: string): Promise<{ client: Client; transport: SocketClientTransport }> {
  const client = new Client({ name: 'victim', version: '1.0.0' });
  const transport = new SocketClientTransport(socketPath);
  await client.connect(transport);
  open.push(client);
  return { client, transport };
}

async function rawClient(socketPath: string): Promise<RawLineClient> {
  const client = await connectRawLines(socketPath);
  open.push({ close: async () => client.destroy() });
  return client;
}

async function initializedRaw(socketPath: string): Promise<RawLineClient> {
  const client = await rawClient(socketPath);
  client.send(initializeFrame(0));
  expect(await client.nextMessage()).toMatchObject({ id: 0, result: { serverInfo: { name: 'postern' } } });
  return client;
}

/** A wait on an event, bounded: a defence that fails should fail the test quickly, not time it out. */
async function within<T>(promise: Promise<T>, what: string, ms = 10_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: nothing within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The reviewer's attack, as a separate process (its own pid, so its own session): open `count` connections,
 * initialize each, then ping every 20 ms on each so they are never the least recently active, and reopen
 * every connection the broker closes (at most reconnectsMax times). Reports on stdout, one JSON line each.
 */
const hogScript = `
import net from 'node:net';
const [socketPath, countText] = process.argv.slice(2);
const count = Number(countText);
const reconnectsMax = 200;
let ready = 0, reconnects = 0, evictedNotices = 0, refusals = 0;
const report = () => process.stdout.write(JSON.stringify({ ready: ready === count, reconnects, evictedNotices, refusals }) + '\\n');
const line = (m) => JSON.stringify(m) + '\\n';
function connect(first) {
  const s = net.createConnection(socketPath);
  let buffered = '', initialized = false;
  s.setEncoding('utf8');
  s.on('connect', () => s.write(line({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {
    protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'hog', version: '1' } } })));
  s.on('data', (text) => {
    buffered += text;
    for (let nl = buffered.indexOf('\\n'); nl >= 0; nl = buffered.indexOf('\\n')) {
      const m = JSON.parse(buffered.slice(0, nl));
      buffered = buffered.slice(nl + 1);
      if (m.id === 1 && m.result !== undefined && !initialized) {
        initialized = true;
        s.write(line({ jsonrpc: '2.0', method: 'notifications/initialized' }));
        if (first && (ready += 1) === count) report();
      }
      if (m.id === null && m.error?.data?.code === 'CONNECTION_EVICTED') evictedNotices += 1;
      if (m.id === null && m.error?.data?.code === 'RATE_LIMITED') refusals += 1;
    }
  });
  const pinger = setInterval(() => initialized && s.write(line({ jsonrpc: '2.0', id: 'p', method: 'ping' })), 20);
  s.on('error', () => {});
  s.on('close', () => {
    clearInterval(pinger);
    if (reconnects >= reconnectsMax) return;
    reconnects += 1;
    report();
    connect(false);
  });
}
for (let i = 0; i < count; i += 1) connect(true);
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
setTimeout(() => process.exit(0), 60_000);
`;

interface HogReport {
  ready: boolean;
  reconnects: number;
  evictedNotices: number;
  refusals: number;
}

function startHog(socketPath: string, count: number): { until(test: (r: HogReport) => boolean): Promise<HogReport> } {
  const file = path.join(dir.path, 'hog.mjs');
  writeFileSync(file, hogScript);
  const child: ChildProcess = spawn(process.execPath, [file, socketPath, String(count)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  open.push({
    close: async () => {
      child.kill('SIGKILL');
      await exited;
    },
  });
  let latest: HogReport = { ready: false, reconnects: 0, evictedNotices: 0, refusals: 0 };
  const waiters: { test: (r: HogReport) => boolean; resolve: (r: HogReport) => void }[] = [];
  let buffered = '';
  child.stdout?.setEncoding('utf8').on('data', (text: string) => {
    buffered += text;
    for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
      latest = JSON.parse(buffered.slice(0, nl)) as HogReport;
      buffered = buffered.slice(nl + 1);
      for (const waiter of waiters.splice(0)) {
        if (waiter.test(latest)) waiter.resolve(latest);
        else waiters.push(waiter);
      }
    }
  });
  return {
    until: (test) =>
      test(latest)
        ? Promise.resolve(latest)
        : within(
            Promise.race([
              new Promise<HogReport>((resolve) => waiters.push({ test, resolve })),
              exited.then(() => Promise.reject(new Error(`the hog exited; last report ${JSON.stringify(latest)}`))),
            ]),
            `the hog report awaited (last: ${JSON.stringify(latest)})`,
          ),
  };
}

describe('when another process holds every agent connection, idle but pinging, and reopens each one closed', () => {
  it('a new agent still gets in, stays in while the hog fights back, and each evicted hog connection is told why', async () => {
    const socket = await start();
    const hog = startHog(socket.path, agentLimitsDefault.connectionsPerUidMax);
    await hog.until((r) => r.ready);

    const { client, transport } = await mcpClient(socket.path);
    let victimClosed = false;
    const victimGone = new Promise<never>((_resolve, reject) => {
      client.onclose = () => {
        victimClosed = true;
        reject(new Error(`the victim's connection was closed (${JSON.stringify(transport.refusal)})`));
      };
    });
    victimGone.catch(() => undefined);
    expect(transport.refusal).toBeUndefined();
    const first = await client.callTool({ name: 'list_routes', arguments: {} });
    expect(first.isError).toBe(false);

    // The hog reopens what it lost, again and again, each time needing a connection to evict; the victim
    // is idle all along (the least recently active connection there is) and holds fewer than the hog.
    const fought = await Promise.race([hog.until((r) => r.reconnects >= 50), victimGone]);
    const again = await client.callTool({ name: 'list_routes', arguments: {} });
    expect(again.isError).toBe(false);
    expect(victimClosed).toBe(false);
    expect(transport.refusal).toBeUndefined();
    // Each hog connection the broker closed was told why before the close (the line, then the close). A connection
    // whose reader does not take the line within evictedDrainMs is cut off without it — on a loaded machine (the full
    // suite beside this test) the hog's own loop can be that late once or twice in fifty.
    expect(fought.evictedNotices).toBeGreaterThanOrEqual(fought.reconnects - 3);
    expect(fought.refusals).toBe(0);
    const victimSession = backend.sessionsOpened.find((s) => s.client.name === 'victim')?.session_id;
    expect(victimSession).toBeDefined();
    expect(backend.disconnected).not.toContain(victimSession);
  });
});

describe('when every connection but one has a call in flight', () => {
  it('evicts only idle connections, never one whose call is waiting, and refuses when all are busy', async () => {
    const socket = await start({ connectionsPerUidMax: 2 });
    const releases: ((answer: ToolAnswer) => void)[] = [];
    backend.respond = () => new Promise<ToolAnswer>((resolve) => releases.push(resolve));

    // A: a call waiting on a person (say) — and A is the least recently active connection from here on.
    const { client: a } = await mcpClient(socket.path);
    const answered = a.callTool({ name: 'http_request', arguments: { route: 'github' } });
    const waiting = await backend.nextCall();
    const b = await initializedRaw(socket.path);

    // C arrives at the cap: B (idle) goes, A (busy, and less recently active) stays.
    const c = await initializedRaw(socket.path);
    expect(await within(b.nextMessage(), 'B evicted')).toMatchObject({
      id: null,
      error: { data: { code: 'CONNECTION_EVICTED' } },
    });
    await b.closed;
    expect(waiting.signal.aborted).toBe(false);

    // C starts a call too; now nothing may go, so a newcomer is refused, coded.
    c.send(
      JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'ssh_exec', arguments: {} } }),
    );
    await within(backend.nextCall(), "C's call");
    const d = await rawClient(socket.path);
    expect(await within(d.nextMessage(), 'D refused')).toMatchObject({
      id: null,
      error: { code: -32000, data: { code: 'RATE_LIMITED' } },
    });
    await d.closed;

    // A's call was never disturbed: it is answered on its own connection when the backend answers.
    expect(waiting.signal.aborted).toBe(false);
    releases[0]?.(envelopeAnswer(scriptedEnvelope('act_waited')));
    const result = await answered;
    expect(result.isError).toBe(false);
    expect(result.structuredContent).toMatchObject({ invocation_id: 'act_waited' });
    expect(backend.disconnected).toEqual([]);
    releases[1]?.(envelopeAnswer(scriptedEnvelope('act_c')));
    expect(await c.nextMessage()).toMatchObject({ id: 5, result: { structuredContent: { invocation_id: 'act_c' } } });
  });

  it('tells an evicted MCP client why (id-null error, CONNECTION_EVICTED) and its session goes on when it reconnects', async () => {
    const socket = await start({ connectionsPerUidMax: 2 });
    const { client: first, transport } = await mcpClient(socket.path);
    const closedFirst = new Promise<void>((resolve) => (first.onclose = () => resolve()));
    const other = await mcpClient(socket.path);
    await other.client.listTools();
    // A third connection: the first is the least recently active idle one.
    await initializedRaw(socket.path);
    await within(closedFirst, 'the first connection evicted');
    expect(transport.refusal).toEqual({
      code: 'CONNECTION_EVICTED',
      message: expect.stringContaining('it had no call in progress, so nothing was lost: reconnect to go on'),
    });
    // The process's other connection kept the session; a new connection is the same session.
    expect(backend.disconnected).toEqual([]);
    const { client: back } = await mcpClient(socket.path);
    expect((await back.callTool({ name: 'list_routes', arguments: {} })).isError).toBe(false);
    const sessions = new Set(backend.sessionsOpened.map((s) => s.session_id));
    expect(sessions.size).toBe(1);
  });
});
