import type { ActionState, Classification } from '../contract/index.js';

/**
 * What the broker can truthfully say, after a restart, about an action a previous run left open.
 * Returns undefined when the record already says what is known.
 *
 * - Dispatched (DISPATCH_STARTED is durable) and nothing classified since: the bytes may have left,
 *   so the outcome is unknown. Backoff when the operation is known to be idempotent; a same-key
 *   retry while the bound idempotency key is within its earliest safe expiry at `nowMs` (as
 *   classifyOutcome says for the same evidence); otherwise reconcile. Without `nowMs` the key's
 *   window is not assumed open.
 * - Never dispatched and not closed: the durable record proves nothing crossed the boundary, so it
 *   is not_attempted, its phase named by the last proven boundary (not by where the crash hit).
 */
export function classifyRestart(state: ActionState, nowMs?: number): Classification | undefined {
  if (state.dispatch_seq !== null) {
    if (state.recorded) return undefined;
    return {
      phase: 'remote_execution',
      outcome: 'unknown',
      retry: restartRetry(state, nowMs),
      code: 'BROKER_RESTARTED',
      effect: 'unknown_effect',
      outcome_basis: 'broker_restart_after_dispatch',
      source: 'transport_observed',
    };
  }
  if (state.outcome !== null) return undefined;
  return {
    phase: phaseBeforeDispatch(state),
    outcome: 'not_attempted',
    retry: 'backoff',
    code: 'BROKER_RESTARTED',
    effect: 'no_effect',
    outcome_basis: 'broker_restart_before_dispatch',
    source: 'local_gate',
  };
}

function restartRetry(state: ActionState, nowMs: number | undefined): Classification['retry'] {
  if (state.idempotent) return 'backoff';
  const expiry = state.key_expires_at_ms;
  if (nowMs !== undefined && expiry !== null && nowMs < expiry) return 'same_idempotency_key';
  return 'reconcile';
}

function phaseBeforeDispatch(state: ActionState): Classification['phase'] {
  if (state.stage === 'accepted') return 'validation';
  if (state.attempts.length > 0) return 'connection_setup';
  return 'credential_injection';
}
