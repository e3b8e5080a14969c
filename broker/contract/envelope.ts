import { z } from 'zod';
import { errorCodeSchema } from './classification.js';
import { batchOutcomeSchema } from './events.js';
import {
  CallerDisposition,
  DispatchEvidence,
  Effect,
  EvidenceSource,
  Outcome,
  Phase,
  RetryDisposition,
} from './outcome.js';

/** One attempt as the public envelope shows it (setup failures included, never secrets). */
export const envelopeAttemptSchema = z.object({
  n: z.number().int().positive(),
  stage: z.string(),
  outcome: z.enum(Outcome),
  code: errorCodeSchema.optional(),
  connection_id: z.string().optional(),
});

export const idempotencyEvidenceSchema = z.object({
  key: z.string(),
  scope: z.string(),
  fingerprint: z.string().regex(/^sha256:[0-9a-f]{64}$/),
  remote_contract: z.enum(['configured', 'none']),
  earliest_safe_expiry_ms: z.number().int().optional(),
});

/** How the broker knows what it claims. New fields may be added; meanings never change. */
export const evidenceSchema = z.object({
  dispatch_started: z.boolean(),
  dispatch_evidence: z.enum(DispatchEvidence),
  request_complete: z.boolean(),
  response_headers_received: z.boolean(),
  response_complete: z.boolean(),
  attempts: z.array(envelopeAttemptSchema),
  journal_seq: z.number().int().nonnegative(),
  request_fingerprint: z.string(),
  source: z.enum(EvidenceSource).optional(),
  idempotency: idempotencyEvidenceSchema.optional(),
  exit_status: z.number().int().optional(),
  exit_signal: z.string().optional(),
  response_status: z.number().int().optional(),
  result_id: z.string().optional(),
  result_digest: z.string().optional(),
  peer_identity: z.string().optional(),
  /** A declared batch: one outcome per member and the completed ids, as RESULT_COMMITTED records them. */
  batch: batchOutcomeSchema.optional(),
});

export const envelopeErrorSchema = z.object({
  code: errorCodeSchema,
  phase: z.enum(Phase),
  outcome: z.enum(Outcome),
  retry: z.enum(RetryDisposition),
  message: z.string().max(1000),
  /** The field path the caller can fix, where there is one. */
  field: z.string().optional(),
  retry_after_ms: z.number().int().nonnegative().optional(),
});

/**
 * The public envelope every answer carries (DESIGN.md §3). `error` is present on every failure;
 * a committed non-success (HTTP 500, exit 23) carries both `error` and the recorded result facts.
 */
export const envelopeSchema = z.object({
  invocation_id: z.string(),
  /**
   * What happened to the caller that made the call, as recorded (DESIGN §3), or as this answer to that call itself
   * is (it completes it). null: nothing is recorded — the call was cut off unanswered (the broker was killed or
   * stopped while it waited) or is still waiting. Never guessed.
   */
  caller_disposition: z.enum(CallerDisposition).nullable(),
  effect: z.enum(Effect).nullable(),
  outcome_basis: z.string().nullable(),
  error: envelopeErrorSchema.optional(),
  evidence: evidenceSchema,
});
export type Envelope = z.infer<typeof envelopeSchema>;
export type EnvelopeError = z.infer<typeof envelopeErrorSchema>;
export type Evidence = z.infer<typeof evidenceSchema>;
