import type { Migration } from '../migration.js';

/**
 * The journal's idempotency book (journal/idempotency-book.ts) reads, when the journal opens, the bindings that still
 * matter: those expiring after now less the book's margin (journal-store idempotencyKeysExpiringAfterSql). The table
 * keeps every binding ever made (a row is a projection of the PREFLIGHT_VALIDATED that bound it), so without an index
 * on the expiry that read scanned all of them: an open's cost grew with every keyed request ever sent, not with the
 * keys still within their remote's retention. With this index it is one range read of the live ones. An index only:
 * no row changes.
 */
export const migration023IdempotencyKeysByExpiry: Migration = {
  version: 23,
  name: 'idempotency-keys-by-expiry',
  up(db) {
    // IF NOT EXISTS: a journal set back to an older version by hand (as the older migrations' tests do) keeps it.
    db.exec(`CREATE INDEX IF NOT EXISTS idempotency_keys_by_expiry ON idempotency_keys (expires_at_ms)`);
  },
};
