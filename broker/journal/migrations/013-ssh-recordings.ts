import type { Migration } from '../migration.js';

/**
 * SSH session recordings (asciicast v2, docs/ssh-channel.md): one row per SSH action, written before its exec
 * request as an open marker (a failure there stops the action as not_attempted: nothing runs unrecorded), then
 * completed with the cast sealed in chunks under the journal's run key, like result chunks (migration 009). Only
 * ids, counts, flags and times are plain. Not part of the projection or the hash chain; the result purge sweeps
 * its bytes after `results.retention_seconds` like a result's.
 */
export const migration013SshRecordings: Migration = {
  version: 13,
  name: 'ssh-recordings',
  up(db) {
    db.exec(`
      CREATE TABLE recordings (
        recording_id TEXT PRIMARY KEY,
        action_id TEXT NOT NULL UNIQUE,
        started_at_ms INTEGER NOT NULL,
        complete INTEGER NOT NULL DEFAULT 0 CHECK (complete IN (0, 1)),
        truncated INTEGER NOT NULL DEFAULT 0 CHECK (truncated IN (0, 1)),
        cast_bytes INTEGER NOT NULL DEFAULT 0,
        chunks INTEGER NOT NULL DEFAULT 0,
        run INTEGER,
        finished_at_ms INTEGER,
        purged_at_ms INTEGER
      ) STRICT;
      CREATE TABLE recording_chunks (
        recording_id TEXT NOT NULL REFERENCES recordings (recording_id),
        n INTEGER NOT NULL,
        bytes BLOB NOT NULL,
        nonce BLOB NOT NULL,
        PRIMARY KEY (recording_id, n)
      ) STRICT, WITHOUT ROWID;
      CREATE INDEX recordings_by_finish ON recordings (finished_at_ms) WHERE purged_at_ms IS NULL;
    `);
  },
};
