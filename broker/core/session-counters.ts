/**
 * The figures `sessions.list` shows per session (calls, pending), kept beside the actions table the way
 * action-counters.ts keeps `status` and `metrics`: moved by the difference between an action's old and new row, in the
 * transaction that rewrites the row, so listing the sessions costs the same for ten actions as for a million.
 */

/** The fields of an ActionState (or the columns of its row) a session's figures read. */
export interface SessionCountedFields {
  readonly session_id: string | null;
  readonly outcome: string | null;
  readonly dispatch_seq: number | null;
}

/** What one action row contributes to its session's figures: one call, and one pending while open before dispatch. */
export interface SessionCounted {
  readonly session_id: string | null;
  /** 1 while nothing classified the action and it has not crossed the dispatch boundary ("not sent yet"). */
  readonly pending: 0 | 1;
}

/** One session's change: calls and pending move by these (either may be 0, never both). */
export interface SessionCountChange {
  readonly session_id: string;
  readonly calls: -1 | 0 | 1;
  readonly pending: -1 | 0 | 1;
}

export function sessionCounted(state: SessionCountedFields): SessionCounted {
  return { session_id: state.session_id, pending: state.outcome === null && state.dispatch_seq === null ? 1 : 0 };
}

/**
 * The session counter writes for one action row going from `before` (undefined: no row yet) to `after`. An action
 * with no session counts nowhere; one whose session changed (no path does so today) moves from the old to the new.
 */
export function sessionCountDelta(before: SessionCounted | undefined, after: SessionCounted): SessionCountChange[] {
  if (before !== undefined && before.session_id === after.session_id) {
    const pending = after.pending - before.pending;
    return after.session_id === null || pending === 0
      ? []
      : [{ session_id: after.session_id, calls: 0, pending: pending as -1 | 1 }];
  }
  const changes: SessionCountChange[] = [];
  if (before?.session_id !== undefined && before.session_id !== null)
    changes.push({ session_id: before.session_id, calls: -1, pending: before.pending === 1 ? -1 : 0 });
  if (after.session_id !== null) changes.push({ session_id: after.session_id, calls: 1, pending: after.pending });
  return changes;
}
