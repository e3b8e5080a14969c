import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { kindsRequiringClassification, type NewEvent } from '../../contract/index.js';
import { actionPaths } from '../../testing/action-paths.js';
import { openTempJournal, type TempJournal } from '../../testing/temp-journal.js';
import { openDispatchesSql, type DispatchMarks } from '../journal-store.js';
import { migrate, schemaVersion } from '../migrate.js';
import { journalMigrations } from './index.js';
import { dispatchMarkKindsSql, migration024DispatchMarks } from './024-dispatch-marks.js';

let t: TempJournal | undefined;
afterEach(async () => {
  await t?.dispose();
  t = undefined;
});

function plan(db: Database.Database): string {
  return db
    .prepare(`EXPLAIN QUERY PLAN ${openDispatchesSql}`)
    .all()
    .map((r) => (r as { detail: string }).detail)
    .join('\n');
}

const dispatchAt = (events: readonly NewEvent[]): number => events.findIndex((e) => e.kind === 'DISPATCH_STARTED');

describe('migration 024: recovery learns from the log which actions were in flight', () => {
  it('names the kinds recovery needs: DISPATCH_STARTED and every kind that must carry a classification', () => {
    const named = dispatchMarkKindsSql.split(',').map((kind) => kind.trim().replace(/'/g, ''));
    expect(new Set(named)).toEqual(new Set(['DISPATCH_STARTED', ...kindsRequiringClassification]));
    expect(named).toHaveLength(1 + kindsRequiringClassification.size);
  });

  it('when a version 23 journal is migrated: the read is one pass over the covering index, it finds only the action in flight, and no row changes', async () => {
    t = await openTempJournal();
    const settled = actionPaths.httpNoApproval('act_settled_0001');
    const running = actionPaths.httpApproved('act_running_0001');
    const refused = actionPaths.rejectedByPerson('act_refused_0001');
    for (const event of [...settled, ...running.slice(0, dispatchAt(running) + 2), ...refused])
      await t.journal.append(event);
    await t.journal.close();

    const db = new Database(t.path);
    try {
      db.exec('DROP INDEX events_dispatch_marks');
      db.pragma('user_version = 23');
      expect(plan(db)).toMatch(/^SCAN events/m);
      expect(plan(db)).not.toMatch(/events_dispatch_marks/);
      const rows = (): unknown => db.prepare('SELECT * FROM events ORDER BY seq').all();
      const before = rows();

      expect(migrate(db, journalMigrations.slice(0, 24))).toBe(migration024DispatchMarks.version);
      expect(schemaVersion(db)).toBe(24);
      expect(plan(db)).toMatch(/^SCAN events USING COVERING INDEX events_dispatch_marks$/m);
      expect(rows()).toEqual(before);
      const open = db.prepare(openDispatchesSql).all() as DispatchMarks[];
      expect(open.map((m) => m.action_id)).toEqual(['act_running_0001']);
      const dispatch = db
        .prepare(`SELECT seq FROM events WHERE action_id = 'act_running_0001' AND kind = 'DISPATCH_STARTED'`)
        .get() as { seq: number };
      expect(open[0]).toMatchObject({
        first_dispatch: dispatch.seq,
        last_dispatch: dispatch.seq,
        last_classified: null,
      });
    } finally {
      db.close();
    }
  });
});
