import type { Database } from 'better-sqlite3';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { openDatabase } from '../ports/open-database.js';
import { journalFileName, noJournalSnapshot } from './journal-file-name.js';
import { restingActionCountsOf, type CounterRow, type RestingActionCounts } from '../core/action-counters.js';
import type { OutcomeCountRow } from '../core/metrics.js';
import type { ActionCounts } from './journal-store.js';
import { schemaVersion } from './schema-version.js';
import {
  countEventsSql,
  dispatchedUnrecordedSql,
  inFlightSql,
  lastSeqSql,
  readCountersSql,
  readTreeSql,
} from './snapshot-sql.js';
import { migration004AuditLog } from './migrations/004-audit-log.js';
import { migration011StatusCounters } from './migrations/011-status-counters.js';

export interface JournalSnapshot {
  readonly exists: boolean;
  readonly events: number;
  readonly last_seq: number;
  readonly schema_version: number;
  /**
   * As the file says them with no broker running it (restingActionCountsOf): a dispatched action with no outcome
   * recorded counts unknown (and in `dispatched_unrecorded`), never in flight. A broker that holds the file (status
   * found one silent, starting or stopping) may still be running those: the caller says so.
   */
  readonly actions: RestingActionCounts;
}

/**
 * Reads a data directory's journal without becoming its writer: a read-only connection, no
 * migration, no recovery (a running daemon may hold the journal, and only the writer recovers).
 */
export function readJournalSnapshot(dataDir: string): JournalSnapshot {
  const path = join(dataDir, journalFileName);
  if (!existsSync(path)) return noJournalSnapshot;
  const db = openDatabase(path, { readonly: true, fileMustExist: true });
  try {
    const version = schemaVersion(db);
    if (version === 0) return { ...noJournalSnapshot, exists: true };
    // The audit tree's size moves in the transaction that appends its events (the broker refuses to open a
    // journal where they differ), and reading it is O(1); the counters likewise. A journal no broker has
    // migrated yet is scanned once. The journal store's own reads (snapshot-sql.ts), without the store, which
    // would load the contract's schemas and the fold.
    const events =
      version >= migration004AuditLog.version ? db.prepare<[], { size: number }>(readTreeSql).get()?.size : undefined;
    return {
      exists: true,
      events: events ?? db.prepare<[], { n: number }>(countEventsSql).get()?.n ?? 0,
      last_seq: db.prepare<[], { seq: number }>(lastSeqSql).get()?.seq ?? 0,
      schema_version: version,
      actions:
        version >= migration011StatusCounters.version
          ? restingActionCountsOf(db.prepare<[], CounterRow>(readCountersSql).all())
          : scanRestingActionCounts(db),
    };
  } finally {
    db.close();
  }
}

/**
 * What the counters replaced (issue #18): a count over the whole actions table. Kept for a journal no broker has
 * migrated to schema 11, and as the oracle the counters are tested and benchmarked against. in_flight: not yet closed
 * before dispatch, or dispatched with no classification recorded.
 */
export function scanActionCounts(db: Database): ActionCounts {
  const row = db
    .prepare<[], { total: number; in_flight: number | null; unknown: number | null }>(
      `
      SELECT count(*) AS total,
        sum(${inFlightSql}) AS in_flight,
        sum(outcome = 'unknown' AND NOT ${dispatchedUnrecordedSql}) AS unknown
      FROM actions`,
    )
    .get();
  return { total: row?.total ?? 0, in_flight: row?.in_flight ?? 0, unknown: row?.unknown ?? 0 };
}

/**
 * scanActionCounts as read with no broker running the journal (restingActionCountsOf): for a journal no broker has
 * migrated to schema 11, and the oracle of the resting counts. A dispatched action with no classification recorded is
 * unknown (dispatched_unrecorded), not in flight; in_flight is only what is open before dispatch.
 */
export function scanRestingActionCounts(db: Database): RestingActionCounts {
  const row = db
    .prepare<
      [],
      { total: number; in_flight: number | null; unknown: number | null; dispatched_unrecorded: number | null }
    >(
      `
      SELECT count(*) AS total,
        sum(${inFlightSql} AND NOT ${dispatchedUnrecordedSql}) AS in_flight,
        sum(outcome = 'unknown' OR ${dispatchedUnrecordedSql}) AS unknown,
        sum(${dispatchedUnrecordedSql}) AS dispatched_unrecorded
      FROM actions`,
    )
    .get();
  return {
    total: row?.total ?? 0,
    in_flight: row?.in_flight ?? 0,
    unknown: row?.unknown ?? 0,
    dispatched_unrecorded: row?.dispatched_unrecorded ?? 0,
  };
}

/**
 * The metrics' former GROUP BY over the actions table, for tests and the benchmark only: decision and dispatched tell
 * a closing decision from a failed phase; minute buckets the hour ending with the newest
 * minute an action with an outcome, settled or running, last changed in (event time; rateBuckets).
 * Shaped as the counters give it (outcomeRowsOf): per key its minutes, one row for the rest, and the ones dispatched
 * and not settled (in_flight: 1, open) apart, by minute likewise: a running action's row says unknown provisionally,
 * and the rate counts it only once it settles (schema 22); its minute still ends the hour (foldRate).
 */
export function scanOutcomeCounts(db: Database): OutcomeCountRow[] {
  const rows = db
    .prepare<[], OutcomeCountRow & { in_flight: number }>(
      `
      WITH grouped AS (
        SELECT phase, outcome, code, decision, dispatch_seq IS NOT NULL AS dispatched,
          CASE WHEN outcome IS NOT NULL AND updated_at_ms / 60000 > (SELECT max(updated_at_ms) / 60000 FROM actions WHERE outcome IS NOT NULL) - 60
            THEN updated_at_ms / 60000 END AS minute,
          ${dispatchedUnrecordedSql} AND outcome IS NOT NULL AS running
        FROM actions)
      SELECT phase, outcome, code, decision, dispatched, minute, count(*) AS n, 0 AS in_flight
        FROM grouped WHERE minute IS NOT NULL AND NOT running GROUP BY phase, outcome, code, decision, dispatched, minute
      UNION ALL
      SELECT phase, outcome, code, decision, dispatched, NULL, sum(minute IS NULL AND NOT running) AS n, 0
        FROM grouped GROUP BY phase, outcome, code, decision, dispatched HAVING n <> 0
      UNION ALL
      SELECT phase, outcome, code, decision, dispatched, minute, count(*), 1
        FROM grouped WHERE running GROUP BY phase, outcome, code, decision, dispatched, minute`,
    )
    .all();
  return rows.map(({ in_flight, ...row }) => (in_flight === 1 ? { ...row, in_flight } : row));
}
