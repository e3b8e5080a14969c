import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { actionPaths } from '../../testing/action-paths.js';
import { restoreOutcomeMinutesBefore022 } from '../../testing/older-journal.js';
import { openTempJournal, type TempJournal } from '../../testing/temp-journal.js';
import { Journal } from '../journal.js';
import { migrate, schemaVersion } from '../migrate.js';
import { migration014DropUnreadProjections } from './014-drop-unread-projections.js';
import { journalMigrations } from './index.js';

let t: TempJournal;
beforeEach(async () => {
  t = await openTempJournal();
});
afterEach(async () => {
  await t.dispose();
});

const upTo13 = journalMigrations.filter((m) => m.version < migration014DropUnreadProjections.version);

function tables(db: Database.Database): string[] {
  return db
    .prepare(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)
    .all()
    .map((r) => (r as { name: string }).name);
}

describe('when a version 13 journal is migrated to 14', () => {
  it('drops attempts and tickets with their rows, and keeps the events and actions the broker reads', async () => {
    await t.journal.appendBatch(actionPaths.httpNoApproval('act_before_014'));
    await t.journal.close();
    // What a version 13 broker left: the same file with the two projections it wrote on every event, filled.
    const old = new Database(t.path);
    old.exec(`
      CREATE TABLE attempts (action_id TEXT NOT NULL, n INTEGER NOT NULL, state TEXT NOT NULL, PRIMARY KEY (action_id, n));
      CREATE TABLE tickets (ticket INTEGER PRIMARY KEY, action_id TEXT NOT NULL UNIQUE, lane TEXT);
      INSERT INTO attempts VALUES ('act_before_014', 1, 'completed');
      INSERT INTO tickets VALUES (1, 'act_before_014', 'lane-a');
      DROP TABLE session_counters;
      DROP INDEX sessions_by_first_seq;
      ALTER TABLE recordings DROP COLUMN alive_at_ms;
      PRAGMA user_version = 13;
    `);
    restoreOutcomeMinutesBefore022(old);
    const before = {
      events: old.prepare('SELECT * FROM events ORDER BY seq').all(),
      actions: old.prepare('SELECT * FROM actions ORDER BY action_id').all(),
    };
    expect(migrate(old, [...upTo13, migration014DropUnreadProjections])).toBe(14);
    expect(tables(old)).not.toContain('attempts');
    expect(tables(old)).not.toContain('tickets');
    expect(old.prepare('SELECT * FROM events ORDER BY seq').all()).toEqual(before.events);
    expect(old.prepare('SELECT * FROM actions ORDER BY action_id').all()).toEqual(before.actions);
    old.close();

    // The journal opens on it and goes on: tickets keep increasing, and a ticket is still one action's only.
    const journal = await Journal.open({ path: t.path, clock: t.clock, vault: t.vault });
    const db = new Database(t.path);
    try {
      await journal.appendBatch(actionPaths.httpNoApproval('act_after_014'));
      expect(journal.getAction('act_after_014')?.ticket).toBe(2);
      expect(journal.getAction('act_before_014')?.attempts).toHaveLength(1);
      expect(schemaVersion(db)).toBe(journalMigrations.length);
      expect(() => db.prepare(`UPDATE actions SET ticket = 1 WHERE action_id = 'act_after_014'`).run()).toThrow(
        /UNIQUE/,
      );
    } finally {
      db.close();
      await journal.close();
    }
  });
});
