import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { foldMetrics, type OutcomeCountRow } from '../../core/index.js';
import { actionPaths } from '../../testing/action-paths.js';
import { rateOf } from '../../testing/rate-of.js';
import { restoreOutcomeMinutesBefore022 } from '../../testing/older-journal.js';
import { openTempJournal, type TempJournal } from '../../testing/temp-journal.js';
import { Journal } from '../journal.js';
import { JournalStore } from '../journal-store.js';
import { migrate, schemaVersion } from '../migrate.js';
import { scanOutcomeCounts } from '../read-snapshot.js';
import { journalMigrations } from './index.js';
import { buildStatusCounters } from './011-status-counters.js';
import { migration022RateCountsSettled } from './022-rate-counts-settled.js';

const minuteMs = 60_000;

let t: TempJournal;
beforeEach(async () => {
  t = await openTempJournal();
});
afterEach(async () => {
  await t.dispose();
});

function sorted(rows: readonly OutcomeCountRow[]): OutcomeCountRow[] {
  const id = (r: OutcomeCountRow): string =>
    JSON.stringify([r.phase, r.outcome, r.code, r.decision, r.dispatched, r.minute, r.in_flight ?? 0]);
  return [...rows].sort((a, b) => (id(a) < id(b) ? -1 : 1));
}

/**
 * A version 21 journal made from this one's file, closed: minute rows without in_flight, as that broker kept them (a
 * running action counted in its dispatch minute under its row's provisional unknown: migration 011's fill counts as
 * that broker did).
 */
function asVersion21(db: Database.Database): void {
  restoreOutcomeMinutesBefore022(db);
  buildStatusCounters(db);
  db.pragma('user_version = 21');
}

/** Appends `act_cut_while_running` up to its REQUEST_SENT: dispatched, its outcome not recorded yet. */
async function appendCutWhileRunning(): Promise<void> {
  const script = actionPaths.httpNoApproval('act_cut_while_running');
  await t.journal.appendBatch(script.slice(0, script.findIndex((e) => e.kind === 'REQUEST_SENT') + 1));
}

describe('migration 022: the rate counts an action once it settles, never while it runs', () => {
  it('when a version 21 journal counted a running action unknown in its dispatch minute: the step moves it to an in-flight row, and the next start counts it once, when it records it', async () => {
    const dispatchMinute = Math.trunc(t.clock.nowMs() / minuteMs);
    // A real unknown in the same minute, with the same key as the running one's provisional unknown but its code.
    await t.journal.appendBatch(actionPaths.callerCancelledAfterDispatch('act_really_unknown'));
    await appendCutWhileRunning();
    await t.journal.close();

    const db = new Database(t.path);
    try {
      // What a version 21 broker left: the running action counted unknown in its dispatch minute.
      asVersion21(db);
      const minutesBefore = db.prepare('SELECT * FROM outcome_minutes ORDER BY 1, 2, 3, 4, 5, 6').all();
      expect(minutesBefore).toMatchObject([
        { minute: dispatchMinute, outcome: 'unknown', code: '', n: 1 },
        { minute: dispatchMinute, outcome: 'unknown', code: 'CALLER_CANCELLED', n: 1 },
      ]);
      const rows = (): unknown => db.prepare('SELECT * FROM actions ORDER BY action_id').all();
      const counters = (): unknown => db.prepare('SELECT * FROM action_counters ORDER BY 1, 2, 3, 4, 5, 6').all();
      const before = { rows: rows(), counters: counters() };

      expect(migrate(db, journalMigrations.slice(0, 22))).toBe(migration022RateCountsSettled.version);
      expect(schemaVersion(db)).toBe(22);
      expect({ rows: rows(), counters: counters() }).toEqual(before);
      // The running one moved to an in-flight row of its minute: not counted, and the rows equal a fresh count.
      expect(db.prepare('SELECT * FROM outcome_minutes WHERE n > 0 ORDER BY 1, 2, 3, 4, 5, 6, 7').all()).toEqual([
        { ...(minutesBefore[0] as object), in_flight: 1 },
        { ...(minutesBefore[1] as object), in_flight: 0 },
      ]);
      const store = new JournalStore(db);
      expect(rateOf(store.outcomeCounts())).toEqual({ unknown: { [dispatchMinute]: 1 } });
      expect(sorted(store.outcomeCounts())).toEqual(sorted(scanOutcomeCounts(db)));
      expect(foldMetrics(store.outcomeCounts())).toMatchObject({ open: 1, total: 2 });
    } finally {
      db.close();
    }

    // The next start, five minutes on: recovery records it unknown (BROKER_RESTARTED) and the rate counts it there, once.
    t.clock.advance(5 * minuteMs);
    const reopened = await Journal.open({ path: t.path, clock: t.clock, vault: t.vault });
    try {
      expect(reopened.getAction('act_cut_while_running')).toMatchObject({ outcome: 'unknown', recorded: true });
      expect(rateOf(reopened.outcomeCounts())).toEqual({ unknown: { [dispatchMinute]: 1, [dispatchMinute + 5]: 1 } });
      expect(rateOf(scanOutcomeCounts(t.reader()))).toEqual(rateOf(reopened.outcomeCounts()));
    } finally {
      await reopened.close();
    }
  });

  it('when a minute row counted a settled action and a running one of the same key: the step moves the running one only', async () => {
    const dispatchMinute = Math.trunc(t.clock.nowMs() / minuteMs);
    await t.journal.appendBatch(actionPaths.callerCancelledAfterDispatch('act_settled_same_key'));
    await appendCutWhileRunning();
    await t.journal.close();

    const db = new Database(t.path);
    try {
      // The settled unknown's key made the running one's (code is part of the key, and a running row has none): no
      // path records an unknown without a code today, so the shared row is made here, with the actions table, the
      // counters and the minute rows all saying it, so the step's split (and the scan) have to tell the two apart.
      db.prepare(`UPDATE actions SET code = NULL WHERE action_id = 'act_settled_same_key'`).run();
      asVersion21(db);
      const shared = { minute: dispatchMinute, phase: 'remote_execution', outcome: 'unknown', code: '' };
      expect(db.prepare('SELECT * FROM outcome_minutes WHERE n > 0').all()).toMatchObject([{ ...shared, n: 2 }]);

      migrate(db, journalMigrations.slice(0, 22));
      // Split: one stays counted, one (the running one) moves to an in-flight row — never both, never neither.
      expect(db.prepare('SELECT * FROM outcome_minutes WHERE n > 0 ORDER BY in_flight').all()).toMatchObject([
        { ...shared, in_flight: 0, n: 1 },
        { ...shared, in_flight: 1, n: 1 },
      ]);
      const store = new JournalStore(db);
      expect(sorted(store.outcomeCounts())).toEqual(sorted(scanOutcomeCounts(db)));
      expect(rateOf(store.outcomeCounts())).toEqual({ unknown: { [dispatchMinute]: 1 } });
      expect(foldMetrics(store.outcomeCounts())).toMatchObject({ open: 1, total: 2 });
    } finally {
      db.close();
    }
  });

  it("when the running action's minute row was already pruned (an hour of settled actions after it): the step adds no row, and the next start counts it once", async () => {
    const dispatchMinute = Math.trunc(t.clock.nowMs() / minuteMs);
    await appendCutWhileRunning();
    t.clock.advance(61 * minuteMs);
    await t.journal.appendBatch(actionPaths.httpNoApproval('act_settled_an_hour_on'));
    await t.journal.close();

    const db = new Database(t.path);
    try {
      asVersion21(db);
      const minutes = (): unknown => db.prepare('SELECT * FROM outcome_minutes WHERE n > 0 ORDER BY 1').all();
      expect(minutes()).toMatchObject([{ minute: dispatchMinute + 61, outcome: 'committed', n: 1 }]);

      migrate(db, journalMigrations.slice(0, 22));
      expect(minutes()).toMatchObject([{ minute: dispatchMinute + 61, outcome: 'committed', in_flight: 0, n: 1 }]);
      const store = new JournalStore(db);
      expect(sorted(store.outcomeCounts())).toEqual(sorted(scanOutcomeCounts(db)));
      expect(rateOf(store.outcomeCounts())).toEqual({ committed: { [dispatchMinute + 61]: 1 } });
      expect(foldMetrics(store.outcomeCounts())).toMatchObject({ open: 1, total: 2 });
    } finally {
      db.close();
    }

    t.clock.advance(5 * minuteMs);
    const reopened = await Journal.open({ path: t.path, clock: t.clock, vault: t.vault });
    try {
      expect(rateOf(reopened.outcomeCounts())).toEqual({
        committed: { [dispatchMinute + 61]: 1 },
        unknown: { [dispatchMinute + 66]: 1 },
      });
      expect(sorted(reopened.outcomeCounts())).toEqual(sorted(scanOutcomeCounts(t.reader())));
    } finally {
      await reopened.close();
    }
  });
});
