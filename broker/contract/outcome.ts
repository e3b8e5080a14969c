import type { ClosedSet } from './closed-set.js';

/** Where the broker stopped. For diagnosis, never for retry policy. [000] */
export const Phase = {
  validation: 'validation',
  credential_injection: 'credential_injection',
  connection_setup: 'connection_setup',
  remote_execution: 'remote_execution',
  result_delivery: 'result_delivery',
} as const satisfies ClosedSet<string>;
export type Phase = keyof typeof Phase;

/** What is known about the remote attempt. [000] */
export const Outcome = {
  /** Durable evidence that dispatch never crossed the boundary. */
  not_attempted: 'not_attempted',
  /** A complete, authoritative refusal that claims no success. */
  rejected: 'rejected',
  /** A complete, authoritative result (an HTTP 500 or exit status 23 is committed). */
  committed: 'committed',
  /** Dispatch may have happened and no deciding result exists. */
  unknown: 'unknown',
} as const satisfies ClosedSet<string>;
export type Outcome = keyof typeof Outcome;

/** What automation may do now, derived by the broker, never inferred from message text. [000] */
export const RetryDisposition = {
  never: 'never',
  after_correction: 'after_correction',
  backoff: 'backoff',
  same_idempotency_key: 'same_idempotency_key',
  reconcile: 'reconcile',
  fetch_result: 'fetch_result',
} as const satisfies ClosedSet<string>;
export type RetryDisposition = keyof typeof RetryDisposition;

/** What happened to the waiting caller. It never decides the effect. [003] */
export const CallerDisposition = {
  completed: 'completed',
  canceled: 'canceled',
  disconnected: 'disconnected',
  timed_out: 'timed_out',
} as const satisfies ClosedSet<string>;
export type CallerDisposition = keyof typeof CallerDisposition;

/** The strongest proof of dispatch reached, in increasing strength. [003] */
export const DispatchEvidence = {
  never_started: 'never_started',
  started_locally: 'started_locally',
  handed_to_transport: 'handed_to_transport',
  remote_receipt: 'remote_receipt',
} as const satisfies ClosedSet<string>;
export type DispatchEvidence = keyof typeof DispatchEvidence;

export const dispatchEvidenceRank: Readonly<Record<DispatchEvidence, number>> = {
  never_started: 0,
  started_locally: 1,
  handed_to_transport: 2,
  remote_receipt: 3,
};

/** What the remote effect is known to be. [003] */
export const Effect = {
  no_effect: 'no_effect',
  succeeded: 'succeeded',
  /** A complete remote failure result: the remote may still have changed state. */
  failed: 'failed',
  rejected: 'rejected',
  partial_effect: 'partial_effect',
  unknown_effect: 'unknown_effect',
} as const satisfies ClosedSet<string>;
export type Effect = keyof typeof Effect;

/** Where a settling fact came from. [000] */
export const EvidenceSource = {
  /** The broker itself observed it locally (a refused connect, a cancel before dispatch). */
  local_gate: 'local_gate',
  transport_observed: 'transport_observed',
  remote_response: 'remote_response',
  remote_query: 'remote_query',
  operator_attested: 'operator_attested',
} as const satisfies ClosedSet<string>;
export type EvidenceSource = keyof typeof EvidenceSource;

/** Channels an action can travel on. */
export const Channel = {
  http: 'http',
  ssh: 'ssh',
  /** A tool of an upstream MCP server (mcp_servers in postern.yaml), called through the broker. */
  mcp: 'mcp',
} as const satisfies ClosedSet<string>;
export type Channel = keyof typeof Channel;
