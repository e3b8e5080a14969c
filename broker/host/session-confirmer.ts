import type { Journal } from '../journal/index.js';

/** Sessions confirmed a turn of the loop: a few milliseconds each (bench/sessions-confirm.ts: ~11 ms per 100). */
export const sessionsConfirmedPerTurn = 100;

/**
 * After an unlock, an earlier run's sessions still read from their rows (SessionRecordCheck `unconfirmed`) are
 * confirmed from their sealed events behind the loop, `sessionsConfirmedPerTurn` a turn (`schedule`, setImmediate by
 * default), until none is left that can be tried; then, if any was confirmed, `onConfirmed` (the runtime publishes a
 * `sessions` change notice, so an open page lists them as their events say). A lock or the journal's close ends it:
 * what is locked out is tried again after the next unlock. Returns a stop.
 */
export function confirmSessionsBehind(
  journal: Pick<Journal, 'confirmHeldSessions'>,
  onConfirmed: () => void,
  schedule: (turn: () => void) => void = (turn) => setImmediate(turn),
): () => void {
  let stopped = false;
  let confirmedAny = false;
  const turn = (): void => {
    if (stopped) return;
    let step: { confirmed: number; left: boolean };
    try {
      step = journal.confirmHeldSessions(sessionsConfirmedPerTurn);
    } catch {
      return; // A journal that failed answers its own readers; nothing here to say.
    }
    confirmedAny ||= step.confirmed > 0;
    if (step.left) schedule(turn);
    else if (confirmedAny) onConfirmed();
  };
  schedule(turn);
  return () => {
    stopped = true;
  };
}
