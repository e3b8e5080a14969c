import type { Logger } from 'pino';
import type { ActionState } from '../contract/index.js';
import { classifyBrokerError } from '../core/index.js';
import type { Journal } from '../journal/index.js';

/**
 * An executor threw while its admitted action was still open. Best effort, so the record says what
 * is known instead of leaving the lane's head "dispatching" forever: OUTCOME_RECORDED with broker/
 * core's classifyBrokerError (unknown after DISPATCH_STARTED — abandonable by a person — else
 * not_attempted). A refusal means another event won meanwhile (a DISPATCH_STARTED still in the
 * commit queue, a closure): the state is read again once. Never throws; the executor rethrows its
 * own error and the backend answers from the record.
 */
export async function recordBrokerError(
  journal: Journal,
  actionId: string,
  logger: Logger | undefined,
): Promise<ActionState | undefined> {
  for (let tries = 0; tries < 2; tries += 1) {
    try {
      const state = journal.getAction(actionId);
      const classification = state === undefined ? undefined : classifyBrokerError(state);
      if (state === undefined || classification === undefined) return state;
      const attempt = state.attempts.at(-1)?.n;
      const payload = attempt === undefined ? {} : { attempt };
      const result = await journal.tryAppend({
        kind: 'OUTCOME_RECORDED',
        action_id: actionId,
        payload,
        classification,
      });
      // already_dispatched (a DISPATCH_STARTED was still in the commit queue), settled, or any other
      // event that won: the classification was for a record that moved on; read it again.
      if (!result.ok) continue;
      logger?.error(
        { action_id: actionId, outcome: classification.outcome, basis: classification.outcome_basis },
        'broker error recorded for an open action',
      );
      return result.appended.state;
    } catch (error) {
      if (closedByShutdown(journal))
        logger?.info(
          { action_id: actionId },
          'the broker stopped before this action settled; the next start records it',
        );
      else logger?.error({ err: error, action_id: actionId }, 'recording a broker error failed');
      return undefined;
    }
  }
  return undefined;
}

/**
 * Runs one action's executor body the same way for every channel: a broker bug after admission is
 * recorded (unknown once dispatched) and rethrown — the agent backend answers from the record,
 * never with a bare refusal — and, recorded or given up, the action's lane is told it may move on
 * (or stays blocked if the outcome is unknown).
 */
export async function runRecorded<T>(
  deps: { readonly journal: Journal; readonly logger?: Logger; readonly queue: { settled(actionId: string): void } },
  actionId: string,
  run: () => Promise<T>,
): Promise<T> {
  try {
    return await run();
  } catch (error) {
    await recordBrokerError(deps.journal, actionId, deps.logger);
    throw error;
  } finally {
    deps.queue.settled(actionId);
  }
}

/**
 * The journal was closed (or is closing) on purpose (the broker stopped, BrokerRuntime.close) rather than failed: whatever an executor
 * still running then could not record is the shutdown's cut, which the next start's recovery records — not an error.
 */
export function closedByShutdown(journal: Pick<Journal, 'stats'>): boolean {
  try {
    const state = journal.stats().state;
    return state === 'closing' || state === 'closed';
  } catch {
    return false;
  }
}
