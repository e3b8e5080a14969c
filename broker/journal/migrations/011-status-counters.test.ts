import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import type { OutcomeCountRow } from '../../core/index.js';
import { actionPathNames, actionPaths } from '../../testing/action-paths.js';
import { dropIndexAddedBy018, dropTablesAddedBy017, restoreTablesDroppedBy014 } from '../../testing/older-journal.js';
import { openTempJournal, type TempJournal } from '../../testing/temp-journal.js';
import { Journal } from '../journal.js';
import { JournalStore } from '../journal-store.js';
import { migrate, schemaVersion } from '../migrate.js';
import { scanActionCounts, scanOutcomeCounts } from '../read-snapshot.js';
import { journalMigrations } from './index.js';

const minuteMs = 60_000;

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function tempJournal(): Promise<TempJournal> {
  const t = await openTempJournal();
  cleanups.push(() => t.dispose());
  return t;
}

/**
 * Makes a closed journal's file what a version 10 broker left: the current writer cannot append at version 10 (its
 * writes name the counter tables), and version 10's tables are version 11's without the counters.
 */
function downgradeTo10(path: string): void {
  const db = new Database(path);
  try {
    // The tables of later migrations (012's integrity anchor, 013's SSH recordings) go too: a version 10 file had none.
    db.exec(`DROP TABLE action_counters; DROP TABLE outcome_minutes; PRAGMA user_version = 10`);
    db.exec(`DROP TABLE IF EXISTS integrity_anchor; DROP TABLE IF EXISTS recording_chunks`);
    db.exec(`DROP TABLE IF EXISTS recordings`);
    restoreTablesDroppedBy014(db);
    dropTablesAddedBy017(db);
    dropIndexAddedBy018(db);
  } finally {
    db.close();
  }
}

function sorted(rows: readonly OutcomeCountRow[]): OutcomeCountRow[] {
  const id = (r: OutcomeCountRow): string =>
    JSON.stringify([r.phase, r.outcome, r.code, r.decision, r.dispatched, r.minute, r.in_flight ?? 0]);
  return [...rows].sort((a, b) => (id(a) < id(b) ? -1 : 1));
}

function expectCountersEqualScan(journal: Journal, path: string): void {
  const scan = new Database(path, { readonly: true, fileMustExist: true });
  try {
    expect(sorted(journal.outcomeCounts())).toEqual(sorted(scanOutcomeCounts(scan)));
    expect(journal.actionCounts()).toEqual(scanActionCounts(scan));
  } finally {
    scan.close();
  }
}

describe('when a version 10 journal holding actions of every path, over two hours, is migrated to 11', () => {
  it('builds the counters from the actions table once, and later commits keep them equal to the scans', async () => {
    const t = await tempJournal();
    for (const [i, name] of actionPathNames.entries()) {
      // Every third one left open part way; the clock spans more than the rate's hour.
      const script = actionPaths[name](`act_upgrade_${i}`);
      await t.journal.appendBatch(script.slice(0, i % 3 === 0 ? 3 : undefined));
      t.clock.advance(9 * minuteMs);
    }
    await t.journal.close();
    downgradeTo10(t.path);
    const before = new Database(t.path, { readonly: true });
    const scanned = { actions: scanActionCounts(before), outcomes: sorted(scanOutcomeCounts(before)) };
    before.close();
    expect(scanned.outcomes.some((r) => r.minute === null && r.outcome !== null)).toBe(true);

    // The migration alone, before any recovery writes: the counters answer what the scans answered.
    const raw = new Database(t.path);
    expect(migrate(raw)).toBe(journalMigrations.length);
    const store = new JournalStore(raw);
    expect({ actions: store.actionCounts(), outcomes: sorted(store.outcomeCounts()) }).toEqual(scanned);
    raw.close();

    const journal = await Journal.open({ path: t.path, clock: t.clock, vault: t.vault });
    cleanups.push(() => journal.close());
    expect(journal.stats().schema_version).toBe(journalMigrations.length);
    // Recovery at open classified what the old run left open, through the counted writes, after the migration.
    expect(journal.stats().recovered_at_open).toBeGreaterThan(0);
    expect(journal.actionCounts().total).toBe(scanned.actions.total);
    expectCountersEqualScan(journal, t.path);

    t.clock.advance(45 * minuteMs);
    await journal.appendBatch(actionPaths.httpNoApproval('act_after_upgrade'));
    expectCountersEqualScan(journal, t.path);
  });

  it('an empty journal gets empty counters, and a failed step leaves it at version 10', async () => {
    const t = await tempJournal();
    await t.journal.close();
    downgradeTo10(t.path);
    const db = new Database(t.path);
    cleanups.push(() => {
      db.close();
    });
    db.exec(`CREATE TABLE outcome_minutes (x INTEGER)`);
    expect(() => migrate(db)).toThrow(expect.objectContaining({ code: 'MIGRATION_FAILED' }));
    expect(schemaVersion(db)).toBe(10);
    db.exec(`DROP TABLE outcome_minutes`);
    expect(migrate(db)).toBe(journalMigrations.length);
    expect(db.prepare('SELECT count(*) AS n FROM action_counters').get()).toEqual({ n: 0 });
    expect(db.prepare('SELECT count(*) AS n FROM outcome_minutes').get()).toEqual({ n: 0 });
  });
});
