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

const upTo5 = [
  migration001Initial,
  migration002ReadIndexes,
  migration003Results,
  migration004AuditLog,
  migration005Sessions,
];

describe('when a version 5 database is migrated to 6', () => {
  it('keeps every table as it was and adds an empty idempotency_keys table keyed by route, scope and key', () => {
    migrate(db, upTo5);
    const counts = (): unknown =>
      db
        .prepare(
          `SELECT (SELECT count(*) FROM events) AS events, (SELECT count(*) FROM actions) AS actions, (SELECT count(*) FROM sessions) AS sessions`,
        )
        .get();
    const before = counts();

    expect(migrate(db, [...upTo5, migration006IdempotencyKeys])).toBe(6);
    expect(schemaVersion(db)).toBe(6);
    expect(counts()).toEqual(before);
    expect(db.prepare('SELECT count(*) AS n FROM idempotency_keys').get()).toEqual({ n: 0 });

    const insert = db.prepare(
      `INSERT INTO idempotency_keys (route, scope, key, fingerprint, action_id, first_seen_ms, expires_at_ms, bound_seq) VALUES (?, ?, ?, 'sha256:x', 'act_0000001', 5, 10, 2)`,
    );
    insert.run('docs', 'docs.account', 'key-1');
    insert.run('docs', 'other.account', 'key-1');
    insert.run('other', 'docs.account', 'key-1');
    expect(() => insert.run('docs', 'docs.account', 'key-1')).toThrow(/UNIQUE/);
    expect(() =>
      db
        .prepare(
          `INSERT INTO idempotency_keys (route, scope, key, fingerprint, action_id, first_seen_ms, expires_at_ms, bound_seq) VALUES ('r', 's', 'k', 'f', 'a', 'soon', 1, 1)`,
        )
        .run(),
    ).toThrow(/cannot store TEXT value in INTEGER column/);
  });
});
