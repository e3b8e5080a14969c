import type { Migration } from '../migration.js';

/** Kinds that settle a recorded unknown (a lookup's answer, a person's attestation). */
const lateSettlingKinds = `'RECONCILIATION_RESULT', 'OPERATOR_ATTESTED'`;

/**
 * An unknown that recovery in a quarantined journal recorded before any DISPATCH_STARTED (basis
 * broker_restart_journal_quarantined) blocks its lane like any unknown head (DESIGN §4; broker/core ticketStanding).
 * A broker before this step read such a ticket as resolved, so its action-timeline column `resolved_at_ms` says the
 * lane stopped waiting on it when recovery recorded it — and the lane loader (`resolved_at_ms IS NULL`) left it out,
 * releasing the next ticket as if the unknown one had failed.
 *
 * The fold is the record: this step re-derives the column the way the timeline now folds it, from the events'
 * plaintext headers (kind, at_ms) and the plaintext state (no key is at hand while migrating). Only an action with no
 * DISPATCH_STARTED whose recorded outcome is unknown, or was settled by a lookup or an attestation (before dispatch
 * nothing else admits those), changes: still unknown and not abandoned → null (it blocks); abandoned → the latest
 * ABANDONED; settled → its first ABANDONED if a person abandoned it before learning the outcome (the fold keeps the
 * moment the lane stopped waiting), else the latest settlement. Every other row is already what the fold says.
 */
export const migration015QuarantinedUnknownBlocks: Migration = {
  version: 15,
  name: 'quarantined-unknown-blocks',
  up(db) {
    db.exec(`
      UPDATE actions SET resolved_at_ms = CASE
          WHEN outcome = 'unknown' AND json_extract(state, '$.abandoned') = 1 THEN coalesce(
            (SELECT at_ms FROM events e WHERE e.action_id = actions.action_id AND e.kind = 'ABANDONED' ORDER BY seq DESC LIMIT 1),
            resolved_at_ms)
          WHEN outcome = 'unknown' THEN NULL
          ELSE coalesce(
            (SELECT at_ms FROM events e WHERE e.action_id = actions.action_id AND e.kind = 'ABANDONED' ORDER BY seq LIMIT 1),
            (SELECT at_ms FROM events e WHERE e.action_id = actions.action_id AND e.kind IN (${lateSettlingKinds}) ORDER BY seq DESC LIMIT 1),
            resolved_at_ms)
        END
      WHERE ticket IS NOT NULL AND dispatch_seq IS NULL AND recorded = 1 AND (
        outcome = 'unknown' OR
        EXISTS (SELECT 1 FROM events e WHERE e.action_id = actions.action_id AND e.kind IN (${lateSettlingKinds})));
    `);
  },
};
