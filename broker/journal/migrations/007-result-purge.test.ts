import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTempDir, type TempDir } from '../../testing/temp-dir.js';
import { migrate, schemaVersion } from '../migrate.js';
import { migration001Initial } from './001-initial.js';
import { migration002ReadIndexes } from './002-read-indexes.js';
import { migration003Results } from './003-results.js';
import { migration004AuditLog } from './004-audit-log.js';
import { migration005Sessions } from './005-sessions.js';
import { migration006IdempotencyKeys } from './006-idempotency-keys.js';
import { migration007ResultPurge } from './007-result-purge.js';

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

const upTo6 = [
  migration001Initial,
  migration002ReadIndexes,
  migration003Results,
  migration004AuditLog,
  migration005Sessions,
  migration006IdempotencyKeys,
];

describe('when a version 6 database with stored results is migrated to 7', () => {
  it('keeps every result and chunk, marks none purged, and adds the purge column and its index', () => {
    migrate(db, upTo6);
    db.prepare(
      `INSERT INTO results VALUES ('res_1', 'act_0000001', 1, '{"status":200}', 3, 3, 0, 'sha256:x', 1, 1, 5)`,
    ).run();
    db.prepare(`INSERT INTO result_chunks VALUES ('res_1', 0, x'616263')`).run();
    const counts = (): unknown =>
      db
        .prepare(
          `SELECT (SELECT count(*) FROM events) AS events, (SELECT count(*) FROM results) AS results, (SELECT count(*) FROM result_chunks) AS chunks`,
        )
        .get();
    const before = counts();

    expect(migrate(db, [...upTo6, migration007ResultPurge])).toBe(7);
    expect(schemaVersion(db)).toBe(7);
    expect(counts()).toEqual(before);
    expect(db.prepare(`SELECT result_id, created_at_ms, purged_at_ms FROM results`).all()).toEqual([
      { result_id: 'res_1', created_at_ms: 5, purged_at_ms: null },
    ]);
    expect(
      db.prepare(`SELECT name FROM sqlite_master WHERE type = 'index' AND name = 'results_unpurged_by_age'`).get(),
    ).toEqual({ name: 'results_unpurged_by_age' });
    // The table is STRICT: the new column takes whole milliseconds only.
    db.prepare(`UPDATE results SET purged_at_ms = 10 WHERE result_id = 'res_1'`).run();
    expect(() => db.prepare(`UPDATE results SET purged_at_ms = 'soon' WHERE result_id = 'res_1'`).run()).toThrow(
      /cannot store TEXT value in INTEGER column/,
    );
  });
});
