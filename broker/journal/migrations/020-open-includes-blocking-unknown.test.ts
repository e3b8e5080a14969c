import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { actionPaths } from '../../testing/action-paths.js';
import { openTempJournal, type TempJournal } from '../../testing/temp-journal.js';
import { ActionListQuery } from '../action-list-query.js';
import { migrate, schemaVersion } from '../migrate.js';
import { journalMigrations } from './index.js';
import { migration020OpenIncludesBlockingUnknown, openActionsCondition } from './020-open-includes-blocking-unknown.js';

let t: TempJournal;
beforeEach(async () => {
  t = await openTempJournal();
  // A recorded unknown that still blocks its lane, one a person settled, one in flight, one closed.
  await t.journal.appendBatch(actionPaths.callerCancelledAfterDispatch('act_blocking_unknown'));
  await t.journal.appendBatch(actionPaths.sshClosedNoExitAttested('act_attested_ssh_1'));
  await t.journal.appendBatch(actionPaths.deadlineInFlight('act_in_flight_0001'));
  await t.journal.appendBatch(actionPaths.httpNoApproval('act_committed_0001'));
});
afterEach(async () => {
  await t.dispose();
});

describe('migration 020: actions list --open keeps a recorded unknown its lane still waits on', () => {
  it('when a version 19 journal is migrated: the open page has the blocking unknown (and the in-flight one), through the rebuilt index, rows unchanged', async () => {
    await t.journal.close();
    const db = new Database(t.path);
    try {
      // What a version 19 broker left: the index over settled_at_ms alone.
      db.exec(
        `DROP INDEX actions_list_open; CREATE INDEX actions_list_open ON actions (first_seq) WHERE settled_at_ms IS NULL`,
      );
      db.pragma('user_version = 19');
      const rows = (): unknown => db.prepare('SELECT * FROM actions ORDER BY action_id').all();
      const before = rows();
      expect(migrate(db, journalMigrations.slice(0, 20))).toBe(migration020OpenIncludesBlockingUnknown.version);
      expect(schemaVersion(db)).toBe(20);
      expect(rows()).toEqual(before);
      // Partial on the filter's condition, to the letter (a full index would answer the same query, only larger).
      const indexSql = db.prepare(`SELECT sql FROM sqlite_master WHERE name = 'actions_list_open'`).pluck().get();
      expect(indexSql).toBe(`CREATE INDEX actions_list_open ON actions (first_seq) WHERE ${openActionsCondition}`);
      const open = new ActionListQuery(db).page({ open: true, limit: 10 });
      expect(open.rows.map((r) => r.action_id).sort()).toEqual(['act_blocking_unknown', 'act_in_flight_0001']);
      const plan = db
        .prepare(
          `EXPLAIN QUERY PLAN SELECT action_id FROM actions a INDEXED BY actions_list_open WHERE (settled_at_ms IS NULL OR (ticket IS NOT NULL AND resolved_at_ms IS NULL)) ORDER BY first_seq DESC`,
        )
        .all()
        .map((r) => (r as { detail: string }).detail)
        .join('\n');
      expect(plan).toContain('actions_list_open');
      expect(plan).not.toContain('TEMP B-TREE');
    } finally {
      db.close();
    }
  });
});
