import { z } from 'zod';
import { Effect, EvidenceSource, Outcome, Phase, RetryDisposition } from './outcome.js';
import { errorCodeMeanings, type ErrorCode } from './error-codes.js';

const errorCodes = Object.keys(errorCodeMeanings) as [ErrorCode, ...ErrorCode[]];
export const errorCodeSchema = z.enum(errorCodes);

/**
 * What the broker concluded about an action from the evidence at one point in time. It is computed
 * by broker/core classifyOutcome and appended inside an event; nothing rewrites it afterwards.
 */
export const classificationSchema = z.object({
  phase: z.enum(Phase),
  outcome: z.enum(Outcome),
  retry: z.enum(RetryDisposition),
  /** null when the action completed without an error (a committed success). */
  code: errorCodeSchema.nullable(),
  effect: z.enum(Effect),
  /** A stable reason string, e.g. cancellation_observed_before_dispatch. */
  outcome_basis: z.string().min(1).max(128),
  source: z.enum(EvidenceSource),
  /** Milliseconds the caller should wait before a backoff retry (Retry-After), when known. */
  retry_after_ms: z.number().int().nonnegative().optional(),
});
export type Classification = z.infer<typeof classificationSchema>;

/**
 * The one basis under which an action without DISPATCH_STARTED reads `unknown` rather than `not_attempted`: recovery
 * at a start that found the journal disagreeing with its signed integrity anchor (quarantined: rolled back, forged,
 * history missing). Such a journal may lack a DISPATCH_STARTED the broker did write, so "provably never sent" would
 * claim more than is known (DESIGN §2). The projection admits `unknown` before dispatch under this basis only.
 */
export const restartJournalQuarantinedBasis = 'broker_restart_journal_quarantined';
