import type { ActionState, NewEvent } from '../contract/index.js';
import { classifyRestart, type RecoveredJournal } from '../core/index.js';

/**
 * The event recovery appends at open for an action a previous run left open, or undefined when
 * the record already says what is known. The decision is core's classifyRestart; the journal
 * appends the event through the normal commit path, so applyEvent still guards it. `journal` is what the start found
 * before recovery: a quarantined journal claims no not_attempted (classify-restart.ts).
 */
export function recoveryEvent(
  state: ActionState,
  nowMs?: number,
  journal: RecoveredJournal = 'trusted',
): NewEvent | undefined {
  const classification = classifyRestart(state, nowMs, journal);
  if (classification === undefined) return undefined;
  const latest = state.dispatch_seq === null ? undefined : state.attempts.at(-1);
  return {
    kind: 'OUTCOME_RECORDED',
    action_id: state.action_id,
    payload: latest === undefined ? {} : { attempt: latest.n },
    classification,
  };
}
