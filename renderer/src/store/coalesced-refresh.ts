export interface CoalescedRefresh {
  /**
   * Starts a read, or, while one is in flight, asks for one more read after it: that read may have begun before the
   * change the ask is about (an unlock, a decision, a pushed notice), so sharing it could answer with the state from
   * before. Every ask that comes meanwhile folds into that one more read, never a second read at once. Resolves (or
   * rejects) when a read that began after the ask is done.
   */
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
export function coalescedRefresh(read: () => Promise<void>): CoalescedRefresh {
  let current: Round | null = null;
  const readUntilQuiet = async (round: Round): Promise<void> => {
    try {
      do {
        round.again = false;
        await read();
      } while (round.again);
    } finally {
      // Freed in the same turn as the last read's end: an ask that comes after it starts a read of its own, rather
      // than joining a round whose reads are all done.
      if (current === round) current = null;
    }
  };
  return {
    run: () => {
      if (current !== null) {
        current.again = true;
        return current.done;
      }
      const round: Round = { again: false, done: Promise.resolve() };
      current = round;
      round.done = readUntilQuiet(round);
      return round.done;
    },
    restart: () => {
      if (current === null) return;
      current.again = false;
      current = null;
    },
  };
}
