import { sessionRecordWords, type ActionState, type SessionRecordCheck, type SessionState } from '../contract/index.js';

/**
 * Why a decision lost its compare-and-swap, in words that name the ticket's current state, e.g.
 * "ticket #7 already expired". The journal's projection made the call; this only explains it.
 */
export function conflictMessage(
  state: ActionState,
  verb: 'approve' | 'reject' | 'cancel' | 'abandon' | 'attest' | 'reconcile',
): string {
  const t = `ticket #${state.ticket ?? '?'}`;
  // Closed or open before dispatch; an undispatched unknown (a quarantined journal's recovery) or its settlement is not.
  const neverDispatched = state.dispatch_seq === null && (state.outcome === null || state.outcome === 'not_attempted');
  if (verb === 'attest' || verb === 'reconcile') {
    const what = verb === 'attest' ? 'attest' : 'reconcile';
    const done = verb === 'attest' ? 'attested' : 'reconciled';
    if (neverDispatched)
      return `${t} was never dispatched; there is no remote outcome to ${what} (it is ${state.outcome ?? 'still open'})`;
    if (!state.recorded) return `${t} has no recorded outcome yet; it is still in flight`;
    return `${t} already settled (${state.outcome ?? 'recorded'}, source ${state.source ?? 'unknown'}); only an unknown outcome can be ${done}`;
  }
  if (verb === 'abandon') {
    if (state.abandoned) return `${t} already abandoned`;
    if (neverDispatched)
      return `${t} was never dispatched; only a recorded unknown outcome can be abandoned (it is ${state.outcome ?? 'still open'})`;
    if (!state.recorded) return `${t} has no recorded outcome yet; it is still in flight`;
    return `${t} already settled (${state.outcome ?? 'recorded'}); only an unknown outcome can be abandoned`;
  }
  if (state.dispatch_seq !== null) return `${t} already dispatched`;
  if (state.decision === 'rejected' || state.decision === 'expired' || state.decision === 'cancelled')
    return `${t} already ${state.decision}`;
  if (state.outcome !== null) return `${t} already closed (${state.code ?? state.outcome})`;
  if (state.decision === 'approved') return `${t} already approved`;
  return `${t} cannot take this decision now (stage ${state.stage})`;
}

export function sessionConflictMessage(session: SessionState, record: SessionRecordCheck = 'confirmed'): string {
  const words = sessionRecordWords[record];
  return `session ${session.session_id} is already ${session.status}${words === null ? '' : ` (${words})`}`;
}
