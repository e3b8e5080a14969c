import type { Database } from 'better-sqlite3';

/**
 * For a test that makes a journal file look like one an older broker wrote: puts back, empty, the tables migration 014
 * dropped (`attempts`, `tickets`), which every file before 014 had. Migrating the file again drops them again.
 */
export function restoreTablesDroppedBy014(db: Database): void {
  db.exec(`CREATE TABLE IF NOT EXISTS attempts (action_id TEXT); CREATE TABLE IF NOT EXISTS tickets (ticket INTEGER)`);
}

/** For the same tests: takes away migration 017's session_counters, which no file before 017 had (017 builds it). */
export function dropTablesAddedBy017(db: Database): void {
  db.exec(`DROP TABLE IF EXISTS session_counters`);
}

/** For the same tests: takes away migration 018's index, which no file before 018 had (018 creates it). */
export function dropIndexAddedBy018(db: Database): void {
  db.exec(`DROP INDEX IF EXISTS sessions_by_first_seq`);
}

/** For the same tests: takes away migration 019's `recordings.alive_at_ms`, which no file before 019 had. */
export function dropColumnAddedBy019(db: Database): void {
  db.exec(`ALTER TABLE recordings DROP COLUMN alive_at_ms`);
}

/**
 * For the same tests: puts back migration 011's `outcome_minutes` as a version 11 to 21 broker kept it, without the
 * in_flight column migration 022 added: a running action's row counted in its minute with the settled ones of its key.
 */
export function restoreOutcomeMinutesBefore022(db: Database): void {
  db.exec(`
    CREATE TABLE outcome_minutes_21 (
      minute INTEGER NOT NULL,
      phase TEXT NOT NULL,
      outcome TEXT NOT NULL,
      code TEXT NOT NULL,
      decision TEXT NOT NULL,
      dispatched INTEGER NOT NULL,
      n INTEGER NOT NULL,
      PRIMARY KEY (minute, phase, outcome, code, decision, dispatched)
    ) STRICT, WITHOUT ROWID;
    INSERT INTO outcome_minutes_21 (minute, phase, outcome, code, decision, dispatched, n)
    SELECT minute, phase, outcome, code, decision, dispatched, sum(n) FROM outcome_minutes GROUP BY 1, 2, 3, 4, 5, 6;
    DROP TABLE outcome_minutes;
    ALTER TABLE outcome_minutes_21 RENAME TO outcome_minutes;
  `);
}
