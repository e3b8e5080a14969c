import { restartJournalQuarantinedBasis, type ActionState, type Classification } from '../contract/index.js';

/**
 * What the start found of the journal before recovery: `trusted` (its integrity anchor agrees, or there is none yet),
 * or `quarantined` (the anchor says the journal disagrees with what the broker signed: it may lack later events).
 */
export type RecoveredJournal = 'trusted' | 'quarantined';

/**
 * What the broker can truthfully say, after a restart, about an action a previous run left open.
 * Returns undefined when the record already says what is known.
 *
 * - Dispatched (DISPATCH_STARTED is durable) and nothing classified since: the bytes may have left,
 *   so the outcome is unknown. Backoff when the operation is known to be idempotent; a same-key
 *   retry while the bound idempotency key is within its earliest safe expiry at `nowMs` (as
 *   classifyOutcome says for the same evidence); otherwise reconcile. Without `nowMs` the key's
 *   window is not assumed open.
 * - Never dispatched and not closed, in a trusted journal: the durable record proves nothing crossed
 *   the boundary, so it is not_attempted, its phase named by the last proven boundary (not by where
 *   the crash hit).
 * - Never dispatched and not closed, in a quarantined journal: the record may have lost a later
 *   DISPATCH_STARTED (an earlier copy restored), so nothing is proven either way: unknown, under its
 *   own basis (restartJournalQuarantinedBasis), retry `reconcile` — the journal leases no retry for it
 *   (a retry would follow an attempt the record may lack), so advice to repeat it would be refused.
 */
export function classifyRestart(
  state: ActionState,
  nowMs?: number,
  journal: RecoveredJournal = 'trusted',
): Classification | undefined {
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
  if (journal === 'quarantined') {
    return {
      phase: phaseBeforeDispatch(state),
      outcome: 'unknown',
      // Not a retry: the journal leases none for it (project.ts retriableRecord), so only a lookup or a person.
      retry: 'reconcile',
      code: 'BROKER_RESTARTED',
      effect: 'unknown_effect',
      outcome_basis: restartJournalQuarantinedBasis,
      source: 'local_gate',
    };
  }
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
