import type { Channel, ErrorCode } from '../contract/index.js';

/** Local gates that can stop an action before dispatch. */
export type LocalGate =
  | { kind: 'validation'; code: ErrorCode; field?: string }
  | { kind: 'fingerprint_mismatch' }
  | { kind: 'idempotency_mismatch' }
  | { kind: 'vault_locked' }
  | { kind: 'credential_missing' }
  | { kind: 'approval_denied' }
  | { kind: 'approval_expired' }
  | { kind: 'session_revoked' }
  /** The session's process is gone (the session sweeper ended it): the caller went away, nobody cancelled. */
  | { kind: 'session_ended' }
  /** A person cancelled the ticket before dispatch (a withdrawn approval: not a caller event). */
  | { kind: 'operator_cancelled' }
  /** The SSH session recording could not be started before exec: the command never runs unrecorded. */
  | { kind: 'recording_unavailable' }
  /**
   * No OAuth2 access token before dispatch: its own token action failed or gave none. `transient`: that action may
   * succeed if asked again (its remote was unreachable or unsure), else a person corrects the client or endpoint.
   */
  | { kind: 'oauth_token_unavailable'; transient: boolean };

/** Why a fresh connection failed before the application channel existed. */
export type SetupFailure =
  | 'dns_not_found'
  | 'dns_temporary'
  | 'connect_refused'
  | 'connect_timeout'
  | 'network_unreachable'
  | 'tls_certificate'
  | 'tls_handshake'
  /** The network guard refused every resolved address (link-local, metadata, a private range the route does not name). */
  | 'address_forbidden'
  | 'proxy_tunnel'
  | 'ssh_transport'
  | 'ssh_host_key'
  /** accept_new's known_hosts.json failed its MAC, is damaged, or could not be checked (the vault locked). */
  | 'ssh_known_hosts'
  | 'ssh_auth'
  | 'ssh_channel'
  /** The server refused the session channel (CHANNEL_OPEN_FAILURE), or the broker cannot hold the exec back. */
  | 'ssh_channel_refused'
  /** The server answered (CHANNEL_SUCCESS / CHANNEL_FAILURE) an exec request that was never written: a protocol breach. */
  | 'ssh_channel_protocol'
  /** A stdio upstream MCP server's process could not be started (or is backing off after a crash). */
  | 'mcp_spawn'
  /** An upstream MCP server did not complete the MCP initialize handshake. */
  | 'mcp_initialize'
  /** An upstream MCP server needs OAuth and no usable grant is held (never authorized, or its refresh refused). */
  | 'mcp_authorization';

export type CallerEvent = 'cancelled' | 'deadline' | 'disconnected';

/**
 * Plain evidence about one action, as the channels and the queue observed it. classifyOutcome turns
 * it into a classification; nothing here is inferred from an exception's type or message.
 */
export interface OutcomeEvidence {
  channel: Channel;
  /** A local gate that stopped the action before dispatch. */
  gate?: LocalGate;
  /**
   * A fresh connection failed during setup; `attempts` counts setup attempts made so far. `retryAfterMs`: the setup
   * was refused for a known while (an MCP child's crash backoff), so waiting that long is the way, not a correction.
   */
  setup?: {
    failure: SetupFailure;
    stage: string;
    attempts: number;
    attemptsMax: number;
    retryAfterMs?: number;
    /**
     * The channel never retries setup itself (SSH: one connection per action), so attemptsMax is no budget that was
     * spent: a transient failure is the caller's to retry after a backoff, like one with attempts left.
     */
    noInternalRetry?: boolean;
  };
  /** DISPATCH_STARTED is durable for the latest attempt. */
  dispatchStarted: boolean;
  /**
   * An earlier attempt of this action crossed dispatch and no authoritative result settled it (the latest attempt is a
   * retry out of unknown): only a success of this attempt settles the action (earlierAttemptUnknown in
   * report-evidence.ts).
   */
  earlierAttemptUnknown?: boolean;
  /** Whether the latest attempt used a fresh or a reused (pooled) connection. */
  connection?: 'fresh' | 'reused';
  /** Some request bytes were handed to the transport (HTTP headers written, SSH exec request sent). */
  handedToTransport: boolean;
  /** The whole request was handed to the transport. */
  requestComplete: boolean;
  /** The transport broke or went silent after dispatch (reset, close, write error, read timeout). */
  transportBroken?: boolean;
  http?: {
    /** Final (non-1xx) status line received. */
    status?: number;
    /** Only informational (1xx) responses were seen. */
    informationalOnly?: boolean;
    /** The response completed by its framing (RFC 9112): content-length reached, last chunk, etc. */
    framingComplete: boolean;
    retryAfterMs?: number;
    /** A Proxy-Status header (RFC 9209) says an intermediary produced this response. */
    fromProxy?: boolean;
    /** A 3xx that the route does not allow to be followed. */
    redirectBlocked?: boolean;
  };
  ssh?: {
    execReply?: 'success' | 'failure';
    exitStatus?: number;
    exitSignal?: string;
    channelClosed: boolean;
    /** The server answered an exec request that was never written (it is then never written). */
    unsolicitedReply?: 'success' | 'failure';
  };
  mcp?: {
    /**
     * The JSON-RPC reply to tools/call: a tool result, a tool result with isError: true, or a JSON-RPC error object
     * (with its code). Absent when no complete reply arrived.
     */
    reply?: 'result' | 'tool_error' | 'protocol_error';
    protocolErrorCode?: number;
    /** The reply message was received whole and within its bound (REMOTE_RESPONSE_COMPLETE). */
    complete: boolean;
    /** streamable_http: the status of the POST carrying the call when it brought no JSON-RPC reply (an error status). */
    httpStatus?: number;
  };
  /** The first caller event observed, if any. */
  caller?: CallerEvent;
  /**
   * The operation's own deadline (the route's or SSH host's timeout_ms) fired: a broker-side limit on the remote
   * operation, never a caller event. A caller event observed first takes precedence.
   */
  operationDeadline?: boolean;
  /**
   * The vault locked while DISPATCH_STARTED was being made durable, so the request was never handed to the transport
   * (a locked vault starts no credential-backed action); the row is durable, so the outcome stays unknown.
   */
  vaultLocked?: boolean;
  /** The operation is known to be idempotent (method semantics or a declared route/command contract). */
  idempotent: boolean;
  /** A declared idempotency contract covers this attempt and its retention window has not passed. */
  idempotencyContract?: { withinRetention: boolean };
  /** The settled result could not be handed to the caller. */
  deliveryFailed?: boolean;
}
