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
  /** A person cancelled the ticket before dispatch (a withdrawn approval: not a caller event). */
  | { kind: 'operator_cancelled' };

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
  | 'ssh_auth'
  | 'ssh_channel';

export type CallerEvent = 'cancelled' | 'deadline' | 'disconnected';

/**
 * Plain evidence about one action, as the channels and the queue observed it. classifyOutcome turns
 * it into a classification; nothing here is inferred from an exception's type or message.
 */
export interface OutcomeEvidence {
  channel: Channel;
  /** A local gate that stopped the action before dispatch. */
  gate?: LocalGate;
  /** A fresh connection failed during setup; `attempts` counts setup attempts made so far. */
  setup?: { failure: SetupFailure; stage: string; attempts: number; attemptsMax: number };
  /** DISPATCH_STARTED is durable for the latest attempt. */
  dispatchStarted: boolean;
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
  };
  /** The first caller event observed, if any. */
  caller?: CallerEvent;
  /**
   * The operation's own deadline (the route's or SSH host's timeout_ms) fired: a broker-side limit on the remote
   * operation, never a caller event. A caller event observed first takes precedence.
   */
  operationDeadline?: boolean;
  /** The operation is known to be idempotent (method semantics or a declared route/command contract). */
  idempotent: boolean;
  /** A declared idempotency contract covers this attempt and its retention window has not passed. */
  idempotencyContract?: { withinRetention: boolean };
  /** The settled result could not be handed to the caller. */
  deliveryFailed?: boolean;
}
