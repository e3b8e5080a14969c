import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { verifyJournal } from '../../audit/verify-journal.js';
import { createTempDir, type TempDir } from '../../testing/temp-dir.js';
import { FakeClock } from '../../testing/fake-clock.js';
import { Journal } from '../journal.js';
import { migrate, schemaVersion } from '../migrate.js';
import { readJournalSnapshot } from '../read-snapshot.js';
import { migration001Initial } from './001-initial.js';
import { migration002ReadIndexes } from './002-read-indexes.js';
import { migration003Results } from './003-results.js';
import { migration004AuditLog } from './004-audit-log.js';

let dir: TempDir;
let path: string;
beforeEach(() => {
  dir = createTempDir();
  path = join(dir.path, 'journal.sqlite');
});
afterEach(() => dir.remove());

const upTo3 = [migration001Initial, migration002ReadIndexes, migration003Results];
const accepted = JSON.stringify({
  channel: 'http',
  target: 'route:a',
  request_fingerprint: `sha256:${'b'.repeat(64)}`,
  approval: 'none',
  idempotent: false,
});

describe('when a version 3 database with events is migrated to 4', () => {
  it('keeps every event (as plaintext run 0), keeps the append high-water mark, and the result verifies', async () => {
    const db = new Database(path);
    migrate(db, upTo3);
    db.prepare(
      `INSERT INTO events (at_ms, action_id, ticket, kind, payload) VALUES (5, 'act_0000001', 1, 'ACTION_ACCEPTED', ?)`,
    ).run(accepted);
    db.prepare(
      `INSERT INTO events (at_ms, action_id, ticket, kind, payload) VALUES (6, 'act_0000001', 1, 'PREFLIGHT_VALIDATED', '{}')`,
    ).run();
    // A rolled-back append leaves no gap, but the sequence must still never move backwards.
    db.prepare(`UPDATE sqlite_sequence SET seq = 2 WHERE name = 'events'`).run();

    expect(migrate(db, [...upTo3, migration004AuditLog])).toBe(4);
    expect(schemaVersion(db)).toBe(4);
    expect(db.prepare(`SELECT seq, kind, run, length(nonce) AS nonce FROM events ORDER BY seq`).all()).toEqual([
      { seq: 1, kind: 'ACTION_ACCEPTED', run: 0, nonce: 0 },
      { seq: 2, kind: 'PREFLIGHT_VALIDATED', run: 0, nonce: 0 },
    ]);
    expect(db.prepare(`SELECT seq FROM sqlite_sequence WHERE name = 'events'`).get()).toEqual({ seq: 2 });
    expect(db.prepare(`SELECT size FROM audit_tree`).get()).toEqual({ size: 2 });
    expect(() => db.prepare(`DELETE FROM events WHERE seq = 1`).run()).toThrow(/append-only/);
    db.close();

    expect(await verifyJournal({ dbPath: path })).toMatchObject({ ok: true, events: 2 });
    const journal = await Journal.open({ path, clock: new FakeClock() });
    expect([...journal.events()].map((e) => [e.seq, e.kind, e.payload])).toEqual([
      [1, 'ACTION_ACCEPTED', JSON.parse(accepted)],
      [2, 'PREFLIGHT_VALIDATED', {}],
    ]);
    await journal.close();
  });

  it('an empty version 3 database becomes an empty, verifiable log', async () => {
    const db = new Database(path);
    migrate(db, upTo3);
    migrate(db, [...upTo3, migration004AuditLog]);
    db.close();
    expect(await verifyJournal({ dbPath: path })).toMatchObject({ ok: true, events: 0 });
  });

  it('postern status still reads a version 3 database read-only, without migrating it', () => {
    const db = new Database(path);
    migrate(db, upTo3);
    db.prepare(
      `INSERT INTO events (at_ms, action_id, ticket, kind, payload) VALUES (5, 'act_0000001', 1, 'ACTION_ACCEPTED', ?)`,
    ).run(accepted);
    db.close();
    expect(readJournalSnapshot(dir.path)).toMatchObject({ exists: true, events: 1, last_seq: 1, schema_version: 3 });
  });
});
