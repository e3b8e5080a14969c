import type { Migration } from '../migration.js';

/**
 * An open SSH recording's last known moment alive (docs/ssh-channel.md). A recording an earlier broker run left open
 * (it died while the command ran) was purged a retention after it started, while a finished one goes a retention
 * after it finished: a command that ran for hours before the crash lost its evidence hours early. `alive_at_ms` is
 * the last moment the broker that opened the row recorded it: its start, then each purge sweep that found its command
 * still running, or the moment its command ended unsealed (`forget`). The purge takes a leftover a retention after it.
 * Rows stored before this step were purged by their start: that is what they keep.
 */
export const migration019RecordingAlive: Migration = {
  version: 19,
  name: 'recording-alive',
  up(db) {
    db.exec(`
      ALTER TABLE recordings ADD COLUMN alive_at_ms INTEGER NOT NULL DEFAULT 0;
      UPDATE recordings SET alive_at_ms = coalesce(finished_at_ms, started_at_ms);
    `);
  },
};
