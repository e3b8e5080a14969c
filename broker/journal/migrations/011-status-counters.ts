import type { Database } from 'better-sqlite3';
import type { Migration } from '../migration.js';

/**
 * `status` and `metrics` read counters instead of scanning the actions table (issue #18: 0.2–0.7 s
 * of blocked loop on a 1M-event journal, asked every 5 s). action_counters holds the number of
 * actions per (phase, outcome, code, decision, dispatched, in_flight); outcome_minutes the number of
 * classified actions per minute they last changed, for the last hour's rate. The journal moves both
 * by the difference between an action's old and new row, in the transaction that rewrites the row
 * (journal-store writeState), so they never disagree with the table after a crash.
 *
 * Key columns are NOT NULL with '' for a null value: SQLite treats NULLs in a primary key as distinct,
 * which would defeat the upsert. Readers map '' back to null.
 */
export const migration011StatusCounters: Migration = {
  version: 11,
  name: 'status-counters',
  up(db) {
    db.exec(`
      CREATE TABLE action_counters (
        phase TEXT NOT NULL,
        outcome TEXT NOT NULL,
        code TEXT NOT NULL,
        decision TEXT NOT NULL,
        dispatched INTEGER NOT NULL,
        in_flight INTEGER NOT NULL,
        n INTEGER NOT NULL,
        PRIMARY KEY (phase, outcome, code, decision, dispatched, in_flight)
      ) STRICT, WITHOUT ROWID;

      CREATE TABLE outcome_minutes (
        minute INTEGER NOT NULL,
        phase TEXT NOT NULL,
        outcome TEXT NOT NULL,
        code TEXT NOT NULL,
        decision TEXT NOT NULL,
        dispatched INTEGER NOT NULL,
        n INTEGER NOT NULL,
        PRIMARY KEY (minute, phase, outcome, code, decision, dispatched)
      ) STRICT, WITHOUT ROWID;
    `);
    buildStatusCounters(db);
  },
};

/**
 * Fills the counters from the actions table with the scan queries they replace (one pass each): the upgrade of an
 * existing data directory. The minute rows as this schema keeps them (no in_flight: migration 022 adds it); the
 * benchmark's setup fills action_counters with buildActionCounters and the minutes with 022's buildOutcomeMinutes.
 */
export function buildStatusCounters(db: Database): void {
  buildActionCounters(db);
  db.exec(`
    DELETE FROM outcome_minutes;

    INSERT INTO outcome_minutes (minute, phase, outcome, code, decision, dispatched, n)
    SELECT updated_at_ms / 60000, coalesce(phase, ''), outcome, coalesce(code, ''), coalesce(decision, ''),
      dispatch_seq IS NOT NULL, count(*)
    FROM actions
    WHERE outcome IS NOT NULL
      AND updated_at_ms / 60000 > (SELECT max(updated_at_ms) / 60000 FROM actions WHERE outcome IS NOT NULL) - 60
    GROUP BY 1, 2, 3, 4, 5, 6;
  `);
}

/** Fills action_counters from the actions table (one pass); its shape is the same at every schema since 011. */
export function buildActionCounters(db: Database): void {
  db.exec(`
    DELETE FROM action_counters;

    INSERT INTO action_counters (phase, outcome, code, decision, dispatched, in_flight, n)
    SELECT coalesce(phase, ''), coalesce(outcome, ''), coalesce(code, ''), coalesce(decision, ''),
      dispatch_seq IS NOT NULL, recorded = 0 AND (outcome IS NULL OR dispatch_seq IS NOT NULL), count(*)
    FROM actions GROUP BY 1, 2, 3, 4, 5, 6;
  `);
}
