import Database from 'better-sqlite3';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NewEvent, SessionState } from '../../contract/index.js';
import { actionPaths } from '../../testing/action-paths.js';
import { dropIndexAddedBy018 } from '../../testing/older-journal.js';
import { inSession, sessionStartedEvent } from '../../testing/session-events.js';
import { openTempJournal, type TempJournal } from '../../testing/temp-journal.js';
import { JournalStore, listCountedSessionsSql, listSessionsSql } from '../journal-store.js';
import { migrate, schemaVersion } from '../migrate.js';
import { journalMigrations } from './index.js';
import { migration018SessionsByFirstSeq } from './018-sessions-by-first-seq.js';

const person = { kind: 'person' as const, id: 'ann' };
const statuses = ['pending', 'approved', 'revoked', 'ended'] as const;
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

/** What the store ran before migration 018 (the oracle): the newest `limit`, in a subquery, sorted again oldest first. */
const oldListSessionsSql = `SELECT state FROM (
    SELECT state, first_seq FROM sessions
    WHERE @statuses IS NULL OR status IN (SELECT value FROM json_each(@statuses))
    ORDER BY first_seq DESC LIMIT @limit
  ) ORDER BY first_seq`;
const oldListCountedSessionsSql = `
  SELECT s.state, coalesce(c.calls, 0) AS calls, coalesce(c.pending, 0) AS pending
  FROM (SELECT session_id, state, first_seq FROM sessions ORDER BY first_seq DESC LIMIT ?) AS s
  LEFT JOIN session_counters AS c ON c.session_id = s.session_id
  ORDER BY s.first_seq`;

function plan(db: Database.Database, sql: string, ...params: unknown[]): string[] {
  return db
    .prepare(`EXPLAIN QUERY PLAN ${sql}`)
    .all(...params)
    .map((r) => (r as { detail: string }).detail);
}

/** A plan that reads sessions only through sessions_by_first_seq, in its order: no table scan and no sort. */
function expectIndexOrdered(lines: readonly string[]): void {
  expect(lines.join('\n')).toMatch(/^SCAN (sessions|s) USING INDEX sessions_by_first_seq$/m);
  expect(lines.filter((l) => /^SCAN (sessions|s)\b/.test(l) && !l.includes('USING INDEX'))).toEqual([]);
  expect(lines.filter((l) => l.includes('TEMP B-TREE'))).toEqual([]);
}

describe('sessions.list and listSessions on a journal of 1,240 sessions (migration 018)', () => {
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

  it('reads the newest sessions through sessions_by_first_seq, stopped at the limit: no table scan, no sort', () => {
    const db = t.reader();
    expect(db.prepare(`SELECT count(*) AS n FROM sessions`).get()).toEqual({ n: sessionCount });
    expectIndexOrdered(plan(db, listCountedSessionsSql, 1_000));
    expectIndexOrdered(plan(db, listSessionsSql, { statuses: null, limit: 1_000 }));
    expectIndexOrdered(plan(db, listSessionsSql, { statuses: JSON.stringify(['pending', 'approved']), limit: 1_000 }));
    // The counter row by its key, once per listed session.
    expect(plan(db, listCountedSessionsSql, 1_000)).toContain('SEARCH c USING PRIMARY KEY (session_id=?) LEFT-JOIN');

    // What the journal answers: the newest 1,000, oldest first, with their figures.
    const counted = t.journal.listCountedSessions();
    expect(counted.map((c) => c.session.session_id)).toEqual(ids.slice(sessionCount - 1_000));
    expect(counted.at(-1)).toMatchObject({ calls: 2, pending: 1 });
    expect(t.journal.listSessions().map((s) => s.session_id)).toEqual(ids.slice(sessionCount - 1_000));
  });

  it('answers exactly what the query before 018 answered, for any limit and status filter', () => {
    const db = t.reader();
    const store = new JournalStore(db);
    const oldSessions = db.prepare<[{ statuses: string | null; limit: number }], { state: string }>(oldListSessionsSql);
    const oldCounted = db.prepare<[number], { state: string; calls: number; pending: number }>(
      oldListCountedSessionsSql,
    );
    const parsed = (state: string): SessionState => JSON.parse(state) as SessionState;
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: sessionCount + 10 }),
        fc.option(fc.subarray([...statuses]), { nil: undefined }),
        (limit, only) => {
          const expected = oldSessions
            .all({ statuses: only === undefined ? null : JSON.stringify(only), limit })
            .map((r) => parsed(r.state).session_id);
          expect(store.listSessions(limit, only).map((s) => s.session_id)).toEqual(expected);
          expect(store.listCountedSessions(limit).map((c) => [c.session.session_id, c.calls, c.pending])).toEqual(
            oldCounted.all(limit).map((r) => [parsed(r.state).session_id, r.calls, r.pending]),
          );
        },
      ),
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
        expect(plan(old, listCountedSessionsSql, 1_000).join('\n')).toMatch(/TEMP B-TREE/);
        const dump = (): unknown => ({
          sessions: old.prepare('SELECT * FROM sessions ORDER BY session_id').all(),
          events: old.prepare('SELECT * FROM events ORDER BY seq').all(),
        });
        const before = dump();
        expect(migrate(old, journalMigrations.slice(0, 18))).toBe(migration018SessionsByFirstSeq.version);
        expect(schemaVersion(old)).toBe(18);
        expect(dump()).toEqual(before);
        expectIndexOrdered(plan(old, listCountedSessionsSql, 1_000));
      } finally {
        old.close();
      }
    } finally {
      await t.dispose();
    }
  });
});
