import type { Journal } from '../journal/index.js';

/**
 * Sessions tried a turn of the loop, at most (bench/sessions-confirm.ts: ~11 ms per 100 of five events each); a turn
 * also stops once it has spent the journal's time budget (Journal.confirmHeldSessions), since one session's fold may
 * read thousands of events.
 */
export const sessionsConfirmedPerTurn = 100;

/**
 * After an unlock, an earlier run's sessions still read from their rows (SessionRecordCheck `unconfirmed`) are
 * confirmed from their sealed events behind the loop, `sessionsConfirmedPerTurn` a turn (`schedule`, setImmediate by
 * default), until none is left that can be tried; then, if any was settled, `onConfirmed` (the runtime publishes a
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
    let step: { settled: number; left: boolean };
    try {
      step = journal.confirmHeldSessions(sessionsConfirmedPerTurn);
    } catch {
      return; // A journal that failed answers its own readers; nothing here to say.
    }
    // A session settled was confirmed, forgotten or found unverifiable: each changes what its card says.
    confirmedAny ||= step.settled > 0;
    if (step.left) schedule(turn);
    else if (confirmedAny) onConfirmed();
  };
  schedule(turn);
  return () => {
    stopped = true;
  };
}
