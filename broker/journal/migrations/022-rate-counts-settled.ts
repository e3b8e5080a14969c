import type { Database } from 'better-sqlite3';
import type { Migration } from '../migration.js';

/** The counters' in_flight test on an actions row (broker/core/action-counters.ts countedAction). */
const inFlightOf = 'recorded = 0 AND (outcome IS NULL OR dispatch_seq IS NOT NULL)';

/** outcome_minutes since this step: migration 011's, with the counter key's in_flight. */
const createOutcomeMinutes = (name: string): string => `
  CREATE TABLE ${name} (
    minute INTEGER NOT NULL,
    phase TEXT NOT NULL,
    outcome TEXT NOT NULL,
    code TEXT NOT NULL,
    decision TEXT NOT NULL,
    dispatched INTEGER NOT NULL,
    in_flight INTEGER NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY (minute, phase, outcome, code, decision, dispatched, in_flight)
  ) STRICT, WITHOUT ROWID;`;

/** The actions in flight with an outcome (dispatched, not settled), per minute and rate key ('' for null). */
const inFlightMinutes = `(SELECT updated_at_ms / 60000 AS minute, coalesce(phase, '') AS phase, outcome,
  coalesce(code, '') AS code, coalesce(decision, '') AS decision, 1 AS dispatched, count(*) AS n
  FROM actions WHERE recorded = 0 AND dispatch_seq IS NOT NULL AND outcome IS NOT NULL GROUP BY 1, 2, 3, 4, 5) AS a`;
const sameMinuteKey = `o.in_flight = 0 AND o.n > 0 AND o.minute = a.minute AND o.phase = a.phase
  AND o.outcome = a.outcome AND o.code = a.code AND o.decision = a.decision AND o.dispatched = a.dispatched`;

/**
 * The rate (`metrics --json`'s `rate`, the Metrics tab's sparklines) counted a command still running under `unknown` in
 * the minute it last changed: a dispatched action's row says unknown from DISPATCH_STARTED on (its provisional outcome)
 * until its outcome is recorded, and migration 011's minute rows kept no in-flight dimension — while `status`, metrics'
 * own counts and `actions list --outcome` read such an action as open, not an unknown outcome. The minute rows now
 * carry the counter key's in_flight: an in-flight row still moves the rate's hour (its dispatch is the newest change)
 * but is never counted as an outcome, and settling moves the action to a counted row, in the minute it settled.
 *
 * The table is rebuilt with the column (it is part of the primary key), every row copied as settled, and then the
 * in-flight actions a version 21 broker counted are moved to in-flight rows of the same minute and key, as the journal
 * moves them when a row changes (journal-store writeState): a minute already pruned is not brought back, and a move
 * never takes a row below 0. A broker's start leaves none dispatched and unrecorded, so only a stopped or crashed run's
 * are found, through migration 002's index on unrecorded actions; the recovery that follows records each unknown
 * (BROKER_RESTARTED) and counts it then, once. Counters only: no actions row changes.
 */
export const migration022RateCountsSettled: Migration = {
  version: 22,
  name: 'rate-counts-settled',
  up(db) {
    db.exec(`
      ${createOutcomeMinutes('outcome_minutes_22')}
      INSERT INTO outcome_minutes_22 (minute, phase, outcome, code, decision, dispatched, in_flight, n)
      SELECT minute, phase, outcome, code, decision, dispatched, 0, n FROM outcome_minutes;
      DROP TABLE outcome_minutes;
      ALTER TABLE outcome_minutes_22 RENAME TO outcome_minutes;

      INSERT INTO outcome_minutes (minute, phase, outcome, code, decision, dispatched, in_flight, n)
      SELECT o.minute, o.phase, o.outcome, o.code, o.decision, o.dispatched, 1, min(o.n, a.n)
      FROM outcome_minutes AS o, ${inFlightMinutes} WHERE ${sameMinuteKey};
      UPDATE outcome_minutes AS o SET n = o.n - min(o.n, a.n) FROM ${inFlightMinutes} WHERE ${sameMinuteKey};
    `);
  },
};

/**
 * Fills the rate's minute rows from the actions table as the journal counts them since this step (one pass): the
 * benchmark's setup, after migration 011's buildStatusCounters filled action_counters (its own minute fill is the
 * shape before this step).
 */
export function buildOutcomeMinutes(db: Database): void {
  db.exec(`
    DELETE FROM outcome_minutes;
    INSERT INTO outcome_minutes (minute, phase, outcome, code, decision, dispatched, in_flight, n)
    SELECT updated_at_ms / 60000, coalesce(phase, ''), outcome, coalesce(code, ''), coalesce(decision, ''),
      dispatch_seq IS NOT NULL, ${inFlightOf}, count(*)
    FROM actions
    WHERE outcome IS NOT NULL
      AND updated_at_ms / 60000 > (SELECT max(updated_at_ms) / 60000 FROM actions WHERE outcome IS NOT NULL) - 60
    GROUP BY 1, 2, 3, 4, 5, 6, 7;
  `);
}
