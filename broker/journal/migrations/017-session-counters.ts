import type { Database } from 'better-sqlite3';
import type { Migration } from '../migration.js';

/**
 * `sessions.list` reads each session's figures from a counter row instead of its actions (issue #18). Before, it read
 * and parsed up to 1,000 action rows per session, for up to 1,000 sessions, on every call (each refresh of the
 * desktop's Sessions view): O(actions) on the event loop, and `calls`/`pending` stopped at the session's first 1,000
 * actions. session_counters holds, per session id found on an action row, the number of its actions (`calls`) and of
 * those neither classified nor dispatched (`pending`: outcome and dispatch_seq null). The journal moves them by the
 * difference between an action's old and new row, in the transaction that rewrites the row (journal-store writeState,
 * broker/core/session-counters.ts), like migration 011's counters; this step counts them once from the table. Keyed by
 * the action's session id, not by the sessions table: an action row never waits for its session's row.
 */
export const migration017SessionCounters: Migration = {
  version: 17,
  name: 'session-counters',
  up(db) {
    db.exec(`
      CREATE TABLE session_counters (
        session_id TEXT PRIMARY KEY,
        calls INTEGER NOT NULL,
        pending INTEGER NOT NULL
      ) STRICT, WITHOUT ROWID;
    `);
    buildSessionCounters(db);
  },
};

/** Fills session_counters from the actions table in one pass (through actions_by_session): the upgrade, and the bench. */
export function buildSessionCounters(db: Database): void {
  db.exec(`
    DELETE FROM session_counters;
    INSERT INTO session_counters (session_id, calls, pending)
    SELECT session_id, count(*), sum(outcome IS NULL AND dispatch_seq IS NULL)
    FROM actions WHERE session_id IS NOT NULL GROUP BY session_id;
  `);
}
