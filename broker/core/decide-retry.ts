import type { Outcome, RetryDisposition } from '../contract/index.js';

/** The recorded facts decideRetry reads: what the journal says, never what memory remembers. */
export interface RetryRecord {
  invocation_id: string;
  outcome: Outcome;
  retry: RetryDisposition;
  request_fingerprint: string;
  retry_after_ms?: number | null;
}

/** The operation a retry would perform. */
export interface RetryOperation {
  /** Known to be idempotent: method semantics or a declared contract, not a method name alone. */
  idempotent: boolean;
  fingerprint: string;
}

export type RetryDecision =
  | { kind: 'FETCH'; invocation_id: string }
  | { kind: 'RETRY_NEW_ATTEMPT' }
  | { kind: 'STOP_FOR_CORRECTION' }
  | { kind: 'RETRY_SAME_KEY' }
  | { kind: 'RECONCILE' }
  | { kind: 'RETRY_WHEN_ALLOWED'; after_ms: number | null }
  | { kind: 'RETURN_RECORDED_RESULT' };

/**
 * Article 000's decide(), branch for branch. It consumes the disposition derived from evidence and
 * can never upgrade an unsafe one because an error looked temporary.
 */
export function decideRetry(record: RetryRecord, operation: RetryOperation): RetryDecision {
  if (record.retry === 'fetch_result') return { kind: 'FETCH', invocation_id: record.invocation_id };

  if (record.outcome === 'not_attempted') {
    return record.retry === 'backoff' ? { kind: 'RETRY_NEW_ATTEMPT' } : { kind: 'STOP_FOR_CORRECTION' };
  }

  if (record.outcome === 'unknown') {
    if (operation.idempotent) return { kind: 'RETRY_NEW_ATTEMPT' };
    if (record.retry === 'same_idempotency_key' && operation.fingerprint === record.request_fingerprint) {
      return { kind: 'RETRY_SAME_KEY' };
    }
    return { kind: 'RECONCILE' };
  }

  if (record.outcome === 'rejected' && record.retry === 'backoff') {
    return { kind: 'RETRY_WHEN_ALLOWED', after_ms: record.retry_after_ms ?? null };
  }

  return { kind: 'RETURN_RECORDED_RESULT' };
}
