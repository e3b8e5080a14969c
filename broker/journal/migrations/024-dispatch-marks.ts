import type { Migration } from '../migration.js';

/**
 * The kinds recovery reads from the log's plaintext headers to learn, at open, which actions the log shows dispatched
 * and not settled since: DISPATCH_STARTED and every kind that must carry a classification (contract
 * kindsRequiringClassification, as it stood at this version). Recovery's query names this list as it is, so SQLite
 * takes the partial index below for it; a test holds the two lists equal.
 */
export const dispatchMarkKindsSql = `'DISPATCH_STARTED', 'PREFLIGHT_FAILED', 'REJECTED', 'EXPIRED', 'CANCELLED', 'RESULT_COMMITTED', 'OUTCOME_RECORDED', 'RECONCILIATION_RESULT', 'OPERATOR_ATTESTED'`;

/**
 * Recovery at open takes an `actions` row for what it says only where the log's headers agree (docs/audit.md, "Nor
 * does recovery record over a row the log refutes"). The rows it selected were those whose columns read in flight, so
 * a row rewritten to read settled while no broker ran was never read, and its lane was released. The log itself says
 * which actions are in flight: those whose last DISPATCH_STARTED has no classified event after it. This partial index
 * holds those headers only (two or three an action, appended at its right edge: each action id begins with its time),
 * covering (action_id, seq, kind), so that question is one pass over the index in SQLite, with no event row read. An
 * index only: no row changes.
 */
export const migration024DispatchMarks: Migration = {
  version: 24,
  name: 'dispatch-marks',
  up(db) {
    // IF NOT EXISTS: a journal set back to an older version by hand (as the older migrations' tests do) keeps it.
    db.exec(
      `CREATE INDEX IF NOT EXISTS events_dispatch_marks ON events (action_id, seq, kind) WHERE kind IN (${dispatchMarkKindsSql})`,
    );
  },
};
