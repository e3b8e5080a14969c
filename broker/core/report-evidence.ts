import type { OutcomeEvidence, SetupFailure } from './outcome-evidence.js';
import { parseRetryAfterMs } from './parse-retry-after.js';

/**
 * The part of the HTTP channel's report that decides an outcome (broker/channels/http HttpChannelReport is one).
 * Declared here because core imports no channel: the channel's report satisfies it structurally.
 */
export interface HttpReportFacts {
  readonly setup?: { failure: SetupFailure; stage: string; attempts: number; attemptsMax: number };
  readonly stoppedBeforeDispatch?: 'signal' | 'deadline' | 'request_refused';
  readonly requestRefused?: { readonly field: string };
  readonly dispatchStarted: boolean;
  readonly connection?: 'fresh' | 'reused';
  readonly handedToTransport: boolean;
  readonly requestComplete: boolean;
  readonly transportBroken: boolean;
  readonly operationDeadline: boolean;
  readonly vaultLocked?: boolean;
  readonly informationalSeen?: boolean;
  readonly response?: {
    readonly status: number;
    readonly headers: Readonly<Record<string, string>>;
    readonly framingComplete: boolean;
  };
}

/** What the executor knows about the action that the report does not: the route, the key's window, the time. */
export interface HttpReportContext {
  /**
   * The response's Location points off the route's origin (judged by the executor: core parses no URL). A redirect
   * there is refused as such, never an effect that succeeded.
   */
  readonly locationElsewhere: boolean;
  readonly idempotent: boolean;
  /** The key's earliest safe expiry as journaled (PREFLIGHT_VALIDATED): only under a declared contract. */
  readonly keyExpiresAtMs?: number;
  readonly nowMs: number;
  readonly retryAfterMsMax: number;
  /** earlierAttemptUnknown() of the action's record before this attempt's outcome. */
  readonly earlierAttemptUnknown?: boolean;
}

/**
 * Whether attempt `attempt` retries out of unknown: an earlier attempt crossed dispatch, and this round's lease was not
 * taken after an authoritative throttle (RETRY_WHEN_ALLOWED, decideRetry's one way out of a `rejected`). A committed
 * attempt is never retried, so an earlier dispatched attempt under any other lease left the action unknown.
 */
export function earlierAttemptUnknown(
  state: {
    readonly attempts: ReadonlyArray<{ readonly n: number; readonly state: string }>;
    readonly lease: { readonly decision?: string | null } | null;
  },
  attempt: number,
): boolean {
  if (state.lease?.decision === 'RETRY_WHEN_ALLOWED') return false;
  return state.attempts.some((a) => a.n < attempt && a.state === 'dispatched');
}

/** The field a final request the HTTP client would refuse is reported under (never its value: it may hold the secret). */
export function refusedRequestField(report: Pick<HttpReportFacts, 'requestRefused'>): string {
  return report.requestRefused?.field ?? 'request';
}

/** What the HTTP channel observed, as the evidence classifyOutcome reads. */
export function httpReportEvidence(report: HttpReportFacts, context: HttpReportContext): OutcomeEvidence {
  const stopped = report.stoppedBeforeDispatch;
  const expiryMs = context.keyExpiresAtMs;
  return {
    channel: 'http',
    dispatchStarted: report.dispatchStarted,
    handedToTransport: report.handedToTransport,
    requestComplete: report.requestComplete,
    transportBroken: report.transportBroken,
    idempotent: context.idempotent,
    ...(context.earlierAttemptUnknown === true ? { earlierAttemptUnknown: true } : {}),
    ...(report.connection === undefined ? {} : { connection: report.connection }),
    ...(report.setup === undefined ? {} : { setup: report.setup }),
    ...(stopped === 'signal' ? { gate: { kind: 'vault_locked' } as const } : {}),
    // The final request (credential injected) is one the HTTP client would refuse: built, never sent.
    ...(stopped === 'request_refused'
      ? { gate: { kind: 'validation', code: 'INVALID_ARGUMENT', field: refusedRequestField(report) } as const }
      : {}),
    // The route's operation deadline: a broker-side limit (OPERATION_TIMEOUT), never a caller event.
    ...(stopped === 'deadline' || report.operationDeadline ? { operationDeadline: true } : {}),
    ...(report.vaultLocked === true ? { vaultLocked: true } : {}),
    ...(expiryMs === undefined ? {} : { idempotencyContract: { withinRetention: context.nowMs < expiryMs } }),
    ...httpResponseEvidence(report, context),
  };
}

function httpResponseEvidence(report: HttpReportFacts, context: HttpReportContext): Pick<OutcomeEvidence, 'http'> {
  const response = report.response;
  if (response === undefined)
    return report.informationalSeen === true ? { http: { informationalOnly: true, framingComplete: false } } : {};
  const retryAfterMs = parseRetryAfterMs(response.headers['retry-after'], context.nowMs, context.retryAfterMsMax);
  return {
    http: {
      status: response.status,
      framingComplete: response.framingComplete,
      fromProxy: response.headers['proxy-status'] !== undefined,
      // The broker never follows a redirect; one to another origin is refused as such, never an effect that succeeded.
      redirectBlocked: response.status >= 300 && response.status < 400 && context.locationElsewhere,
      ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
    },
  };
}

/** The part of the SSH channel's report that decides an outcome (broker/channels/ssh SshChannelReport is one). */
export interface SshReportFacts {
  readonly setup?: { failure: SetupFailure; stage: string; attempts: number; attemptsMax: number };
  readonly stoppedBeforeDispatch?: 'signal' | 'deadline' | 'cancelled';
  readonly dispatchStarted: boolean;
  readonly handedToTransport: boolean;
  readonly requestComplete: boolean;
  readonly execReply?: 'success' | 'failure';
  readonly exitStatus?: number;
  readonly exitSignal?: string;
  readonly channelClosed: boolean;
  readonly transportBroken: boolean;
  readonly caller?: 'cancelled';
  readonly operationDeadline?: boolean;
  readonly vaultLocked?: boolean;
  readonly unsolicitedReply?: 'success' | 'failure';
}

/**
 * What the SSH channel observed, as the evidence classifyOutcome reads. A command is never assumed idempotent (no
 * declared command contract yet) and every attempt is on a fresh connection (no pooling) that the channel never
 * retries itself: a transient setup failure (refused, reset or timed-out TCP, a failed handshake) is the caller's to
 * retry after a backoff, as the HTTP channel's is while it has attempts left.
 */
export function sshReportEvidence(report: SshReportFacts): OutcomeEvidence {
  const stopped = report.stoppedBeforeDispatch;
  const caller = report.caller ?? (stopped === 'cancelled' ? 'cancelled' : undefined);
  // The host entry's operation deadline: a broker-side limit, recorded as OPERATION_TIMEOUT, never a caller event.
  const operationDeadline = report.operationDeadline === true || stopped === 'deadline';
  return {
    channel: 'ssh',
    dispatchStarted: report.dispatchStarted,
    connection: 'fresh',
    handedToTransport: report.handedToTransport,
    requestComplete: report.requestComplete,
    transportBroken: report.transportBroken,
    idempotent: false,
    ...(report.setup === undefined ? {} : { setup: { ...report.setup, noInternalRetry: true } }),
    ...(stopped === 'signal' ? { gate: { kind: 'vault_locked' } as const } : {}),
    ...(caller === undefined ? {} : { caller }),
    ...(operationDeadline ? { operationDeadline } : {}),
    ...(report.vaultLocked === true ? { vaultLocked: true } : {}),
    ...(report.dispatchStarted
      ? {
          ssh: {
            channelClosed: report.channelClosed,
            ...(report.unsolicitedReply === undefined ? {} : { unsolicitedReply: report.unsolicitedReply }),
            ...(report.execReply === undefined ? {} : { execReply: report.execReply }),
            ...(report.exitStatus === undefined ? {} : { exitStatus: report.exitStatus }),
            ...(report.exitSignal === undefined ? {} : { exitSignal: report.exitSignal }),
          },
        }
      : {}),
  };
}

/** The part of the MCP channel's report that decides an outcome (broker/channels/mcp McpChannelReport is one). */
export interface McpReportFacts {
  readonly setup?: {
    failure: SetupFailure;
    stage: string;
    attempts: number;
    attemptsMax: number;
    /** A start refused during a crash backoff: the wait until one may be tried. */
    retryAfterMs?: number;
  };
  readonly stoppedBeforeDispatch?: 'signal' | 'deadline' | 'cancelled';
  readonly dispatchStarted: boolean;
  /** A warm child/session was reused, or one was started for this call. */
  readonly connection?: 'fresh' | 'reused';
  /** The JSON-RPC request was handed to the transport (stdin write begun / HTTP request head sent). */
  readonly handedToTransport: boolean;
  /** The whole request was written; absent, handing it over counts as whole (one message written at once). */
  readonly requestComplete?: boolean;
  /** The child exited / the connection broke after dispatch without a reply (a reply over its bound is one). */
  readonly transportBroken: boolean;
  readonly operationDeadline?: boolean;
  readonly caller?: 'cancelled';
  readonly reply?:
    { readonly kind: 'result' | 'tool_error' } | { readonly kind: 'protocol_error'; readonly code: number };
  /** streamable_http: the HTTP status of the POST that carried the call, when it came without a JSON-RPC reply. */
  readonly httpStatus?: number;
}

/**
 * What the MCP channel observed, as the evidence classifyOutcome reads. A tool is never assumed idempotent: its
 * annotations (idempotentHint) come from the upstream server and are hints, not a contract the broker can rely on.
 * A channel that cannot tell a partial write from a whole one reports only handedToTransport.
 */
export function mcpReportEvidence(report: McpReportFacts): OutcomeEvidence {
  const stopped = report.stoppedBeforeDispatch;
  const caller = report.caller ?? (stopped === 'cancelled' ? 'cancelled' : undefined);
  // The server entry's operation deadline: a broker-side limit, recorded as OPERATION_TIMEOUT, never a caller event.
  const operationDeadline = report.operationDeadline === true || stopped === 'deadline';
  const reply = report.reply;
  return {
    channel: 'mcp',
    dispatchStarted: report.dispatchStarted,
    handedToTransport: report.handedToTransport,
    requestComplete: report.requestComplete ?? report.handedToTransport,
    transportBroken: report.transportBroken,
    idempotent: false,
    ...(report.connection === undefined ? {} : { connection: report.connection }),
    ...(report.setup === undefined ? {} : { setup: report.setup }),
    ...(stopped === 'signal' ? { gate: { kind: 'vault_locked' } as const } : {}),
    ...(caller === undefined ? {} : { caller }),
    ...(operationDeadline ? { operationDeadline } : {}),
    // A reply reported before dispatch is not evidence: nothing was sent.
    ...(report.dispatchStarted
      ? {
          mcp:
            reply === undefined
              ? { complete: false }
              : {
                  reply: reply.kind,
                  complete: true,
                  ...(reply.kind === 'protocol_error' ? { protocolErrorCode: reply.code } : {}),
                },
        }
      : {}),
    ...(report.dispatchStarted && reply === undefined && report.httpStatus !== undefined
      ? { mcp: { complete: false, httpStatus: report.httpStatus } }
      : {}),
  };
}
