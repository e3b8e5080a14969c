import type { Logger } from 'pino';
import { CodedError, type ErrorCode } from '../../contract/index.js';
import type { SetupFailure } from '../../core/index.js';
import { systemClock, type Clock, type DispatchGate } from '../../ports/index.js';
import { defaultMcpLimits, type McpLimits } from './mcp-limits.js';
import type {
  McpCallRequest,
  McpChannelReport,
  McpSecrets,
  McpServerSpec,
  McpStopReason,
  McpUpstreamErrorCode,
  McpUpstreamStatus,
  McpUpstreamTool,
} from './mcp-types.js';
import type { McpOAuth } from './oauth-grants.js';
import { runCall } from './run-call.js';
import type { StderrScrubber } from './stderr-log.js';
import { StartFailed, startFailure, UpstreamSession } from './upstream-session.js';

export interface McpUpstreamsOptions {
  readonly gate: DispatchGate;
  readonly logger?: Logger;
  /** The server's secrets, resolved inside vault.withSecret; asked at every (re)start, never kept by the caller. */
  readonly secretsFor: (server: string) => Promise<McpSecrets>;
  readonly limits?: Partial<McpLimits>;
  readonly clock?: Clock;
  /** OAuth for streamable_http servers with `oauth` (oauth-grants.ts); without it such a server never starts. */
  readonly oauth?: McpOAuth;
  /**
   * Builds the broker's full scrubber over a server's secrets (broker/actions/secret-scrubber.ts, out of this
   * folder's reach) for its child's stderr; without it only the exact forms of secret-forms.ts are removed.
   */
  readonly stderrScrubber?: (secrets: readonly Buffer[]) => StderrScrubber;
}

/** One configured server as the registry tracks it: its live session, its restart history, its tool list. */
interface Entry {
  spec: McpServerSpec;
  specKey: string;
  session: UpstreamSession | undefined;
  starting: Promise<UpstreamSession> | undefined;
  tools: McpUpstreamTool[] | undefined;
  /** Consecutive unexpected exits and failed starts; a reply resets it. */
  failures: number;
  restarts: number;
  /** The last session ended unexpectedly (or never started): the next start is a restart. */
  afterFailure: boolean;
  retryAtMs: number | undefined;
  lastError: McpUpstreamStatus['lastError'];
  warmTimer: NodeJS.Timeout | undefined;
  /** OAuth servers: the authorization header of the latest setup, read by the session's fetch per request. */
  authorization: string | undefined;
  /** Aborted by stopAll: the start in progress closes its child or connections at once. */
  stopStart: AbortController | undefined;
}

/**
 * The upstream MCP servers behind Postern (docs/mcp-channel.md): children and sessions started lazily at the first
 * call or tools/list, kept warm for the server's warm_ms, at most `childrenMax` at once (the least recently used idle
 * one stopped first), restarted with exponential backoff after an unexpected exit, all stopped on vault lock and
 * broker stop. `call` is the dispatch boundary of the `mcp` channel (run-call.ts); it never throws for remote trouble.
 */
export class McpUpstreams {
  readonly limits: McpLimits;
  private readonly clock: Clock;
  private readonly entries = new Map<string, Entry>();
  private readonly toolListeners = new Set<(server: string) => void>();
  /** Bumped by stopAll: a start that began before it is closed as soon as it completes. */
  private epoch = 0;
  private stopping = false;

  constructor(private readonly options: McpUpstreamsOptions) {
    this.limits = { ...defaultMcpLimits, ...options.limits };
    this.clock = options.clock ?? systemClock;
  }

  call(spec: McpServerSpec, request: McpCallRequest): Promise<McpChannelReport> {
    return runCall(
      {
        gate: this.options.gate,
        acquire: () => this.acquire(spec, request.credentialKey),
        release: (session, replied) => this.release(spec.name, session, replied),
      },
      request,
    );
  }

  /** The server's tools (started lazily; cached until it announces tools/list_changed or its entry changes). */
  async listTools(spec: McpServerSpec): Promise<McpUpstreamTool[]> {
    const entry = this.entryFor(spec);
    if (entry.tools !== undefined) return entry.tools;
    let session: UpstreamSession;
    try {
      session = await this.acquire(spec, undefined);
    } catch (error) {
      throw codedStartError(spec.name, error);
    }
    try {
      const tools = await session.listTools();
      if (entry.session === session) entry.tools = tools;
      return tools;
    } catch (error) {
      throw new CodedError('MCP_INITIALIZE_FAILED', `the MCP server ${spec.name} did not answer tools/list`, {
        field: 'mcp_servers',
        cause: error,
      });
    } finally {
      this.release(spec.name, session, false);
    }
  }

  onToolsChanged(listener: (server: string) => void): () => void {
    this.toolListeners.add(listener);
    return () => this.toolListeners.delete(listener);
  }

  status(): McpUpstreamStatus[] {
    const now = this.clock.nowMs();
    return [...this.entries.values()].map((entry) => {
      const live = entry.session !== undefined && !entry.session.closed ? entry.session : undefined;
      const state =
        live !== undefined
          ? 'ready'
          : entry.starting !== undefined
            ? 'starting'
            : entry.retryAtMs !== undefined && now < entry.retryAtMs
              ? 'backoff'
              : entry.failures > 0
                ? 'failed'
                : 'idle';
      return {
        server: entry.spec.name,
        transport: entry.spec.transport,
        state,
        ...(live?.pid === undefined ? {} : { pid: live.pid }),
        restarts: entry.restarts,
        ...(state === 'backoff' && entry.retryAtMs !== undefined ? { retryAtMs: entry.retryAtMs } : {}),
        ...(entry.lastError === undefined ? {} : { lastError: entry.lastError }),
        auth: this.authState(entry.spec),
      };
    });
  }

  /** Whether an OAuth server holds a grant (`ok`) or waits for a person (`required`); `none` for the others. */
  authState(spec: McpServerSpec): 'none' | 'ok' | 'required' {
    if (spec.oauth === undefined) return 'none';
    return this.options.oauth?.authState(spec) ?? 'required';
  }

  /** The OAuth tokens the server was given lately, for scrubbing its answers like any other secret of it. */
  oauthSecrets(server: string): readonly string[] {
    return this.options.oauth?.secretsOf(server) ?? [];
  }

  /** Kills every child (SIGTERM, SIGKILL after the grace) and closes every session; calls in flight see them go. */
  async stopAll(reason: McpStopReason): Promise<void> {
    this.epoch += 1;
    if (reason === 'broker_stopping') {
      this.stopping = true;
      this.options.oauth?.close();
    }
    const sessions: UpstreamSession[] = [];
    // A start in progress holds a child (the secrets in its env) too: stopped now, not at its initialize timeout.
    const starts: Promise<unknown>[] = [];
    for (const entry of this.entries.values()) {
      entry.stopStart?.abort();
      if (entry.starting !== undefined) starts.push(entry.starting.catch(() => undefined));
      clearTimeout(entry.warmTimer);
      if (entry.session !== undefined) {
        entry.session.stopReason = reason;
        sessions.push(entry.session);
      }
      entry.session = undefined;
      // Stopped by the broker, not crashed: the next start is not held back.
      entry.failures = 0;
      entry.retryAtMs = undefined;
    }
    if (sessions.length > 0) this.options.logger?.info({ reason, servers: sessions.length }, 'mcp upstreams stopped');
    await Promise.all([...sessions.map((session) => session.close()), ...starts]);
  }

  private entryFor(spec: McpServerSpec): Entry {
    const specKey = JSON.stringify([spec.transport, spec.command, spec.args, spec.cwd, spec.url, spec.oauth]);
    let entry = this.entries.get(spec.name);
    if (entry === undefined) {
      entry = {
        spec,
        specKey,
        session: undefined,
        starting: undefined,
        tools: undefined,
        failures: 0,
        restarts: 0,
        afterFailure: false,
        retryAtMs: undefined,
        lastError: undefined,
        warmTimer: undefined,
        authorization: undefined,
        stopStart: undefined,
      };
      this.entries.set(spec.name, entry);
    } else if (entry.specKey !== specKey) {
      // The entry changed (a configuration applied live): the old session finishes its calls and is stopped then.
      const old = entry.session;
      Object.assign(entry, { spec, specKey, session: undefined, tools: undefined, failures: 0, retryAtMs: undefined });
      if (old !== undefined && old.inflight === 0) void old.close();
    } else entry.spec = spec;
    return entry;
  }

  private async acquire(spec: McpServerSpec, credentialKey?: string): Promise<UpstreamSession> {
    const entry = this.entryFor(spec);
    // Setup, before the boundary: a refresh that fails here leaves the call not attempted (stage authorize).
    if (spec.oauth !== undefined) entry.authorization = await this.bearer(spec);
    let session = await this.sessionFor(entry, credentialKey);
    // Started under other credentials (rotated, rebound, env changed): a new one, so the record names what is used.
    // The old one finishes its calls and is stopped then (release closes a session no longer the entry's).
    for (let tries = 0; credentialKey !== undefined && session.credentialKey !== credentialKey; tries++) {
      // Calls under two generations racing each other: this one gives up at setup rather than spin.
      if (tries >= 2) throw new StartFailed('mcp_spawn', 'spawn', 'credentials changed while starting', 'spawn_failed');
      if (entry.session === session) entry.session = undefined;
      entry.tools = undefined;
      if (session.inflight === 0) void this.stopSession(entry, session, 'credentials changed');
      session = await this.sessionFor(entry, credentialKey);
    }
    session.inflight += 1;
    session.lastUsedMs = this.clock.nowMs();
    clearTimeout(entry.warmTimer);
    return session;
  }

  private bearer(spec: McpServerSpec): Promise<string> {
    const oauth = this.options.oauth;
    if (oauth === undefined)
      return Promise.reject(
        new StartFailed('mcp_authorization', 'authorize', 'not_authorized', 'authorization_required'),
      );
    return oauth.bearer(spec);
  }

  private sessionFor(entry: Entry, credentialKey: string | undefined): Promise<UpstreamSession> {
    if (this.stopping) return Promise.reject(new StartFailed('mcp_spawn', 'spawn', 'broker_stopping', 'spawn_failed'));
    if (entry.session !== undefined && !entry.session.closed) return Promise.resolve(entry.session);
    if (entry.starting !== undefined) return entry.starting;
    const retryAt = entry.retryAtMs;
    if (entry.spec.transport === 'stdio' && retryAt !== undefined && this.clock.nowMs() < retryAt) {
      const until = new Date(retryAt).toISOString();
      const waitMs = retryAt - this.clock.nowMs();
      return Promise.reject(
        new StartFailed(
          'mcp_spawn',
          'spawn',
          `backing off after a crash; may start again at ${until}`,
          'spawn_failed',
          waitMs,
        ),
      );
    }
    const room = this.makeRoom();
    if (room !== undefined) return Promise.reject(room);
    const starting = this.start(entry, credentialKey).finally(() => {
      entry.starting = undefined;
    });
    entry.starting = starting;
    return starting;
  }

  private async start(entry: Entry, credentialKey: string | undefined): Promise<UpstreamSession> {
    const epoch = this.epoch;
    const spec = entry.spec;
    const stop = new AbortController();
    entry.stopStart = stop;
    const secrets = await this.options.secretsFor(spec.name);
    let session: UpstreamSession;
    try {
      session = await UpstreamSession.open(spec, secrets, {
        stop: stop.signal,
        limits: this.limits,
        clock: this.clock,
        logger: this.options.logger,
        onToolsChanged: () => this.toolsChanged(entry, session),
        authorization: () => entry.authorization,
        ...(this.options.stderrScrubber === undefined ? {} : { stderrScrubber: this.options.stderrScrubber }),
      });
    } catch (error) {
      if (stop.signal.aborted) throw new StartFailed('mcp_spawn', 'spawn', 'stopped while starting', 'spawn_failed');
      const failed = startFailure(error);
      this.failed(entry, failed.code, failed.detail);
      throw failed;
    } finally {
      if (entry.stopStart === stop) entry.stopStart = undefined;
    }
    if (epoch !== this.epoch || this.stopping) {
      await session.close();
      throw new StartFailed('mcp_spawn', 'spawn', 'stopped while starting', 'spawn_failed');
    }
    session.credentialKey = credentialKey;
    if (entry.afterFailure) entry.restarts += 1;
    entry.afterFailure = false;
    entry.session = session;
    void session.whenClosed().then(() => this.closed(entry, session));
    this.options.logger?.info({ mcp_server: spec.name, pid: session.pid }, 'mcp upstream started');
    return session;
  }

  private release(server: string, session: UpstreamSession, replied: boolean): void {
    const entry = this.entries.get(server);
    session.inflight = Math.max(0, session.inflight - 1);
    session.lastUsedMs = this.clock.nowMs();
    if (entry === undefined || session.inflight > 0) return;
    if (replied) entry.failures = 0;
    if (entry.session !== session) {
      void session.close();
      return;
    }
    clearTimeout(entry.warmTimer);
    if (entry.spec.warmMs <= 0) {
      void this.stopSession(entry, session, 'warm_ms 0');
      return;
    }
    entry.warmTimer = setTimeout(() => {
      if (session.inflight === 0) void this.stopSession(entry, session, 'idle');
    }, entry.spec.warmMs);
    entry.warmTimer.unref();
  }

  private async stopSession(entry: Entry, session: UpstreamSession, why: string): Promise<void> {
    if (entry.session === session) {
      clearTimeout(entry.warmTimer);
      entry.session = undefined;
    }
    this.options.logger?.info({ mcp_server: entry.spec.name, pid: session.pid, why }, 'mcp upstream stopped');
    await session.close();
  }

  /** Makes room for one more live upstream: the least recently used idle one is stopped; refused if all are busy. */
  private makeRoom(): StartFailed | undefined {
    const live = [...this.entries.values()].filter(
      (e) => e.starting !== undefined || (e.session !== undefined && !e.session.closed),
    );
    if (live.length < this.limits.childrenMax) return undefined;
    const idle = live
      .filter((e) => e.starting === undefined && e.session !== undefined && e.session.inflight === 0)
      .sort((a, b) => (a.session?.lastUsedMs ?? 0) - (b.session?.lastUsedMs ?? 0))[0];
    if (idle?.session === undefined)
      return new StartFailed('mcp_spawn', 'spawn', `all ${this.limits.childrenMax} upstreams are busy`, 'spawn_failed');
    void this.stopSession(idle, idle.session, 'least recently used');
    return undefined;
  }

  private closed(entry: Entry, session: UpstreamSession): void {
    if (entry.session === session) {
      clearTimeout(entry.warmTimer);
      entry.session = undefined;
    }
    const reason = session.closeReason;
    if (reason === 'stopped') return;
    this.failed(entry, reason === 'reply_too_large' ? 'reply_too_large' : 'exited', session.exitDetail);
  }

  private failed(entry: Entry, code: McpUpstreamErrorCode, detail: string): void {
    const now = this.clock.nowMs();
    entry.failures += 1;
    entry.afterFailure = true;
    const backoffMs = Math.min(this.limits.backoffMsBase * 2 ** (entry.failures - 1), this.limits.backoffMsMax);
    entry.retryAtMs = now + backoffMs;
    entry.lastError = { code, detail: detail.slice(0, 200), atMs: now };
    this.options.logger?.warn(
      { mcp_server: entry.spec.name, code, detail: entry.lastError.detail, backoff_ms: backoffMs },
      'mcp upstream failed',
    );
  }

  private toolsChanged(entry: Entry, session: UpstreamSession): void {
    if (entry.session !== session) return;
    entry.tools = undefined;
    for (const listener of this.toolListeners) listener(entry.spec.name);
  }
}

const startErrorCodes: Partial<Record<SetupFailure, ErrorCode>> = {
  mcp_spawn: 'MCP_SPAWN_FAILED',
  mcp_initialize: 'MCP_INITIALIZE_FAILED',
  mcp_authorization: 'MCP_AUTHORIZATION_REQUIRED',
  dns_not_found: 'DNS_FAILED',
  dns_temporary: 'DNS_FAILED',
  connect_refused: 'CONNECT_REFUSED',
  connect_timeout: 'CONNECT_TIMEOUT',
  tls_certificate: 'TLS_FAILED',
  tls_handshake: 'TLS_FAILED',
};

/** A start that failed for tools/list (no action is involved): the setup failure's code, the detail in words. */
function codedStartError(server: string, error: unknown): Error {
  if (!(error instanceof StartFailed)) return error instanceof Error ? error : new Error('start failed');
  const code = startErrorCodes[error.failure] ?? 'NETWORK_UNREACHABLE';
  return new CodedError(code, `the MCP server ${server} could not be started (${error.stage}: ${error.detail})`, {
    field: 'mcp_servers',
  });
}
