import type { ActionState, Classification } from '../contract/index.js';

/**
 * What the broker can truthfully record when its own code threw while an admitted action was still
 * open (a bug: a schema refusal, an unexpected exception in a channel or while recording). Returns
 * undefined when the record already says what is known (closed, or classified since dispatch).
 *
 * - Dispatched and not classified since: the bytes may have left, so unknown (INTERNAL, reconcile),
 *   which also lets a person abandon it instead of the lane waiting on a "dispatching" head forever.
 * - Never dispatched and not closed: the durable record proves nothing crossed the boundary, so it
 *   is not_attempted, in the last proven phase; `never` because the same bug would refuse it again.
 */
export function classifyBrokerError(state: ActionState): Classification | undefined {
  if (state.dispatch_seq !== null) {
    if (state.recorded) return undefined;
    return {
      phase: 'remote_execution',
      outcome: 'unknown',
      retry: 'reconcile',
      code: 'INTERNAL',
      effect: 'unknown_effect',
      outcome_basis: 'broker_error_after_dispatch',
      source: 'transport_observed',
    };
  }
  if (state.outcome !== null) return undefined;
  return {
    phase:
      state.stage === 'accepted'
        ? 'validation'
        : state.attempts.length > 0
          ? 'connection_setup'
          : 'credential_injection',
    outcome: 'not_attempted',
    retry: 'never',
    code: 'INTERNAL',
    effect: 'no_effect',
    outcome_basis: 'broker_error_before_dispatch',
    source: 'local_gate',
  };
}
