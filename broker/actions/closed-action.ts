import type { ActionState } from '../contract/index.js';
import { settledForCaller } from './call-waits.js';

/**
 * Why a cancel of this action can change nothing, or undefined while it can: the action is closed once its outcome
 * is recorded and no retry lease is open (settledForCaller) — settled, closed before dispatch (a decision, a
 * validation refusal, a cancel), abandoned by a person, or an unknown whose attempt is over. Then no attempt is
 * waiting or in flight to stop, and a caller event would only rewrite how its call ended (the caller that asks is
 * not the one whose call it was: that call was answered, or cut off). One sentence, from the record alone. The
 * caller asks the queue first: an action whose executor still runs (an automatic retry in its backoff) is not closed.
 */
export function closedForCancel(state: ActionState): string | undefined {
  if (!settledForCaller(state)) return undefined;
  const code = state.code === null ? '' : `, ${state.code}`;
  if (state.abandoned) return `a person abandoned it (outcome unknown${code}); it is never sent again`;
  if (state.decision === 'rejected' || state.decision === 'expired' || state.decision === 'cancelled')
    return `its ticket was ${state.decision} before dispatch (${state.outcome ?? 'not_attempted'}${code}); nothing was sent`;
  if (state.outcome === 'committed' || state.outcome === 'rejected')
    return `it is settled: ${state.outcome} (effect ${state.effect ?? 'none'}${code})`;
  if (state.outcome === 'not_attempted') return `it closed before dispatch (not_attempted${code}); nothing was sent`;
  return `its outcome is recorded (${state.outcome ?? 'none'}${code}) and no attempt of it is in flight`;
}
