import type { Migration } from '../migration.js';

/**
 * Idempotency keys: which request fingerprint an agent's key means on a route and scope, until the
 * remote forgets it (DESIGN §3). A current-state table like actions and sessions: each row is
 * derived from the PREFLIGHT_VALIDATED event that bound the key (`bound_seq`), in the same
 * transaction, so a replay of the log rebuilds it. The key is an agent-chosen identifier, never a
 * secret, and bounded by the event schema (visible ASCII, ≤ 1024).
 */
export const migration006IdempotencyKeys: Migration = {
  version: 6,
  name: 'idempotency-keys',
  up(db) {
    db.exec(`
      CREATE TABLE idempotency_keys (
        route TEXT NOT NULL,
        scope TEXT NOT NULL,
        key TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        action_id TEXT NOT NULL,
        first_seen_ms INTEGER NOT NULL,
        expires_at_ms INTEGER NOT NULL,
        bound_seq INTEGER NOT NULL,
        PRIMARY KEY (route, scope, key)
      ) STRICT;
    `);
  },
};
