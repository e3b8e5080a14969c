import { spawn } from 'node:child_process';
import net from 'node:net';
import { chmodSync, lstatSync, mkdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CodedError } from '../contract/index.js';
import { SocketClientTransport } from '../sdk/socket-client-transport.js';
import { connectRawLines, initializeFrame, type RawLineClient } from '../testing/malformed-mcp.js';
import type { ToolAnswer } from '../ports/index.js';
import { holdUntilAborted, ScriptedAgentBackend, scriptedRouteList } from '../testing/scripted-agent-backend.js';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import type { AgentLimits } from './agent-limits.js';
import { agentSocketPath, startAgentSocket, type AgentSocket, type AgentSocketOptions } from './agent-socket.js';
import { parseProcStat } from './peer-identity.js';

let dir: TempDir;
let backend: ScriptedAgentBackend;
const open: { close(): Promise<void> }[] = [];

beforeEach(() => {
  dir = createTempDir('postern-agent-');
  backend = new ScriptedAgentBackend();
});
afterEach(async () => {
  for (const item of open.splice(0).reverse()) await item.close().catch(() => undefined);
  dir.remove();
});

async function start(
  limits?: Partial<AgentLimits>,
  extra: Pick<AgentSocketOptions, 'identify' | 'ownUid'> = {},
): Promise<AgentSocket> {
  const socket = await startAgentSocket({ dataDir: dir.path, backend, ...(limits ? { limits } : {}), ...extra });
  open.push(socket);
  return socket;
}

async function mcpClient(socketPath: string, name = 'test-agent'): Promise<Client> {
  const client = new Client({ name, version: '1.2.3' });
  await client.connect(new SocketClientTransport(socketPath));
  open.push(client);
  return client;
}

async function rawClient(socketPath: string): Promise<RawLineClient> {
  const client = await connectRawLines(socketPath);
  open.push({ close: async () => client.destroy() });
  return client;
}

/** A raw client that has completed initialize (so it is admitted and has a session). */
async function initializedRaw(socketPath: string): Promise<RawLineClient> {
  const client = await rawClient(socketPath);
  client.send(initializeFrame(0));
  expect(await client.nextMessage()).toMatchObject({ id: 0, result: { serverInfo: { name: 'postern' } } });
  client.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
  return client;
}

describe('when the socket starts', () => {
  it('creates <dataDir>/agent 0700 and the socket 0600', async () => {
    const socket = await start();
    expect(socket.path).toBe(agentSocketPath(dir.path));
    expect(socket.path).toBe(path.join(dir.path, 'agent', 'postern.sock'));
    expect(lstatSync(path.dirname(socket.path)).mode & 0o777).toBe(0o700);
    const stat = lstatSync(socket.path);
    expect(stat.isSocket()).toBe(true);
    expect(stat.mode & 0o777).toBe(0o600);
  });

  it('tightens an existing agent directory to 0700', async () => {
    mkdirSync(path.join(dir.path, 'agent'), { mode: 0o755 });
    chmodSync(path.join(dir.path, 'agent'), 0o755);
    await start();
    expect(lstatSync(path.join(dir.path, 'agent')).mode & 0o777).toBe(0o700);
  });

  it('replaces a stale socket left by a killed process', async () => {
    const socketPath = agentSocketPath(dir.path);
    mkdirSync(path.dirname(socketPath), { recursive: true });
    const child = spawn(
      process.execPath,
      ['-e', `require('net').createServer().listen(${JSON.stringify(socketPath)}, () => console.log('ready'))`],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    await new Promise<void>((resolve) => child.stdout.once('data', () => resolve()));
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
    expect(lstatSync(socketPath).isSocket()).toBe(true);
    const socket = await start();
    const client = await mcpClient(socket.path);
    expect((await client.listTools()).tools).toHaveLength(7);
  });

  it('refuses to start while another broker serves the same data directory', async () => {
    await start();
    await expect(startAgentSocket({ dataDir: dir.path, backend })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      field: '--data-dir',
    });
  });

  it('refuses a path that exists and is not a socket', async () => {
    mkdirSync(path.join(dir.path, 'agent'));
    writeFileSync(agentSocketPath(dir.path), 'not a socket');
    await expect(startAgentSocket({ dataDir: dir.path, backend })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });

  it('removes its socket file on close', async () => {
    const socket = await start();
    await socket.close();
    expect(() => lstatSync(socket.path)).toThrow();
  });
});

describe('when a process connects', () => {
  it('records its identity from the kernel and /proc, not from the client', async () => {
    const socket = await start();
    const client = await mcpClient(socket.path, 'claims-to-be-root');
    await client.callTool({ name: 'list_routes', arguments: {} });
    expect(backend.sessionsOpened).toHaveLength(1);
    const opened = backend.sessionsOpened[0];
    const stat = parseProcStat(readFileSync(`/proc/${process.pid}/stat`, 'utf8'));
    expect(opened?.peer).toEqual({
      pid: process.pid,
      uid: process.getuid?.(),
      gid: process.getgid?.(),
      start_time: stat?.startTime,
      ppid: process.ppid,
      exe: process.execPath,
      cwd: process.cwd(),
      parent_exe: readlinkSync(`/proc/${process.ppid}/exe`),
    });
    expect(opened?.client).toEqual({ name: 'claims-to-be-root', version: '1.2.3' });
  });

  it('refuses a peer whose identity cannot be read with PEER_REFUSED, and nothing reaches the backend', async () => {
    const socket = await start(undefined, {
      identify: () => {
        throw new CodedError('PEER_REFUSED', 'the peer credential addon is not available');
      },
    });
    const client = await rawClient(socket.path);
    expect(await client.nextMessage()).toEqual({
      jsonrpc: '2.0',
      id: null,
      error: { code: -32000, message: 'the peer credential addon is not available', data: { code: 'PEER_REFUSED' } },
    });
    await client.closed;
    expect(backend.sessionsOpened).toHaveLength(0);
  });

  it('keeps a refused connection open until its peer has read why: a peer that writes late meets no broken pipe', async () => {
    const socket = await start(undefined, {
      identify: () => {
        throw new CodedError('PEER_REFUSED', 'the peer credential addon is not available');
      },
    });
    // A reconnecting shim writes its initialize at once; on a loaded machine that write can land after the refusal.
    // Destroyed right after the refusal, the socket answered that write with EPIPE (or a reset) and the peer could
    // lose the refusal line unread: the shim then said "closed without answering" instead of the broker's code.
    const conn = net.createConnection(socket.path);
    conn.pause();
    const errors: string[] = [];
    conn.on('error', (error: NodeJS.ErrnoException) => errors.push(error.code ?? error.message));
    await new Promise<void>((resolve) => conn.once('connect', () => resolve()));
    await new Promise((resolve) => setTimeout(resolve, 300));
    const written = await new Promise<Error | null | undefined>((resolve) =>
      conn.write(`${initializeFrame(1, 'late-writer')}\n`, (error) => resolve(error)),
    );
    expect(written ?? null).toBeNull();
    let text = '';
    conn.setEncoding('utf8');
    conn.on('data', (chunk: string) => (text += chunk));
    const ended = new Promise<void>((resolve) => conn.once('end', () => resolve()));
    conn.resume();
    await ended;
    expect(JSON.parse(text.trim())).toMatchObject({ id: null, error: { data: { code: 'PEER_REFUSED' } } });
    expect(errors).toEqual([]);
    conn.destroy();
  });

  it('refuses a peer the kernel reports as another uid', async () => {
    const socket = await start(undefined, { ownUid: (process.getuid?.() ?? 0) + 1 });
    const client = await rawClient(socket.path);
    expect(await client.nextMessage()).toMatchObject({
      id: null,
      error: { code: -32000, data: { code: 'PEER_REFUSED' } },
    });
    await client.closed;
  });

  it.skipIf(process.getuid?.() !== 0)(
    'refuses a real process running as another user (uid 65534) by its kernel credentials',
    async () => {
      const socket = await start();
      // Open the way for uid 65534 so the socket's own check is what refuses it (file modes would
      // stop it earlier with EACCES, which is the first line of defence, not the one under test).
      for (let p = path.dirname(socket.path); p.startsWith(dir.path); p = path.dirname(p)) chmodSync(p, 0o711);
      chmodSync(socket.path, 0o666);
      const script = `const s = require('net').createConnection(${JSON.stringify(socket.path)}); s.setEncoding('utf8'); let out = ''; s.on('data', (d) => out += d); s.on('close', () => { process.stdout.write(out); }); s.on('error', (e) => { process.stdout.write('ERR ' + e.code); });`;
      const child = spawn(process.execPath, ['-e', script], {
        uid: 65534,
        gid: 65534,
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      let output = '';
      child.stdout.setEncoding('utf8').on('data', (text: string) => (output += text));
      const code = await new Promise((resolve) => child.once('exit', resolve));
      expect(code).toBe(0);
      expect(JSON.parse(output.trim())).toMatchObject({
        id: null,
        error: { code: -32000, data: { code: 'PEER_REFUSED' } },
      });
      expect(backend.sessionsOpened).toHaveLength(0);
    },
  );

  it('closes a connection that never sends initialize', async () => {
    const socket = await start({ handshakeMs: 100 });
    const client = await rawClient(socket.path);
    await client.closed;
    expect(backend.sessionsOpened).toHaveLength(0);
  });
});

describe('when a client sends broken frames', () => {
  it('answers a line over frameBytesMax with PAYLOAD_LIMIT once its end arrives, and keeps serving', async () => {
    const socket = await start({ frameBytesMax: 1024 });
    const client = await initializedRaw(socket.path);
    // Sent in pieces, the id last (as the TypeScript SDK orders a request): found from the line's end.
    client.socket.write(
      `{"method":"tools/call","params":{"name":"http_request","arguments":{"body":"${'b'.repeat(3000)}`,
    );
    client.socket.write(`${'b'.repeat(3000)}"}},"jsonrpc":"2.0","id":41}\n`);
    expect(await client.nextMessage()).toMatchObject({
      id: 41,
      error: { code: -32600, data: { code: 'PAYLOAD_LIMIT' } },
    });
    client.send(
      JSON.stringify({ jsonrpc: '2.0', id: 42, method: 'tools/call', params: { name: 'list_routes', arguments: {} } }),
    );
    expect(await client.nextMessage()).toMatchObject({ id: 42, result: { isError: false } });
    expect(backend.calls.map((c) => c.tool)).toEqual(['list_routes']);
  });

  it.each([
    [
      'first',
      (pad: string) =>
        `{"jsonrpc":"2.0","id":"req-7","method":"tools/call","params":{"name":"http_request","arguments":{"body":"${pad}"}}}`,
      'req-7',
    ],
    [
      'last',
      (pad: string) => `{"method":"tools/call","params":{"arguments":{"body":"${pad}"}},"jsonrpc":"2.0","id":7}`,
      7,
    ],
    ['absent', (pad: string) => `{"jsonrpc":"2.0","method":"notifications/x","params":{"a":"${pad}"}}`, null],
    [
      'only inside a nested value',
      (pad: string) => `{"jsonrpc":"2.0","method":"m","params":{"a":"${pad}","id":9}}`,
      null,
    ],
  ])('answers an oversized line to its id when the id comes %s', async (_where, frame, id) => {
    const socket = await start({ frameBytesMax: 1024 });
    const client = await initializedRaw(socket.path);
    client.send(frame('p'.repeat(5000)));
    expect(await client.nextMessage()).toMatchObject({
      jsonrpc: '2.0',
      id,
      error: { data: { code: 'PAYLOAD_LIMIT' } },
    });
    client.send(JSON.stringify({ jsonrpc: '2.0', id: 'after', method: 'ping' }));
    expect(await client.nextMessage()).toEqual({ jsonrpc: '2.0', id: 'after', result: {} });
    expect(backend.calls).toHaveLength(0);
  });

  it('closes, coded, after oversizedFramesMax oversized lines', async () => {
    const socket = await start({ frameBytesMax: 1024, oversizedFramesMax: 3 });
    const client = await initializedRaw(socket.path);
    for (let i = 1; i <= 3; i += 1)
      client.send(JSON.stringify({ jsonrpc: '2.0', id: i, method: 'ping', params: { pad: 'x'.repeat(2000) } }));
    expect(await client.nextMessage()).toMatchObject({ id: 1, error: { data: { code: 'PAYLOAD_LIMIT' } } });
    expect(await client.nextMessage()).toMatchObject({ id: 2, error: { data: { code: 'PAYLOAD_LIMIT' } } });
    const last = (await client.nextMessage()) as { id: unknown; error: { message: string; data: { code: string } } };
    expect(last).toMatchObject({ id: 3, error: { data: { code: 'PAYLOAD_LIMIT' } } });
    expect(last.error.message).toContain('closing');
    await client.closed;
  });

  it('closes, coded, when an oversized line has no end within oversizedFrameSkipBytesMax', async () => {
    const socket = await start({ frameBytesMax: 1024, oversizedFrameSkipBytesMax: 64 * 1024 });
    const client = await initializedRaw(socket.path);
    client.socket.write(`{"jsonrpc":"2.0","id":5,"method":"ping","params":{"pad":"`);
    // Written until the broker answers: it must give up on its own, without a newline ever coming.
    const answered = client.nextMessage();
    let more = true;
    const stop = (): void => {
      more = false;
    };
    answered.then(stop, stop);
    while (more && !client.socket.destroyed) {
      await new Promise<void>((resolve) => client.socket.write('y'.repeat(16 * 1024), () => resolve()));
    }
    expect(await answered).toMatchObject({ id: 5, error: { code: -32600, data: { code: 'PAYLOAD_LIMIT' } } });
    await client.closed;
  });

  it('answers malformed JSON with a parse error and keeps serving', async () => {
    const socket = await start();
    const client = await initializedRaw(socket.path);
    client.send('{"jsonrpc":"2.0","id":1,"method":');
    expect(await client.nextMessage()).toEqual({
      jsonrpc: '2.0',
      id: null,
      error: { code: -32700, message: 'Parse error: one JSON-RPC message per line' },
    });
    client.send('{"jsonrpc":"1.0","id":2,"method":"tools/list"}');
    expect(await client.nextMessage()).toMatchObject({ id: 2, error: { code: -32600 } });
    client.send(JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/list' }));
    expect(await client.nextMessage()).toMatchObject({ id: 3, result: { tools: expect.any(Array) } });
  });

  it('refuses nesting deeper than frameDepthMax without parsing it, and keeps serving', async () => {
    const socket = await start({ frameDepthMax: 16 });
    const client = await initializedRaw(socket.path);
    client.send(
      `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_routes","arguments":{"a":${'['.repeat(100_000)}${']'.repeat(100_000)}}}}`,
    );
    expect(await client.nextMessage()).toMatchObject({
      id: null,
      error: { code: -32600, data: { code: 'PAYLOAD_LIMIT' } },
    });
    client.send(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }));
    expect(await client.nextMessage()).toMatchObject({ id: 2, result: {} });
    expect(backend.calls).toHaveLength(0);
  });

  it('closes after garbageFramesMax bad frames in a row', async () => {
    const socket = await start({ garbageFramesMax: 5 });
    const client = await initializedRaw(socket.path);
    for (let i = 0; i < 5; i += 1) client.send('not json');
    for (let i = 0; i < 5; i += 1) expect(await client.nextMessage()).toMatchObject({ error: { code: -32700 } });
    await client.closed;
  });

  it('does not count bad frames separated by good ones', async () => {
    const socket = await start({ garbageFramesMax: 3 });
    const client = await initializedRaw(socket.path);
    for (let round = 0; round < 5; round += 1) {
      client.send('nope');
      client.send('nope');
      client.send(JSON.stringify({ jsonrpc: '2.0', id: round, method: 'ping' }));
      expect(await client.nextMessage()).toMatchObject({ error: { code: -32700 } });
      expect(await client.nextMessage()).toMatchObject({ error: { code: -32700 } });
      expect(await client.nextMessage()).toEqual({ jsonrpc: '2.0', id: round, result: {} });
    }
  });
});

describe('when an agent lists and calls tools', () => {
  it('lists the seven contract tools with object input schemas', async () => {
    const socket = await start();
    const client = await mcpClient(socket.path);
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
    for (const tool of tools) {
      expect(tool.inputSchema.type).toBe('object');
      expect(tool.description).toBeTruthy();
    }
    expect(client.getServerVersion()?.name).toBe('postern');
  });

  it('passes arguments to the backend as received, invalid ones included', async () => {
    const socket = await start();
    const client = await mcpClient(socket.path);
    const args = { route: 42, nonsense: { deep: true } };
    const result = await client.callTool({ name: 'http_request', arguments: args });
    expect(result.isError).toBe(false);
    const call = await backend.nextCall();
    expect(call.tool).toBe('http_request');
    expect(call.args).toEqual(args);
    expect(call.sessionId).toBe(backend.sessionsOpened[0]?.session_id);
  });

  it('answers an unknown tool with an UNKNOWN_TOOL refusal naming the field', async () => {
    const socket = await start();
    const client = await mcpClient(socket.path);
    const result = await client.callTool({ name: 'delete_everything', arguments: {} });
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toMatchObject({
      invocation_id: null,
      error: { code: 'UNKNOWN_TOOL', field: 'name', outcome: 'not_attempted' },
    });
    expect(backend.calls).toHaveLength(0);
  });

  it.each(['approve', 'approvals.approve', 'reject_action', 'revoke-session', 'status', 'abandon'])(
    'answers the operator tool name %s with OPERATOR_ONLY',
    async (name) => {
      const socket = await start();
      const client = await mcpClient(socket.path);
      const result = await client.callTool({ name, arguments: { ticket: 1 } });
      expect(result.isError).toBe(true);
      expect(result.structuredContent).toMatchObject({
        invocation_id: null,
        error: { code: 'OPERATOR_ONLY', retry: 'never' },
      });
      expect(backend.calls).toHaveLength(0);
    },
  );

  it.each(['approvals.approve', 'approvals.list', 'activity.list', 'status', 'approve', 'sessions.revoke'])(
    'answers the JSON-RPC method %s with an OPERATOR_ONLY error',
    async (method) => {
      const socket = await start();
      const client = await initializedRaw(socket.path);
      client.send(JSON.stringify({ jsonrpc: '2.0', id: 9, method, params: { ticket: 1 } }));
      expect(await client.nextMessage()).toMatchObject({
        id: 9,
        error: { code: -32601, data: { code: 'OPERATOR_ONLY' } },
      });
    },
  );

  it.each([
    ['arguments is not an object', { name: 'http_request', arguments: 'route=docs' }, 'params.arguments'],
    ['arguments is an array', { name: 'list_routes', arguments: [1, 2] }, 'params.arguments'],
    ['the tool name is not a string', { name: 42, arguments: {} }, 'params.name'],
    ['params is missing', undefined, 'params'],
  ])(
    'answers a malformed tools/call (%s) with -32602 naming the field, no schema dump, and calls nothing',
    async (_when, params, field) => {
      const socket = await start();
      const client = await initializedRaw(socket.path);
      client.send(
        JSON.stringify({ jsonrpc: '2.0', id: 11, method: 'tools/call', ...(params === undefined ? {} : { params }) }),
      );
      const answer = (await client.nextMessage()) as {
        id: number;
        error: { code: number; message: string; data?: unknown };
      };
      expect(answer).toMatchObject({ id: 11, error: { code: -32602, data: { code: 'INVALID_ARGUMENT', field } } });
      expect(answer.error.message).toContain(field);
      expect(answer.error.message.length).toBeLessThan(200);
      expect(answer.error.message).not.toMatch(/expected|"code"|invalid_type|\[/);
      expect(backend.calls).toHaveLength(0);
    },
  );

  it('answers other unknown methods with method-not-found', async () => {
    const socket = await start();
    const client = await initializedRaw(socket.path);
    client.send(JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'prompts/list' }));
    expect(await client.nextMessage()).toEqual({
      jsonrpc: '2.0',
      id: 9,
      error: { code: -32601, message: 'Method not found' },
    });
  });

  it('refuses tools/call before initialize', async () => {
    const socket = await start();
    const client = await rawClient(socket.path);
    client.send(
      JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'list_routes', arguments: {} } }),
    );
    expect(await client.nextMessage()).toMatchObject({ id: 1, error: { code: -32600 } });
    expect(backend.calls).toHaveLength(0);
  });

  it('answers INTERNAL when the backend throws, and keeps serving', async () => {
    const socket = await start();
    backend.respond = () => {
      throw new Error('boom with a secret-looking message');
    };
    const client = await mcpClient(socket.path);
    const result = await client.callTool({ name: 'ssh_exec', arguments: { host: 'h', command: 'true' } });
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toMatchObject({ error: { code: 'INTERNAL' } });
    expect(JSON.stringify(result)).not.toContain('secret-looking');
    backend.respond = () => ({ isError: false, structured: { routes: [], ssh_hosts: [] }, text: 'ok' });
    expect((await client.callTool({ name: 'list_routes', arguments: {} })).isError).toBe(false);
  });

  it('answers every call with the session refusal code when openSession rejects', async () => {
    backend.openSessionError = new CodedError('SESSION_REVOKED', 'this agent session was revoked');
    const socket = await start();
    const client = await mcpClient(socket.path);
    for (const name of ['list_routes', 'http_request']) {
      const result = await client.callTool({ name, arguments: {} });
      expect(result.isError).toBe(true);
      expect(result.structuredContent).toMatchObject({ error: { code: 'SESSION_REVOKED' } });
    }
    expect(backend.calls).toHaveLength(0);
  });

  it('refuses a call beyond the in-flight bound of the session with RATE_LIMITED', async () => {
    const socket = await start({ inFlightCallsPerSessionMax: 2 });
    backend.respond = holdUntilAborted;
    const client = await mcpClient(socket.path);
    const first = new AbortController();
    const second = new AbortController();
    const pending = [
      client
        .callTool({ name: 'http_request', arguments: {} }, undefined, { signal: first.signal })
        .catch(() => 'aborted'),
      client
        .callTool({ name: 'http_request', arguments: {} }, undefined, { signal: second.signal })
        .catch(() => 'aborted'),
    ];
    await backend.nextCall();
    await backend.nextCall();
    const third = await client.callTool({ name: 'action_status', arguments: { action_id: 'act_1' } });
    expect(third.isError).toBe(true);
    expect(third.structuredContent).toMatchObject({ error: { code: 'RATE_LIMITED', retry: 'backoff' } });
    // A refused read says nothing about act_1: no outcome, in structuredContent nor in the text block.
    expect(third.structuredContent).not.toHaveProperty('error.outcome');
    expect(JSON.stringify(third.content)).not.toContain('not_attempted');
    // A second connection of the same process shares the session and its bound.
    const other = await mcpClient(socket.path);
    expect((await other.callTool({ name: 'list_routes', arguments: {} })).structuredContent).toMatchObject({
      error: { code: 'RATE_LIMITED' },
    });
    first.abort();
    expect(await (await backend.calls[0])?.aborted).toBe('cancelled');
    await pending[0];
    // The slot is free again once the first call has ended.
    backend.respond = () => ({ isError: false, structured: { routes: [], ssh_hosts: [] }, text: 'ok' });
    await expect
      .poll(async () => (await other.callTool({ name: 'list_routes', arguments: {} })).isError, {
        interval: 20,
        timeout: 5_000,
      })
      .toBe(false);
    second.abort();
    await pending[1];
  });
});

describe('when the broker stops accepting (the drain before it closes)', () => {
  it('refuses new connections and answers a new call SHUTTING_DOWN, while a call already running gets its own answer', async () => {
    const socket = await start();
    let answerFirst: (answer: ToolAnswer) => void = () => undefined;
    backend.respond = () =>
      new Promise<ToolAnswer>((resolve) => {
        answerFirst = resolve;
      });
    const client = await mcpClient(socket.path);
    const first = client.callTool({ name: 'list_routes', arguments: {} });
    const running = await backend.nextCall();

    await socket.stopAccepting();
    // No new connection is accepted: the listener is gone.
    await expect(mcpClient(socket.path, 'late-agent')).rejects.toMatchObject({
      code: expect.stringMatching(/^(ECONNREFUSED|ENOENT)$/),
    });
    // A new call on the open connection is answered at once, coded, and never reaches the backend.
    const refused = await client.callTool({ name: 'http_request', arguments: { route: 'r' } }, undefined, {
      timeout: 5_000,
    });
    expect(refused.isError).toBe(true);
    expect(refused.structuredContent).toMatchObject({
      error: {
        code: 'SHUTTING_DOWN',
        outcome: 'not_attempted',
        retry: 'backoff',
        message: 'the broker is stopping; nothing new is accepted and nothing was recorded (call again once it runs)',
      },
    });
    const [text] = refused.content as Array<{ type: string; text: string }>;
    expect(text?.text.split('\n')[0]).toBe(
      'SHUTTING_DOWN: the broker is stopping; nothing new is accepted and nothing was recorded (call again once it runs)',
    );
    expect(backend.calls).toHaveLength(1);

    // The call that was running keeps its connection and gets its own answer.
    expect(running.signal.aborted).toBe(false);
    answerFirst({ isError: false, structured: scriptedRouteList, text: 'the running call' });
    const answered = await first;
    expect(answered.isError).toBeFalsy();
    expect(answered.structuredContent).toEqual(scriptedRouteList);
    expect(backend.disconnected).toEqual([]);
    await socket.stopAccepting(); // idempotent
  });
});

describe('when the broker drains and an agent reads an action', () => {
  it('refuses action_status, fetch_result, cancel_action and list_routes SHUTTING_DOWN with no outcome, in the text block too', async () => {
    const socket = await start();
    const client = await mcpClient(socket.path);
    await socket.stopAccepting();
    const reads = [
      { name: 'action_status', arguments: { action_id: 'act_x', wait_ms: 5_000 } },
      { name: 'fetch_result', arguments: { action_id: 'act_x' } },
      { name: 'cancel_action', arguments: { action_id: 'act_x' } },
      { name: 'list_routes', arguments: {} },
    ];
    for (const call of reads) {
      const refused = await client.callTool(call, undefined, { timeout: 5_000 });
      expect(refused.isError).toBe(true);
      expect(refused.structuredContent).toMatchObject({
        invocation_id: null,
        error: { code: 'SHUTTING_DOWN', phase: 'validation', retry: 'backoff' },
      });
      // "not_attempted" about act_x would be a claim about an action this refusal knows nothing of.
      expect(refused.structuredContent).not.toHaveProperty('error.outcome');
      const [text] = refused.content as Array<{ type: string; text: string }>;
      expect(text?.text).not.toContain('not_attempted');
      expect(text?.text.split('\n')[1]).toBe(
        'error: SHUTTING_DOWN: the broker is stopping; nothing new is accepted and nothing was recorded (call again once it runs) · retry: backoff · phase: validation',
      );
    }
    // An action call refused before admission is honestly not attempted: nothing was admitted, nothing sent.
    const action = await client.callTool({ name: 'ssh_exec', arguments: { host: 'h', command: 'true' } });
    expect(action.structuredContent).toMatchObject({ error: { code: 'SHUTTING_DOWN', outcome: 'not_attempted' } });
    expect(backend.calls).toHaveLength(0);
  });
});

describe('when the caller stops waiting', () => {
  it('aborts the backend call with reason "cancelled" on notifications/cancelled', async () => {
    const socket = await start();
    backend.respond = holdUntilAborted;
    const client = await mcpClient(socket.path);
    const controller = new AbortController();
    const result = client
      .callTool({ name: 'http_request', arguments: { route: 'r' } }, undefined, { signal: controller.signal })
      .then(
        () => 'answered',
        () => 'rejected',
      );
    const call = await backend.nextCall();
    controller.abort('the user pressed escape');
    expect(await call.aborted).toBe('cancelled');
    expect(await result).toBe('rejected');
    // The connection and session stay usable.
    backend.respond = () => ({ isError: false, structured: { routes: [], ssh_hosts: [] }, text: 'ok' });
    expect((await client.callTool({ name: 'list_routes', arguments: {} })).isError).toBe(false);
    expect(backend.disconnected).toEqual([]);
  });

  it('ignores a cancel for another request id', async () => {
    const socket = await start();
    backend.respond = holdUntilAborted;
    const client = await initializedRaw(socket.path);
    client.send(
      JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'http_request', arguments: {} } }),
    );
    const call = await backend.nextCall();
    client.send(
      JSON.stringify({
        jsonrpc: '2.0',
        method: 'notifications/cancelled',
        params: { requestId: 8, reason: 'disconnected' },
      }),
    );
    client.send(JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'ping' }));
    expect(await client.nextMessage()).toEqual({ jsonrpc: '2.0', id: 9, result: {} });
    expect(call.signal.aborted).toBe(false);
    client.send(
      JSON.stringify({
        jsonrpc: '2.0',
        method: 'notifications/cancelled',
        params: { requestId: 7, reason: 'disconnected' },
      }),
    );
    // The client's own reason text is not trusted: a cancel is a cancel.
    expect(await call.aborted).toBe('cancelled');
  });

  it('aborts in-flight calls with reason "disconnected" and reports the session once its last connection closes', async () => {
    const socket = await start();
    backend.respond = holdUntilAborted;
    const first = await mcpClient(socket.path);
    const second = await mcpClient(socket.path);
    void first.callTool({ name: 'ssh_exec', arguments: { host: 'h', command: 'sleep 100' } }).catch(() => undefined);
    const call = await backend.nextCall();
    await second.listTools();
    const sessionId = call.sessionId;
    expect(backend.sessionsOpened.map((opened) => opened.session_id)).toEqual([sessionId, sessionId]);
    await first.close();
    expect(await call.aborted).toBe('disconnected');
    // The other connection still holds the session.
    backend.respond = () => ({ isError: false, structured: { routes: [], ssh_hosts: [] }, text: 'ok' });
    expect((await second.callTool({ name: 'list_routes', arguments: {} })).isError).toBe(false);
    expect(backend.disconnected).toEqual([]);
    await second.close();
    expect(await backend.nextDisconnect()).toBe(sessionId);
    expect(backend.disconnected).toEqual([sessionId]);
  });
});
