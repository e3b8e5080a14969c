import type { Migration } from '../migration.js';

/**
 * Agent sessions: the current state of each agent process (pid + start time), projected from its
 * SESSION_* events the same way actions are, in the same transaction as the events. `state` is
 * the full SessionState; the columns beside it are what the Sessions view filters on.
 */
export const migration005Sessions: Migration = {
  version: 5,
  name: 'sessions',
  up(db) {
    db.exec(`
      CREATE TABLE sessions (
        session_id TEXT PRIMARY KEY,
        status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'revoked', 'ended')),
        pid INTEGER NOT NULL,
        start_time TEXT NOT NULL,
        first_seq INTEGER NOT NULL,
        last_seq INTEGER NOT NULL,
        state TEXT NOT NULL CHECK (json_valid(state))
      ) STRICT;
      CREATE INDEX sessions_by_process ON sessions (pid, start_time);
      CREATE INDEX actions_by_session ON actions (session_id, ticket);
    `);
  },
};
