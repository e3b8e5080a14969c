import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { actionPaths } from '../../testing/action-paths.js';
import { openTempJournal, type TempJournal } from '../../testing/temp-journal.js';
import { ActionListQuery } from '../action-list-query.js';
import { migrate, schemaVersion } from '../migrate.js';
import { journalMigrations } from './index.js';
import { migration021OutcomeFilterSettled, settledOutcomeCondition } from './021-outcome-filter-settled.js';

let t: TempJournal;
beforeEach(async () => {
  t = await openTempJournal();
  // A recorded unknown, one dispatched and still running (its row says unknown provisionally), one committed.
  await t.journal.appendBatch(actionPaths.callerCancelledAfterDispatch('act_recorded_unknown'));
  await t.journal.appendBatch(actionPaths.deadlineInFlight('act_still_running_01'));
  await t.journal.appendBatch(actionPaths.httpNoApproval('act_committed_0001'));
});
afterEach(async () => {
  await t.dispose();
});

const ids = (q: ActionListQuery, filter: { outcome?: string; open?: boolean; text?: string }): string[] =>
  q
    .page({ ...filter, limit: 10 })
    .rows.map((r) => r.action_id)
    .sort();

describe('migration 021: actions list --outcome means settled with that outcome', () => {
  it('when a version 20 journal is migrated: --outcome unknown leaves the running action out (--open has it), through the rebuilt index, rows unchanged', async () => {
    await t.journal.close();
    const db = new Database(t.path);
    try {
      // What a version 20 broker left: the index over every row.
      db.exec(
        `DROP INDEX actions_list_by_outcome; CREATE INDEX actions_list_by_outcome ON actions (outcome, first_seq)`,
      );
      db.pragma('user_version = 20');
      const rows = (): unknown => db.prepare('SELECT * FROM actions ORDER BY action_id').all();
      const before = rows();
      expect(migrate(db, journalMigrations.slice(0, 21))).toBe(migration021OutcomeFilterSettled.version);
      expect(schemaVersion(db)).toBe(21);
      expect(rows()).toEqual(before);
      // Partial on the filter's condition, to the letter (a full index would answer the same query, only larger).
      const indexSql = db.prepare(`SELECT sql FROM sqlite_master WHERE name = 'actions_list_by_outcome'`).pluck().get();
      expect(indexSql).toBe(
        `CREATE INDEX actions_list_by_outcome ON actions (outcome, first_seq) WHERE ${settledOutcomeCondition}`,
      );
      const q = new ActionListQuery(db);
      expect(ids(q, { outcome: 'unknown' })).toEqual(['act_recorded_unknown']);
      // A tested filter beside it (the floor query reads the same index range).
      expect(ids(q, { outcome: 'unknown', text: 'act_' })).toEqual(['act_recorded_unknown']);
      expect(ids(q, { outcome: 'committed' })).toEqual(['act_committed_0001']);
      expect(ids(q, { open: true })).toContain('act_still_running_01');
      const plan = db
        .prepare(
          `EXPLAIN QUERY PLAN SELECT action_id FROM actions a INDEXED BY actions_list_by_outcome WHERE a.outcome = 'unknown' AND ${settledOutcomeCondition} ORDER BY first_seq DESC`,
        )
        .all()
        .map((r) => (r as { detail: string }).detail)
        .join('\n');
      expect(plan).toContain('actions_list_by_outcome');
      expect(plan).not.toContain('TEMP B-TREE');
    } finally {
      db.close();
    }
  });
});
