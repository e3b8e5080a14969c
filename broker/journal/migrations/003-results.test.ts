import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTempDir, type TempDir } from '../../testing/temp-dir.js';
import { migrate, schemaVersion } from '../migrate.js';
import { migration001Initial } from './001-initial.js';
import { migration002ReadIndexes } from './002-read-indexes.js';
import { migration003Results } from './003-results.js';

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

describe('when a version 2 database with events is migrated to 3', () => {
  it('keeps the log and adds an empty result store that refuses a second result for one attempt', () => {
    migrate(db, [migration001Initial, migration002ReadIndexes]);
    db.prepare(
      `INSERT INTO events (at_ms, action_id, kind, payload) VALUES (5, 'act_0000001', 'ACTION_ACCEPTED', '{}')`,
    ).run();
    const events = db.prepare('SELECT * FROM events').all();

    expect(migrate(db, [migration001Initial, migration002ReadIndexes, migration003Results])).toBe(3);
    expect(schemaVersion(db)).toBe(3);
    expect(db.prepare('SELECT * FROM events').all()).toEqual(events);
    expect(db.prepare('SELECT count(*) AS n FROM results').get()).toEqual({ n: 0 });

    const insert = db.prepare(
      `INSERT INTO results (result_id, action_id, attempt, summary, total_bytes, stored_bytes, truncated, digest, chunks, complete, created_at_ms)
       VALUES (?, 'act_0000001', 1, '{}', 10, 10, 0, 'sha256:x', 1, 1, 5)`,
    );
    insert.run('res_1');
    expect(() => insert.run('res_2')).toThrow(/UNIQUE/);
    expect(() =>
      db
        .prepare(
          `INSERT INTO results (result_id, action_id, attempt, summary, total_bytes, stored_bytes, truncated, digest, chunks, complete, created_at_ms)
        VALUES ('res_3', 'act_0000002', 1, 'not json', 1, 1, 0, 'd', 1, 1, 5)`,
        )
        .run(),
    ).toThrow(/CHECK/);
  });
});
