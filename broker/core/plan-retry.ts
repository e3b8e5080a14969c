import type { ActionState, Classification } from '../contract/index.js';
import { decideRetry, type RetryDecision } from './decide-retry.js';
import { leaseLive } from './project.js';

/** The retry decisions that send again (the others fetch, stop, reconcile or return the record). */
export type SendingRetry = 'RETRY_NEW_ATTEMPT' | 'RETRY_SAME_KEY' | 'RETRY_WHEN_ALLOWED';

/** What the operation and its contract allow, as bound at admission. */
export interface RetryContext {
  /** Known to be idempotent (method semantics on this route, or a declared contract). */
  readonly idempotent: boolean;
  /** The fingerprint of the request a retry would send (automatic retries resend the recorded one). */
  readonly fingerprint: string;
  /** The idempotency key's earliest safe expiry (PREFLIGHT_VALIDATED), when a key is bound. */
  readonly keyExpiresAtMs?: number;
  /** Base delay before a retry, doubled per generation; the remote's Retry-After wins when longer. */
  readonly backoffMs: number;
  readonly nowMs: number;
}

export type RetryPlan =
  /** Another worker holds the live lease: its attempt decides; nothing is planned over it. */
  | { readonly kind: 'held'; readonly generation: number }
  /** Nothing to do: settled, in flight, abandoned, or decideRetry says the record stands. */
  | { readonly kind: 'stop'; readonly decision: RetryDecision | null; readonly why: string }
  /** The record holds no more retries: the last evidence stands; reconcile next. */
  | { readonly kind: 'exhausted'; readonly decision: SendingRetry; readonly budget: number }
  /** Only a lookup (or a person) can leave this unknown: no safe resend exists, or the key's window closed. */
  | { readonly kind: 'reconcile'; readonly why: 'no_safe_resend' | 'key_retention_passed' }
  /** Take the next lease and send again after `delayMs`. */
  | { readonly kind: 'retry'; readonly decision: SendingRetry; readonly generation: number; readonly delayMs: number };

/** A retry waits at most this long, whatever the remote or the doubling asks. */
export const retryDelayMsMax = 60_000;

/**
 * Article 000's decide(), applied to the recorded state with the budget, lease generation and
 * key window the record holds (never process memory), so a restart neither resets the count nor
 * forgets the window. Pure: the retry engine and the agent's retry_of both plan with it.
 */
export function planRetry(state: ActionState, ctx: RetryContext): RetryPlan {
  if (state.lease !== null && leaseLive(state, ctx.nowMs)) return { kind: 'held', generation: state.lease.generation };
  if (!state.recorded || state.outcome === null)
    return { kind: 'stop', decision: null, why: 'the current attempt has no recorded outcome yet' };
  if (state.abandoned) return { kind: 'stop', decision: null, why: 'a person abandoned it; its lane moved on' };
  if (state.outcome === 'not_attempted' && state.phase !== 'connection_setup') {
    // VAULT_LOCKED, a gate or a validation refusal: a resend changes nothing until something else does.
    return {
      kind: 'stop',
      decision: null,
      why: `not_attempted in ${state.phase ?? 'an unknown phase'}: nothing to resend yet`,
    };
  }
  const decision = decideRetry(
    {
      invocation_id: state.action_id,
      outcome: state.outcome,
      retry: state.retry ?? 'never',
      request_fingerprint: state.request_fingerprint,
      retry_after_ms: state.retry_after_ms,
    },
    { idempotent: ctx.idempotent, fingerprint: ctx.fingerprint },
  );
  switch (decision.kind) {
    case 'RECONCILE':
      return { kind: 'reconcile', why: 'no_safe_resend' };
    case 'RETRY_SAME_KEY':
      // Past the window the remote may have forgotten the key: a resend could be a second effect.
      if (ctx.keyExpiresAtMs === undefined || ctx.nowMs >= ctx.keyExpiresAtMs)
        return { kind: 'reconcile', why: 'key_retention_passed' };
      return sending(state, ctx, decision.kind);
    case 'RETRY_NEW_ATTEMPT':
    case 'RETRY_WHEN_ALLOWED':
      return sending(state, ctx, decision.kind);
    default:
      return { kind: 'stop', decision, why: `decideRetry: ${decision.kind}` };
  }
}

function sending(state: ActionState, ctx: RetryContext, decision: SendingRetry): RetryPlan {
  const generation = state.retry_generation + 1;
  const budget = state.retry_budget;
  if (generation > budget) return { kind: 'exhausted', decision, budget };
  const doubled = ctx.backoffMs * 2 ** (generation - 1);
  const delayMs = Math.min(retryDelayMsMax, Math.max(doubled, state.retry_after_ms ?? 0));
  return { kind: 'retry', decision, generation, delayMs };
}

/**
 * The record once the budget is spent on an unknown outcome: the last evidence (phase, effect,
 * source) stands, the code says why automation stopped, and the way out is reconcile — never a
 * generic "max retries". A settled outcome (rejected after throttling) is never re-classified.
 */
export function exhaustedClassification(last: Classification): Classification | undefined {
  if (last.outcome !== 'unknown') return undefined;
  return { ...last, code: 'RETRY_BUDGET_EXHAUSTED', retry: 'reconcile', outcome_basis: 'retry_budget_exhausted' };
}
