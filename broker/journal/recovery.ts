import type { ActionState, NewEvent } from '../contract/index.js';
import { classifyRestart } from '../core/index.js';

/**
 * The event recovery appends at open for an action a previous run left open, or undefined when
 * the record already says what is known. The decision is core's classifyRestart; the journal
 * appends the event through the normal commit path, so applyEvent still guards it.
 */
export function recoveryEvent(state: ActionState, nowMs?: number): NewEvent | undefined {
  const classification = classifyRestart(state, nowMs);
  if (classification === undefined) return undefined;
  const latest = state.dispatch_seq === null ? undefined : state.attempts.at(-1);
  return {
    kind: 'OUTCOME_RECORDED',
    action_id: state.action_id,
    payload: latest === undefined ? {} : { attempt: latest.n },
    classification,
  };
}
