import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTempDir, type TempDir } from '../../testing/temp-dir.js';
import { migrate, schemaVersion } from '../migrate.js';
import { migration001Initial } from './001-initial.js';
import { migration002ReadIndexes } from './002-read-indexes.js';

let dir: TempDir;
let db: Database.Database;
beforeEach(() => {
  dir = createTempDir();
  db = new Database(join(dir.path, 'j.sqlite'));
});
afterEach(() => {
  db.close();
  dir.remove();
});

const state = JSON.stringify({ action_id: 'act_0000001' });

/** A database at version 1 holding one action with one event, written as 001 left it. */
function populatedAtVersion1(): void {
  migrate(db, [migration001Initial]);
  db.prepare(
    `INSERT INTO events (at_ms, action_id, ticket, lane, kind, payload) VALUES (5, 'act_0000001', 1, 'lane-a', 'ACTION_ACCEPTED', '{}')`,
  ).run();
  db.prepare(
    `INSERT INTO actions (action_id, ticket, lane, channel, target, request_fingerprint, approval, idempotent, stage,
       dispatch_evidence, recorded, first_seq, last_seq, accepted_at_ms, updated_at_ms, state)
     VALUES ('act_0000001', 1, 'lane-a', 'http', 't', 'f', 'none', 0, 'accepted', 'never_started', 0, 1, 1, 5, 5, ?)`,
  ).run(state);
  db.prepare(
    `INSERT INTO tickets (ticket, action_id, lane, accepted_seq, accepted_at_ms) VALUES (1, 'act_0000001', 'lane-a', 1, 5)`,
  ).run();
  db.prepare(`UPDATE meta SET value = 1 WHERE key = 'last_ticket'`).run();
}

function dump(): unknown {
  return {
    events: db.prepare('SELECT * FROM events').all(),
    actions: db.prepare('SELECT * FROM actions').all(),
    tickets: db.prepare('SELECT * FROM tickets').all(),
    meta: db.prepare('SELECT * FROM meta').all(),
  };
}

function plan(sql: string): string {
  return db
    .prepare(`EXPLAIN QUERY PLAN ${sql}`)
    .all()
    .map((r) => (r as { detail: string }).detail)
    .join('\n');
}

describe('when a version 1 database with data is migrated to 2', () => {
  it('keeps every row and adds the read indexes', () => {
    populatedAtVersion1();
    const before = dump();
    expect(migrate(db, [migration001Initial, migration002ReadIndexes])).toBe(2);
    expect(schemaVersion(db)).toBe(2);
    expect(dump()).toEqual(before);
    expect(plan(`SELECT * FROM events WHERE action_id = 'act_0000001' ORDER BY seq`)).toMatch(/events_by_action/);
    expect(plan(`SELECT * FROM actions WHERE lane = 'lane-a' ORDER BY ticket`)).toMatch(/actions_by_lane/);
    expect(plan(`SELECT action_id FROM actions WHERE recorded = 0 ORDER BY first_seq`)).toMatch(/actions_unrecorded/);
  });
});
