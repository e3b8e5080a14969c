import type { Database } from 'better-sqlite3';
import type { Migration } from '../migration.js';

/** Which header rows the outcome marks index holds: every one that names an outcome, and every ABANDONED. */
export const outcomeMarksWhereSql = `outcome IS NOT NULL OR kind = 'ABANDONED'`;

/** Whether the events table has the outcome header column (schema 25 on; a migration test's journal may stop before). */
export function eventsHaveOutcomeColumn(db: Database): boolean {
  const columns = db.prepare(`SELECT name FROM pragma_table_info('events')`).all() as Array<{ name: string }>;
  return columns.some((column) => column.name === 'outcome');
}

/**
 * An event's plaintext header gains the outcome its action folds to at that event, where the event sets one (core
 * eventOutcomeHeader: a DISPATCH_STARTED's unknown, a classification's outcome). It is part of the canonical header
 * text the event's seal and its audit leaf bind (core auditHeaderText: an eighth element, only where not null), so an
 * edited one fails the event's authentication and `audit verify`, as every other header column does.
 *
 * Why: at open no earlier run's sealed event can be opened, so recovery checks each `actions` row it acts on against
 * the log's headers (docs/audit.md, "Nor does recovery record over a row the log refutes"), and until this version they
 * said whether an outcome was recorded but not which. A recorded unknown (a blocked lane's head) whose row another
 * process rewrote to read committed, or abandoned, was taken as written, and its lane released. With the outcome in the
 * header, the log says which actions it last left unknown, and what each row must read.
 *
 * Rows written before this version keep a null outcome: their headers, leaves and seals are what they were (events are
 * never rewritten). The partial index holds the headers that name an outcome and the ABANDONED ones (a person's close
 * of an unknown), covering (action_id, seq, kind, outcome), so recovery's question "which actions does the log last
 * leave unknown, not abandoned" is one pass over it with no event row read (JournalStore.openOutcomes).
 */
export const migration025OutcomeHeaders: Migration = {
  version: 25,
  name: 'outcome-headers',
  up(db) {
    // A journal set back to an older version by hand (as the older migrations' tests do) keeps its column.
    if (!eventsHaveOutcomeColumn(db)) db.exec(`ALTER TABLE events ADD COLUMN outcome TEXT`);
    db.exec(
      `CREATE INDEX IF NOT EXISTS events_outcome_marks ON events (action_id, seq, kind, outcome)
        WHERE ${outcomeMarksWhereSql}`,
    );
  },
};
