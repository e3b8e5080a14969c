import type { Migration } from '../migration.js';

/**
 * `sessions.list` (and `postern sessions`, which asks it) and the session sweeper's `listSessions` read the newest
 * sessions by `first_seq`, the seq of each session's SESSION_STARTED. Without an index on it every call read the whole
 * sessions table and sorted it: O(sessions) per refresh of the Sessions view, though it shows at most 1,000. With this
 * index the queries (journal-store listSessions and listCountedSessions) walk it from the newest entry and stop at
 * their LIMIT, with no sort; the caller reverses the rows to oldest first. An index only: no row changes.
 */
export const migration018SessionsByFirstSeq: Migration = {
  version: 18,
  name: 'sessions-by-first-seq',
  up(db) {
    db.exec(`CREATE INDEX sessions_by_first_seq ON sessions (first_seq)`);
  },
};
