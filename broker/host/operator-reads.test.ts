import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { brokerApiSchemas } from '../contract/index.js';
import { actionPaths } from '../testing/action-paths.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { WriterThread } from '../journal/writer-thread.js';
import { createOperatorReads } from './operator-reads.js';

type Reads = ReturnType<typeof createOperatorReads>;

/**
 * For each test of the enclosing describe: a fresh real journal file (`seed` appends to it first, when given) and the
 * operator reads over it, with no agent connected; disposed after the test.
 */
function readsOverJournal(seed?: (journal: TempJournal['journal']) => Promise<void>) {
  let temp: TempJournal | undefined;
  let reads: Reads | undefined;
  beforeEach(async () => {
    temp = await openTempJournal();
    reads = createOperatorReads(temp.journal, { position: () => null, isConnected: () => false });
    await seed?.(temp.journal);
  });
  afterEach(() => temp?.dispose());
  const open = (): { temp: TempJournal; reads: Reads } => {
    if (temp === undefined || reads === undefined) throw new Error('no journal open: call inside a test');
    return { temp, reads };
  };
  return {
    get journal(): TempJournal['journal'] {
      return open().temp.journal;
    },
    get reads(): Reads {
      return open().reads;
    },
    /** actions.show of `actionId`, parsed by the contract's output schema. */
    show: async (actionId: string) =>
      brokerApiSchemas['actions.show'].output.parse(await open().reads['actions.show']({ action_id: actionId })),
  };
}

/** actions.show against a real journal file: which mechanism released a blocked lane, from the recorded events. */
describe('actions.show: released_by', () => {
  const rig = readsOverJournal();
  const { show } = rig;

  it('names the reconciliation (source remote_query) and the seq of its RECONCILIATION_RESULT', async () => {
    const appended = await rig.journal.appendBatch(actionPaths.lostThenReconciled('act_reco_000001'));
    const shown = await show('act_reco_000001');
    expect(shown.released_by).toEqual({
      kind: 'reconciliation',
      seq: appended.at(-1)?.event.seq,
      outcome: 'committed',
      source: 'remote_query',
    });
  });

  it('names the person who attested, with the basis they wrote', async () => {
    await rig.journal.appendBatch(actionPaths.sshClosedNoExitAttested('act_attest_0001'));
    expect((await show('act_attest_0001')).released_by).toMatchObject({
      kind: 'operator_attested',
      actor: { kind: 'person', id: 'operator-1' },
      reason: 'checked the host: the job ran',
      outcome: 'committed',
    });
  });

  it('is null while the head is blocked, and names the abandonment (outcome still unknown) once a person releases it', async () => {
    await rig.journal.appendBatch(actionPaths.callerCancelledAfterDispatch('act_blocked_001'));
    expect((await show('act_blocked_001')).released_by).toBeNull();
    const { event } = await rig.journal.append({
      kind: 'ABANDONED',
      action_id: 'act_blocked_001',
      payload: { actor: { kind: 'person', id: 'alice' }, reason: 'the remote is gone' },
    });
    const shown = await show('act_blocked_001');
    expect(shown.state).toMatchObject({ outcome: 'unknown', abandoned: true });
    expect(shown.released_by).toEqual({
      kind: 'abandoned',
      seq: event.seq,
      actor: { kind: 'person', id: 'alice' },
      outcome: 'unknown',
      reason: 'the remote is gone',
    });
  });

  it('is null for an action whose first attempt settled (it never blocked its lane)', async () => {
    await rig.journal.appendBatch(actionPaths.httpNoApproval('act_plain_00001'));
    expect((await show('act_plain_00001')).released_by).toBeNull();
  });
});

/** activity.list against a real journal file: every filter keeps the journal's own positions and pages on by seq. */
describe('activity.list: filters by outcome, code and text keep the original seq', () => {
  // Four actions, interleaved in the log by whole paths: ok, 500, rejected, preflight failure.
  const rig = readsOverJournal(async (journal) => {
    await journal.appendBatch(actionPaths.httpNoApproval('act_ok_00000001'));
    await journal.appendBatch(actionPaths.http500('act_500_0000001'));
    await journal.appendBatch(actionPaths.rejectedByPerson('act_rej_0000001'));
    await journal.appendBatch(actionPaths.preflightFailed('act_pre_0000001'));
  });

  const list = async (input: Parameters<Reads['activity.list']>[0]) =>
    brokerApiSchemas['activity.list'].output.parse(
      await rig.reads['activity.list'](brokerApiSchemas['activity.list'].input.parse(input)),
    );
  const allRows = async () => (await list({ limit: 500 })).events;

  it('when filtering by outcome, returns exactly the classified rows with that outcome, at their original seq', async () => {
    const expected = (await allRows()).filter((e) => e.outcome === 'not_attempted');
    const got = await list({ outcome: 'not_attempted' });
    expect(got.events.map((e) => e.kind)).toEqual(['REJECTED', 'PREFLIGHT_FAILED']);
    expect(got.events.map((e) => e.seq)).toEqual(expected.map((e) => e.seq));
    expect(got.next_seq).toBeNull();
  });

  it('when filtering by code, matches the row code only', async () => {
    const got = (await list({ code: 'REMOTE_ERROR_STATUS' })).events;
    expect(got).toHaveLength(1);
    expect(got[0]).toMatchObject({
      kind: 'RESULT_COMMITTED',
      action_id: 'act_500_0000001',
      code: 'REMOTE_ERROR_STATUS',
    });
    expect((await list({ code: 'NO_SUCH_CODE' })).events).toEqual([]);
  });

  it('when filtering by text, matches case-insensitively across the shown fields', async () => {
    expect((await list({ text: 'NOT THIS WEEK' })).events.map((e) => e.action_id)).toEqual(['act_rej_0000001']);
    const byAction = (await list({ text: 'act_pre' })).events;
    expect(byAction.map((e) => e.seq)).toEqual(
      (await allRows()).filter((e) => e.action_id === 'act_pre_0000001').map((e) => e.seq),
    );
  });

  it('when a filtered page is full, next_seq pages on by position and the pages join without gaps or repeats', async () => {
    const first = await list({ text: 'act_', limit: 3 });
    expect(first.events).toHaveLength(3);
    expect(first.next_seq).toBe((first.events.at(-1)?.seq ?? 0) + 1);
    const rest: number[] = [];
    for (let from = first.next_seq; from !== null;) {
      const page = await list({ text: 'act_', limit: 3, from_seq: from });
      rest.push(...page.events.map((e) => e.seq));
      from = page.next_seq;
    }
    expect([...first.events.map((e) => e.seq), ...rest]).toEqual((await allRows()).map((e) => e.seq));
  });

  it('when filtering by action, reads that action’s rows by its index: found in one call past the scan bound', async () => {
    // More than the 20,000 rows one call may scan stand before the action's first event.
    const filler: Parameters<TempJournal['journal']['appendBatch']>[0][number][] = [];
    for (let i = 0; i < 2_600; i++)
      filler.push(...actionPaths.httpNoApproval(`act_fill_${String(i).padStart(6, '0')}`));
    for (let i = 0; i < filler.length; i += 256) await rig.journal.appendBatch(filler.slice(i, i + 256));
    await rig.journal.appendBatch(actionPaths.httpNoApproval('act_far_0000001'));
    const got = await list({ action_id: 'act_far_0000001' });
    expect(got.events.length).toBeGreaterThan(0);
    expect(got.events.every((e) => e.action_id === 'act_far_0000001')).toBe(true);
    expect(got.events[0]?.seq).toBeGreaterThan(20_000);
    expect(got.next_seq).toBeNull();
    expect(await list({ action_id: 'act_never_000001' })).toEqual({ events: [], next_seq: null });
  });

  it('when unfiltered, pages of any size join into the whole log in seq order, the last one saying the end', async () => {
    const all = (await allRows()).map((e) => e.seq);
    const joined: number[] = [];
    let pages = 0;
    for (let from: number | null = 1; from !== null; pages += 1) {
      const page = await list({ from_seq: from, limit: 7 });
      expect(page.events.length).toBeLessThanOrEqual(7);
      joined.push(...page.events.map((e) => e.seq));
      from = page.next_seq;
    }
    expect(joined).toEqual(all);
    expect(all).toEqual(Array.from({ length: all.length }, (_, i) => i + 1));
    expect(pages).toBe(Math.ceil(all.length / 7) + (all.length % 7 === 0 ? 1 : 0));
  });

  it('combines filters (lane and outcome) and refuses an unknown outcome at the schema', async () => {
    expect((await list({ lane: 'lane-a', outcome: 'committed' })).events.map((e) => e.action_id)).toEqual([
      'act_ok_00000001',
      'act_500_0000001',
    ]);
    expect(brokerApiSchemas['activity.list'].input.safeParse({ outcome: 'maybe' }).success).toBe(false);
    expect(brokerApiSchemas['activity.list'].input.safeParse({ text: '   ' }).success).toBe(false);
  });
});

/**
 * actions.show of an action still open (dispatched, nothing recorded since): no outcome yet, as its actions.list row
 * says — never the provisional unknown / unknown_effect the projection holds from DISPATCH_STARTED on.
 */
describe('actions.show: an open action', () => {
  const rig = readsOverJournal();
  const { show } = rig;
  const listed = async (actionId: string) =>
    brokerApiSchemas['actions.list'].output
      .parse(await rig.reads['actions.list']({}))
      .actions.find((a) => a.action_id === actionId);

  it('running: outcome and effect null, as its list row, with how far it got; once recorded, the recorded ones', async () => {
    const path = actionPaths.httpNoApproval('act_running_0001');
    const cut = path.findIndex((e) => e.kind === 'REMOTE_RESPONSE_STARTED') + 1;
    expect(cut).toBeGreaterThan(0);
    await rig.journal.appendBatch(path.slice(0, cut));
    // The projection's own record still holds the dispatch's provisional unknown: only the shown state leaves it out.
    expect(rig.journal.getAction('act_running_0001')).toMatchObject({ outcome: 'unknown', recorded: false });
    const running = await show('act_running_0001');
    expect(running.state).toMatchObject({
      outcome: null,
      effect: null,
      recorded: false,
      phase: 'remote_execution',
      stage: 'response_started',
      outcome_basis: 'dispatch_started_no_result_recorded',
    });
    expect(await listed('act_running_0001')).toMatchObject({
      outcome: running.state.outcome,
      effect: running.state.effect,
    });

    await rig.journal.appendBatch(path.slice(cut));
    const settled = await show('act_running_0001');
    expect(settled.state).toMatchObject({ outcome: 'committed', effect: 'succeeded', recorded: true });
    expect(await listed('act_running_0001')).toMatchObject({ outcome: 'committed', effect: 'succeeded' });
  });

  it('a retry running after a recorded answer is open again: no outcome until the retry records one', async () => {
    const path = actionPaths.throttledThenRetried('act_retrying_001');
    const secondDispatch = path.findIndex((e) => e.kind === 'DISPATCH_STARTED' && e.payload.attempt === 2);
    await rig.journal.appendBatch(path.slice(0, secondDispatch + 2));
    const shown = await show('act_retrying_001');
    expect(shown.state).toMatchObject({ outcome: null, effect: null, recorded: false, retry_generation: 1 });
    // The earlier attempt's recorded answer stays in its events.
    expect(shown.events.filter((e) => e.kind === 'OUTCOME_RECORDED').map((e) => e.outcome)).toEqual(['rejected']);
    expect(await listed('act_retrying_001')).toMatchObject({ outcome: null, effect: null, settled_at_ms: null });
  });
});

/**
 * A time the summary names is data too: the console writes it in the viewer's zone (time-words.ts), which need not be
 * the daemon's; the summary keeps the terminal's ISO UTC (docs/operator.md: the terminal writes ISO UTC).
 */
describe('activity rows: a time the summary names', () => {
  const rig = readsOverJournal();
  const expires = Date.UTC(2026, 11, 3, 17, 28, 33, 825);

  it("carries a CARD_SHOWN's expiry as epoch ms beside the summary; every other row carries null", async () => {
    const path = actionPaths
      .httpApproved('act_card_time_01')
      .map((e) => (e.kind === 'CARD_SHOWN' ? { ...e, payload: { expires_at_ms: expires } } : e));
    await rig.journal.appendBatch(path);
    const events = (await rig.show('act_card_time_01')).events;
    const card = events.find((e) => e.kind === 'CARD_SHOWN');
    expect(card).toMatchObject({ expires_at_ms: expires, summary: 'expires at 2026-12-03T17:28:33.825Z' });
    const others = events.filter((e) => e.kind !== 'CARD_SHOWN');
    expect(others.length).toBeGreaterThan(0);
    expect(others.every((e) => e.expires_at_ms === null)).toBe(true);
    const page = brokerApiSchemas['activity.list'].output.parse(
      await rig.reads['activity.list']({ action_id: 'act_card_time_01' }),
    );
    expect(page.events.find((e) => e.kind === 'CARD_SHOWN')?.expires_at_ms).toBe(expires);
  });
});

/**
 * The Text filter matches the row as its reader sees it (event-row-text.ts): the console names its zone and finds a
 * card by the expiry it shows there; the terminal (no zone) by the ISO UTC it prints. Never by a time the reader's
 * row does not show.
 */
describe('activity.list text: a time matched as the reader sees it', () => {
  const rig = readsOverJournal();
  const expires = Date.UTC(2026, 11, 3, 17, 28, 33, 825);
  const cards = async (input: Record<string, unknown>): Promise<number[]> => {
    const parsed = brokerApiSchemas['activity.list'].input.parse(input);
    return brokerApiSchemas['activity.list'].output
      .parse(await rig.reads['activity.list'](parsed))
      .events.filter((e) => e.kind === 'CARD_SHOWN')
      .map((e) => e.expires_at_ms ?? 0);
  };

  it("finds a card by the local expiry the console shows in the viewer's zone, not by the UTC it does not show", async () => {
    const path = actionPaths
      .httpApproved('act_card_text_01')
      .map((e) => (e.kind === 'CARD_SHOWN' ? { ...e, payload: { expires_at_ms: expires } } : e));
    await rig.journal.appendBatch(path);
    // The console in Berlin shows "expires at 2026-12-03 18:28:33 CET".
    expect(await cards({ text: '18:28', zone: 'Europe/Berlin' })).toEqual([expires]);
    expect(await cards({ text: 'expires at 2026-12-03 18:28:33 cet', zone: 'Europe/Berlin' })).toEqual([expires]);
    expect(await cards({ text: '17:28', zone: 'Europe/Berlin' })).toEqual([]);
    expect(await cards({ text: 'T17:28:33.825Z', zone: 'Europe/Berlin' })).toEqual([]);
    // In New York the same card reads 12:28:33 GMT-5.
    expect(await cards({ text: '12:28:33 GMT-5', zone: 'America/New_York' })).toEqual([expires]);
    // What it matched and still shows: the kind, the action id.
    expect(await cards({ text: 'card_shown', zone: 'Europe/Berlin' })).toEqual([expires]);
    expect((await cards({ text: 'act_card_text_01', zone: 'Europe/Berlin' })).length).toBe(1);
    // The terminal names no zone and prints ISO UTC: it finds the card by that.
    expect(await cards({ text: 'T17:28:33.825Z' })).toEqual([expires]);
    expect(await cards({ text: '18:28' })).toEqual([]);
  });

  it('refuses a zone that is no time zone at the schema', async () => {
    const input = brokerApiSchemas['activity.list'].input;
    expect(input.safeParse({ text: 'x', zone: 'Mars/Olympus' }).success).toBe(false);
    expect(input.safeParse({ text: 'x', zone: '' }).success).toBe(false);
    expect(input.safeParse({ text: 'x', zone: 'UTC' }).success).toBe(true);
  });
});

/**
 * With the journal's writer thread committing, the operator reads wait for what is queued without holding the loop
 * (Journal.readCurrent): they never drain the thread (Atomics.wait on the loop's turn), and still see every event
 * appended before them.
 */
describe('operator reads over a journal whose batches go to the writer thread', () => {
  let temp: TempJournal | undefined;
  afterEach(async () => {
    vi.restoreAllMocks();
    await temp?.dispose();
    temp = undefined;
  });

  it('answer after what was queued before them commits, without draining the thread on the loop', async () => {
    temp = await openTempJournal({ writerThread: true, threadBatchEventsMin: 1 });
    const { journal } = temp;
    const reads = createOperatorReads(journal, { position: () => null, isConnected: () => false });
    // The action shown is known (its acceptance committed); the rest of its events are queued with 20 more actions.
    const path = actionPaths.httpNoApproval('act_thread_00000');
    await journal.appendBatch(path.slice(0, 2));
    const drain = vi.spyOn(WriterThread.prototype, 'drain');
    const ids = Array.from({ length: 20 }, (_, i) => `act_thread_${String(i + 1).padStart(5, '0')}`);
    const appended = [
      journal.appendBatch(path.slice(2)),
      ...ids.map((id) => journal.appendBatch(actionPaths.httpNoApproval(id))),
    ];
    const [shown, listed, sessions, activity] = await Promise.all([
      reads['actions.show']({ action_id: 'act_thread_00000' }),
      reads['actions.list']({ limit: 100 }),
      reads['sessions.list'](),
      reads['activity.list']({ limit: 500 }),
    ]);
    await Promise.all(appended);
    expect(drain).not.toHaveBeenCalled();
    expect(shown.events.map((e) => e.kind)).toEqual(path.map((e) => e.kind));
    expect(listed.actions).toHaveLength(21);
    expect(listed.as_of_seq).toBe(journal.stats().last_seq);
    expect(sessions.sessions).toEqual([]);
    expect(activity.events).toHaveLength(journal.stats().last_seq);
  });
});
