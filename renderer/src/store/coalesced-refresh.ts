/**
 * What a refresh asked for while a read is in flight does:
 * - `read_again`: that read may have begun before the change the ask is about (a decision, a pushed notice),
 *   so every ask that comes meanwhile is folded into one more read after it, never a second read at once;
 * - `join`: the ask shares the read in flight (the caller wants a recent answer, not one after its ask).
 */
export type WhileInFlight = 'read_again' | 'join';

export interface CoalescedRefresh {
  /** Starts a read, or folds into the one in flight; resolves (or rejects) when the reads it waits for are done. */
  run: () => Promise<void>;
  /**
   * Lets go of the read in flight (its answer is stale and the caller drops it), so the next `run` reads at
   * once; the abandoned read finishes without a read after it and never frees the newer read's slot.
   */
  restart: () => void;
}

interface Round {
  again: boolean;
  done: Promise<void>;
}

/** One refresh at a time over `read`; a failed read rejects the asks that waited on it and frees the slot. */
export function coalescedRefresh(
  read: () => Promise<void>,
  whileInFlight: WhileInFlight = 'read_again',
): CoalescedRefresh {
  let current: Round | null = null;
  const readUntilQuiet = async (round: Round): Promise<void> => {
    do {
      round.again = false;
      await read();
    } while (round.again);
  };
  return {
    run: () => {
      if (current !== null) {
        if (whileInFlight === 'read_again') current.again = true;
        return current.done;
      }
      const round: Round = { again: false, done: Promise.resolve() };
      round.done = readUntilQuiet(round).finally(() => {
        if (current === round) current = null;
      });
      current = round;
      return round.done;
    },
    restart: () => {
      if (current === null) return;
      current.again = false;
      current = null;
    },
  };
}
