import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FakeClock } from '../testing/fake-clock.js';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import { Journal } from './journal.js';
import { migrate, schemaVersion } from './migrate.js';
import type { Migration } from './migration.js';
import { journalMigrations } from './migrations/index.js';

let dir: TempDir;
let db: Database.Database;
beforeEach(() => {
  dir = createTempDir();
  db = new Database(join(dir.path, 'j.sqlite'));
});
afterEach(() => {
  if (db.open) db.close();
  dir.remove();
});

function tableNames(): string[] {
  return db
    .prepare(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
    .all()
    .map((row) => (row as { name: string }).name);
}

describe('when the database is empty', () => {
  it('applies every numbered migration and reports the newest version', () => {
    expect(migrate(db)).toBe(journalMigrations.length);
    expect(schemaVersion(db)).toBe(journalMigrations.length);
    expect(tableNames()).toEqual([
      'action_counters',
      'actions',
      'audit_keys',
      'audit_runs',
      'audit_tree',
      'checkpoints',
      'events',
      'idempotency_keys',
      'integrity_anchor',
      'kept_requests',
      'meta',
      'outcome_minutes',
      'recording_chunks',
      'recordings',
      'result_chunks',
      'results',
      'session_counters',
      'sessions',
    ]);
  });

  it('does nothing the second time', () => {
    migrate(db);
    const before = db.prepare(`SELECT count(*) AS n FROM sqlite_master`).get();
    expect(migrate(db)).toBe(journalMigrations.length);
    expect(db.prepare(`SELECT count(*) AS n FROM sqlite_master`).get()).toEqual(before);
  });
});

describe('when the database was written by a newer broker', () => {
  it('refuses with MIGRATION_FAILED and leaves the file untouched', async () => {
    db.pragma('user_version = 99');
    expect(() => migrate(db)).toThrow(
      expect.objectContaining({
        code: 'MIGRATION_FAILED',
        message: expect.stringContaining(`version 99, newer than this broker knows (${journalMigrations.length})`),
      }),
    );
    expect(tableNames()).toEqual([]);
    db.close();
    await expect(Journal.open({ path: join(dir.path, 'j.sqlite'), clock: new FakeClock() })).rejects.toMatchObject({
      code: 'MIGRATION_FAILED',
    });
  });
});

describe('when a migration step fails half way', () => {
  const failing: Migration = {
    version: 2,
    name: 'breaks',
    up(d) {
      d.exec('CREATE TABLE half_done (x INTEGER)');
      d.exec('INSERT INTO no_such_table VALUES (1)');
    },
  };

  it('rolls the step back and leaves the database at its previous version', () => {
    const [first] = journalMigrations;
    if (first === undefined) throw new Error('no migrations');
    expect(() => migrate(db, [first, failing])).toThrow(
      expect.objectContaining({
        code: 'MIGRATION_FAILED',
        message: expect.stringMatching(/002-breaks failed; the database stays at version 1/),
      }),
    );
    expect(schemaVersion(db)).toBe(1);
    expect(tableNames()).not.toContain('half_done');
    expect(tableNames()).toContain('events');
  });

  it('refuses to open the journal, and a later good run migrates from there', async () => {
    db.close();
    const path = join(dir.path, 'j.sqlite');
    const [first, second] = journalMigrations;
    if (first === undefined || second === undefined) throw new Error('need two migrations');
    await expect(Journal.open({ path, clock: new FakeClock(), migrations: [first, failing] })).rejects.toMatchObject({
      code: 'MIGRATION_FAILED',
    });
    const journal = await Journal.open({ path, clock: new FakeClock() });
    expect(journal.stats().schema_version).toBe(journalMigrations.length);
    await journal.close();
  });
});

describe('when the migration list itself is wrong', () => {
  it('treats a gap in the numbering as a programmer error', () => {
    const [, second] = journalMigrations;
    if (second === undefined) throw new Error('need two migrations');
    expect(() => migrate(db, [second])).toThrow(/expected 1/);
    expect(schemaVersion(db)).toBe(0);
  });
});
