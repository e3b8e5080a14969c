import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTempDir, type TempDir } from '../../testing/temp-dir.js';
import { migrate, schemaVersion } from '../migrate.js';
import { journalMigrations } from './index.js';
import { migration008KeptRequests } from './008-kept-requests.js';

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

describe('when a version 7 database is migrated to 8', () => {
  it('keeps every event and result, and adds an empty, strict kept_requests table with its expiry index', () => {
    const upTo7 = journalMigrations.filter((m) => m.version <= 7);
    migrate(db, upTo7);
    db.prepare(
      `INSERT INTO results (result_id, action_id, attempt, summary, total_bytes, stored_bytes, truncated, digest, chunks, complete, created_at_ms) VALUES ('res_1', 'act_0000001', 1, '{}', 3, 3, 0, 'sha256:x', 1, 1, 5)`,
    ).run();
    const counts = (): unknown =>
      db.prepare(`SELECT (SELECT count(*) FROM events) AS events, (SELECT count(*) FROM results) AS results`).get();
    const before = counts();

    expect(migrate(db, [...upTo7, migration008KeptRequests])).toBe(8);
    expect(schemaVersion(db)).toBe(8);
    expect(counts()).toEqual(before);
    expect(db.prepare(`SELECT count(*) AS n FROM kept_requests`).get()).toEqual({ n: 0 });
    expect(
      db.prepare(`SELECT name FROM sqlite_master WHERE type = 'index' AND name = 'kept_requests_by_expiry'`).get(),
    ).toEqual({ name: 'kept_requests_by_expiry' });
    expect(() => db.prepare(`INSERT INTO kept_requests VALUES ('act_1', 'docs', x'00', 'now', 1)`).run()).toThrow(
      /cannot store TEXT value in INTEGER column/,
    );
  });
});
