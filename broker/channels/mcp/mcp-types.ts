import type { SetupFailure } from '../../core/index.js';
import type { HeldObservations } from '../../ports/index.js';

/** What the channel needs of one `mcp_servers[]` entry; built by the executor from McpServerSettings. */
export interface McpServerSpec {
  readonly name: string;
  readonly transport: 'stdio' | 'streamable_http';
  /** stdio: absolute path of the program (config refuses anything else). */
  readonly command?: string;
  readonly args?: readonly string[];
  readonly cwd?: string;
  /** streamable_http: the endpoint. */
  readonly url?: string;
  /** streamable_http: the remote requires OAuth 2.1 (oauth-grants.ts); its bearer is the grant's access token. */
  readonly oauth?: McpOAuthSettings;
  /** How long an idle child or session is kept after its last call; 0 stops it after each call. */
  readonly warmMs: number;
}

/** `mcp_servers[].oauth` as the channel needs it. */
export interface McpOAuthSettings {
  /** Pre-registered public client; absent: RFC 7591 dynamic registration, kept sealed with the grant. */
  readonly clientId?: string;
  readonly clientName?: string;
  readonly scopes?: readonly string[];
}

/** Secret material for one (re)start of a server, resolved by the caller inside vault.withSecret. */
export interface McpSecrets {
  /** The rendered env of a stdio child, added to a minimal base env (never the broker's own). */
  readonly env: Readonly<Record<string, string>>;
  /** Headers a streamable_http server gets on every request (e.g. authorization). */
  readonly headers: Readonly<Record<string, string>>;
  /** Every secret value given to this server, for scrubbing what it writes to stderr. */
  readonly secrets: readonly Buffer[];
}

export interface McpUpstreamTool {
  name: string;
  description?: string;
  inputSchema: Record<string, unknown>;
  annotations?: Record<string, unknown>;
}

export interface McpCallRequest {
  readonly actionId: string;
  readonly attempt: number;
  /** The upstream tool name (without the `<server>.` prefix). */
  readonly tool: string;
  readonly arguments: Record<string, unknown>;
  /** The operation deadline: before dispatch it stops setup, after it the effect is unknown. */
  readonly deadlineMs: number;
  /** The caller cancelled: before dispatch → stoppedBeforeDispatch 'cancelled'; after it, only recorded. */
  readonly signal?: AbortSignal;
  /**
   * The credential generation the caller authorized (ids, version tags, env template): a warm session started
   * under another one is stopped and a new one started before the boundary, so the record names what was used.
   */
  readonly credentialKey?: string;
  /** Hears the secrets the session serving this call was started with, for scrubbing its reply (before dispatch). */
  readonly onSessionSecrets?: (secrets: readonly Buffer[]) => void;
  /**
   * The caller appends the settlement at once, with AppendOptions.withHeld (settle.ts): after dispatch, unless the caller
   * cancelled (its record appends a caller event first), the channel does not commit its observations on its own; they
   * ride in the settlement's commit, and the report hands them over as `observations`.
   */
  readonly observationsRideWithSettlement?: boolean;
}

/** Setup stages a SETUP_ATTEMPT_FAILED names (docs/mcp-channel.md). */
export type McpSetupStage = 'spawn' | 'initialize' | 'connect' | 'tls' | 'authorize';

/** The reply to a tools/call as received (never scrubbed here: the executor scrubs what it delivers). */
export type McpCallResult =
  | { readonly content: unknown[]; readonly structuredContent?: unknown; readonly isError: boolean }
  | { readonly error: { readonly code: number; readonly message: string } };

/** What the channel observed for one call. It decides nothing: it satisfies core's McpReportFacts. */
export interface McpChannelReport {
  readonly setup?: {
    failure: SetupFailure;
    stage: McpSetupStage;
    attempts: number;
    attemptsMax: number;
    detail: string;
    /** Refused during a crash backoff: the wait until a start may be tried (the agent's retry_after_ms). */
    retryAfterMs?: number;
  };
  readonly stoppedBeforeDispatch?: 'signal' | 'deadline' | 'cancelled';
  readonly dispatchStarted: boolean;
  /** The request was handed to the transport (stdin write begun / HTTP request head sent). */
  readonly handedToTransport: boolean;
  /** The whole request was written (stdin write callback / HTTP body sent). */
  readonly requestComplete: boolean;
  /** The child exited / the session broke after dispatch without a reply; a reply over its bound is one. */
  readonly transportBroken: boolean;
  readonly operationDeadline?: boolean;
  readonly caller?: 'cancelled';
  readonly reply?:
    { readonly kind: 'result' | 'tool_error' } | { readonly kind: 'protocol_error'; readonly code: number };
  readonly result?: McpCallResult;
  /** sha256 of the reply JSON as received (also in REMOTE_RESPONSE_COMPLETE). */
  readonly replyDigest?: string;
  /** A child or session started for this call, or a warm one. */
  readonly connection: 'fresh' | 'reused';
  readonly connectionId?: string;
  /** streamable_http: the HTTP status of the POST that carried the call, when one arrived. */
  readonly httpStatus?: number;
  /** The journal refused an observation (or the boundary itself: then dispatchStarted is false). */
  readonly journalFailed?: unknown;
  /** With observationsRideWithSettlement: the observation appends, held for the settlement's commit. */
  readonly observations?: HeldObservations;
}

export type McpUpstreamState = 'idle' | 'starting' | 'ready' | 'backoff' | 'failed';

/** Closed set of what went wrong last with an upstream (for Status); never carries upstream text. */
export const mcpUpstreamErrorCodes = {
  spawn_failed: 'The child process could not be started.',
  initialize_failed: 'The server did not complete MCP initialize.',
  connect_failed: 'The remote could not be reached (DNS, TCP or TLS).',
  exited: 'The child exited or the session closed unexpectedly.',
  reply_too_large: 'A reply exceeded the bound and the transport was closed.',
  authorization_required: 'The server needs OAuth and no usable grant is held: a person must authorize it.',
  authorization_failed: 'The authorization server could not be reached or answered badly while refreshing.',
} as const;
export type McpUpstreamErrorCode = keyof typeof mcpUpstreamErrorCodes;

export interface McpUpstreamStatus {
  readonly server: string;
  readonly transport: 'stdio' | 'streamable_http';
  readonly state: McpUpstreamState;
  readonly pid?: number;
  /** Starts that followed an unexpected exit or a failed start. */
  readonly restarts: number;
  /** When a call may start the server again (state backoff). */
  readonly retryAtMs?: number;
  readonly lastError?: { readonly code: McpUpstreamErrorCode; readonly detail: string; readonly atMs: number };
  /** OAuth servers: whether a grant is held (`ok`) or a person must authorize (`required`); `none` otherwise. */
  readonly auth: 'none' | 'ok' | 'required';
}

export type McpStopReason = 'vault_locked' | 'broker_stopping';
