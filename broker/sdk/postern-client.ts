import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import {
  actionRecordedCapability,
  actionRecordedNotification,
  agentRouteListSchema,
  agentToolReplySchema,
  callWaitMsDefault,
  type AgentRouteList,
  type AgentToolInput,
  type AgentToolName,
  type AgentToolReply,
} from '../contract/index.js';
import { PosternActionError, PosternConnectionError } from './postern-error.js';
import { nextRetry, type RetryOptions } from './retry-policy.js';
import { SocketClientTransport } from './socket-client-transport.js';

/** Where the broker's agent socket lives under a data directory (broker/agent/agent-socket.ts says the same). */
export const agentSocketRelativePath = path.join('agent', 'postern.sock');
/** How long past the call's own wait the SDK waits for the broker's answer before giving up. */
export const answerGraceMs = 30_000;
/** Reads (status, fetch, cancel, routes) answer at once; this only bounds a stuck broker. */
export const readTimeoutMs = 60_000;

export interface ConnectOptions {
  /** The broker's data directory (else POSTERN_DATA_DIR); the socket is `<dataDir>/agent/postern.sock`. */
  readonly dataDir?: string;
  /** The socket itself, overriding dataDir. */
  readonly socketPath?: string;
  /** A label the broker records with the session (identity comes from the kernel, not from this). */
  readonly clientName?: string;
  readonly clientVersion?: string;
  /** Opt-in automatic retry; without it nothing is ever retried. */
  readonly retry?: RetryOptions;
}

export interface CallOptions {
  /** Aborting sends MCP notifications/cancelled: the broker cancels the action if it was not dispatched. */
  readonly signal?: AbortSignal;
}

/** An action's answer: the envelope plus what it carries (ticket, queue position, response, output). */
export type ActionReply = Exclude<AgentToolReply, { invocation_id: null }>;

export interface PosternClient {
  httpRequest(input: AgentToolInput<'http_request'>, options?: CallOptions): Promise<ActionReply>;
  sshExec(input: AgentToolInput<'ssh_exec'>, options?: CallOptions): Promise<ActionReply>;
  actionStatus(actionId: string, options?: CallOptions): Promise<ActionReply>;
  fetchResult(actionId: string, options?: CallOptions): Promise<ActionReply>;
  cancelAction(actionId: string, options?: CallOptions): Promise<ActionReply>;
  /**
   * Every route and SSH host entry: list_routes answers a page at a time, and this follows `more.next_offset` to the
   * last page, so the list is whole (no `offset`, no `more`). A config reload between two pages starts it over.
   */
  listRoutes(options?: CallOptions): Promise<AgentRouteList>;
  close(): Promise<void>;
}

/**
 * Connects straight to the broker's agent socket (no shim) and speaks MCP over it. Each method's
 * input type is the contract's tool schema; answers are parsed with the contract's reply schemas,
 * and an answer flagged isError is thrown as a PosternActionError carrying the whole envelope.
 */
export async function connectPostern(options: ConnectOptions = {}): Promise<PosternClient> {
  const socketPath = resolveSocketPath(options);
  const transport = new SocketClientTransport(socketPath);
  const client = new Client(
    { name: options.clientName ?? 'postern-sdk', version: options.clientVersion ?? '0' },
    // The broker then names each call's action once it is durable, so a lost connection still says which one.
    { capabilities: { experimental: { [actionRecordedCapability]: {} } } },
  );
  const recorded = recordedActions(transport, client);
  try {
    await client.connect(transport);
  } catch (error) {
    await client.close().catch(() => undefined);
    throw connectionError(error, transport, socketPath);
  }

  const call = async (
    tool: AgentToolName,
    args: Record<string, unknown>,
    callOptions: CallOptions | undefined,
    timeout: number,
  ): Promise<unknown> => {
    /** The answer of the action a retry_of goes on: what is thrown if the broker refuses that retry. */
    let retried: ReturnType<typeof parseReply> | undefined;
    for (let attempt = 1; ; attempt += 1) {
      const result = await recorded.track((meta) =>
        client.callTool({ name: tool, arguments: args, _meta: meta }, undefined, {
          timeout,
          ...(callOptions?.signal ? { signal: callOptions.signal } : {}),
        }),
      );
      if (result.isError !== true) return result.structuredContent;
      const reply = parseReply(result.structuredContent);
      // A retry of an action the broker refused to run again (a route without a retry policy): the action's own
      // answer stands, not the refusal of a retry the caller never asked for by name.
      if (retried !== undefined && reply.invocation_id === null) throw new PosternActionError(retried);
      const step = nextRetry({
        options: options.retry,
        attempt,
        disposition: reply.error?.retry,
        retryAfterMs:
          reply.error !== undefined && 'retry_after_ms' in reply.error ? reply.error.retry_after_ms : undefined,
        hasIdempotencyKey: typeof args['idempotency_key'] === 'string',
      });
      if (!step.retry) throw new PosternActionError(reply);
      await sleep(step.delayMs, undefined, callOptions?.signal ? { signal: callOptions.signal } : undefined);
      // A same-key retry, and any retry of a dispatched action whose outcome is unknown (an idempotent repeat after a
      // backoff), is an attempt of the SAME action (its ticket, lane place and lease), never a new one: a new action
      // would also queue behind its own blocked original (DESIGN §2, §4).
      const sameAction = reply.error?.retry === 'same_idempotency_key' || reply.error?.outcome === 'unknown';
      if (tool === 'http_request' && sameAction && reply.invocation_id !== null) {
        retried ??= reply;
        args = { ...args, retry_of: reply.invocation_id };
      }
    }
  };
  const action = async (
    tool: AgentToolName,
    args: Record<string, unknown>,
    callOptions: CallOptions | undefined,
    timeout: number,
  ): Promise<ActionReply> => {
    const reply = parseReply(await call(tool, args, callOptions, timeout));
    if (reply.invocation_id === null) throw new PosternActionError(reply);
    return reply as ActionReply;
  };
  const waitTimeout = (timeoutMs: number | undefined): number => (timeoutMs ?? callWaitMsDefault) + answerGraceMs;

  return {
    httpRequest: (input, callOptions) =>
      action('http_request', { ...input }, callOptions, waitTimeout(input.timeout_ms)),
    sshExec: (input, callOptions) => action('ssh_exec', { ...input }, callOptions, waitTimeout(input.timeout_ms)),
    actionStatus: (actionId, callOptions) =>
      action('action_status', { action_id: actionId }, callOptions, readTimeoutMs),
    fetchResult: (actionId, callOptions) => action('fetch_result', { action_id: actionId }, callOptions, readTimeoutMs),
    cancelAction: (actionId, callOptions) =>
      action('cancel_action', { action_id: actionId }, callOptions, readTimeoutMs),
    listRoutes: (callOptions) =>
      allRoutes(async (offset) => {
        const structured = await call('list_routes', offset === 0 ? {} : { offset }, callOptions, readTimeoutMs);
        const routes = agentRouteListSchema.safeParse(structured);
        if (!routes.success)
          throw new PosternConnectionError('PROTOCOL', 'the broker answered list_routes with an unexpected shape');
        return routes.data;
      }),
    close: () => client.close(),
  };
}

/** How many times listRoutes starts over when the config changed between two of its pages. */
export const listRoutesAttemptsMax = 3;

/**
 * list_routes' pages from offset 0, following `more.next_offset` to the last, as one list. A page that does not go on
 * from the one before (another `list_digest`, the digest of the whole listing it was cut from; or, from a broker that
 * sends none, its offset, its total of entries, or a name listed twice: the config was reloaded between them) starts
 * it over, at most listRoutesAttemptsMax times. The pages are bounded by the config's own bounds (1,024 routes
 * and 1,024 SSH host entries, at least one entry a page), and a `next_offset` that does not move forward is the
 * broker's error, never a loop.
 */
async function allRoutes(page: (offset: number) => Promise<AgentRouteList>): Promise<AgentRouteList> {
  for (let attempt = 1; attempt <= listRoutesAttemptsMax; attempt += 1) {
    const routes: AgentRouteList['routes'] = [];
    const sshHosts: AgentRouteList['ssh_hosts'] = [];
    const names = { routes: new Set<string>(), hosts: new Set<string>() };
    let total: number | undefined;
    let digest: string | undefined;
    let offset = 0;
    let consistent = true;
    for (;;) {
      const list = await page(offset);
      const shown = list.routes.length + list.ssh_hosts.length;
      const listTotal = offset + shown + (list.more?.not_shown ?? 0);
      total ??= listTotal;
      if (offset === 0) digest = list.list_digest;
      const repeated =
        list.routes.some((r) => names.routes.has(r.name)) || list.ssh_hosts.some((h) => names.hosts.has(h.name));
      if ((list.offset ?? 0) !== offset || listTotal !== total || list.list_digest !== digest || repeated) {
        consistent = false;
        break;
      }
      for (const r of list.routes) names.routes.add(r.name);
      for (const h of list.ssh_hosts) names.hosts.add(h.name);
      routes.push(...list.routes);
      sshHosts.push(...list.ssh_hosts);
      if (list.more === undefined) break;
      if (shown === 0 || list.more.next_offset !== offset + shown)
        throw new PosternConnectionError(
          'PROTOCOL',
          `the broker answered list_routes from entry ${offset} with ${shown} entries and a next offset of ${list.more.next_offset}`,
        );
      offset = list.more.next_offset;
    }
    if (consistent) return { ...(digest === undefined ? {} : { list_digest: digest }), routes, ssh_hosts: sshHosts };
  }
  throw new PosternConnectionError(
    'ROUTES_CHANGED',
    `the broker's routes changed while listRoutes read them page by page, ${listRoutesAttemptsMax} times over: call it again`,
  );
}

/** Marks a tool call's request so the client can find the JSON-RPC id it was sent under. */
const callMarker = 'postern.sdk_call';

/**
 * The action each in-flight call recorded, as the broker names it (notifications/postern/action_recorded, sent to a
 * client that declared the capability): `track` runs one call and, when the connection closes before its answer,
 * throws CONNECTION_LOST naming that action (or saying the broker had named none).
 */
function recordedActions(transport: SocketClientTransport, client: Client) {
  let calls = 0;
  const idOfCall = new Map<number, string>();
  const actionOfId = new Map<string, string>();
  transport.onsend = (message) => {
    if (!('method' in message) || message.method !== 'tools/call' || !('id' in message)) return;
    const marker = (message.params?.['_meta'] as Record<string, unknown> | undefined)?.[callMarker];
    if (typeof marker === 'number') idOfCall.set(marker, JSON.stringify(message.id));
  };
  client.fallbackNotificationHandler = async ({ method, params }) => {
    if (method !== actionRecordedNotification) return;
    const { request_id: id, action_id: actionId } = (params ?? {}) as { request_id?: unknown; action_id?: unknown };
    if ((typeof id === 'string' || typeof id === 'number') && typeof actionId === 'string')
      actionOfId.set(JSON.stringify(id), actionId);
  };
  return {
    async track<T>(send: (meta: Record<string, unknown>) => Promise<T>): Promise<T> {
      calls += 1;
      const marker = calls;
      try {
        return await send({ [callMarker]: marker });
      } catch (error) {
        // A call on a connection that closed earlier (the broker evicted it, or went away): a coded error, not the
        // MCP client's bare "Not connected".
        if (!(error instanceof McpError) && (transport.closed || brokenPipe(error)))
          throw closedConnection(error, transport.refusal);
        if (!(error instanceof McpError) || error.code !== ErrorCode.ConnectionClosed) throw error;
        const requestId = idOfCall.get(marker);
        const actionId = requestId === undefined ? undefined : actionOfId.get(requestId);
        throw lostConnection(error, actionId);
      } finally {
        const requestId = idOfCall.get(marker);
        idOfCall.delete(marker);
        if (requestId !== undefined) actionOfId.delete(requestId);
      }
    },
  };
}

function lostConnection(error: McpError, actionId: string | undefined): PosternConnectionError {
  const lost = 'the connection to the Postern broker closed before it answered';
  if (actionId === undefined)
    return new PosternConnectionError(
      'CONNECTION_LOST',
      `${lost}; the broker had named no action for this call before the connection was lost`,
      { cause: error },
    );
  return new PosternConnectionError(
    'CONNECTION_LOST',
    `${lost}; this call's action ${actionId} was recorded: do not send it again — once a broker is back, actionStatus("${actionId}") says what is known`,
    { cause: error, actionId },
  );
}

/** The socket's write failed because its other end is gone (before the close event reached the transport). */
function brokenPipe(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'EPIPE' || code === 'ECONNRESET' || code === 'ERR_STREAM_DESTROYED';
}

function closedConnection(
  error: unknown,
  refusal: { code: string; message: string } | undefined,
): PosternConnectionError {
  const why = refusal === undefined ? '' : ` (${refusal.code}: ${refusal.message})`;
  return new PosternConnectionError(
    'CONNECTION_LOST',
    `the connection to the Postern broker is closed${why}; nothing was sent: connect again (connectPostern) and send it then`,
    { cause: error },
  );
}

function resolveSocketPath(options: ConnectOptions): string {
  if (options.socketPath !== undefined) return options.socketPath;
  const dataDir = options.dataDir ?? process.env['POSTERN_DATA_DIR'];
  if (dataDir === undefined || dataDir === '') {
    throw new PosternConnectionError(
      'INVALID_ARGUMENT',
      'connectPostern needs dataDir or socketPath (or POSTERN_DATA_DIR)',
    );
  }
  return path.join(dataDir, agentSocketRelativePath);
}

function parseReply(structured: unknown): AgentToolReply {
  const reply = agentToolReplySchema.safeParse(structured);
  if (!reply.success) throw new PosternConnectionError('PROTOCOL', 'the broker answered with an unexpected shape');
  return reply.data;
}

function connectionError(error: unknown, transport: SocketClientTransport, socketPath: string): PosternConnectionError {
  if (transport.refusal !== undefined)
    return new PosternConnectionError(transport.refusal.code, transport.refusal.message, { cause: error });
  const code = (error as { code?: unknown }).code;
  if (code === 'ENOENT' || code === 'ECONNREFUSED') {
    return new PosternConnectionError(
      'BROKER_NOT_RUNNING',
      `no Postern broker is listening on ${socketPath} (start one with \`postern daemon --data-dir DIR\`)`,
      { cause: error },
    );
  }
  return new PosternConnectionError('CONNECTION_FAILED', `could not open an MCP session on ${socketPath}`, {
    cause: error,
  });
}
