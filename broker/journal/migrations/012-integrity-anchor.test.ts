import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTempDir, type TempDir } from '../../testing/temp-dir.js';
import { migrate, schemaVersion } from '../migrate.js';
import { migration012IntegrityAnchor } from './012-integrity-anchor.js';
import { journalMigrations } from './index.js';

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

const upTo11 = journalMigrations.filter((m) => m.version < migration012IntegrityAnchor.version);

describe('when a version 11 journal is migrated to 12', () => {
  it('keeps its events and adds an empty integrity_anchor: no anchor recorded, so the first start is first use', () => {
    migrate(db, upTo11);
    const events = db.prepare(`SELECT count(*) AS n FROM events`).get();
    expect(migrate(db, [...upTo11, migration012IntegrityAnchor])).toBe(12);
    expect(schemaVersion(db)).toBe(12);
    expect(db.prepare(`SELECT count(*) AS n FROM events`).get()).toEqual(events);
    expect(db.prepare(`SELECT count(*) AS n FROM integrity_anchor`).get()).toEqual({ n: 0 });
  });

  it('holds one row only, with a positive counter (STRICT: whole numbers)', () => {
    migrate(db, [...upTo11, migration012IntegrityAnchor]);
    const insert = db.prepare(
      `INSERT INTO integrity_anchor (id, counter, head_seq, key_id, written_at_ms) VALUES (?, ?, 5, 'ab', 1)`,
    );
    insert.run(1, 1);
    expect(() => insert.run(2, 1)).toThrow(/CHECK/);
    expect(() => insert.run(1, 2)).toThrow(/UNIQUE|PRIMARY/);
    db.prepare(`DELETE FROM integrity_anchor`).run();
    expect(() => insert.run(1, 0)).toThrow(/CHECK/);
    expect(() => insert.run(1, 'one')).toThrow();
  });
});
