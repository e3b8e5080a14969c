import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { registerUpstreamTools } from './upstream-tools.js';

/**
 * A real streamable-HTTP upstream MCP server on 127.0.0.1 (design19 slice A): the SDK's StreamableHTTPServerTransport
 * with stateful sessions (one McpServer per session), the tool set of upstream-tools.ts without the process-level
 * tools, plus `drop_after_read`: the server records the call, then destroys the connection without answering (the
 * "request handed over, transport broke" case of HTTP). With `bearer`, every request without
 * `authorization: Bearer <bearer>` is answered 401 and reaches no session. `push` sends server-initiated
 * notifications on each session's GET stream (the stream a client keeps open for them), for the flood case there.
 */
export interface UpstreamHttpMcpOptions {
  readonly bearer?: string;
}

export interface UpstreamHttpCall {
  readonly tool: string;
  /** The authorization header as received (the injected credential, so a test can prove it arrived). */
  readonly authorization?: string;
  readonly sessionId?: string;
}

export interface UpstreamHttpMcp {
  /** The MCP endpoint, `http://127.0.0.1:<port>/mcp`. */
  readonly url: string;
  /** tools/call requests that passed the bearer check, counted as they arrive (before any tool runs). */
  calls(): number;
  received(): UpstreamHttpCall[];
  /** Requests answered 401. */
  unauthorized(): number;
  /** GET streams (server-initiated messages) whose head was sent and whose connection is still open. */
  openStreams(): number;
  /**
   * Sends `count` notifications (`notifications/postern/push`, about `bytes` bytes each) on the GET stream of every
   * session that has one; resolves with the sessions reached.
   */
  push(bytes: number, count?: number): Promise<number>;
  /** Stop accepting TCP connections now: a new connect is refused by the kernel until `resume()`. Sessions live on. */
  refuseNext(): void;
  /** Listen again on the same port. */
  resume(): Promise<void>;
  /** Forget every session (a restarted or expiring remote): their next requests are answered 404. */
  forgetSessions(): Promise<void>;
  close(): Promise<void>;
}

const mcpPath = '/mcp';
/** Request bodies beyond this are answered 413: the server's own bound, far above any test's call. */
const bodyBytesMax = 8 * 1024 * 1024;

interface ServerState {
  readonly options: UpstreamHttpMcpOptions;
  readonly sessions: Map<string, StreamableHTTPServerTransport>;
  readonly received: UpstreamHttpCall[];
  unauthorized: number;
  /** Session id → its GET stream is open (head sent, connection not closed). */
  readonly streams: Set<string>;
}

export async function startUpstreamHttpMcp(options: UpstreamHttpMcpOptions = {}): Promise<UpstreamHttpMcp> {
  const state: ServerState = { options, sessions: new Map(), received: [], unauthorized: 0, streams: new Set() };
  const server = createServer((request, response) => {
    handle(state, request, response).catch((error: unknown) => {
      if (!response.headersSent) sendJson(response, 500, { error: error instanceof Error ? error.message : 'error' });
      else response.destroy();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}${mcpPath}`,
    calls: () => state.received.length,
    received: () => [...state.received],
    unauthorized: () => state.unauthorized,
    openStreams: () => state.streams.size,
    push: (bytes, count = 1) => push(state, bytes, count),
    refuseNext: () => {
      // close() drops the listening socket at once (new connects get ECONNREFUSED); open connections are untouched.
      if (server.listening) server.close();
    },
    resume: async () => {
      if (server.listening) return;
      server.listen(port, '127.0.0.1');
      await once(server, 'listening');
    },
    forgetSessions: async () => {
      const transports = [...state.sessions.values()];
      state.sessions.clear();
      await Promise.all(transports.map((transport) => transport.close()));
    },
    close: () => closeAll(server, state),
  };
}

async function closeAll(server: Server, state: ServerState): Promise<void> {
  await Promise.all([...state.sessions.values()].map((transport) => transport.close()));
  state.sessions.clear();
  server.closeAllConnections();
  if (server.listening) await new Promise<void>((resolve) => server.close(() => resolve()));
}

async function handle(state: ServerState, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const url = new URL(request.url ?? '/', 'http://127.0.0.1');
  if (url.pathname !== mcpPath) return sendJson(response, 404, { error: 'not found' });
  const authorization = request.headers.authorization;
  if (state.options.bearer !== undefined && authorization !== `Bearer ${state.options.bearer}`) {
    state.unauthorized += 1;
    response.setHeader('www-authenticate', 'Bearer');
    return sendJson(response, 401, { error: 'unauthorized' });
  }
  const sessionId = headerValue(request.headers['mcp-session-id']);
  if (request.method !== 'POST') {
    const transport = sessionId === undefined ? undefined : state.sessions.get(sessionId);
    if (transport === undefined || sessionId === undefined)
      return sendJson(response, 404, rpcError(-32001, 'session not found'));
    if (request.method === 'GET') trackStream(state, sessionId, response);
    return transport.handleRequest(request, response);
  }
  const body = await readJson(request, response);
  if (body === undefined) return;
  for (const tool of toolCalls(body)) {
    state.received.push({
      tool,
      ...(authorization === undefined ? {} : { authorization }),
      ...(sessionId === undefined ? {} : { sessionId }),
    });
    if (tool === 'drop_after_read') {
      request.socket.destroy();
      return;
    }
  }
  const transport = sessionId === undefined ? undefined : state.sessions.get(sessionId);
  if (transport !== undefined) return transport.handleRequest(request, response, body.value);
  if (sessionId !== undefined || !isInitializeRequest(body.value))
    return sendJson(response, sessionId === undefined ? 400 : 404, rpcError(-32000, 'no valid session'));
  return openSession(state, request, response, body.value);
}

async function openSession(state: ServerState, request: IncomingMessage, response: ServerResponse, body: unknown) {
  const transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    onsessioninitialized: (id) => void state.sessions.set(id, transport),
    onsessionclosed: (id) => void state.sessions.delete(id),
  });
  const mcp = new McpServer({ name: 'postern-upstream-http', version: '1.0.0' });
  registerUpstreamTools(mcp, {
    processTools: false,
    interceptedTools: { drop_after_read: 'The server drops the connection after reading the request, unanswered.' },
  });
  await mcp.connect(transport);
  await transport.handleRequest(request, response, body);
}

/** The GET stream counts as open once its head is written (the SDK maps it before that) until its socket closes. */
function trackStream(state: ServerState, sessionId: string, response: ServerResponse): void {
  const writeHead = response.writeHead.bind(response) as (...args: unknown[]) => ServerResponse;
  response.writeHead = ((...args: unknown[]) => {
    const written = writeHead(...args);
    if (response.statusCode === 200) state.streams.add(sessionId);
    return written;
  }) as ServerResponse['writeHead'];
  response.once('close', () => state.streams.delete(sessionId));
}

async function push(state: ServerState, bytes: number, count: number): Promise<number> {
  let reached = 0;
  for (const [sessionId, transport] of state.sessions) {
    if (!state.streams.has(sessionId)) continue;
    reached += 1;
    // No related request: the SDK sends it on the session's GET stream.
    for (let i = 0; i < count; i++)
      await transport.send({
        jsonrpc: '2.0',
        method: 'notifications/postern/push',
        params: { data: 'p'.repeat(bytes) },
      });
  }
  return reached;
}

function toolCalls(body: { value: unknown }): string[] {
  const messages = Array.isArray(body.value) ? body.value : [body.value];
  return messages.flatMap((message: unknown) => {
    if (typeof message !== 'object' || message === null) return [];
    const { method, params } = message as { method?: unknown; params?: { name?: unknown } };
    if (method !== 'tools/call') return [];
    return [typeof params?.name === 'string' ? params.name : ''];
  });
}

/** The parsed body, or undefined once an error answer was sent. */
async function readJson(request: IncomingMessage, response: ServerResponse): Promise<{ value: unknown } | undefined> {
  const chunks: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    bytes += chunk.length;
    if (bytes > bodyBytesMax) {
      sendJson(response, 413, { error: 'body too large' });
      return undefined;
    }
    chunks.push(chunk);
  }
  try {
    return { value: JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown };
  } catch {
    sendJson(response, 400, rpcError(-32700, 'parse error'));
    return undefined;
  }
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function rpcError(code: number, message: string): Record<string, unknown> {
  return { jsonrpc: '2.0', error: { code, message }, id: null };
}

function sendJson(response: ServerResponse, status: number, value: unknown): void {
  response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value));
}
