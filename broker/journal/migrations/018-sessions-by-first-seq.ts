import type { Migration } from '../migration.js';

/**
 * Added when `sessions.list` (and `postern sessions`, which asks it) and the session sweeper's `listSessions` read the
 * newest sessions by `first_seq`, the seq of each session's SESSION_STARTED: without an index on it every call read
 * the whole sessions table and sorted it, though a list shows at most 1,000. Those lists now come from the journal's
 * session book in memory; what still reads the table through this index is the book's one read as the journal opens
 * (journal-store `openingSessionsSql`: the newest ended sessions, walked from the end of the index and stopped at
 * their LIMIT, with no sort). An index only: no row changes.
 */
export const migration018SessionsByFirstSeq: Migration = {
  version: 18,
  name: 'sessions-by-first-seq',
  up(db) {
    db.exec(`CREATE INDEX sessions_by_first_seq ON sessions (first_seq)`);
  },
};
