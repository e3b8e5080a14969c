import type Database from 'better-sqlite3';

/** One session's figures as sessions.list shows them. */
export interface SessionCountRow {
  readonly session_id: string;
  readonly calls: number;
  readonly pending: number;
}

/**
 * What `calls` and `pending` mean, counted over the whole actions table (docs/operator.md): every action naming the
 * session, and those neither classified nor dispatched. The oracle session_counters (migration 017) are tested and
 * benchmarked against; a full scan, so for tests and the bench only.
 */
export function scanSessionCounts(db: Database.Database): SessionCountRow[] {
  return db
    .prepare<[], SessionCountRow>(
      `SELECT session_id, count(*) AS calls, sum(outcome IS NULL AND dispatch_seq IS NULL) AS pending
       FROM actions WHERE session_id IS NOT NULL GROUP BY session_id ORDER BY session_id`,
    )
    .all();
}

/** The stored session_counters rows in session order, a row at zero skipped (as a scan has none for it). */
export function readSessionCounters(db: Database.Database): SessionCountRow[] {
  return db
    .prepare<[], SessionCountRow>(
      `SELECT session_id, calls, pending FROM session_counters WHERE calls <> 0 OR pending <> 0 ORDER BY session_id`,
    )
    .all();
}
