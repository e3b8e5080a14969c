import type { Migration } from '../migration.js';

/**
 * The `attempts` and `tickets` tables go (issue #18: per-event work on the commit path). Both were projections that
 * nothing read: every column of `tickets` is also a column of `actions` (ticket, action_id, session_id, lane, decision,
 * outcome, dispatch_seq, first_seq, accepted_at_ms), `actions.ticket` is UNIQUE, and an action's attempts are in its
 * `actions.state`. Yet each event that moved an attempt or a ticket rewrote their rows: about three upserts of each
 * per HTTP action, ~7 % of the event loop at concurrency 64. Nothing is lost: the events hold the history, and the
 * actions table the current state, as before.
 */
export const migration014DropUnreadProjections: Migration = {
  version: 14,
  name: 'drop-unread-projections',
  up(db) {
    db.exec(`
      DROP TABLE attempts;
      DROP TABLE tickets;
    `);
  },
};
