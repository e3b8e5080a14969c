import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Classification, NewEvent } from '../../contract/index.js';
import { stateEnvelope } from '../../actions/index.js';
import { verifyJournal } from '../../audit/verify-journal.js';
import { foldMetrics, type OutcomeCountRow } from '../../core/index.js';
import { actionPaths } from '../../testing/action-paths.js';
import { attestedRejection, remoteRefusal } from '../../testing/attested-rejection.js';
import { restoreOutcomeMinutesBefore022 } from '../../testing/older-journal.js';
import { openTempJournal, type TempJournal } from '../../testing/temp-journal.js';
import { Journal } from '../journal.js';
import { JournalStore } from '../journal-store.js';
import { migrate } from '../migrate.js';
import { scanActionCounts, scanOutcomeCounts } from '../read-snapshot.js';
import { recoveryEvent } from '../recovery.js';
import { buildStatusCounters } from './011-status-counters.js';
import { migration016AttestedRejectedCode } from './016-attested-rejected-code.js';
import { journalMigrations } from './index.js';

/*
 * The version 15 file is written by this journal as a broker before 101f91b wrote it. That broker's validation accepted
 * an attestation coded REMOTE_REJECTED; validateNewEvent now refuses it (no new event may carry it). While
 * `olderBroker.writing` is set, such an event is validated as its ATTESTED_REJECTED twin and stored with its old code,
 * which is all the older validation did differently; every other event, and all reading, goes through the real one.
 */
const olderBroker = vi.hoisted(() => ({ writing: false }));
vi.mock('../validate-new-event.js', async (importOriginal) => {
  const real = await importOriginal<{ validateNewEvent: (input: unknown) => NewEvent }>();
  const validateNewEvent = (input: unknown): NewEvent => {
    const c = (input as NewEvent).classification;
    if (!olderBroker.writing || c?.code !== 'REMOTE_REJECTED' || c.source !== 'operator_attested')
      return real.validateNewEvent(input);
    const valid = real.validateNewEvent({
      ...(input as NewEvent),
      classification: { ...c, code: 'ATTESTED_REJECTED' },
    });
    return { ...valid, classification: { ...c, ...valid.classification, code: 'REMOTE_REJECTED' } };
  };
  return {
    ...real,
    validateNewEvent,
    // The journal checks each append through its checker: the older broker's checked every event in full.
    NewEventChecker: class {
      check(input: unknown): NewEvent {
        return validateNewEvent(input);
      }
    },
  };
});

let t: TempJournal;
beforeEach(async () => {
  olderBroker.writing = false;
  t = await openTempJournal();
});
afterEach(async () => {
  await t.dispose();
});

const upTo15 = journalMigrations.filter((m) => m.version < migration016AttestedRejectedCode.version);
const hourMs = 3_600_000;
const lookupNoRecord: Classification = {
  phase: 'remote_execution',
  outcome: 'rejected',
  retry: 'never',
  code: 'REMOTE_REJECTED',
  effect: 'no_effect',
  outcome_basis: 'remote_query_no_record',
  source: 'remote_query',
};

const ids = {
  /** Attested rejected more than an hour before the rest: its rate minute is no longer stored. */
  attestedLongAgo: 'act_q016_attested_old',
  attested: 'act_q016_attested',
  /** Recorded unknown before dispatch by a quarantined journal's recovery, then attested rejected. */
  attestedBeforeDispatch: 'act_q016_attested_undispatched',
  remote: 'act_q016_remote',
  lookup: 'act_q016_lookup',
} as const;
const attested = [ids.attestedLongAgo, ids.attested, ids.attestedBeforeDispatch];

/** Dispatched, the connection lost, recorded unknown (the reconciled path, cut before its lookup). */
const lostUnknown = (id: string): NewEvent[] =>
  actionPaths.lostThenReconciled(id).filter((e) => e.kind !== 'RECONCILIATION_RESULT');

async function attestedAfterRecovery(id: string): Promise<void> {
  const script = actionPaths.httpApproved(id);
  await t.journal.appendBatch(
    script.slice(
      0,
      script.findIndex((e) => e.kind === 'DISPATCH_STARTED'),
    ),
  );
  const state = t.journal.getAction(id);
  const recovered = state === undefined ? undefined : recoveryEvent(state, t.clock.nowMs(), 'quarantined');
  if (recovered === undefined) throw new Error('recovery recorded nothing');
  await t.journal.append(recovered);
  await t.journal.append(attestedRejection(id));
}

interface StoredCode {
  code: string | null;
  state_code: string | null;
}
const codesOf = (db: Database.Database): Record<string, StoredCode> =>
  Object.fromEntries(
    db
      .prepare<[], StoredCode & { action_id: string }>(
        `SELECT action_id, code, json_extract(state, '$.code') AS state_code FROM actions ORDER BY action_id`,
      )
      .all()
      .map(({ action_id, ...codes }) => [action_id, codes]),
  );
const both = (code: string): StoredCode => ({ code, state_code: code });

function sorted(rows: readonly OutcomeCountRow[]): OutcomeCountRow[] {
  const id = (r: OutcomeCountRow): string =>
    JSON.stringify([r.phase, r.outcome, r.code, r.decision, r.dispatched, r.minute, r.in_flight ?? 0]);
  return [...rows].sort((a, b) => (id(a) < id(b) ? -1 : 1));
}

/** The counter tables' rows that count something, as stored. */
function counterRows(db: Database.Database): unknown {
  return {
    counters: db.prepare(`SELECT * FROM action_counters WHERE n <> 0 ORDER BY 1, 2, 3, 4, 5, 6`).all(),
    minutes: db.prepare(`SELECT * FROM outcome_minutes WHERE n <> 0 ORDER BY 1, 2, 3, 4, 5, 6`).all(),
  };
}

/** What migration 011's fill from the actions table counts (rolled back: the file keeps its own counters). */
function recount(db: Database.Database): unknown {
  db.exec('SAVEPOINT recount');
  try {
    buildStatusCounters(db);
    return counterRows(db);
  } finally {
    db.exec('ROLLBACK TO recount; RELEASE recount');
  }
}

describe('when a version 15 journal holds rejections a person attested under REMOTE_REJECTED', () => {
  it('recodes their rows, state and counters to ATTESTED_REJECTED, and leaves the remote and lookup refusals alone', async () => {
    olderBroker.writing = true;
    await t.journal.appendBatch([...lostUnknown(ids.attestedLongAgo), attestedRejection(ids.attestedLongAgo)]);
    t.clock.advance(2 * hourMs);
    await t.journal.appendBatch([...lostUnknown(ids.attested), attestedRejection(ids.attested)]);
    await attestedAfterRecovery(ids.attestedBeforeDispatch);
    // A complete refusal from the remote, and a lookup's authoritative no-record: both the remote's word.
    await t.journal.appendBatch(
      actionPaths
        .httpNoApproval(ids.remote)
        .map((e) =>
          e.kind === 'RESULT_COMMITTED'
            ? { ...e, classification: remoteRefusal }
            : e.kind === 'REMOTE_RESPONSE_STARTED'
              ? { ...e, payload: { ...e.payload, status: 422 } }
              : e,
        ),
    );
    await t.journal.appendBatch([
      ...lostUnknown(ids.lookup),
      {
        kind: 'RECONCILIATION_RESULT',
        action_id: ids.lookup,
        payload: { correlation: 'idempotency_token', lookup_action_id: 'act_lookup_0001' },
        classification: lookupNoRecord,
      },
    ]);
    olderBroker.writing = false;
    // The old attestations are in the log as written: sealed with the code an older broker gave them.
    for (const id of attested)
      expect([...t.journal.events()].find((e) => e.action_id === id && e.kind === 'OPERATOR_ATTESTED')).toMatchObject({
        classification: { code: 'REMOTE_REJECTED', source: 'operator_attested' },
      });
    // What this broker folds (the fold reads an old attestation's code as ATTESTED_REJECTED): the migration's target.
    for (const id of attested) expect(t.journal.getAction(id)?.code).toBe('ATTESTED_REJECTED');
    const fresh = { metrics: foldMetrics(t.journal.outcomeCounts()), counts: t.journal.actionCounts() };
    await t.journal.close();

    // What a version 15 broker wrote: the attestation's own code in the row and its state, counted under it.
    const old = new Database(t.path);
    old.exec(`
      UPDATE actions SET code = 'REMOTE_REJECTED', state = json_set(state, '$.code', 'REMOTE_REJECTED')
      WHERE code = 'ATTESTED_REJECTED';
      DROP TABLE session_counters;
      DROP INDEX sessions_by_first_seq;
      ALTER TABLE recordings DROP COLUMN alive_at_ms;
      PRAGMA user_version = 15;
    `);
    restoreOutcomeMinutesBefore022(old);
    buildStatusCounters(old);
    expect(
      Object.values(codesOf(old)).filter((c) => c.code === 'REMOTE_REJECTED' && c.state_code === c.code),
    ).toHaveLength(5);
    // Counted under it (read from the stored counters: this broker's store reads the minute rows of schema 22).
    expect(old.prepare(`SELECT sum(n) FROM action_counters WHERE code = 'REMOTE_REJECTED'`).pluck().get()).toBe(5);
    const events = old.prepare('SELECT * FROM events ORDER BY seq').all();
    const untouched = old
      .prepare(`SELECT * FROM actions WHERE action_id IN (?, ?) ORDER BY action_id`)
      .all(ids.remote, ids.lookup);

    expect(migrate(old, [...upTo15, migration016AttestedRejectedCode])).toBe(16);
    expect(codesOf(old)).toMatchObject({
      [ids.attestedLongAgo]: both('ATTESTED_REJECTED'),
      [ids.attested]: both('ATTESTED_REJECTED'),
      [ids.attestedBeforeDispatch]: both('ATTESTED_REJECTED'),
      [ids.remote]: both('REMOTE_REJECTED'),
      [ids.lookup]: both('REMOTE_REJECTED'),
    });
    expect(
      old.prepare(`SELECT * FROM actions WHERE action_id IN (?, ?) ORDER BY action_id`).all(ids.remote, ids.lookup),
    ).toEqual(untouched);
    expect(old.prepare('SELECT * FROM events ORDER BY seq').all()).toEqual(events);
    // The counters moved as a fresh count from the table counts, and read as the scans they replaced read.
    expect(counterRows(old)).toEqual(recount(old));
    // The later steps (022 moves the minute rows to its shape), then this broker's store reads them.
    expect(migrate(old)).toBe(journalMigrations.length);
    const store = new JournalStore(old);
    expect(store.actionCounts()).toEqual(scanActionCounts(old));
    expect(sorted(store.outcomeCounts())).toEqual(sorted(scanOutcomeCounts(old)));
    expect(foldMetrics(store.outcomeCounts())).toEqual(fresh.metrics);
    expect(fresh.metrics.by_code).toEqual(
      expect.arrayContaining([
        { code: 'ATTESTED_REJECTED', count: 3 },
        { code: 'REMOTE_REJECTED', count: 2 },
      ]),
    );
    const eventCount = events.length;
    old.close();
    // The sealed old attestations still verify: the chain, the tree head and every signed checkpoint.
    expect(await verifyJournal({ dbPath: t.path })).toMatchObject({ ok: true, events: eventCount });

    // The journal opens on it: what action_status, `actions list --code` and `metrics` read says who refused.
    const journal = await Journal.open({ path: t.path, clock: t.clock, vault: t.vault });
    try {
      for (const id of attested) {
        const state = journal.getAction(id);
        if (state === undefined) throw new Error(`${id} is gone`);
        expect(stateEnvelope(state)).toMatchObject({ error: { code: 'ATTESTED_REJECTED', outcome: 'rejected' } });
      }
      expect(
        journal
          .actionListPage({ limit: 10, code: 'ATTESTED_REJECTED' })
          .rows.map((r) => r.action_id)
          .sort(),
      ).toEqual([...attested].sort());
      expect(
        journal
          .actionListPage({ limit: 10, code: 'REMOTE_REJECTED' })
          .rows.map((r) => r.action_id)
          .sort(),
      ).toEqual([ids.lookup, ids.remote]);
      expect(foldMetrics(journal.outcomeCounts())).toEqual(fresh.metrics);
      expect(journal.actionCounts()).toEqual(fresh.counts);
    } finally {
      await journal.close();
    }
  });
});
