import type { Migration } from '../migration.js';

/**
 * Kept requests: the agent's own request (never a credential: injection happens later), sealed
 * under the vault's data key, for an action on a route with an idempotency contract and a retry
 * policy, so that a PERSON can retry it with the same key after the agent's call ended (the
 * "retry with the same key" way out of a blocked lane). Not part of the journal's projection or
 * its hash chain: a row is dropped when its action settles, and swept once the key's earliest safe
 * expiry passes (no same-key retry is allowed after it anyway).
 */
export const migration008KeptRequests: Migration = {
  version: 8,
  name: 'kept-requests',
  up(db) {
    db.exec(`
      CREATE TABLE kept_requests (
        action_id TEXT PRIMARY KEY,
        route TEXT NOT NULL,
        sealed BLOB NOT NULL,
        kept_at_ms INTEGER NOT NULL,
        expires_at_ms INTEGER NOT NULL
      ) STRICT;
      CREATE INDEX kept_requests_by_expiry ON kept_requests (expires_at_ms);
    `);
  },
};
