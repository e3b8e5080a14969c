import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import {
  ErrorCode,
  LATEST_PROTOCOL_VERSION,
  McpError,
  ToolListChangedNotificationSchema,
  type CallToolResult,
  type JSONRPCMessage,
} from '@modelcontextprotocol/sdk/types.js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startUpstreamHttpMcp, stdioServerCommand, type UpstreamHttpMcp } from './index.js';

/** Upper bound on any wait for an event (a notification, an exit, a stderr line); never a sleep. */
const waitMsMax = 10_000;
/** How long `hang` is given to answer before the test accepts that it does not. */
const hangWaitMs = 400;
const secret = 'canary-upstream-7f3a9c';

function withDeadline<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), waitMsMax);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

function textOf(result: CallToolResult): string {
  const [block] = result.content;
  if (block?.type !== 'text') throw new Error(`expected a text block, got ${JSON.stringify(block)}`);
  return block.text;
}

async function call(client: Client, name: string, args: Record<string, unknown> = {}): Promise<CallToolResult> {
  return (await client.callTool({ name, arguments: args })) as CallToolResult;
}

function listChanged(client: Client): Promise<void> {
  return withDeadline(
    new Promise<void>((resolve) => client.setNotificationHandler(ToolListChangedNotificationSchema, () => resolve())),
    'notifications/tools/list_changed',
  );
}

async function expectHangs(client: Client): Promise<void> {
  const error = await client.callTool({ name: 'hang', arguments: {} }, undefined, { timeout: hangWaitMs }).then(
    () => undefined,
    (reason: unknown) => reason,
  );
  expect(error).toBeInstanceOf(McpError);
  expect((error as McpError).code).toBe(ErrorCode.RequestTimeout);
}

async function stdioClient(
  flags: string[] = [],
  options: { env?: Record<string, string>; cwd?: string } = {},
): Promise<{ client: Client; transport: StdioClientTransport }> {
  const { command, args } = stdioServerCommand(flags);
  const transport = new StdioClientTransport({
    command,
    args,
    env: options.env ?? { PATH: '/usr/bin:/bin' },
    ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
    stderr: 'pipe',
  });
  const client = new Client({ name: 'upstream-mcp-test', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}

/**
 * The stdio server driven line by line (no SDK client), for what a client hides: the exit code, and that a request
 * stayed unanswered. Sends initialize (+ initialized) and then `then`, collects every message the child writes.
 */
async function rawStdio(
  flags: string[],
  then: JSONRPCMessage[],
): Promise<{ code: number | null; replies: JSONRPCMessage[] }> {
  const { command, args } = stdioServerCommand(flags);
  const child: ChildProcess = spawn(command, args, {
    env: { PATH: '/usr/bin:/bin' },
    stdio: ['pipe', 'pipe', 'ignore'],
  });
  const replies: JSONRPCMessage[] = [];
  const buffer = new ReadBuffer();
  const exited = once(child, 'exit') as Promise<[number | null]>;
  let initialized = false;
  child.stdout?.on('data', (chunk: Buffer) => {
    buffer.append(chunk);
    for (let message = buffer.readMessage(); message !== null; message = buffer.readMessage()) {
      replies.push(message);
      if (!initialized && 'id' in message && message.id === 0) {
        initialized = true;
        child.stdin?.write(serializeMessage({ jsonrpc: '2.0', method: 'notifications/initialized' }));
        for (const next of then) child.stdin?.write(serializeMessage(next));
      }
    }
  });
  child.stdin?.on('error', () => undefined); // a child that died may have closed its stdin under our writes
  child.stdin?.write(
    serializeMessage({
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    }),
  );
  const [code] = await withDeadline(exited, 'the stdio server to exit');
  return { code, replies };
}

describe('the stdio upstream MCP server', () => {
  let client: Client;
  let transport: StdioClientTransport;

  beforeAll(async () => {
    ({ client, transport } = await stdioClient([], { env: { PATH: '/usr/bin:/bin', UPSTREAM_TOKEN: secret } }));
  });
  afterAll(async () => {
    await client.close();
  });

  it('lists the design tool set with their input schemas', async () => {
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name).sort()).toEqual(
      ['add_tool', 'count', 'die_after_read', 'echo', 'env', 'fail', 'flood', 'hang'].sort(),
    );
    const flood = tools.find((tool) => tool.name === 'flood');
    expect(flood?.inputSchema).toMatchObject({ type: 'object', required: ['bytes'] });
  });

  it('echoes its arguments as JSON text and as structuredContent', async () => {
    const args = { path: '/srv/a b.txt', n: 3, nested: { ok: true } };
    const result = await call(client, 'echo', args);
    expect(result.isError).toBe(false);
    expect(JSON.parse(textOf(result))).toEqual(args);
    expect(result.structuredContent).toEqual(args);
  });

  it('returns the value of an env var given to the child (the secret reached it), and null for an unset one', async () => {
    expect((await call(client, 'env', { name: 'UPSTREAM_TOKEN' })).structuredContent).toEqual({
      name: 'UPSTREAM_TOKEN',
      value: secret,
    });
    expect((await call(client, 'env', { name: 'POSTERN_NOT_SET' })).structuredContent).toEqual({
      name: 'POSTERN_NOT_SET',
      value: null,
    });
  });

  it('answers fail with isError: true', async () => {
    const result = await call(client, 'fail', { message: 'disk is read-only' });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toBe('disk is read-only');
  });

  it('counts the calls this process received and reports its pid', async () => {
    const first = (await call(client, 'count')).structuredContent as { calls: number; pid: number };
    const second = (await call(client, 'count')).structuredContent as { calls: number; pid: number };
    expect(first.pid).toBe(transport.pid);
    expect(second).toEqual({ calls: first.calls + 1, pid: first.pid });
  });

  it('floods exactly the bytes asked for', async () => {
    const bytes = 1024 * 1024 + 7;
    expect(Buffer.byteLength(textOf(await call(client, 'flood', { bytes })))).toBe(bytes);
  });

  it('refuses arguments its schema does not allow, as an error result', async () => {
    const result = await call(client, 'flood', { bytes: -1 });
    expect(result.isError).toBe(true);
  });

  it('never answers hang within a bounded wait, and keeps serving other calls', async () => {
    await expectHangs(client);
    expect((await call(client, 'echo', { after: 'hang' })).structuredContent).toEqual({ after: 'hang' });
  });

  it('sends tools/list_changed after add_tool, and lists and runs the new tool', async () => {
    const changed = listChanged(client);
    expect((await call(client, 'add_tool')).structuredContent).toEqual({ added: true });
    await changed;
    expect((await client.listTools()).tools.map((tool) => tool.name)).toContain('extra');
    expect((await call(client, 'extra', { a: 1 })).structuredContent).toEqual({ extra: true, arguments: { a: 1 } });
  });
});

describe('the stdio upstream MCP server, when it misbehaves or is started with flags', () => {
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'postern-upstream-mcp-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('exits with code 3 after reading die_after_read, leaving the request unanswered (and the marker written)', async () => {
    const markerFile = join(dir, 'die.marker');
    const { code, replies } = await rawStdio(
      ['--marker-file', markerFile],
      [{ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'die_after_read', arguments: {} } }],
    );
    expect(code).toBe(3);
    expect(replies.map((reply) => ('id' in reply ? reply.id : undefined))).toEqual([0]);
    const lines = (await readFile(markerFile, 'utf8')).trim().split('\n');
    expect(lines.map((line) => (JSON.parse(line) as { tool: string }).tool)).toEqual(['die_after_read']);
  });

  it('exits with code 1 before initialize with --crash-at-start', async () => {
    const { code, replies } = await rawStdio(['--crash-at-start'], []);
    expect(code).toBe(1);
    expect(replies).toEqual([]);
    await expect(stdioClient(['--crash-at-start'])).rejects.toThrow();
  });

  it('a client sees die_after_read as a closed connection, never as an answer', async () => {
    const { client } = await stdioClient();
    const closed = withDeadline(new Promise<void>((resolve) => (client.onclose = resolve)), 'the client to close');
    await expect(call(client, 'die_after_read')).rejects.toThrow(McpError);
    await closed;
  });

  it('writes the value of --stderr-env to stderr at start', async () => {
    const { client, transport } = await stdioClient(['--stderr-env', 'UPSTREAM_TOKEN'], {
      env: { PATH: '/usr/bin:/bin', UPSTREAM_TOKEN: secret },
    });
    let stderr = '';
    await withDeadline(
      new Promise<void>((resolve) => {
        const check = (chunk?: Buffer): void => {
          stderr += chunk?.toString('utf8') ?? '';
          if (stderr.includes('\n')) resolve();
        };
        transport.stderr?.on('data', check);
      }),
      'the stderr line',
    );
    expect(stderr).toBe(`UPSTREAM_TOKEN=${secret}\n`);
    await client.close();
  });

  it('records one marker line per tools/call received, with the pid', async () => {
    const markerFile = join(dir, 'calls.marker');
    const { client, transport } = await stdioClient(['--marker-file', markerFile]);
    await call(client, 'echo', { x: 1 });
    await call(client, 'fail');
    await client.listTools();
    const lines = (await readFile(markerFile, 'utf8')).trim().split('\n');
    expect(lines.map((line) => JSON.parse(line) as unknown)).toEqual([
      { tool: 'echo', pid: transport.pid },
      { tool: 'fail', pid: transport.pid },
    ]);
    await client.close();
  });

  it('starts from any cwd with a PATH that holds no node', async () => {
    const { client } = await stdioClient([], { cwd: dir, env: { PATH: join(dir, 'no-such-bin') } });
    expect((await call(client, 'echo', { from: 'elsewhere' })).structuredContent).toEqual({ from: 'elsewhere' });
    await client.close();
  });

  it('exits when its stdin closes, so an orphaned child does not live on', async () => {
    const { command, args } = stdioServerCommand();
    const child = spawn(command, args, { env: { PATH: '/usr/bin:/bin' }, stdio: ['pipe', 'ignore', 'ignore'] });
    const exited = once(child, 'exit') as Promise<[number | null]>;
    child.stdin.end();
    expect((await withDeadline(exited, 'the stdio server to exit'))[0]).toBe(0);
  });

  it('rejects an unknown flag with exit code 2', async () => {
    const { code } = await rawStdio(['--no-such-flag'], []);
    expect(code).toBe(2);
  });
});

async function httpClient(url: string, bearer?: string): Promise<Client> {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: bearer === undefined ? {} : { headers: { authorization: `Bearer ${bearer}` } },
  });
  const client = new Client({ name: 'upstream-mcp-test', version: '1.0.0' });
  await client.connect(transport);
  return client;
}

describe('the streamable-HTTP upstream MCP server', () => {
  let upstream: UpstreamHttpMcp;
  let client: Client;

  beforeAll(async () => {
    upstream = await startUpstreamHttpMcp({ bearer: secret });
    client = await httpClient(upstream.url, secret);
  });
  afterAll(async () => {
    await client.close();
    await upstream.close();
  });

  it('listens on 127.0.0.1 and lists the tool set without the process-level tools', async () => {
    expect(new URL(upstream.url).hostname).toBe('127.0.0.1');
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name).sort()).toEqual([
      'add_tool',
      'drop_after_read',
      'echo',
      'fail',
      'flood',
      'hang',
    ]);
  });

  it('runs echo and records the call with the authorization it carried and its session', async () => {
    const before = upstream.calls();
    const result = await call(client, 'echo', { q: 'x' });
    expect(result.structuredContent).toEqual({ q: 'x' });
    expect(upstream.calls()).toBe(before + 1);
    const last = upstream.received().at(-1);
    expect(last).toMatchObject({ tool: 'echo', authorization: `Bearer ${secret}` });
    expect(last?.sessionId).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('answers fail with isError: true and floods exactly the bytes asked for', async () => {
    expect((await call(client, 'fail')).isError).toBe(true);
    expect(Buffer.byteLength(textOf(await call(client, 'flood', { bytes: 300_000 })))).toBe(300_000);
  });

  it('never answers hang within a bounded wait', async () => {
    await expectHangs(client);
    expect(upstream.received().at(-1)?.tool).toBe('hang');
  });

  it('sends tools/list_changed after add_tool', async () => {
    const changed = listChanged(client);
    expect((await call(client, 'add_tool')).structuredContent).toEqual({ added: true });
    await changed;
    expect((await client.listTools()).tools.map((tool) => tool.name)).toContain('extra');
  });

  it('drops the connection after reading drop_after_read: the call arrived and got no answer; the session lives on', async () => {
    const before = upstream.calls();
    await expect(call(client, 'drop_after_read')).rejects.toThrow();
    expect(upstream.calls()).toBe(before + 1);
    expect(upstream.received().at(-1)?.tool).toBe('drop_after_read');
    expect((await call(client, 'echo', { after: 'drop' })).structuredContent).toEqual({ after: 'drop' });
  });
});

describe('the streamable-HTTP upstream MCP server, when the caller lacks the bearer or connects are refused', () => {
  let upstream: UpstreamHttpMcp;
  const clients: Client[] = [];

  beforeAll(async () => {
    upstream = await startUpstreamHttpMcp({ bearer: secret });
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((client) => client.close()));
  });
  afterAll(async () => {
    await upstream.close();
  });

  it('answers 401 without the bearer or with a wrong one, and no call reaches a session', async () => {
    // The SDK's StreamableHTTPError carries the HTTP status as `code`.
    await expect(httpClient(upstream.url)).rejects.toMatchObject({ code: 401 });
    await expect(httpClient(upstream.url, 'wrong')).rejects.toMatchObject({ code: 401 });
    const response = await fetch(upstream.url, { method: 'POST', body: '{}' });
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toBe('Bearer');
    expect(upstream.unauthorized()).toBe(3);
    expect(upstream.calls()).toBe(0);
  });

  it('refuses TCP connects after refuseNext and accepts them again after resume', async () => {
    const client = await httpClient(upstream.url, secret);
    clients.push(client);
    const port = Number(new URL(upstream.url).port);
    upstream.refuseNext();
    const refused = await withDeadline(
      new Promise<string>((resolve) => {
        const socket = connect(port, '127.0.0.1');
        socket.once('connect', () => {
          socket.destroy();
          resolve('connected');
        });
        socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? 'error'));
      }),
      'the refused connect',
    );
    expect(refused).toBe('ECONNREFUSED');
    await upstream.resume();
    expect((await call(client, 'echo', { after: 'resume' })).structuredContent).toEqual({ after: 'resume' });
  });

  it('without a bearer option, serves any caller', async () => {
    const open = await startUpstreamHttpMcp({});
    try {
      const client = await httpClient(open.url);
      expect((await call(client, 'echo', { open: true })).structuredContent).toEqual({ open: true });
      expect(open.received()).toEqual([{ tool: 'echo', sessionId: expect.any(String) as string }]);
      await client.close();
    } finally {
      await open.close();
    }
  });
});
