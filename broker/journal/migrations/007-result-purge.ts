import type { Migration } from '../migration.js';

/**
 * Result retention: a stored result's bytes are deleted once `results.retention_seconds` has
 * passed (broker/host/result-purge.ts). `purged_at_ms` marks the row whose chunks are gone, so a
 * read of it says "expired, purged" instead of handing over nothing or pretending it never
 * existed; the row itself (digest, counts, summary) stays, as do the journal's events. The partial
 * index keeps each bounded sweep to the rows still holding bytes, oldest first.
 */
export const migration007ResultPurge: Migration = {
  version: 7,
  name: 'result-purge',
  up(db) {
    db.exec(`
      ALTER TABLE results ADD COLUMN purged_at_ms INTEGER;
      CREATE INDEX results_unpurged_by_age ON results (created_at_ms) WHERE purged_at_ms IS NULL;
    `);
  },
};
