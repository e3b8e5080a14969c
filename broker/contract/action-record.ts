import { z } from 'zod';
import type { ClosedSet } from './closed-set.js';
import { errorCodeSchema } from './classification.js';
import { ApprovalMode } from './route-modes.js';
import {
  CallerDisposition,
  Channel,
  DispatchEvidence,
  Effect,
  EvidenceSource,
  Outcome,
  Phase,
  RetryDisposition,
} from './outcome.js';

/** The furthest lifecycle step an action reached, in order. */
export const ActionStage = {
  accepted: 'accepted',
  validated: 'validated',
  card_shown: 'card_shown',
  approved: 'approved',
  credential_authorized: 'credential_authorized',
  dispatch_started: 'dispatch_started',
  request_sent: 'request_sent',
  response_started: 'response_started',
  response_complete: 'response_complete',
  result_committed: 'result_committed',
  result_delivered: 'result_delivered',
} as const satisfies ClosedSet<string>;
export type ActionStage = keyof typeof ActionStage;
export const actionStageOrder: readonly ActionStage[] = Object.keys(ActionStage) as ActionStage[];

export const Decision = {
  approved: 'approved',
  rejected: 'rejected',
  expired: 'expired',
  cancelled: 'cancelled',
} as const satisfies ClosedSet<string>;
export type Decision = keyof typeof Decision;

export const attemptStateSchema = z.object({
  n: z.number().int().positive(),
  /** setup_failed: the fresh connection failed before the application channel existed. */
  state: z.enum(['setup_failed', 'dispatched']),
  setup_stage: z.string().nullable(),
  connection: z.enum(['fresh', 'reused']).nullable(),
  connection_id: z.string().nullable(),
  dispatch_seq: z.number().int().nullable(),
  request_complete: z.boolean(),
  response_started: z.boolean(),
  response_complete: z.boolean(),
  response_status: z.number().int().nullable(),
  connection_lost: z.boolean(),
  exit_status: z.number().int().nullable(),
  exit_signal: z.string().nullable(),
  channel_closed: z.boolean(),
  output_bytes: z.object({ stdout: z.number(), stderr: z.number(), body: z.number() }),
});
export type AttemptState = z.infer<typeof attemptStateSchema>;

/** A retry lease as the action's record holds it (RETRY_LEASED, closed by the classification after it). */
const retryLeaseSchema = z.object({
  generation: z.number().int(),
  holder: z.string(),
  expires_at_ms: z.number().int(),
  open: z.boolean(),
  /**
   * decideRetry's verdict that licensed it (a same-key lease also needs the key's window at dispatch); null only on a
   * lease stored before leases recorded it, which never counts as same-key.
   */
  decision: z.enum(['RETRY_NEW_ATTEMPT', 'RETRY_SAME_KEY', 'RETRY_WHEN_ALLOWED']).nullable(),
});

/** The current state of one action: a pure fold of its events (broker/core project). */
export const actionStateSchema = z.object({
  action_id: z.string(),
  session_id: z.string().nullable(),
  ticket: z.number().int().nullable(),
  lane: z.string().nullable(),
  channel: z.enum(Channel),
  target: z.string(),
  request_fingerprint: z.string(),
  approval: z.enum(ApprovalMode),
  idempotent: z.boolean(),
  stage: z.enum(ActionStage),
  decision: z.enum(Decision).nullable(),
  dispatch_evidence: z.enum(DispatchEvidence),
  /** Append position of the first DISPATCH_STARTED, or null if the boundary was never crossed. */
  dispatch_seq: z.number().int().nullable(),
  attempts: z.array(attemptStateSchema),
  /** null while the action is before dispatch and nothing has closed it. */
  outcome: z.enum(Outcome).nullable(),
  phase: z.enum(Phase).nullable(),
  retry: z.enum(RetryDisposition).nullable(),
  code: errorCodeSchema.nullable(),
  effect: z.enum(Effect).nullable(),
  outcome_basis: z.string().nullable(),
  source: z.enum(EvidenceSource).nullable(),
  retry_after_ms: z.number().int().nullable(),
  caller_disposition: z.enum(CallerDisposition).nullable(),
  /** True once the broker recorded a classification after the latest dispatch or closure. */
  recorded: z.boolean(),
  result_id: z.string().nullable(),
  result_digest: z.string().nullable(),
  /**
   * A person released the lane behind this unknown head (ABANDONED, with a reason). The outcome
   * stays what it was; only the lane moves on.
   */
  abandoned: z.boolean(),
  /**
   * Retries this record allows after the first attempt (ACTION_ACCEPTED retry_budget) and the
   * generation of the latest retry lease (RETRY_LEASED): counts live in the record, so a restart
   * neither resets nor forgets them.
   */
  retry_budget: z.number().int(),
  /** ACTION_ACCEPTED approval_rule: the route rule that set the approval; null: the route's own. */
  approval_rule: z.string().nullable(),
  retry_generation: z.number().int(),
  /** The latest retry lease; `open` until a classification lands after it. */
  lease: retryLeaseSchema.nullable(),
  /** The bound idempotency key's earliest safe expiry (PREFLIGHT_VALIDATED), so a restart can still say same_idempotency_key. */
  key_expires_at_ms: z.number().int().nullable(),
  first_seq: z.number().int(),
  last_seq: z.number().int(),
  accepted_at_ms: z.number().int(),
  updated_at_ms: z.number().int(),
});
export type ActionState = z.infer<typeof actionStateSchema>;

/**
 * An `actions.state` row as any Postern version stored it: the current shape, with each field added after the first
 * release optional (absent in rows written before it). Only the journal reads this shape, and it upgrades each row once,
 * on read, to ActionState (broker/journal/upgrade-stored-state.ts); the rest of the broker never sees an absent field.
 */
export const storedActionStateSchema = actionStateSchema.extend({
  /** Absent before schema 5 (ABANDONED). */
  abandoned: z.boolean().optional(),
  /** These three are absent before the retry engine; a lease's decision is absent before leases recorded it. */
  retry_budget: z.number().int().optional(),
  retry_generation: z.number().int().optional(),
  lease: retryLeaseSchema.extend({ decision: retryLeaseSchema.shape.decision.optional() }).nullable().optional(),
  /** Absent before route rules, and absent (not null) in later rows when the route's own approval applied. */
  approval_rule: z.string().nullable().optional(),
  /** Absent before the key's expiry was projected, and in later rows until PREFLIGHT_VALIDATED bound a key. */
  key_expires_at_ms: z.number().int().nullable().optional(),
});
export type StoredActionState = z.infer<typeof storedActionStateSchema>;

export const SessionStatus = {
  /** Connected, waiting for a person to approve the process once. */
  pending: 'pending',
  approved: 'approved',
  /** A person revoked it: new calls are refused. */
  revoked: 'revoked',
  /** The process exited. */
  ended: 'ended',
} as const satisfies ClosedSet<string>;
export type SessionStatus = keyof typeof SessionStatus;

/** One agent process (pid + start time) as a pure fold of its SESSION_* events. */
export const sessionStateSchema = z.object({
  session_id: z.string(),
  status: z.enum(SessionStatus),
  pid: z.number().int(),
  uid: z.number().int(),
  start_time: z.string(),
  ppid: z.number().int().nullable(),
  exe: z.string().nullable(),
  cwd: z.string().nullable(),
  parent_exe: z.string().nullable(),
  client_name: z.string().nullable(),
  client_version: z.string().nullable(),
  /** Why the process allowlist did not apply to it though an entry matched its executable (SESSION_STARTED); null: it did or none matched. */
  allowlist_withheld: z.string().nullable(),
  /** Who approved it: a person's id, or `observe` policy. */
  approved_by: z.string().nullable(),
  revoked_by: z.string().nullable(),
  revoke_reason: z.string().nullable(),
  end_reason: z.string().nullable(),
  first_seq: z.number().int(),
  last_seq: z.number().int(),
  started_at_ms: z.number().int(),
  ended_at_ms: z.number().int().nullable(),
  updated_at_ms: z.number().int(),
  /**
   * When the session was approved (its SESSION_APPROVED), null while it is not: the start of its grant
   * (agents.session_grant_ttl_seconds), which a reconnection does not move.
   */
  approved_at_ms: z.number().int().nullable(),
  /** SESSION_RECONNECTED events folded so far. */
  reconnects: z.number().int().nonnegative(),
});
export type SessionState = z.infer<typeof sessionStateSchema>;

/** A `sessions.state` row as any Postern version stored it (see storedActionStateSchema). */
export const storedSessionStateSchema = sessionStateSchema.extend({
  /** Absent before SESSION_RECONNECTED, and in later rows until the first reconnection. */
  reconnects: z.number().int().nonnegative().optional(),
  /** Absent before the allowlist could be withheld from a process. */
  allowlist_withheld: z.string().nullable().optional(),
  /** Absent before the grant's start was kept apart from the last event (upgraded: updated_at_ms if approved). */
  approved_at_ms: z.number().int().nullable().optional(),
});
export type StoredSessionState = z.infer<typeof storedSessionStateSchema>;
