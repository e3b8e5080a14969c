import type { Migration } from '../migration.js';

/**
 * Indexes for the read paths: one action's timeline in append order (Activity view, evidence),
 * a lane's tickets in order (the queue), and the unrecorded actions that recovery at open and the
 * in-flight count look at. A separate step from 001 so the upgrade path from a populated database
 * is exercised (and tested) from the first release on.
 */
export const migration002ReadIndexes: Migration = {
  version: 2,
  name: 'read-indexes',
  up(db) {
    db.exec(`
      CREATE INDEX events_by_action ON events (action_id, seq);
      CREATE INDEX actions_by_lane ON actions (lane, ticket);
      CREATE INDEX actions_unrecorded ON actions (first_seq) WHERE recorded = 0;
    `);
  },
};
