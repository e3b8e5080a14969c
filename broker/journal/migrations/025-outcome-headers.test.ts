import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import type { NewEvent } from '../../contract/index.js';
import { eventOutcomeHeader } from '../../core/index.js';
import { verifyJournal } from '../../audit/verify-journal.js';
import { actionPaths } from '../../testing/action-paths.js';
import { openTempJournal, type TempJournal } from '../../testing/temp-journal.js';
import { eventOfBody } from '../audit-writer.js';
import { Journal } from '../journal.js';
import { openOutcomesSql } from '../journal-store.js';
import { migrate, schemaVersion } from '../migrate.js';
import { journalMigrations } from './index.js';
import { migration025OutcomeHeaders } from './025-outcome-headers.js';

let t: TempJournal | undefined;
afterEach(async () => {
  await t?.dispose();
  t = undefined;
});

/** A recorded unknown after dispatch (its lookup never answered), a settled action, and one refused before dispatch. */
async function written(): Promise<TempJournal> {
  const journal = await openTempJournal();
  const unknown = actionPaths.lostThenReconciled('act_unknown_0001').filter((e) => e.kind !== 'RECONCILIATION_RESULT');
  const events: NewEvent[] = [
    ...unknown,
    ...actionPaths.httpNoApproval('act_settled_0001'),
    ...actionPaths.rejectedByPerson('act_refused_0001'),
  ];
  for (const event of events) await journal.journal.append(event);
  await journal.journal.close();
  return journal;
}

const outcomeColumn = (db: Database.Database): Array<{ seq: number; kind: string; outcome: string | null }> =>
  db.prepare('SELECT seq, kind, outcome FROM events ORDER BY seq').all() as never;

describe('migration 025: event headers name the outcome their event sets', () => {
  it("every event the journal writes names in its header the outcome it folds its action to, where it sets one, and only there; the log's unresolved unknowns are one pass over the covering index", async () => {
    t = await written();
    const db = new Database(t.path, { readonly: true });
    try {
      const reopened = await Journal.open({ path: t.path, clock: t.clock, vault: t.vault });
      const events = [...reopened.events()];
      const folded = new Map(
        ['act_unknown_0001', 'act_settled_0001', 'act_refused_0001'].map((id) => [id, reopened.sealedAction(id)]),
      );
      await reopened.close();
      const headers = outcomeColumn(db);
      expect(headers.map((h) => h.outcome)).toEqual(events.map((e) => eventOutcomeHeader(e)));
      // What recovery reads: each action's last header naming an outcome names the one its own events fold to.
      for (const [id, state] of folded) {
        const last = headers.filter((h, i) => events[i]?.action_id === id && h.outcome !== null).at(-1);
        expect(last?.outcome).toBe(state?.outcome);
      }
      // The premise: the three paths set unknown (a dispatch, a recorded unknown), committed and not_attempted.
      expect(new Set(headers.map((h) => h.outcome))).toEqual(new Set([null, 'unknown', 'committed', 'not_attempted']));
      expect(headers.filter((h) => h.kind === 'DISPATCH_STARTED').every((h) => h.outcome === 'unknown')).toBe(true);
      expect(headers.filter((h) => h.kind === 'ACTION_ACCEPTED').every((h) => h.outcome === null)).toBe(true);

      const plan = db
        .prepare(`EXPLAIN QUERY PLAN ${openOutcomesSql}`)
        .all()
        .map((r) => (r as { detail: string }).detail)
        .join('\n');
      expect(plan).toMatch(/^SCAN events USING COVERING INDEX events_outcome_marks$/m);
      expect((db.prepare(openOutcomesSql).all() as Array<{ action_id: string }>).map((r) => r.action_id)).toEqual([
        'act_unknown_0001',
      ]);
    } finally {
      db.close();
    }
    expect(await verifyJournal({ dbPath: t.path })).toMatchObject({ ok: true });
  });

  it('when a version 24 journal is migrated: its rows are unchanged, each with no outcome header, and none is listed as unresolved', async () => {
    t = await written();
    const db = new Database(t.path);
    try {
      db.exec('DROP INDEX events_outcome_marks; ALTER TABLE events DROP COLUMN outcome');
      db.pragma('user_version = 24');
      const rows = (): unknown => db.prepare('SELECT * FROM events ORDER BY seq').all();
      const before = (rows() as Array<Record<string, unknown>>).map((row) => ({ ...row, outcome: null }));

      expect(migrate(db, journalMigrations)).toBe(migration025OutcomeHeaders.version);
      expect(schemaVersion(db)).toBe(25);
      expect(rows()).toEqual(before);
      expect(db.prepare(openOutcomesSql).all()).toEqual([]);
    } finally {
      db.close();
    }
  });

  it('an outcome header edited in place: `audit verify` fails at that row, and a read refuses the event (its seal binds the header)', async () => {
    t = await written();
    const db = new Database(t.path);
    let seq: number;
    try {
      ({ seq } = db
        .prepare(
          `SELECT seq FROM events WHERE action_id = 'act_unknown_0001' AND outcome = 'unknown' ORDER BY seq DESC`,
        )
        .get() as { seq: number });
      db.exec('DROP TRIGGER events_no_update');
      db.prepare(`UPDATE events SET outcome = 'committed' WHERE seq = ?`).run(seq);
    } finally {
      db.close();
    }
    expect(await verifyJournal({ dbPath: t.path })).toMatchObject({ ok: false, code: 'ROW_MODIFIED', seq });
    const reopened = await Journal.open({ path: t.path, clock: t.clock, vault: t.vault });
    try {
      expect(() => [...reopened.events(seq)]).toThrow(`event ${seq} failed authentication`);
    } finally {
      await reopened.close();
    }
  });
});

describe('when an event is opened', () => {
  it('a header naming another outcome than its body sets is refused: what recovery reads from headers and what the fold reads agree', () => {
    const row = {
      seq: 7,
      at_ms: 1,
      action_id: 'act_opened_0001',
      session_id: null,
      ticket: 1,
      lane: 'lane-a',
      kind: 'DISPATCH_STARTED',
      run: 0,
      nonce: new Uint8Array(0),
      ciphertext: new Uint8Array(0),
      leaf_hash: new Uint8Array(32),
    };
    const body = Buffer.from(JSON.stringify({ payload: { attempt: 1, connection: 'fresh' } }), 'utf8');
    expect(eventOfBody({ ...row, outcome: 'unknown' }, body)).toMatchObject({ kind: 'DISPATCH_STARTED' });
    expect(eventOfBody({ ...row, outcome: null }, body)).toMatchObject({ kind: 'DISPATCH_STARTED' });
    expect(() => eventOfBody({ ...row, outcome: 'committed' }, body)).toThrow(
      "event 7's header names another outcome than its body",
    );
  });
});
