import type { Migration } from '../migration.js';

/** Kinds that may close or settle an action (contract kindsRequiringClassification), as SQL. */
const settlingKinds = `'PREFLIGHT_FAILED', 'REJECTED', 'EXPIRED', 'CANCELLED', 'RESULT_COMMITTED', 'OUTCOME_RECORDED', 'RECONCILIATION_RESULT', 'OPERATOR_ATTESTED'`;
const decisionKinds = `'APPROVED', 'REJECTED', 'EXPIRED', 'CANCELLED'`;

/**
 * The action list (`actions.list`, one row per action, newest first): the moments of each action
 * (broker/core action-timeline) become columns of the plaintext `actions` projection, beside the
 * route or host name, so a page is one indexed query that never opens a sealed event. Each filter
 * has an index ending in first_seq, so a filtered page is a keyset range too.
 *
 * Existing rows are filled from the events' plaintext headers (kind, at_ms) — the bodies are sealed
 * and no key is at hand while migrating — so for them: who decided is known only for an expiry
 * (the reader words the rest from the decision event when the vault lets it, by decided_seq), and
 * settled/resolved are the wall time of the latest event that may carry a classification (an
 * ABANDONED for an abandoned head). New events fold the exact values.
 */
export const migration010ActionList: Migration = {
  version: 10,
  name: 'action-list',
  up(db) {
    db.exec(`
      ALTER TABLE actions ADD COLUMN target_name TEXT;
      ALTER TABLE actions ADD COLUMN decided_by TEXT;
      ALTER TABLE actions ADD COLUMN decided_at_ms INTEGER;
      ALTER TABLE actions ADD COLUMN decided_seq INTEGER;
      ALTER TABLE actions ADD COLUMN dispatched_at_ms INTEGER;
      ALTER TABLE actions ADD COLUMN settled_at_ms INTEGER;
      ALTER TABLE actions ADD COLUMN resolved_at_ms INTEGER;

      UPDATE actions SET
        target_name = CASE WHEN instr(target, ' ') > 0 THEN substr(target, 1, instr(target, ' ') - 1) ELSE target END,
        decided_seq = (SELECT seq FROM events e WHERE e.action_id = actions.action_id AND e.kind IN (${decisionKinds}) ORDER BY seq DESC LIMIT 1),
        dispatched_at_ms = (SELECT at_ms FROM events e WHERE e.action_id = actions.action_id AND e.kind = 'DISPATCH_STARTED' ORDER BY seq LIMIT 1),
        settled_at_ms = CASE WHEN outcome IS NOT NULL AND recorded = 1 THEN coalesce(
          (SELECT at_ms FROM events e WHERE e.action_id = actions.action_id AND e.kind IN (${settlingKinds}) ORDER BY seq DESC LIMIT 1),
          updated_at_ms) END;

      UPDATE actions SET
        target_name = CASE WHEN target_name LIKE 'route:%' THEN substr(target_name, 7)
          WHEN target_name LIKE 'host:%' THEN substr(target_name, 6) ELSE target_name END,
        decided_at_ms = (SELECT at_ms FROM events WHERE seq = actions.decided_seq),
        decided_by = CASE WHEN (SELECT kind FROM events WHERE seq = actions.decided_seq) = 'EXPIRED' THEN 'nobody (expired)' END,
        resolved_at_ms = CASE
          WHEN ticket IS NULL THEN NULL
          WHEN dispatch_seq IS NULL THEN CASE WHEN outcome IS NOT NULL THEN settled_at_ms END
          WHEN recorded = 0 THEN NULL
          WHEN outcome IN ('committed', 'rejected') THEN settled_at_ms
          WHEN json_extract(state, '$.abandoned') = 1 THEN coalesce(
            (SELECT at_ms FROM events e WHERE e.action_id = actions.action_id AND e.kind = 'ABANDONED' ORDER BY seq DESC LIMIT 1),
            settled_at_ms)
        END;

      CREATE INDEX actions_list ON actions (first_seq);
      CREATE INDEX actions_list_by_session ON actions (session_id, first_seq);
      CREATE INDEX actions_list_by_lane ON actions (lane, first_seq);
      CREATE INDEX actions_list_by_target ON actions (target_name, first_seq);
      CREATE INDEX actions_list_by_outcome ON actions (outcome, first_seq);
      CREATE INDEX actions_list_by_code ON actions (code, first_seq) WHERE code IS NOT NULL;
      CREATE INDEX actions_list_open ON actions (first_seq) WHERE settled_at_ms IS NULL;
    `);
  },
};
