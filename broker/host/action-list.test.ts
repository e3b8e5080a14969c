import Database from 'better-sqlite3';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { brokerApiSchemas, type NewEvent, type OperatorInput } from '../contract/index.js';
import { isActionOpen, isListedOpen } from '../core/index.js';
import { Journal, journalMigrations } from '../journal/index.js';
import { openActionsCondition } from '../journal/migrations/020-open-includes-blocking-unknown.js';
import { settledOutcomeCondition } from '../journal/migrations/021-outcome-filter-settled.js';
import { actionPathNames, actionPaths } from '../testing/action-paths.js';
import { dropIndexAddedBy018, dropTablesAddedBy017, restoreTablesDroppedBy014 } from '../testing/older-journal.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { listActions } from './action-list.js';
import { createOperatorReads } from './operator-reads.js';

const sessions = ['ses_alpha_01', 'ses_bravo_02'] as const;
const lanes = ['lane-a', 'lane-b'] as const;
const httpTargets = ['route:docs POST /documents/{id}', 'route:api GET /v1/items'] as const;

/** Appends one event at a time, the clock one second on each time, so every moment has its own wall time. */
async function appendSlowly(t: TempJournal, events: readonly NewEvent[]): Promise<void> {
  for (const event of events) {
    t.clock.advance(1_000);
    await t.journal.append(event);
  }
}

/** One script per path name and per n, its acceptance moved to a session, lane and target of its own. */
function varied(name: (typeof actionPathNames)[number], n: number): NewEvent[] {
  const id = `act_${name.slice(0, 20)}_${String(n).padStart(3, '0')}`;
  const [accepted, ...rest] = actionPaths[name](id);
  if (accepted?.kind !== 'ACTION_ACCEPTED') throw new Error('a script starts with ACTION_ACCEPTED');
  const target = accepted.payload.channel === 'ssh' ? accepted.payload.target : httpTargets[n % 2];
  return [
    {
      ...accepted,
      session_id: sessions[n % 2],
      lane: lanes[(n >> 1) % 2],
      payload: { ...accepted.payload, target: target ?? '' },
    },
    ...rest,
  ];
}

let temp: TempJournal;
beforeEach(async () => {
  temp = await openTempJournal();
});
afterEach(() => temp.dispose());

const list = (input: OperatorInput<'actions.list'>) =>
  brokerApiSchemas['actions.list'].output.parse(
    listActions(temp.journal, brokerApiSchemas['actions.list'].input.parse(input)),
  );

describe('actions.list over a real journal', () => {
  it("when a person approved a call of a named agent: one row with who, what, when and how long, from the events' times", async () => {
    await temp.journal.appendSession({
      kind: 'SESSION_STARTED',
      action_id: 'ses_alpha_01',
      payload: {
        pid: 4242,
        uid: 1000,
        start_time: '77',
        ppid: 1,
        exe: '/usr/bin/node',
        cwd: '/w',
        parent_exe: null,
        client_name: 'claude-code',
        client_version: '1',
      },
    });
    const start = temp.clock.nowMs();
    await appendSlowly(temp, varied('httpApproved', 0));
    await appendSlowly(temp, varied('httpNoApproval', 1));
    const { actions, next_before, as_of_seq } = list({});
    expect(next_before).toBeNull();
    // As of the journal's newest position (the newest action's last event), whatever page was asked for.
    expect(as_of_seq).toBe(temp.journal.stats().last_seq);
    expect(as_of_seq).toBe(actions[0]?.last_seq);
    expect(list({ before_seq: 2, text: 'docs' }).as_of_seq).toBe(as_of_seq);
    expect(actions.map((a) => a.action_id)).toEqual(['act_httpNoApproval_001', 'act_httpApproved_000']);
    expect(actions[1]).toEqual({
      action_id: 'act_httpApproved_000',
      ticket: 1,
      accepted_at_ms: start + 1_000,
      session_id: 'ses_alpha_01',
      agent: { name: 'claude-code', pid: 4242 },
      channel: 'http',
      target: 'docs',
      method: 'POST',
      request: '/documents/{id}',
      lane: 'lane-a',
      stage: 'result_delivered',
      decision: 'approved',
      decided_by: 'person:operator-1',
      outcome: 'committed',
      code: null,
      effect: 'succeeded',
      decided_at_ms: start + 4_000,
      dispatched_at_ms: start + 6_000,
      settled_at_ms: start + 10_000,
      duration_ms: 9_000,
      first_seq: 2,
      last_seq: 12,
    });
    // A session with no SESSION_STARTED row still says which session; the agent is unnamed.
    expect(actions[0]?.agent).toEqual({ name: null, pid: null });
  });

  it('when an acceptance is still queued as the list is read: the page commits it first, and as_of_seq is at or above every row', async () => {
    await temp.journal.appendBatch(varied('httpNoApproval', 0));
    const before = temp.journal.stats().last_seq;
    // Queued, not awaited: the list's read commits it in this same turn, so the page holds it.
    const [accepted] = varied('httpApproved', 1);
    if (accepted === undefined) throw new Error('a script starts with ACTION_ACCEPTED');
    const queued = temp.journal.appendBatch([accepted]);
    const { actions, as_of_seq } = list({});
    await queued;
    expect(actions.map((a) => a.action_id)).toEqual(['act_httpApproved_001', 'act_httpNoApproval_000']);
    expect(actions[0]?.first_seq).toBe(before + 1);
    for (const row of actions) expect(as_of_seq).toBeGreaterThanOrEqual(row.last_seq);
    expect(as_of_seq).toBe(temp.journal.stats().last_seq);
  });

  it('when policy allowed a call at admission (approval: none): who decided says policy and the rule, never undecided', async () => {
    await temp.journal.appendBatch(varied('httpNoApproval', 0));
    const [accepted, ...rest] = varied('httpNoApproval', 1);
    if (accepted?.kind !== 'ACTION_ACCEPTED') throw new Error('a script starts with ACTION_ACCEPTED');
    const rule = 'rules[1]: GET /v1/** → none';
    await temp.journal.appendBatch([{ ...accepted, payload: { ...accepted.payload, approval_rule: rule } }, ...rest]);
    const { actions } = list({});
    expect(actions.map((a) => [a.action_id, a.decision, a.decided_by])).toEqual([
      ['act_httpNoApproval_001', null, `policy (approval: none; ${rule})`],
      ['act_httpNoApproval_000', null, 'policy (approval: none)'],
    ]);
  });

  it('when the text is words the list shows for who decided: a policy-allowed call is found by them, as a person-approved one is', async () => {
    await temp.journal.appendBatch(varied('httpNoApproval', 0));
    const [accepted, ...rest] = varied('httpNoApproval', 1);
    if (accepted?.kind !== 'ACTION_ACCEPTED') throw new Error('a script starts with ACTION_ACCEPTED');
    await temp.journal.appendBatch([
      { ...accepted, payload: { ...accepted.payload, approval_rule: 'rules[1]: GET /v1/** → none' } },
      ...rest,
    ]);
    await temp.journal.appendBatch(varied('httpApproved', 0));
    await temp.journal.appendBatch(varied('rejectedByPerson', 0));
    const found = (text: string) => list({ text }).actions.map((a) => a.action_id);
    expect(found('POLICY')).toEqual(['act_httpNoApproval_001', 'act_httpNoApproval_000']);
    expect(found('allowed by policy (approval: none)')).toEqual(['act_httpNoApproval_000']);
    expect(found('allowed by policy (approval: none; rules[1]')).toEqual(['act_httpNoApproval_001']);
    // Into the rule, across its first words, up to its closing paren, in any case: the rule's row alone.
    expect(found('none; rules[1]: get')).toEqual(['act_httpNoApproval_001']);
    expect(found('get /v1/** → none)')).toEqual(['act_httpNoApproval_001']);
    expect(found('(approval: none)')).toEqual(['act_httpNoApproval_000']);
    expect(found('none; rules[2]')).toEqual([]);
    expect(found('→ none"')).toEqual([]); // a quote: never in the raw state as typed, so the phrase alone decides
    expect(found('approved by person:')).toEqual(['act_httpApproved_000']);
    expect(found('rejected by')).toEqual(['act_rejectedByPerson_000']);
  });

  it('when one action is still running and one settled unknown: --outcome unknown finds the settled one only, --open the running one', async () => {
    // Same session and lane (n = 0): the lane filter drives the read and the outcome is tested on its rows.
    await temp.journal.appendBatch(varied('deadlineInFlight', 0));
    await temp.journal.appendBatch(varied('callerCancelledAfterDispatch', 0));
    const ids = (input: OperatorInput<'actions.list'>): string[] => list(input).actions.map((a) => a.action_id);
    // The running one is in flight, as status counts it: its row has no outcome (nor effect) until one is recorded —
    // never the provisional unknown the projection holds from its dispatch on.
    expect(list({}).actions.map((a) => [a.action_id, a.outcome, a.effect, a.settled_at_ms === null])).toEqual([
      ['act_callerCancelledAfter_000', 'unknown', 'unknown_effect', false],
      ['act_deadlineInFlight_000', null, null, true],
    ]);
    expect(temp.journal.getAction('act_deadlineInFlight_000')).toMatchObject({ outcome: 'unknown', recorded: false });
    expect(ids({ outcome: 'unknown' })).toEqual(['act_callerCancelledAfter_000']);
    expect(ids({ outcome: 'unknown', lane: 'lane-a' })).toEqual(['act_callerCancelledAfter_000']);
    expect(ids({ outcome: 'unknown', text: 'act_' })).toEqual(['act_callerCancelledAfter_000']);
    expect(ids({ open: true })).toContain('act_deadlineInFlight_000');
  });

  it('when every path has run in two sessions, lanes and targets: each filter and keyset page agrees with the projection, with no duplicate or gap', async () => {
    for (const name of actionPathNames) for (const n of [0, 1, 2, 3]) await temp.journal.appendBatch(varied(name, n));
    const model = temp.journal.listActions().sort((a, b) => b.first_seq - a.first_seq);
    expect(model.length).toBe(actionPathNames.length * 4);
    const filterArb = fc.record(
      {
        session_id: fc.constantFrom(...sessions),
        lane: fc.constantFrom(...lanes, 'lane-ssh'),
        target: fc.constantFrom('docs', 'route:api', 'host:build-1', 'nothing-here'),
        outcome: fc.constantFrom('committed', 'unknown', 'not_attempted', 'rejected' as const),
        code: fc.constantFrom('APPROVAL_DENIED', 'REMOTE_ERROR_STATUS'),
        open: fc.constant(true),
        text: fc.constantFrom('DOCUMENTS', 'v1/items', 'operator-1', '#1', 'expired'),
      },
      { requiredKeys: [] },
    );
    await fc.assert(
      fc.property(filterArb, fc.integer({ min: 1, max: 9 }), (filter, limit) => {
        const expected = model.filter((s) => {
          const rowTarget = s.target.split(' ')[0]?.replace(/^(route|host):/, '');
          if (filter.session_id !== undefined && s.session_id !== filter.session_id) return false;
          if (filter.lane !== undefined && s.lane !== filter.lane) return false;
          if (filter.target !== undefined && rowTarget !== filter.target.replace(/^(route|host):/, '')) return false;
          // Settled with that outcome: a running action's provisional unknown is not one (--open finds it).
          if (filter.outcome !== undefined && (s.outcome !== filter.outcome || isActionOpen(s))) return false;
          if (filter.code !== undefined && s.code !== filter.code) return false;
          if (filter.open === true && !isListedOpen(s)) return false;
          return true;
        });
        const seen: string[] = [];
        let before: number | undefined;
        for (let pages = 0; pages < 200; pages += 1) {
          const page = list({ ...filter, limit, ...(before === undefined ? {} : { before_seq: before }) });
          expect(page.actions.length).toBeLessThanOrEqual(limit);
          seen.push(...page.actions.map((a) => a.action_id));
          if (page.next_before === null) break;
          before = page.next_before;
        }
        if (filter.text === undefined) {
          expect(seen).toEqual(expected.map((s) => s.action_id));
        } else {
          // Text narrows further: every row found is one the other filters allow, in order, once.
          const allowed = expected.map((s) => s.action_id);
          expect(seen.every((id) => allowed.includes(id))).toBe(true);
          expect(seen).toEqual(allowed.filter((id) => seen.includes(id)));
        }
        expect(new Set(seen).size).toBe(seen.length);
      }),
      { numRuns: 60 },
    );
    // A row's outcome is what --outcome filters by: null exactly while open (settled_at_ms null), and a row that has one
    // is found by it.
    const all = list({ limit: 500 }).actions;
    expect(all.length).toBe(model.length);
    expect(all.filter((a) => (a.outcome === null) !== (a.settled_at_ms === null))).toEqual([]);
    expect(all.filter((a) => a.settled_at_ms === null && a.effect !== null)).toEqual([]);
    for (const outcome of ['committed', 'unknown', 'not_attempted', 'rejected'] as const) {
      const found = new Set(list({ outcome, limit: 500 }).actions.map((a) => a.action_id));
      expect(all.filter((a) => a.outcome === outcome).map((a) => a.action_id)).toEqual([...found]);
    }
    expect(list({ text: 'v1/ITEMS' }).actions.every((a) => a.request === '/v1/items')).toBe(true);
    expect(list({ text: 'expired: nobody decided', limit: 500 }).actions.map((a) => a.decision)).toEqual([
      'expired',
      'expired',
      'expired',
      'expired',
    ]);
  });

  it('when a filter is asked for with a bad value: a coded INVALID_ARGUMENT naming the field', () => {
    const parsed = brokerApiSchemas['actions.list'].input.safeParse({ limit: 501 });
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues[0]?.path).toEqual(['limit']);
    expect(brokerApiSchemas['actions.list'].input.safeParse({ outcome: 'failed' }).success).toBe(false);
    // A blank id or name is a caller gone wrong (the desktop, the HTTP host, the CLI alike), never "no session ''".
    for (const [method, field] of [
      ['actions.list', 'session_id'],
      ['actions.list', 'lane'],
      ['actions.list', 'target'],
      ['activity.list', 'session_id'],
      ['activity.list', 'lane'],
      ['activity.list', 'action_id'],
    ] as const) {
      for (const blank of ['', '   ']) {
        const refused = brokerApiSchemas[method].input.safeParse({ [field]: blank });
        expect(refused.success, `${method} ${field} ${JSON.stringify(blank)}`).toBe(false);
        expect(refused.error?.issues[0]?.path).toEqual([field]);
      }
    }
    // A lane or target is matched as configured: surrounding spaces are kept, not trimmed away.
    expect(brokerApiSchemas['actions.list'].input.parse({ lane: 'deploy ', target: ' web' })).toMatchObject({
      lane: 'deploy ',
      target: ' web',
    });
    expect(brokerApiSchemas['activity.list'].input.parse({ lane: ' deploy' })).toMatchObject({ lane: ' deploy' });
  });

  it('uses an index for the first page, a deep page and each filter (no full scan, no temp sort)', async () => {
    await appendSlowly(temp, varied('httpNoApproval', 0));
    const db = new Database(temp.path, { readonly: true });
    try {
      const plan = (where: string): string =>
        db
          .prepare(
            `EXPLAIN QUERY PLAN SELECT a.action_id FROM actions a LEFT JOIN sessions s ON s.session_id = a.session_id ${where} ORDER BY a.first_seq DESC LIMIT 101`,
          )
          .all()
          .map((r) => (r as { detail: string }).detail)
          .join('\n');
      for (const [where, index] of [
        ['', 'actions_list'],
        ['WHERE a.first_seq < 500', 'actions_list'],
        [`WHERE a.session_id = 'x' AND a.first_seq < 500`, 'actions_list_by_session'],
        [`WHERE a.lane = 'x'`, 'actions_list_by_lane'],
        [`WHERE a.target_name = 'x'`, 'actions_list_by_target'],
        [`WHERE a.outcome = 'unknown' AND ${settledOutcomeCondition}`, 'actions_list_by_outcome'],
        [`WHERE a.code IS NOT NULL AND a.code = 'X'`, 'actions_list_by_code'],
        [`WHERE (${openActionsCondition})`, 'actions_list_open'],
      ] as const) {
        const detail = plan(where);
        expect(detail, where).toContain(index);
        expect(detail, where).not.toContain('TEMP B-TREE');
      }
    } finally {
      db.close();
    }
  });
});

describe('actions.show: waited_for', () => {
  it('when #2 was approved while #1 waited for its person, and #1 was then rejected: "#2 waited for #1" from their recorded times', async () => {
    const reads = createOperatorReads(temp.journal, { position: () => null, isConnected: () => false });
    const [a1, ...a1rest] = actionPaths.httpApproved('act_wait_first_1');
    const b = actionPaths.httpApproved('act_wait_second1');
    if (a1 === undefined) throw new Error('no script');
    await appendSlowly(temp, [a1, ...a1rest.slice(0, 2)]); // #1 accepted, validated, card shown
    await appendSlowly(temp, b.slice(0, 4)); // #2 accepted … approved
    const approvedAt = temp.clock.nowMs();
    const show = async (id: string) =>
      brokerApiSchemas['actions.show'].output.parse(await reads['actions.show']({ action_id: id }));
    expect((await show('act_wait_second1')).waited_for).toEqual([
      { ticket: 1, action_id: 'act_wait_first_1', waited_ms: 0, ongoing: true },
    ]);
    temp.clock.advance(40_000);
    await temp.journal.append({
      kind: 'REJECTED',
      action_id: 'act_wait_first_1',
      payload: { actor: { kind: 'person', id: 'alice' }, reason: 'no' },
      classification: {
        phase: 'credential_injection',
        outcome: 'not_attempted',
        retry: 'never',
        code: 'APPROVAL_DENIED',
        effect: 'no_effect',
        outcome_basis: 'approval_denied',
        source: 'local_gate',
      },
    });
    await appendSlowly(temp, b.slice(4));
    // Ready at its approval, free when #1's rejection was recorded 40 s later (its own dispatch came after).
    expect((await show('act_wait_second1')).waited_for).toEqual([
      { ticket: 1, action_id: 'act_wait_first_1', waited_ms: 40_000, ongoing: false },
    ]);
    expect(temp.clock.nowMs() - approvedAt).toBeGreaterThan(40_000);
    expect((await show('act_wait_first_1')).waited_for).toEqual([]);
    expect(list({ lane: 'lane-a' }).actions.map((a) => a.decided_by)).toEqual(['person:operator-1', 'person:alice']);
  });
});

describe('when a data dir written before migration 010 is opened', () => {
  it("fills the list columns from the events' headers, and words who decided from the decision event while the vault can open it", async () => {
    await appendSlowly(temp, varied('httpApproved', 0));
    await appendSlowly(temp, varied('expired', 1));
    await appendSlowly(temp, actionPaths.callerCancelledAfterDispatch('act_blocked_000'));
    const live = list({}).actions;
    await temp.journal.close();
    // Back to schema 9 exactly: 010 only added indexes and trailing columns.
    const db = new Database(temp.path);
    const indexes = db
      .prepare(`SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'actions_list%'`)
      .pluck()
      .all() as string[];
    expect(indexes).toHaveLength(7);
    for (const name of indexes) db.exec(`DROP INDEX ${name}`);
    for (const column of [
      'target_name',
      'decided_by',
      'decided_at_ms',
      'decided_seq',
      'dispatched_at_ms',
      'settled_at_ms',
      'resolved_at_ms',
    ])
      db.exec(`ALTER TABLE actions DROP COLUMN ${column}`);
    // And without 011's status counters, which that schema did not have either.
    db.exec('DROP TABLE action_counters');
    db.exec('DROP TABLE outcome_minutes');
    // Nor the tables of later migrations (012's integrity anchor, 013's SSH recordings).
    db.exec('DROP TABLE IF EXISTS integrity_anchor; DROP TABLE recording_chunks; DROP TABLE recordings');
    restoreTablesDroppedBy014(db);
    dropTablesAddedBy017(db);
    dropIndexAddedBy018(db);
    db.pragma('user_version = 9');
    db.close();

    const reopened = await Journal.open({ path: temp.path, clock: temp.clock, vault: temp.vault });
    try {
      expect(reopened.stats().schema_version).toBe(journalMigrations.length);
      const migrated = listActions(reopened, {}).actions;
      // Exact for every column the headers carry; settled is the latest settling event's time (exact here).
      expect(migrated).toEqual(live);
      temp.vault.lock();
      const locked = listActions(reopened, {}).actions;
      // The earlier run's decision events are sealed now: a person's name is never guessed, an expiry needs no body,
      // and a call policy allowed at admission (approval: none) is said from the plaintext state.
      expect(locked.map((a) => a.decided_by)).toEqual(['policy (approval: none)', 'nobody (expired)', null]);
    } finally {
      await reopened.close();
    }
  });
});

/**
 * as_of_seq inside Journal.readCurrent (how the operator's actions.list reads): the snapshot can already hold a batch the
 * writer thread committed whose ack the loop has not heard (stats().last_seq moves at the ack), so the position is the
 * snapshot's own newest event.
 */
describe('actions.list: as_of_seq while the writer thread commits beside the read', () => {
  it('is at or above every row of the page and at most what the file holds', async () => {
    const t = await openTempJournal({ writerThread: true, threadBatchEventsMin: 1 });
    const other = new Database(t.path, { readonly: true });
    try {
      const committedSeq = (): number =>
        (other.prepare('SELECT max(seq) AS s FROM events').get() as { s: number | null }).s ?? 0;
      let conclusive = 0;
      for (let round = 0; round < 20 && conclusive < 2; round += 1) {
        const batch = (prefix: string) =>
          Array.from({ length: 30 }, (_, n) => actionPaths.httpNoApproval(`act_${prefix}${round}_${n}`)).flat();
        const a = batch('asof_a').map((event) => t.journal.append(event));
        await new Promise((resolve) => setImmediate(resolve));
        const read = t.journal.readCurrent(() => {
          // Wait (on this turn, as a slow read would) until the thread committed the next batch: its ack is unheard.
          const deadline = performance.now() + 2_000;
          while (committedSeq() <= t.journal.stats().last_seq && performance.now() < deadline);
          const acked = t.journal.stats().last_seq;
          return { acked, page: listActions(t.journal, { limit: 500 }) };
        });
        const b = batch('asof_b').map((event) => t.journal.append(event));
        const { acked, page } = await read;
        await Promise.all([...a, ...b]);
        const newest = Math.max(...page.actions.map((row) => row.last_seq));
        expect(page.as_of_seq).toBeGreaterThanOrEqual(newest);
        expect(page.as_of_seq).toBeLessThanOrEqual(t.journal.stats().last_seq);
        if (newest > acked) conclusive += 1;
      }
      expect(conclusive).toBeGreaterThan(0);
    } finally {
      other.close();
      await t.dispose();
    }
  }, 30_000);
});
