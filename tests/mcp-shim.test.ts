import { spawn } from 'node:child_process';
import { mkdirSync, statSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startAgentSocket, type AgentSocket } from '../broker/agent/index.js';
import { jsonRpcCode, jsonRpcErrorLine } from '../broker/agent/jsonrpc-error.js';
import { agentSocketPath } from '../broker/agent/socket-path.js';
import { connectRawLines, initializeFrame } from '../broker/testing/malformed-mcp.js';
import { holdUntilAborted, ScriptedAgentBackend } from '../broker/testing/scripted-agent-backend.js';
import { createTempDir, type TempDir } from '../broker/testing/temp-dir.js';
import { posternBin, repoRoot } from './support/postern-process.js';

/**
 * `postern mcp` end to end: the MCP SDK's own StdioClientTransport launches the real shim
 * (`node bin/postern.mjs mcp --data-dir X`), which pipes to a socket started here with the
 * scripted backend.
 */
let dir: TempDir;
let backend: ScriptedAgentBackend;
let socket: AgentSocket | undefined;

beforeEach(async () => {
  dir = createTempDir('postern-shim-');
  backend = new ScriptedAgentBackend();
  socket = await startAgentSocket({ dataDir: dir.path, backend });
});
afterEach(async () => {
  await socket?.close();
  dir.remove();
});

function shimTransport(dataDir: string, extra: readonly string[] = []): StdioClientTransport {
  return new StdioClientTransport({
    command: process.execPath,
    args: [posternBin, 'mcp', '--data-dir', dataDir, ...extra],
    cwd: repoRoot,
    stderr: 'pipe',
  });
}

/** The shim as a plain child with its exit code, for the cases an MCP client cannot show. */
function spawnShim(dataDir: string, extra: readonly string[] = []) {
  const child = spawn(process.execPath, [posternBin, 'mcp', '--data-dir', dataDir, ...extra], {
    cwd: repoRoot,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  let stdout = '';
  child.stderr.setEncoding('utf8').on('data', (text: string) => (stderr += text));
  const lines = createInterface({ input: child.stdout });
  const firstLine = new Promise<string>((resolve) => lines.once('line', resolve));
  lines.on('line', (line) => (stdout += `${line}\n`));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, firstLine, exited, stderr: () => stderr, stdout: () => stdout };
}

describe('when an MCP client launches postern mcp', () => {
  it('lists and calls tools through the shim, and the broker identifies the agent behind the shim', async () => {
    const client = new Client({ name: 'shim-test', version: '1' });
    const transport = shimTransport(dir.path);
    await client.connect(transport);
    try {
      const { tools } = await client.listTools();
      expect(tools.map((tool) => tool.name)).toEqual([
        'http_request',
        'ssh_exec',
        'action_status',
        'fetch_result',
        'cancel_action',
        'list_routes',
        'request_credential',
      ]);
      const result = await client.callTool({
        name: 'http_request',
        arguments: { route: 'github', method: 'GET', path: '/' },
      });
      expect(result.isError).toBe(false);
      expect(result.structuredContent).toMatchObject({
        invocation_id: expect.stringMatching(/^act_/),
        response: { status: 200 },
      });
      const refused = await client.callTool({ name: 'approve', arguments: { ticket: 1 } });
      expect(refused.structuredContent).toMatchObject({ error: { code: 'OPERATOR_ONLY' } });
      const peer = backend.sessionsOpened[0]?.peer;
      // The connecting process is the shim, a child of this test process: the session is this process (the MCP client).
      expect(transport.pid).not.toBe(process.pid);
      expect(peer?.pid).toBe(process.pid);
      expect(peer?.ppid).toBe(process.ppid);
      expect(peer?.exe).toBe(process.execPath);
    } finally {
      await client.close();
    }
  });

  it('carries a cancellation through to the backend as "cancelled"', async () => {
    backend.respond = holdUntilAborted;
    const client = new Client({ name: 'shim-cancel', version: '1' });
    await client.connect(shimTransport(dir.path));
    try {
      const controller = new AbortController();
      const pending = client
        .callTool({ name: 'ssh_exec', arguments: { host: 'h', command: 'true' } }, undefined, {
          signal: controller.signal,
        })
        .catch(() => 'rejected');
      const call = await backend.nextCall();
      controller.abort();
      expect(await call.aborted).toBe('cancelled');
      expect(await pending).toBe('rejected');
    } finally {
      await client.close();
    }
  });

  it('exits 0 when the client closes stdin, and the session is reported disconnected', async () => {
    const shim = spawnShim(dir.path);
    shim.child.stdin.write(`${initializeFrame(1, 'raw-stdio')}\n`);
    expect(JSON.parse(await shim.firstLine)).toMatchObject({ id: 1, result: { serverInfo: { name: 'postern' } } });
    shim.child.stdin.end();
    expect(await shim.exited).toBe(0);
    expect(await backend.nextDisconnect()).toBe(backend.sessionsOpened[0]?.session_id);
    expect(shim.stderr()).toBe('');
  });

  it('with --reconnect-for 0, exits 0 when the broker goes away, with nothing but socket bytes on stdout', async () => {
    const shim = spawnShim(dir.path, ['--reconnect-for', '0']);
    shim.child.stdin.write(`${initializeFrame(1)}\n`);
    await shim.firstLine;
    await socket?.close();
    socket = undefined;
    expect(await shim.exited).toBe(0);
    for (const line of shim.stdout().trim().split('\n')) expect(JSON.parse(line)).toMatchObject({ jsonrpc: '2.0' });
  });
});

describe('when the client sends more than the shim keeps while the broker is away', () => {
  it('answers each request beyond 256 RATE_LIMITED at once, saying it was never sent, and sends the 256 kept once the broker is back', async () => {
    const client = new Client({ name: 'shim-overflow', version: '1' });
    const transport = shimTransport(dir.path);
    let stderr = '';
    transport.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    await client.connect(transport);
    try {
      await client.ping();
      await socket?.close();
      socket = undefined;
      await waitUntil('the shim saw the broker go', () => stderr.includes('reconnecting for up to'));
      // Pings: small answers (tools/list would have the SDK client compile every tool's schema for each answer).
      const sent = 300;
      const refused: unknown[] = [];
      const calls = Array.from({ length: sent }, () =>
        client.ping().then(
          () => 'answered',
          (error: unknown) => {
            refused.push(error);
            return 'refused';
          },
        ),
      );
      // The refusals come while the broker is still away: they are the shim's own, not a later broker's.
      await waitUntil('the requests beyond the bound were answered', () => refused.length === sent - 256);
      for (const error of refused) expect(error).toMatchObject({ code: -32_000, data: { code: 'RATE_LIMITED' } });
      expect(refused[0]).toBeInstanceOf(McpError);
      const message = (refused[0] as McpError).message;
      expect(message).toContain('256 requests or 16 MiB already wait in postern mcp, so this one was not kept');
      expect(message).toContain('it never reached the broker and nothing was recorded for it');
      expect(message).not.toContain('restart');
      socket = await startAgentSocket({ dataDir: dir.path, backend });
      const answers = await Promise.all(calls);
      expect(answers.filter((answer) => answer === 'answered')).toHaveLength(256);
      expect(refused).toHaveLength(sent - 256);
    } finally {
      await client.close();
    }
  });
});

/** Until `done` holds, polling (no sleep stands in for an event the test can see). */
async function waitUntil(what: string, done: () => boolean, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Rejects after `ms`, saying what did not happen (to race with what should). */
function failAfter(ms: number, what: string): Promise<never> {
  return new Promise((_resolve, reject) =>
    setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms).unref(),
  );
}

/**
 * A real agent socket that refuses every peer with PEER_REFUSED, as a broker does for another uid (admit-peer.ts):
 * told its own uid is another one, it sees this test's shim as a stranger.
 */
function refusingSocket(dataDir: string): Promise<AgentSocket> {
  return startAgentSocket({ dataDir, backend, ownUid: (process.getuid?.() ?? 0) + 1 });
}

describe('when the broker refuses this process itself (PEER_REFUSED)', () => {
  /** Far longer than any of these cases may take: the shim must stop at once, not when this runs out. */
  const reconnectForSeconds = 600;
  /** "At once", with room for a loaded 2-core machine: a shim that reconnects is still at it after this. */
  const promptlyMs = 15_000;
  const codedLine = (dataDir: string): string =>
    `postern: PEER_REFUSED: the broker for ${dataDir} refused this process's connection (this broker serves only ` +
    'processes of the user it runs as); it refuses it the same way every time, so postern mcp is not reconnecting';

  it('from its first connection: the shim exits 1 at once with the one coded line on stderr, nothing on stdout', async () => {
    await socket?.close();
    socket = await refusingSocket(dir.path);
    const startedAt = Date.now();
    const shim = spawnShim(dir.path, ['--reconnect-for', String(reconnectForSeconds)]);
    let timer: NodeJS.Timeout | undefined;
    const running = new Promise((resolve) => (timer = setTimeout(resolve, promptlyMs, 'still running')));
    const code = await Promise.race([shim.exited, running]);
    clearTimeout(timer);
    if (code === 'still running') shim.child.kill('SIGKILL');
    expect(code).toBe(1);
    expect(Date.now() - startedAt).toBeLessThan(promptlyMs);
    expect(shim.stdout()).toBe('');
    const lines = shim.stderr().trimEnd().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toBe(codedLine(dir.path));
  });

  it('after a restart, under a real MCP client: what waited is answered PEER_REFUSED and the shim stops at once', async () => {
    const transport = shimTransport(dir.path, ['--reconnect-for', String(reconnectForSeconds)]);
    let stderr = '';
    transport.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    let closedAt: number | undefined;
    const client = new Client({ name: 'shim-refused', version: '1' });
    client.onclose = () => (closedAt = Date.now());
    await client.connect(transport);
    try {
      expect((await client.listTools()).tools.length).toBeGreaterThan(0);
      await socket?.close();
      await waitUntil('the shim reconnecting', () => stderr.includes('reconnecting for up to'));
      // Sent while no broker listens: it waits in the shim for the next connection, which the new broker refuses.
      const waited = client.listTools().then(
        () => undefined,
        (error: unknown) => error,
      );
      const restartedAt = Date.now();
      socket = await refusingSocket(dir.path);
      const refused = await Promise.race([waited, failAfter(promptlyMs, 'the request waiting for the broker')]);
      expect(refused).toBeInstanceOf(McpError);
      expect(refused).toMatchObject({ code: -32_000, data: { code: 'PEER_REFUSED' } });
      expect((refused as McpError).message).toContain(
        'closed the connection before handling this request (PEER_REFUSED: this broker serves only processes',
      );
      expect((refused as McpError).message).toContain('postern mcp stopped: sent again, it would be refused');
      await waitUntil('the shim exiting', () => closedAt !== undefined, promptlyMs);
      expect((closedAt ?? Infinity) - restartedAt).toBeLessThan(promptlyMs);
      // Said once, coded; the notice of the refusal is that line, not a "reconnecting" one after it.
      const after = stderr.slice(stderr.indexOf('reconnecting for up to'));
      const lines = after.trimEnd().split('\n').slice(1);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toBe(codedLine(dir.path));
    } finally {
      await client.close();
    }
  });
});

describe('when the broker keeps refusing the shim with RATE_LIMITED (every connection busy)', () => {
  it('the refused reconnections do not restart --reconnect-for: the shim gives up with the coded line, exit 1', async () => {
    // A real agent socket whose per-user cap is one connection, held by a call that waits: every newcomer is refused.
    await socket?.close();
    socket = await startAgentSocket({ dataDir: dir.path, backend, limits: { connectionsPerUidMax: 1 } });
    backend.respond = holdUntilAborted;
    const holder = await connectRawLines(socket.path);
    try {
      holder.send(initializeFrame(0, 'holder'));
      await holder.nextMessage();
      holder.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      const call = { name: 'ssh_exec', arguments: { host: 'h', command: 'true' } };
      holder.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: call }));
      await backend.nextCall();

      const reconnectForSeconds = 2;
      const shim = spawnShim(dir.path, ['--reconnect-for', String(reconnectForSeconds)]);
      const exited = await Promise.race([shim.exited, failAfter(20_000, 'the shim giving up')]).finally(() =>
        shim.child.kill('SIGKILL'),
      );
      expect(exited).toBe(1);
      const lines = shim.stderr().trimEnd().split('\n');
      expect(lines.filter((line) => line.includes('reconnecting for up to'))).toHaveLength(1);
      expect(lines.at(-1)).toBe(
        `postern: RATE_LIMITED: gave up reconnecting after ${reconnectForSeconds} s: the broker refused the ` +
          'reconnection: at most 1 agent connections per user, and every one has a call in progress; retry later',
      );
      expect(shim.stdout()).toBe('');
    } finally {
      holder.destroy();
    }
  });
});

describe('when another agent takes the connections while the shim is away and keeps them busy (RATE_LIMITED)', () => {
  it('a real MCP client request that waited is answered RATE_LIMITED, saying nothing was recorded, when the shim gives up', async () => {
    // A real agent socket whose per-user cap is one connection: the shim's idle one, until another connection evicts it.
    await socket?.close();
    socket = await startAgentSocket({ dataDir: dir.path, backend, limits: { connectionsPerUidMax: 1 } });
    const reconnectForSeconds = 2;
    const transport = shimTransport(dir.path, ['--reconnect-for', String(reconnectForSeconds)]);
    let stderr = '';
    transport.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const client = new Client({ name: 'shim-crowded-out', version: '1' });
    await client.connect(transport);
    let holder: Awaited<ReturnType<typeof connectRawLines>> | undefined;
    try {
      expect((await client.listTools()).tools.length).toBeGreaterThan(0);
      backend.respond = holdUntilAborted;
      holder = await connectRawLines(socket.path);
      // The holder evicts the shim's idle connection and is busy at once (a call that waits): each of the shim's
      // reconnections is refused for as long as it holds it, the 100 ms before the first one included.
      const call = { name: 'ssh_exec', arguments: { host: 'h', command: 'true' } };
      holder.send(
        `${initializeFrame(0, 'holder')}\n${JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: call })}`,
      );
      await backend.nextCall();
      await waitUntil('the shim reconnecting', () => stderr.includes('reconnecting for up to'));
      // Sent while the shim is away: it waits in the shim, and every reconnection that could carry it is refused.
      const waited = await Promise.race([
        client.listTools().then(
          () => undefined,
          (error: unknown) => error,
        ),
        failAfter(20_000, 'the answer to the request that waited'),
      ]);
      expect(waited).toBeInstanceOf(McpError);
      expect(waited).toMatchObject({ code: -32_000, data: { code: 'RATE_LIMITED' } });
      const message = (waited as McpError).message;
      expect(message).toContain(
        "refused postern mcp's reconnection (RATE_LIMITED: at most 1 agent connections per user, and every one has " +
          `a call in progress; retry later) until its ${reconnectForSeconds} s reconnect window ran out`,
      );
      expect(message).toContain('never reached the broker, so nothing was recorded for it');
      expect(message).not.toContain('did not come back');
      expect(stderr.trimEnd().split('\n').at(-1)).toBe(
        `postern: RATE_LIMITED: gave up reconnecting after ${reconnectForSeconds} s: the broker refused the ` +
          'reconnection: at most 1 agent connections per user, and every one has a call in progress; retry later',
      );
    } finally {
      holder?.destroy();
      await client.close();
    }
  });
});

describe('when no broker listens', () => {
  /** The one coded line every command that only asks a broker prints (cli-program.ts reportError), for the shim's case. */
  const notRunning = (dataDir: string, socketPath: string, why: string): string =>
    `postern: NOT_FOUND --data-dir: no broker is running for ${dataDir} (nothing listens on ${socketPath}: ${why}; ` +
    `start one with: postern daemon --data-dir ${dataDir})`;

  it('says so in one coded stderr line naming the data directory and how to start the broker, and exits 1', async () => {
    const empty = createTempDir('postern-shim-empty-');
    try {
      const shim = spawnShim(empty.path);
      expect(await shim.exited).toBe(1);
      expect(shim.stdout()).toBe('');
      expect(shim.stderr()).toBe(`${notRunning(empty.path, agentSocketPath(empty.path), 'ENOENT')}\n`);
    } finally {
      empty.remove();
    }
  });

  it('a real MCP client launching it on a data directory that does not exist gets a clean close, the coded line on stderr, and nothing is created', async () => {
    const parent = createTempDir('postern-shim-nodir-');
    const missing = path.join(parent.path, 'nested', 'data');
    try {
      const transport = shimTransport(missing);
      let stderr = '';
      transport.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
      const exited = new Promise<number | null>((resolve) => {
        transport.onclose = () => resolve(null);
      });
      const client = new Client({ name: 'shim-nodir', version: '1' });
      const errors: unknown[] = [];
      client.onerror = (error) => errors.push(error);
      // stdout is the protocol channel: the client reads nothing there (no half answer, no human line), only the close.
      await expect(client.connect(transport)).rejects.toThrow(/Connection closed/);
      await exited;
      expect(errors).toEqual([]);
      expect(stderr).toBe(
        `postern: NOT_FOUND --data-dir: no data directory at ${missing}, so no broker is running for it ` +
          `(start one with: postern daemon --data-dir ${missing})\n`,
      );
      expect(() => statSync(path.dirname(missing))).toThrow();
    } finally {
      parent.remove();
    }
  });

  it('exits 1 with the coded line, and creates nothing, for a data directory that does not exist', async () => {
    const parent = createTempDir('postern-shim-nodir-');
    const missing = path.join(parent.path, 'nested');
    try {
      const shim = spawnShim(missing);
      expect(await shim.exited).toBe(1);
      expect(shim.stdout()).toBe('');
      expect(shim.stderr()).toContain(`postern: NOT_FOUND --data-dir: no data directory at ${missing}`);
      expect(() => statSync(missing)).toThrow();
    } finally {
      parent.remove();
    }
  });
});

/** A scripted broker's answer to the client's initialize request `id`: a server named postern offering tools. */
function initializeAnswer(id: string | number) {
  return {
    jsonrpc: '2.0',
    id,
    result: {
      protocolVersion: '2025-06-18',
      capabilities: { tools: {} },
      serverInfo: { name: 'postern', version: '0' },
    },
  };
}

/**
 * A broker that evicted the connection just before reading the client's request (the broker's pool decides on a
 * newcomer's arrival, and a request already sent but not yet read does not make the connection busy): scripted here,
 * since a real broker's order of the two is a race. It answers initialize, then answers the first other request with
 * the eviction line (the exact line mcp-connection.ts writes) and closes; a later connection is served normally.
 */
function evictingBroker(socketPath: string): Promise<Server> {
  let connections = 0;
  const server = createServer((conn) => {
    connections += 1;
    const evicts = connections === 1;
    const lines = createInterface({ input: conn });
    const send = (message: unknown): boolean => conn.write(`${JSON.stringify(message)}\n`);
    lines.on('line', (line) => {
      const message = JSON.parse(line) as { id?: string | number; method?: string };
      if (message.id === undefined) return;
      if (message.method === 'initialize') {
        send(initializeAnswer(message.id));
      } else if (evicts) {
        conn.end(
          jsonRpcErrorLine(
            null,
            jsonRpcCode.refused,
            'closed to make room for another agent connection',
            'CONNECTION_EVICTED',
          ),
        );
      } else {
        send({ jsonrpc: '2.0', id: message.id, result: { tools: [] } });
      }
    });
    conn.on('error', () => undefined);
  });
  mkdirSync(path.dirname(socketPath), { recursive: true, mode: 0o700 });
  return new Promise((resolve) => server.listen(socketPath, () => resolve(server)));
}

describe('when the broker evicts the connection with a request of the client unanswered', () => {
  it('answers that request with a JSON-RPC error coded CONNECTION_EVICTED saying it was not handled, and goes on', async () => {
    const scripted = createTempDir('postern-shim-evicting-');
    const server = await evictingBroker(agentSocketPath(scripted.path));
    const client = new Client({ name: 'shim-evicted-in-flight', version: '1' });
    const errors: unknown[] = [];
    client.onerror = (error) => errors.push(error);
    try {
      await client.connect(shimTransport(scripted.path));
      const refused = await client.listTools().then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(refused).toBeInstanceOf(McpError);
      expect(refused).toMatchObject({ code: -32_000, data: { code: 'CONNECTION_EVICTED' } });
      expect((refused as McpError).message).toContain(
        'closed the connection before handling this request (CONNECTION_EVICTED: closed to make room',
      );
      expect((refused as McpError).message).toContain('it recorded no action for it');
      expect((refused as McpError).message).not.toContain('restarted');
      // Sent again, it is answered on the shim's new connection.
      expect(await client.listTools()).toEqual({ tools: [] });
      expect(errors).toEqual([]);
    } finally {
      await client.close();
      await new Promise((resolve) => server.close(resolve));
      scripted.remove();
    }
  });
});

/**
 * A broker that serves the shim's first connection, drops it when told, and then answers the replayed initialize of
 * a later connection with `refusal` (scripted: today's broker answers every initialize and refuses the session's
 * calls instead). Until `arm()`, and on one connection after it, it closes a new connection at the replayed
 * initialize unanswered: the shim keeps reconnecting, and a request the client sent before `arm()` has been read into
 * the shim by the connection it is refused on (each reconnection waits its backoff after the close of the one before).
 */
function sessionRefusingBroker(socketPath: string, refusal: Record<string, unknown>) {
  let first: Socket | undefined;
  let armed = false;
  let unansweredAfterArming = 1;
  const server = createServer((conn) => {
    const isFirst = first === undefined;
    if (isFirst) first = conn;
    const lines = createInterface({ input: conn });
    const send = (message: unknown): boolean => conn.write(`${JSON.stringify(message)}\n`);
    lines.on('line', (line) => {
      const message = JSON.parse(line) as { id?: string | number; method?: string };
      if (message.id === undefined) return;
      if (isFirst && message.method === 'initialize') {
        send(initializeAnswer(message.id));
      } else if (isFirst) {
        send({ jsonrpc: '2.0', id: message.id, result: { tools: [] } });
      } else if (message.method === 'initialize') {
        if (!armed || unansweredAfterArming-- > 0) conn.destroy();
        else send({ jsonrpc: '2.0', id: message.id, error: refusal });
      }
    });
    conn.on('error', () => undefined);
  });
  mkdirSync(path.dirname(socketPath), { recursive: true, mode: 0o700 });
  return new Promise<{ server: Server; dropFirst: () => void; arm: () => void }>((resolve) =>
    server.listen(socketPath, () => resolve({ server, dropFirst: () => first?.destroy(), arm: () => (armed = true) })),
  );
}

describe('when the broker comes back but refuses the replayed initialize (the session)', () => {
  const cases = [
    {
      when: "with the broker's code",
      refusal: { code: -32_000, message: 'a person revoked this session', data: { code: 'SESSION_REVOKED' } },
      code: 'SESSION_REVOKED',
      said: 'a person revoked this session',
    },
    {
      when: 'without a Postern code',
      refusal: { code: -32_602, message: 'Invalid params' },
      code: 'INTERNAL',
      said: 'Invalid params (JSON-RPC error -32602, without a Postern code)',
    },
  ];
  it.each(cases)('$when: the request that waited is answered with that code, and the coded line says so', async (c) => {
    const scripted = createTempDir('postern-shim-session-refused-');
    const broker = await sessionRefusingBroker(agentSocketPath(scripted.path), c.refusal);
    const transport = shimTransport(scripted.path, ['--reconnect-for', '600']);
    let stderr = '';
    transport.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    let closed = false;
    const client = new Client({ name: 'shim-session-refused', version: '1' });
    client.onclose = () => (closed = true);
    try {
      await client.connect(transport);
      expect(await client.listTools()).toEqual({ tools: [] });
      broker.dropFirst();
      await waitUntil('the shim reconnecting', () => stderr.includes('reconnecting for up to'));
      const waited = client.listTools().then(
        () => undefined,
        (error: unknown) => error,
      );
      broker.arm();
      const refused = await Promise.race([waited, failAfter(20_000, 'the answer to the request that waited')]);
      expect(refused).toBeInstanceOf(McpError);
      expect(refused).toMatchObject({ code: -32_000, data: { code: c.code } });
      const message = (refused as McpError).message;
      expect(message).toContain(
        `came back but refused this agent's session (${c.code}: ${c.said}), so postern mcp stopped`,
      );
      expect(message).toContain('never reached the broker, so nothing was recorded for it');
      expect(message).not.toContain('BROKER_RESTARTED');
      await waitUntil('the shim exiting', () => closed);
      // Said once, coded as every CLI failure line is.
      const after = stderr.slice(stderr.indexOf('reconnecting for up to'));
      expect(after.trimEnd().split('\n').slice(1)).toEqual([
        `postern: ${c.code}: the broker for ${scripted.path} refused this agent's session after reconnecting ` +
          `(${c.said}); postern mcp is not reconnecting`,
      ]);
    } finally {
      await client.close();
      await new Promise((resolve) => broker.server.close(resolve));
      scripted.remove();
    }
  });
});

/**
 * A broker that accepts every connection and never answers on it: it reads the connection's first line (the client's
 * initialize on the shim's first connection, the replayed one on each reconnection) and then, by `mode`, closes it
 * saying nothing, says a line that answers nothing (an id-null parse error without a Postern code) and closes, or
 * holds it open unanswered. Scripted: a real broker answers every initialize.
 */
function unansweringBroker(socketPath: string, mode: 'closes' | 'says-nothing-useful' | 'holds') {
  const connections: Socket[] = [];
  const server = createServer((conn) => {
    connections.push(conn);
    conn.on('error', () => undefined);
    const lines = createInterface({ input: conn });
    lines.once('line', () => {
      // The first connection always closes: that is the loss the shim's absence starts from.
      if (mode === 'holds' && connections.length > 1) return;
      if (mode === 'says-nothing-useful')
        conn.end(`${JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32_700, message: 'Parse error' } })}\n`);
      else conn.destroy();
    });
  });
  mkdirSync(path.dirname(socketPath), { recursive: true, mode: 0o700 });
  return new Promise<{ server: Server; connections: Socket[] }>((resolve) =>
    server.listen(socketPath, () => resolve({ server, connections })),
  );
}

describe('when the broker accepts the reconnections and never answers them', () => {
  const reconnectForSeconds = 1;
  /** Far past the window on a loaded 2-core machine; a shim that never gives up is still reconnecting after it. */
  const boundMs = 15_000;
  const cases = [
    {
      mode: 'closes' as const,
      said: 'the broker accepted the reconnection and closed it without answering',
    },
    {
      mode: 'says-nothing-useful' as const,
      said: 'the broker accepted the reconnection and closed it without answering',
    },
    {
      mode: 'holds' as const,
      said: 'the broker accepted the reconnection and had not answered it when the window ran out',
    },
  ];
  it.each(cases)(
    '$mode: --reconnect-for bounds the whole absence; the shim gives up with the coded line, exit 1',
    async (c) => {
      const scripted = createTempDir('postern-shim-unanswered-');
      const broker = await unansweringBroker(agentSocketPath(scripted.path), c.mode);
      const child = spawn(
        process.execPath,
        [posternBin, 'mcp', '--data-dir', scripted.path, '--reconnect-for', String(reconnectForSeconds)],
        { cwd: repoRoot, stdio: ['pipe', 'pipe', 'pipe'] },
      );
      let stderr = '';
      child.stderr.setEncoding('utf8').on('data', (text: string) => (stderr += text));
      const answers = new Map<unknown, Record<string, unknown>>();
      createInterface({ input: child.stdout }).on('line', (line) => {
        const message = JSON.parse(line) as Record<string, unknown>;
        answers.set(message['id'], message);
      });
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      try {
        child.stdin.write(`${initializeFrame(1, 'shim-unanswered')}\n`);
        // The first connection closes on the initialize: the shim answers it itself and starts reconnecting.
        await waitUntil('the shim answering the lost initialize', () => answers.has(1));
        expect(answers.get(1)).toMatchObject({ error: { data: { code: 'BROKER_RESTARTED' } } });
        const lostAt = Date.now();
        // Sent while the broker is away: it waits in the shim, and no reconnection ever carries it.
        child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' })}\n`);
        const code = await Promise.race([exited, failAfter(boundMs, 'the shim giving up')]);
        expect(code).toBe(1);
        // Within the window, not a multiple of it: the window is not restarted by accepted reconnections.
        expect(Date.now() - lostAt).toBeLessThan(reconnectForSeconds * 1000 + boundMs / 3);
        // The case was the one meant: reconnections were accepted (and not answered).
        expect(broker.connections.length).toBeGreaterThan(1);
        const lines = stderr.trimEnd().split('\n');
        expect(lines.filter((line) => line.includes('reconnecting for up to'))).toHaveLength(1);
        expect(lines.filter((line) => line.includes('gave up'))).toHaveLength(1);
        expect(lines.at(-1)).toBe(
          `postern: CONNECTION_FAILED: gave up reconnecting after ${reconnectForSeconds} s: ${c.said}`,
        );
        const waited = answers.get(2);
        expect(waited).toMatchObject({ error: { code: -32_000, data: { code: 'BROKER_RESTARTED' } } });
        const message = (waited?.['error'] as { message: string }).message;
        expect(message).toContain(`went away and did not come back within ${reconnectForSeconds} s`);
        expect(message).toContain('never reached the broker, so nothing was recorded for it');
      } finally {
        child.kill('SIGKILL');
        for (const conn of broker.connections) conn.destroy();
        await new Promise((resolve) => broker.server.close(resolve));
        scripted.remove();
      }
    },
  );
});

/**
 * A broker that serves the shim's first connection until told to drop it, refuses the first reconnection with the
 * per-user cap's line (RATE_LIMITED, the exact line the agent socket writes) and holds every later one open
 * unanswered: what a broker at its cap looks like from a shim on a loaded machine, where the answer to the last try
 * comes after the reconnect window ends. Scripted, since a real broker's timing is a race.
 */
function refusingThenSlowBroker(socketPath: string) {
  const connections: Socket[] = [];
  const server = createServer((conn) => {
    connections.push(conn);
    const index = connections.length;
    conn.on('error', () => undefined);
    const lines = createInterface({ input: conn });
    const send = (message: unknown): boolean => conn.write(`${JSON.stringify(message)}\n`);
    lines.on('line', (line) => {
      const message = JSON.parse(line) as { id?: string | number; method?: string };
      if (message.id === undefined) return;
      if (index === 1 && message.method === 'initialize') send(initializeAnswer(message.id));
      else if (index === 1) send({ jsonrpc: '2.0', id: message.id, result: { tools: [] } });
      else if (index === 2)
        conn.end(
          jsonRpcErrorLine(
            null,
            jsonRpcCode.refused,
            'at most 1 agent connections per user, and every one has a call in progress; retry later',
            'RATE_LIMITED',
          ),
        );
      // Later reconnections: accepted, their replayed initialize never answered within the window.
    });
  });
  mkdirSync(path.dirname(socketPath), { recursive: true, mode: 0o700 });
  return new Promise<{ server: Server; dropFirst: () => void; connections: Socket[] }>((resolve) =>
    server.listen(socketPath, () => resolve({ server, dropFirst: () => connections[0]?.destroy(), connections })),
  );
}

describe('when the broker refused a reconnection and its answer to the last one comes after the window', () => {
  it("answers what waited with the broker's refusal (RATE_LIMITED), not as a broker that went away", async () => {
    const scripted = createTempDir('postern-shim-refused-then-slow-');
    const broker = await refusingThenSlowBroker(agentSocketPath(scripted.path));
    const transport = shimTransport(scripted.path, ['--reconnect-for', '2']);
    let stderr = '';
    transport.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const client = new Client({ name: 'shim-refused-then-slow', version: '1' });
    try {
      await client.connect(transport);
      expect(await client.listTools()).toEqual({ tools: [] });
      broker.dropFirst();
      await waitUntil('the shim reconnecting', () => stderr.includes('reconnecting for up to'));
      const waited = await Promise.race([
        client.listTools().then(
          () => undefined,
          (error: unknown) => error,
        ),
        failAfter(20_000, 'the answer to the request that waited'),
      ]);
      // The scenario happened: refused once, then a reconnection left unanswered when the window ran out.
      expect(stderr).toContain('postern mcp: the broker refused the reconnection: RATE_LIMITED');
      expect(broker.connections.length).toBeGreaterThanOrEqual(3);
      expect(waited).toBeInstanceOf(McpError);
      expect(waited).toMatchObject({ code: -32_000, data: { code: 'RATE_LIMITED' } });
      expect((waited as McpError).message).toContain('never reached the broker, so nothing was recorded for it');
      expect(stderr.trimEnd().split('\n').at(-1)).toMatch(/^postern: RATE_LIMITED: gave up reconnecting after 2 s/);
    } finally {
      await client.close();
      await new Promise((resolve) => broker.server.close(resolve));
      scripted.remove();
    }
  });
});
