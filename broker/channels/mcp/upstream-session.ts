import { randomBytes } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import type { SetupFailure } from '../../core/index.js';
import type { Clock } from '../../ports/index.js';
import type { Logger } from 'pino';
import { openPinnedSocket, SetupFailed } from '../http/open-pinned-socket.js';
import { CallTap, type CallEnd } from './call-tap.js';
import { ChildTransport, SpawnFailed } from './child-transport.js';
import type { McpLimits } from './mcp-limits.js';
import type { McpSecrets, McpServerSpec, McpSetupStage, McpUpstreamErrorCode, McpUpstreamTool } from './mcp-types.js';
import {
  connectionTarget,
  createPinnedFetch,
  withCallWire,
  type CallWire,
  type CallWireObserver,
} from './pinned-fetch.js';
import { SecretForms } from './secret-forms.js';
import { StderrLog, type StderrScrubber } from './stderr-log.js';
import type { StreamOverBound } from './stream-bound.js';

/** A start (spawn + initialize, or connect + initialize) or a call's connection that failed: nothing was sent. */
export class StartFailed extends Error {
  constructor(
    readonly failure: SetupFailure,
    readonly stage: McpSetupStage,
    /** Short and ours (an errno code, `exit_1`, `http_401`, `timeout`): never upstream text, never a secret. */
    readonly detail: string,
    readonly code: McpUpstreamErrorCode,
    /** A start refused during a crash backoff: how long until one may be tried again. */
    readonly retryAfterMs?: number,
  ) {
    super(`${stage}: ${failure} (${detail})`);
    this.name = 'StartFailed';
  }
}

/** What a call sees on the wire; the stdio transport reports written, HTTP reports through its CallWire. */
export interface WireObserver extends CallWireObserver {
  written(complete: boolean): void;
}

export interface SessionDeps {
  readonly limits: McpLimits;
  readonly clock: Clock;
  readonly logger: Logger | undefined;
  readonly onToolsChanged: () => void;
  /** OAuth servers: the current `authorization` value, read per request (a refresh in setup replaces it). */
  readonly authorization?: () => string | undefined;
  /** The broker's full scrubber over a child's secrets, for its stderr (McpUpstreamsOptions.stderrScrubber). */
  readonly stderrScrubber?: (secrets: readonly Buffer[]) => StderrScrubber;
  /** Aborted by stopAll while this start is in progress: its child or connections are closed at once. */
  readonly stop?: AbortSignal;
}

const clientInfo = { name: 'postern', version: '1' };

/**
 * One live upstream: an SDK Client over a stdio child or a streamable-HTTP session, plus the channel's own call
 * path (CallTap). The Client does initialize, tools/list and notifications; tools/call is the channel's.
 */
export class UpstreamSession {
  readonly connectionId = `mcp_${randomBytes(6).toString('hex')}`;
  inflight = 0;
  calls = 0;
  lastUsedMs: number;
  tools: McpUpstreamTool[] | undefined;
  /** The caller's credential generation this session was started for (McpCallRequest.credentialKey). */
  credentialKey: string | undefined;
  /** The secret values it was started with: what a reply may echo, whatever the caller opened since. */
  secrets: readonly Buffer[] = [];
  private readonly tap = new CallTap();
  private closedAt: Promise<void>;
  private markClosed: () => void = () => undefined;
  private isClosed = false;

  private constructor(
    readonly spec: McpServerSpec,
    private readonly client: Client,
    private readonly transport: ChildTransport | StreamableHTTPClientTransport,
    private readonly deps: SessionDeps,
    private readonly closeHttp: () => void,
  ) {
    this.lastUsedMs = deps.clock.nowMs();
    this.closedAt = new Promise((resolve) => {
      this.markClosed = resolve;
    });
  }

  get pid(): number | undefined {
    return this.transport instanceof ChildTransport ? this.transport.pid : undefined;
  }

  get closed(): boolean {
    return this.isClosed;
  }

  /** Closed or being closed: a call that has not crossed the boundary yet must not cross it on this session. */
  get stopping(): boolean {
    return this.isClosed || this.stopped;
  }

  /** Set by a stopAll that closed it: why the calls it held back were stopped. */
  stopReason: 'vault_locked' | 'broker_stopping' | undefined;

  /** Why the transport closed when the channel or a bound closed it; undefined for an upstream that went away. */
  get closeReason(): 'stopped' | 'reply_too_large' | undefined {
    if (this.transport instanceof ChildTransport) return this.transport.closeReason;
    return this.overBound !== undefined ? 'reply_too_large' : this.stopped ? 'stopped' : undefined;
  }

  get exitDetail(): string {
    if (this.overBound !== undefined) return this.overBound;
    const end = this.transport instanceof ChildTransport ? this.transport.end : undefined;
    if (end === undefined) return 'closed';
    return end.signal !== null ? `signal_${end.signal}` : `exit_${end.code ?? 'unknown'}`;
  }

  whenClosed(): Promise<void> {
    return this.closedAt;
  }

  private stopped = false;
  private overBound: StreamOverBound | undefined;

  /**
   * streamable_http: what the server sent outside a call broke a bound (stream-bound.ts). Its stream is gone and may
   * not be resumed, so the session goes; marked closed at once, so the next call opens a new one.
   */
  closeOverBound(why: StreamOverBound): void {
    if (this.isClosed || this.stopped) return;
    this.overBound = why;
    this.isClosed = true;
    void this.close();
  }

  /** Marked closed at once (the next call opens a new session) and closed in the background. */
  private expire(): void {
    if (this.isClosed || this.stopped) return;
    this.isClosed = true;
    void this.close();
  }

  static async open(spec: McpServerSpec, secrets: McpSecrets, deps: SessionDeps): Promise<UpstreamSession> {
    const session = await (spec.transport === 'stdio' ? openStdio(spec, secrets, deps) : openHttp(spec, secrets, deps));
    session.secrets = secrets.secrets;
    return session;
  }

  /** @internal the openers' constructor. */
  static create(
    spec: McpServerSpec,
    client: Client,
    transport: ChildTransport | StreamableHTTPClientTransport,
    deps: SessionDeps,
    closeHttp: () => void = () => undefined,
  ): UpstreamSession {
    const session = new UpstreamSession(spec, client, transport, deps, closeHttp);
    session.tap.install(transport);
    const closed = transport.onclose;
    transport.onclose = () => {
      closed?.();
      session.isClosed = true;
      session.markClosed();
    };
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
      session.tools = undefined;
      deps.onToolsChanged();
    });
    return session;
  }

  async listTools(): Promise<McpUpstreamTool[]> {
    if (this.tools !== undefined) return this.tools;
    const tools: McpUpstreamTool[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < this.deps.limits.toolsPagesMax; page++) {
      const answer = await this.client.listTools(cursor === undefined ? {} : { cursor }, {
        timeout: this.deps.limits.initializeTimeoutMs,
      });
      for (const tool of answer.tools) {
        if (tools.length >= this.deps.limits.toolsMax) break;
        tools.push({
          name: tool.name,
          ...(tool.description === undefined ? {} : { description: tool.description }),
          inputSchema: tool.inputSchema as Record<string, unknown>,
          ...(tool.annotations === undefined ? {} : { annotations: tool.annotations as Record<string, unknown> }),
        });
      }
      cursor = answer.nextCursor;
      if (cursor === undefined) break;
    }
    this.tools = tools;
    return tools;
  }

  /** streamable_http: the call's own connection, opened and verified before the boundary. stdio: none needed. */
  async openCallWire(stop: AbortSignal, observer: CallWireObserver): Promise<CallWire | undefined> {
    if (this.spec.transport === 'stdio') return undefined;
    try {
      const socket = await openPinnedSocket(connectionTarget(new URL(this.spec.url ?? '')), {
        signal: stop,
        connectTimeoutMs: this.deps.limits.connectTimeoutMs,
        dnsAddressesMax: this.deps.limits.dnsAddressesMax,
      });
      return { socket, observer };
    } catch (error) {
      throw startFailure(error);
    }
  }

  /**
   * Writes the tools/call (the caller has crossed the boundary) and resolves with how it ended. `id` is
   * this.newCallId(); `observer` hears the write (stdio) or the POST's progress (HTTP, through `wire`).
   */
  call(
    id: string,
    message: Record<string, unknown>,
    observer: WireObserver,
    wire: CallWire | undefined,
  ): Promise<CallEnd> {
    const end = this.tap.expect(id);
    const rpc = { jsonrpc: '2.0' as const, id, method: 'tools/call', params: message };
    if (this.transport instanceof ChildTransport) {
      // A child already gone or stopping was handed nothing: no write is begun, the call is lost unsent.
      if (!this.transport.writable) {
        this.tap.lose(id);
        return end;
      }
      observer.headersSent();
      this.transport.send(rpc).then(
        () => observer.written(true),
        () => observer.written(false),
      );
      return end;
    }
    const transport = this.transport;
    const send = wire === undefined ? transport.send(rpc) : withCallWire(wire, () => transport.send(rpc));
    // An HTTP error status or a broken POST: this call's transport is gone, the session may live on — unless the
    // remote no longer knows it (404) or refuses its static credential (401): then every later call would fail on
    // it too, so it goes and the next call starts a new one. This call's record stays what it saw.
    send.catch((error: unknown) => {
      this.tap.lose(id);
      const status = error instanceof StreamableHTTPError ? error.code : undefined;
      if (status === 404 || (status === 401 && this.spec.oauth === undefined)) this.expire();
    });
    return end;
  }

  newCallId(): string {
    return this.tap.newId();
  }

  forget(id: string): void {
    this.tap.forget(id);
  }

  lose(id: string): void {
    this.tap.lose(id);
  }

  /** notifications/cancelled for a call the broker stopped waiting for at its deadline: a courtesy, not evidence. */
  cancelCall(id: string): void {
    this.transport
      .send({
        jsonrpc: '2.0',
        method: 'notifications/cancelled',
        params: { requestId: id, reason: 'operation deadline' },
      })
      .catch(() => undefined);
  }

  async close(): Promise<void> {
    this.stopped = true;
    if (this.transport instanceof StreamableHTTPClientTransport) {
      await bounded(
        this.transport.terminateSession().catch(() => undefined),
        this.deps.limits.killGraceMs,
      );
    }
    await this.client.close().catch(() => undefined);
    await this.transport.close().catch(() => undefined);
    this.closeHttp();
    this.isClosed = true;
    this.markClosed();
  }
}

async function openStdio(spec: McpServerSpec, secrets: McpSecrets, deps: SessionDeps): Promise<UpstreamSession> {
  if (deps.stop?.aborted === true)
    throw new StartFailed('mcp_spawn', 'spawn', 'stopped while starting', 'spawn_failed');
  const stderr = new StderrLog({
    server: spec.name,
    // Read when a line is logged, by then the child is spawned.
    pid: () => transport.pid,
    forms: new SecretForms(secrets.secrets),
    ...(deps.stderrScrubber === undefined ? {} : { scrubber: deps.stderrScrubber(secrets.secrets) }),
    logger: deps.logger,
    clock: deps.clock,
    lineBytesMax: deps.limits.stderrLineBytesMax,
    linesPerSecond: deps.limits.stderrLinesPerSecond,
  });
  const transport = new ChildTransport({
    command: spec.command ?? '',
    args: spec.args ?? [],
    ...(spec.cwd === undefined ? {} : { cwd: spec.cwd }),
    env: secrets.env,
    lineBytesMax: deps.limits.replyBytesMax,
    killGraceMs: deps.limits.killGraceMs,
    onStderr: (chunk) => stderr.push(chunk),
    onStderrEnd: () => stderr.end(),
  });
  onStop(deps.stop, () => void transport.close());
  try {
    await transport.start();
  } catch (error) {
    if (error instanceof SpawnFailed) throw new StartFailed('mcp_spawn', 'spawn', error.detail, 'spawn_failed');
    throw error;
  }
  const client = newClient();
  try {
    await client.connect(transport, { timeout: deps.limits.initializeTimeoutMs });
  } catch {
    await transport.close();
    const end = transport.end;
    const detail =
      end === undefined ? 'initialize_failed' : end.signal !== null ? `signal_${end.signal}` : `exit_${end.code}`;
    throw new StartFailed('mcp_initialize', 'initialize', detail, 'initialize_failed');
  }
  return UpstreamSession.create(spec, client, transport, deps);
}

async function openHttp(spec: McpServerSpec, secrets: McpSecrets, deps: SessionDeps): Promise<UpstreamSession> {
  const url = new URL(spec.url ?? '');
  const authorization = deps.authorization;
  // Bound before the session exists: a bound broken during initialize fails the start (its body errors).
  const opened: { session?: UpstreamSession } = {};
  const fetch = createPinnedFetch({
    url,
    headers:
      authorization === undefined
        ? secrets.headers
        : () => {
            const value = authorization();
            return value === undefined ? secrets.headers : { ...secrets.headers, authorization: value };
          },
    connectTimeoutMs: deps.limits.connectTimeoutMs,
    dnsAddressesMax: deps.limits.dnsAddressesMax,
    replyBytesMax: deps.limits.replyBytesMax,
    serverStream: {
      bytesPerSecond: deps.limits.serverStreamBytesPerSecond,
      clock: deps.clock,
      overBound: (why) => {
        deps.logger?.warn({ mcp_server: spec.name, why }, 'mcp server stream over its bound; session closed');
        opened.session?.closeOverBound(why);
      },
    },
  });
  const transport = new StreamableHTTPClientTransport(url, {
    fetch,
    // A lost SSE stream is not resumed on a new connection: for a call that would cross the boundary again.
    reconnectionOptions: {
      maxRetries: 0,
      initialReconnectionDelay: 1_000,
      maxReconnectionDelay: 1_000,
      reconnectionDelayGrowFactor: 1,
    },
  });
  const client = newClient();
  onStop(deps.stop, () => {
    void transport.close().catch(() => undefined);
    fetch.closeAll();
  });
  try {
    await client.connect(transport, { timeout: deps.limits.initializeTimeoutMs });
  } catch (error) {
    fetch.closeAll();
    throw startFailure(error);
  }
  opened.session = UpstreamSession.create(spec, client, transport, deps, () => fetch.closeAll());
  return opened.session;
}

function onStop(stop: AbortSignal | undefined, run: () => void): void {
  if (stop?.aborted === true) run();
  else stop?.addEventListener('abort', run, { once: true });
}

function newClient(): Client {
  const client = new Client(clientInfo, { capabilities: {} });
  // Late replies to calls the channel stopped waiting for, and upstream noise, land here: nothing to act on.
  client.onerror = () => undefined;
  return client;
}

/** A connect-stage failure keeps the HTTP channel's words; anything else failed the MCP handshake. */
export function startFailure(error: unknown): StartFailed {
  if (error instanceof StartFailed) return error;
  if (error instanceof SetupFailed) {
    if (error.failure === 'cancelled')
      return new StartFailed('connect_timeout', 'connect', 'cancelled', 'connect_failed');
    const stage = error.stage === 'tls_handshake' ? 'tls' : 'connect';
    return new StartFailed(error.failure, stage, error.detail, 'connect_failed');
  }
  if (error instanceof StreamableHTTPError)
    return new StartFailed('mcp_initialize', 'initialize', `http_${error.code}`, 'initialize_failed');
  const code = (error as { code?: unknown } | null)?.code;
  const detail = code === -32001 ? 'timeout' : 'initialize_failed';
  return new StartFailed('mcp_initialize', 'initialize', detail, 'initialize_failed');
}

function bounded<T>(work: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}
