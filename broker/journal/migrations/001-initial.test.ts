import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTempDir, type TempDir } from '../../testing/temp-dir.js';
import { migrate, schemaVersion } from '../migrate.js';
import { migration001Initial } from './001-initial.js';

let dir: TempDir;
let db: Database.Database;
beforeEach(() => {
  dir = createTempDir();
  db = new Database(join(dir.path, 'j.sqlite'));
  migrate(db, [migration001Initial]);
});
afterEach(() => {
  db.close();
  dir.remove();
});

function columns(table: string): string[] {
  return db
    .prepare(`SELECT name FROM pragma_table_info(?)`)
    .all(table)
    .map((r) => (r as { name: string }).name);
}

function insertEvent(kind = 'ACTION_ACCEPTED'): number {
  const info = db
    .prepare(`INSERT INTO events (at_ms, action_id, kind, payload) VALUES (1, 'act_0000001', ?, '{}')`)
    .run(kind);
  return Number(info.lastInsertRowid);
}

describe('when 001 runs on an empty database', () => {
  it('reaches version 1 with the event log and the current-state tables', () => {
    expect(schemaVersion(db)).toBe(1);
    expect(columns('events')).toEqual([
      'seq',
      'at_ms',
      'action_id',
      'session_id',
      'ticket',
      'lane',
      'kind',
      'payload',
      'classification',
    ]);
    expect(columns('attempts')).toEqual(
      expect.arrayContaining([
        'action_id',
        'n',
        'state',
        'setup_stage',
        'connection',
        'dispatch_seq',
        'request_complete',
        'response_complete',
        'exit_status',
        'exit_signal',
      ]),
    );
    expect(columns('tickets')).toEqual(expect.arrayContaining(['ticket', 'action_id', 'lane', 'decision']));
    expect(columns('actions')).toEqual(
      expect.arrayContaining([
        'ticket',
        'lane',
        'stage',
        'decision',
        'outcome',
        'phase',
        'retry',
        'code',
        'effect',
        'outcome_basis',
        'source',
        'caller_disposition',
        'dispatch_evidence',
        'dispatch_seq',
        'recorded',
        'last_seq',
        'state',
      ]),
    );
    expect(db.prepare(`SELECT value FROM meta WHERE key = 'last_ticket'`).get()).toEqual({ value: 0 });
  });
});

describe('when something tries to rewrite history', () => {
  it('refuses UPDATE and DELETE on events', () => {
    const seq = insertEvent();
    expect(() => db.prepare(`UPDATE events SET kind = 'REJECTED' WHERE seq = ?`).run(seq)).toThrow(/append-only/);
    expect(() => db.prepare(`DELETE FROM events WHERE seq = ?`).run(seq)).toThrow(/append-only/);
    expect(db.prepare(`SELECT kind FROM events WHERE seq = ?`).get(seq)).toEqual({ kind: 'ACTION_ACCEPTED' });
  });

  it('never reuses an append position, even after a rolled-back insert', () => {
    const first = insertEvent();
    db.exec('BEGIN');
    insertEvent();
    db.exec('ROLLBACK');
    expect(insertEvent()).toBe(first + 1);
  });

  it('refuses payloads that are not JSON', () => {
    expect(() =>
      db.prepare(`INSERT INTO events (at_ms, action_id, kind, payload) VALUES (1, 'a', 'k', 'not json')`).run(),
    ).toThrow(/CHECK/);
  });
});
