import type { Migration } from '../migration.js';

/**
 * The journal's side of the signed integrity anchor (broker/host/integrity-anchor.ts): the counter of the last anchor
 * file the broker wrote for this journal, and the key that signed it. The anchor lives outside the data directory; this
 * row lives inside it, so each can catch the other going back: an anchor older than this counter was restored, a
 * counter behind the anchor's means the journal was. IF NOT EXISTS: a step re-run over a file that kept the table
 * (a downgrade that only rewound user_version) leaves its row alone. No row: no anchor was ever written for this journal (a journal
 * from before anchors, or one never unlocked), which is first use, not tampering.
 */
export const migration012IntegrityAnchor: Migration = {
  version: 12,
  name: 'integrity-anchor',
  up(db) {
    db.exec(`
      CREATE TABLE IF NOT EXISTS integrity_anchor (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        counter INTEGER NOT NULL CHECK (counter > 0),
        head_seq INTEGER NOT NULL,
        key_id TEXT NOT NULL,
        written_at_ms INTEGER NOT NULL
      ) STRICT;
    `);
  },
};
