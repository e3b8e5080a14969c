import type { Migration } from '../migration.js';

/**
 * The result store: a settled remote result kept under its invocation id so a caller can fetch it
 * again (a read, never a second execution). `results` holds the non-secret summary and the
 * completeness facts; `result_chunks` holds the stored bytes in sequence. A result is complete only
 * when `complete = 1`, written in the same transaction as its last chunk; a reader trusts chunks
 * only up to a complete marker. Bodies are capped: `truncated` says so explicitly, `total_bytes`
 * counts what arrived, `digest` covers what arrived (not only what was kept).
 */
export const migration003Results: Migration = {
  version: 3,
  name: 'results',
  up(db) {
    db.exec(`
      CREATE TABLE results (
        result_id TEXT PRIMARY KEY,
        action_id TEXT NOT NULL,
        attempt INTEGER NOT NULL,
        summary TEXT NOT NULL CHECK (json_valid(summary)),
        total_bytes INTEGER NOT NULL,
        stored_bytes INTEGER NOT NULL,
        truncated INTEGER NOT NULL CHECK (truncated IN (0, 1)),
        digest TEXT NOT NULL,
        chunks INTEGER NOT NULL,
        complete INTEGER NOT NULL CHECK (complete IN (0, 1)),
        created_at_ms INTEGER NOT NULL,
        UNIQUE (action_id, attempt)
      ) STRICT;

      CREATE TABLE result_chunks (
        result_id TEXT NOT NULL REFERENCES results (result_id),
        n INTEGER NOT NULL,
        bytes BLOB NOT NULL,
        PRIMARY KEY (result_id, n)
      ) STRICT;
    `);
  },
};
