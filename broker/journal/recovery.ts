import type { ActionState, Classification, NewEvent } from '../contract/index.js';

/**
 * What the broker can truthfully say, after a restart, about an action it was in the middle of.
 * Pure: the journal appends the result through the same path as any event, so applyEvent still
 * guards it (an unknown can never become not_attempted).
 *
 * - Dispatched (DISPATCH_STARTED is durable) and nothing classified since: the bytes may have
 *   left, so the outcome is unknown. Retry by backoff only when the operation is known to be
 *   idempotent; otherwise reconcile.
 * - Never dispatched and not closed: the durable record proves nothing crossed the boundary, so
 *   it is not_attempted, phase named by the last proven boundary.
 * - Anything already classified (including not_attempted + backoff) is left alone.
 */
export function recoveryEvent(state: ActionState): NewEvent | undefined {
  if (state.dispatch_seq !== null) {
    if (state.recorded) return undefined;
    const latest = state.attempts.at(-1);
    return {
      kind: 'OUTCOME_RECORDED',
      action_id: state.action_id,
      payload: latest === undefined ? {} : { attempt: latest.n },
      classification: afterDispatch(state),
    };
  }
  if (state.outcome !== null) return undefined;
  return {
    kind: 'OUTCOME_RECORDED',
    action_id: state.action_id,
    payload: {},
    classification: beforeDispatch(state),
  };
}

function afterDispatch(state: ActionState): Classification {
  return {
    phase: 'remote_execution',
    outcome: 'unknown',
    retry: state.idempotent ? 'backoff' : 'reconcile',
    code: 'BROKER_RESTARTED',
    effect: 'unknown_effect',
    outcome_basis: 'broker_restart_after_dispatch',
    source: 'transport_observed',
  };
}

function beforeDispatch(state: ActionState): Classification {
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

/** Classify by the last proven boundary, not by where the restart happened to interrupt. */
function phaseBeforeDispatch(state: ActionState): Classification['phase'] {
  if (state.stage === 'accepted') return 'validation';
  if (state.attempts.length > 0) return 'connection_setup';
  return 'credential_injection';
}
