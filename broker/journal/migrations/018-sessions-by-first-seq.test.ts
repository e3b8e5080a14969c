import Database from 'better-sqlite3';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NewEvent, SessionState } from '../../contract/index.js';
import { actionPaths } from '../../testing/action-paths.js';
import { dropIndexAddedBy018 } from '../../testing/older-journal.js';
import { inSession, sessionStartedEvent } from '../../testing/session-events.js';
import { openTempJournal, type TempJournal } from '../../testing/temp-journal.js';
import { JournalStore, openingSessionsSql } from '../journal-store.js';
import { migrate, schemaVersion } from '../migrate.js';
import { journalMigrations } from './index.js';
import { migration018SessionsByFirstSeq } from './018-sessions-by-first-seq.js';

const person = { kind: 'person' as const, id: 'ann' };
/** More than sessions.list's 1,000, so its limit cuts the list. */
const sessionCount = 1_240;

/** The i-th session: its id, and the events after its start that leave it in one of the four statuses. */
function session(i: number): { id: string; after: NewEvent[] } {
  const id = `ses_idx_${String(i).padStart(5, '0')}`;
  const approve: NewEvent = { kind: 'SESSION_APPROVED', action_id: id, payload: { actor: person } };
  const revoke: NewEvent = { kind: 'SESSION_REVOKED', action_id: id, payload: { actor: person, reason: 'done' } };
  const end: NewEvent = { kind: 'SESSION_ENDED', action_id: id, payload: { reason: 'process_exited' } };
  // Mostly ended (as on a long-lived desktop), the open ones spread between them.
  const after = [[], [approve], [approve, revoke], [end], [approve, end], [end], [end]][i % 7];
  return { id, after: after ?? [] };
}

function plan(db: Database.Database, sql: string, ...params: unknown[]): string[] {
  return db
    .prepare(`EXPLAIN QUERY PLAN ${sql}`)
    .all(...params)
    .map((r) => (r as { detail: string }).detail);
}

/**
 * A plan whose ended sessions are read through sessions_by_first_seq, in its order and stopped at the limit: no sort.
 * (The sessions not ended are one pass over the table, once, as the journal opens.)
 */
function expectIndexOrdered(lines: readonly string[]): void {
  expect(lines).toContain('SCAN sessions USING INDEX sessions_by_first_seq');
  expect(lines.filter((l) => l.includes('TEMP B-TREE'))).toEqual([]);
}

describe('the sessions a journal of 1,240 opens with, and sessions.list (migration 018)', () => {
  let t: TempJournal;
  let ids: string[];
  beforeAll(async () => {
    t = await openTempJournal();
    const made = Array.from({ length: sessionCount }, (_, i) => session(i));
    ids = made.map((s) => s.id);
    for (let i = 0; i < made.length; i += 80) {
      const batch = made.slice(i, i + 80);
      const started = await t.journal.tryAppendSessionBatch(
        batch.map((s, j) => sessionStartedEvent(s.id, 20_000 + i + j)),
      );
      expect(started.ok).toBe(true);
      const moved = batch.flatMap((s) => s.after);
      if (moved.length > 0) expect((await t.journal.tryAppendSessionBatch(moved)).ok).toBe(true);
    }
    // A few sessions with actions, for the counter rows joined beside them.
    for (const [n, owner] of [ids[3], ids[700], ids[1_239], ids[1_239]].entries())
      await t.journal.appendBatch(
        inSession(actionPaths.httpNoApproval(`act_idx_${String(n).padStart(4, '0')}`).slice(0, 1 + n), owner ?? null),
      );
  }, 60_000);
  afterAll(async () => {
    await t.dispose();
  });

  it('reads the newest ended sessions through sessions_by_first_seq, stopped at the limit: no sort', () => {
    const db = t.reader();
    expect(db.prepare(`SELECT count(*) AS n FROM sessions`).get()).toEqual({ n: sessionCount });
    expectIndexOrdered(plan(db, openingSessionsSql, 1_000));

    // What the journal answers (from its session book, moved by the commits above): the newest 1,000, oldest first,
    // with their figures. The set a reopen reads is the next test's.
    const counted = t.journal.listCountedSessions();
    expect(counted.map((c) => c.session.session_id)).toEqual(ids.slice(sessionCount - 1_000));
    expect(counted.at(-1)).toMatchObject({ calls: 2, pending: 1 });
    expect(t.journal.listSessions().map((s) => s.session_id)).toEqual(ids.slice(sessionCount - 1_000));
  });

  it('opens with every session not ended and the newest ended ones, for any limit: what a sort of the whole table gives', () => {
    const db = t.reader();
    const store = new JournalStore(db);
    const all = (db.prepare('SELECT state FROM sessions').all() as Array<{ state: string }>).map(
      (r) => JSON.parse(r.state) as SessionState,
    );
    const byId = (a: string, b: string): number => (a < b ? -1 : 1);
    fc.assert(
      fc.property(fc.integer({ min: 0, max: sessionCount + 10 }), (endedKept) => {
        const ended = all.filter((s) => s.status === 'ended').sort((a, b) => b.first_seq - a.first_seq);
        const expected = [...all.filter((s) => s.status !== 'ended'), ...ended.slice(0, endedKept)].map(
          (s) => s.session_id,
        );
        const opened = store.openingSessions(endedKept).map((s) => s.session_id);
        expect(opened.sort(byId)).toEqual(expected.sort(byId));
      }),
      { numRuns: 60 },
    );
  });
});

describe('when a version 17 journal with sessions is migrated to 18', () => {
  it('adds sessions_by_first_seq and changes no row', async () => {
    const t = await openTempJournal();
    try {
      for (let i = 0; i < 6; i += 1) await t.journal.appendSession(sessionStartedEvent(`ses_m018_${i}`, 9300 + i));
      await t.journal.close();
      // What a version 17 broker left: the same tables without the index.
      const old = new Database(t.path);
      try {
        dropIndexAddedBy018(old);
        old.pragma('user_version = 17');
        expect(plan(old, openingSessionsSql, 1_000).join('\n')).toMatch(/TEMP B-TREE/);
        const dump = (): unknown => ({
          sessions: old.prepare('SELECT * FROM sessions ORDER BY session_id').all(),
          events: old.prepare('SELECT * FROM events ORDER BY seq').all(),
        });
        const before = dump();
        expect(migrate(old, journalMigrations.slice(0, 18))).toBe(migration018SessionsByFirstSeq.version);
        expect(schemaVersion(old)).toBe(18);
        expect(dump()).toEqual(before);
        expectIndexOrdered(plan(old, openingSessionsSql, 1_000));
      } finally {
        old.close();
      }
    } finally {
      await t.dispose();
    }
  });
});
