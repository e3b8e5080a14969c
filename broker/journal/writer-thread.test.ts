import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { verifyJournal } from '../audit/verify-journal.js';
import { isCodedError, type NewEvent } from '../contract/index.js';
import { actionPathNames, actionPaths, impossibleEvents } from '../testing/action-paths.js';
import { keyBinding, keyedAdmission } from '../testing/keyed-admission.js';
import { sha256Of } from '../testing/action-paths.js';
import { readSessionCounters, scanSessionCounts } from '../testing/session-counts.js';
import { inSession, sessionStartedEvent } from '../testing/session-events.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { writerBatchesInFlightMax, type Journal, type JournalOpenOptions } from './journal.js';
import { scanActionCounts, scanOutcomeCounts } from './read-snapshot.js';
import type { ActionRowWrite } from './journal-store.js';
import { JournalWriter, type WriteBatch, type WriterStart } from './journal-writer.js';
import { WriterThread } from './writer-thread.js';

const opened: TempJournal[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  for (const t of opened.splice(0)) await t.dispose();
});

async function tempJournal(
  options: Pick<JournalOpenOptions, 'writerThread' | 'threadBatchEventsMin' | 'writerThreadIdleMs'>,
): Promise<TempJournal> {
  const t = await openTempJournal(options);
  opened.push(t);
  return t;
}

/** How many batches were posted to the writer thread and not yet answered, at most, over the test. */
function watchInFlight(): { max: () => number; posted: () => number } {
  let now = 0;
  let max = 0;
  let posted = 0;
  const commit = WriterThread.prototype.commit;
  vi.spyOn(WriterThread.prototype, 'commit').mockImplementation(function (this: WriterThread, batch, base, done) {
    now += 1;
    posted += 1;
    max = Math.max(max, now);
    commit.call(this, batch, base, (error, ack) => {
      now -= 1;
      done(error, ack);
    });
  });
  return { max: () => max, posted: () => posted };
}

/** The observations the channels hold for the next commit (appendLater) rather than commit on their own. */
const heldKinds = new Set([
  'CREDENTIAL_AUTHORIZED',
  'REQUEST_SENT',
  'REMOTE_RESPONSE_STARTED',
  'REMOTE_RESPONSE_COMPLETE',
]);
const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Each action's outcomes as one line, sorted: which of two racing dispatchers wins a key is the interleaving's. */
function outcomeLines(outcomes: Map<string, string[]>): string[] {
  return [...outcomes.values()].map((list) => list.join(' ')).sort();
}

/**
 * 48 dispatchers, each driving its actions one append at a time, as the broker's callers do (the next append asked as
 * soon as the last answered): every action path, in a session or none, two dispatchers racing for one idempotency key
 * each round, and an impossible event now and then. Answers, per action, the kinds its appends recorded and how each
 * append ended; the journal is left open.
 */
async function dispatchers(journal: Journal, nowMs: number, rounds: number): Promise<Map<string, string[]>> {
  await journal.appendSession(sessionStartedEvent('ses_pipeline', 4343));
  const outcomes = new Map<string, string[]>();
  const record = (id: string, what: string): void => {
    const list = outcomes.get(id) ?? [];
    list.push(what);
    outcomes.set(id, list);
  };
  const run = async (d: number): Promise<void> => {
    for (let round = 0; round < rounds; round += 1) {
      const name = actionPathNames[(d + round) % actionPathNames.length] as (typeof actionPathNames)[number];
      const id = `act_p${String(d).padStart(3, '0')}r${String(round).padStart(3, '0')}`;
      const events: NewEvent[] =
        d % 8 < 2
          ? // Two dispatchers race for the same key each round: one binds it, the other is refused.
            keyedAdmission(id, keyBinding(sha256Of(d), nowMs, { key: `k-${Math.floor(d / 8)}-${round}` }))
          : inSession(actionPaths[name](id), d % 3 === 0 ? 'ses_pipeline' : null);
      // As the channels do: observations held for the next commit (appendLater), a turn let pass so that another
      // dispatcher's flush posts them, then the next append settles them (withHeld) in a batch planned over that one.
      const answers: Array<Promise<string>> = [];
      let held = false;
      for (const event of events) {
        const answer = (promise: Promise<{ event: { kind: string } }>): Promise<string> =>
          promise.then(
            (appended) => appended.event.kind,
            (error: unknown) => {
              if (!isCodedError(error)) throw error;
              return error.code;
            },
          );
        if (heldKinds.has(event.kind)) {
          answers.push(answer(journal.appendLater(event)));
          held = true;
          await nextTurn();
          continue;
        }
        // The second of two racing for a key asks a turn later: the first's binding is then in the batch in flight.
        if (d % 8 === 1 && event.kind === 'PREFLIGHT_VALIDATED') await nextTurn();
        const settled = answer(journal.append(event, undefined, held ? { withHeld: true } : undefined));
        held = false;
        answers.push(settled);
        const kind = await settled;
        if (kind !== event.kind) break;
      }
      for (const kind of await Promise.all(answers)) record(id, kind);
      if (d % 11 === 5) {
        for (const event of impossibleEvents(id)) {
          await journal.append(event).then(
            () => record(id, 'impossible accepted'),
            (error: unknown) => record(id, isCodedError(error) ? error.code : String(error)),
          );
        }
      }
    }
  };
  await Promise.all(Array.from({ length: 48 }, (_, d) => run(d)));
  return outcomes;
}

/** The tables' own answers a commit moves, read through another connection. */
function tablesOf(path: string): Record<string, unknown> {
  const db = new Database(path, { readonly: true });
  try {
    // Sorted without the action ids: which of two racing dispatchers won a key is the interleaving's.
    const actions = db
      .prepare(`SELECT stage, outcome, code, session_id FROM actions ORDER BY stage, outcome, code, session_id`)
      .all();
    const kinds = db
      .prepare(
        `SELECT kinds FROM (SELECT action_id, group_concat(kind, ' ') AS kinds FROM (SELECT * FROM events ORDER BY seq) GROUP BY action_id) ORDER BY kinds`,
      )
      .all();
    const keys = db.prepare(`SELECT count(*) AS n FROM idempotency_keys`).get();
    return { actions, kinds, keys, counters: { ...scanActionCounts(db) }, sessions: readSessionCounters(db) };
  } finally {
    db.close();
  }
}

describe('on the writer thread with batches pipelined (the loop plans the next while the thread writes one)', () => {
  it('48 dispatchers racing, refused and keyed, leave the same actions, events, keys and counters as the inline writer', async () => {
    const inline = await tempJournal({ writerThread: false });
    const inlineOutcomes = await dispatchers(inline.journal, inline.clock.nowMs(), 6);

    const inFlight = watchInFlight();
    const threaded = await tempJournal({ writerThread: true, threadBatchEventsMin: 1 });
    const threadedOutcomes = await dispatchers(threaded.journal, threaded.clock.nowMs(), 6);

    // Two batches were in flight at once: the second planned over the first before its ack.
    expect(inFlight.max()).toBe(writerBatchesInFlightMax);
    expect(inFlight.posted()).toBeGreaterThan(20);
    // Each action's appends ended the same way, whatever the interleaving of the other dispatchers.
    expect(outcomeLines(threadedOutcomes)).toEqual(outcomeLines(inlineOutcomes));
    const ended = new Set([...threadedOutcomes.values()].flat());
    for (const refusal of ['IDEMPOTENCY_MISMATCH', 'IMPOSSIBLE_TRANSITION']) expect(ended).toContain(refusal);

    for (const t of [inline, threaded]) {
      const scan = new Database(t.path, { readonly: true });
      try {
        // The counters each commit moved equal full scans of what was committed.
        expect(t.journal.actionCounts()).toEqual(scanActionCounts(scan));
        expect(t.journal.outcomeCounts().length).toBe(scanOutcomeCounts(scan).length);
        expect(readSessionCounters(scan)).toEqual(scanSessionCounts(scan));
      } finally {
        scan.close();
      }
    }
    expect(tablesOf(threaded.path)).toEqual(tablesOf(inline.path));
    await threaded.journal.close();
    expect(await verifyJournal({ dbPath: threaded.path })).toMatchObject({ ok: true });
  });
});

/**
 * One action's row written by the thread, then by the loop (two lone appends, inline), then by the thread again, with
 * columns going back to what the thread last wrote (throttledThenRetried: recorded as throttled, leased, dispatched
 * again: code, outcome, retry and recorded as before the throttle); filler of other actions makes the thread's batches.
 * Answers the row as the retry's dispatch left it.
 */
async function writersTakeTurnsOnOneRow(t: TempJournal): Promise<unknown> {
  const path = actionPaths.throttledThenRetried('act_turns_row');
  const filler = (n: number): Promise<unknown>[] =>
    actionPaths
      .httpNoApproval(`act_turns_fill_${n}`)
      .slice(0, 4)
      .map((event) => t.journal.append(event));
  await Promise.all([...path.slice(0, 7).map((event) => t.journal.append(event)), ...filler(1)]);
  for (const event of path.slice(7, 9)) {
    t.clock.advance(1_000);
    await t.journal.append(event);
  }
  t.clock.advance(1_000);
  await Promise.all([t.journal.append(path[9] as NewEvent), ...filler(2)]);
  const dispatchedAgain = t.reader().prepare(`SELECT * FROM actions WHERE action_id = 'act_turns_row'`).get();
  await Promise.all([...path.slice(10).map((event) => t.journal.append(event)), ...filler(3)]);
  return dispatchedAgain;
}

/** The actions rows and every counter a commit moves, read through another connection. */
function rowsAndCounters(path: string): Record<string, unknown> {
  const db = new Database(path, { readonly: true });
  try {
    const all = (sql: string): unknown[] => db.prepare(sql).all();
    return {
      actions: all(`SELECT * FROM actions ORDER BY action_id`),
      action_counters: all(
        `SELECT * FROM action_counters ORDER BY phase, outcome, code, decision, dispatched, in_flight`,
      ),
      outcome_minutes: all(`SELECT * FROM outcome_minutes ORDER BY minute, phase, outcome, code, decision, dispatched`),
      scanned: { ...scanActionCounts(db) },
    };
  } finally {
    db.close();
  }
}

describe('on the writer thread, an action row the batch names by seq alone (ActionRowWrite.writtenSeq)', () => {
  it("the loop wrote it since the thread did: every column that moved since the loop's write is written, and the counters move from it", async () => {
    const inline = await tempJournal({ writerThread: false });
    const inlineRow = await writersTakeTurnsOnOneRow(inline);

    const toThread: WriteBatch[] = [];
    const commit = WriterThread.prototype.commit;
    vi.spyOn(WriterThread.prototype, 'commit').mockImplementation(function (this: WriterThread, batch, base, done) {
      toThread.push(batch);
      commit.call(this, batch, base, done);
    });
    const onLoop = vi.spyOn(JournalWriter.prototype, 'commit');
    const threaded = await tempJournal({ writerThread: true, threadBatchEventsMin: 4 });
    const threadedRow = await writersTakeTurnsOnOneRow(threaded);

    // The thread wrote the row, the loop twice, then the thread again, naming the row by the seq of the loop's write.
    const rowsOf = (batches: readonly WriteBatch[]): ActionRowWrite[] =>
      batches.flatMap((batch) => batch.actions.filter((row) => row.state.action_id === 'act_turns_row'));
    const [first, again] = rowsOf(toThread);
    expect(rowsOf(toThread)).toHaveLength(3);
    expect(rowsOf(onLoop.mock.calls.map(([batch]) => batch))).toHaveLength(2);
    expect(Object.keys(first ?? {}).sort()).toEqual(['state', 'timeline']);
    expect(Object.keys(again ?? {}).sort()).toEqual(['state', 'timeline', 'writtenSeq']);
    const leased = rowsOf(onLoop.mock.calls.map(([batch]) => batch)).at(-1)?.state.last_seq;
    expect(again?.writtenSeq).toBe(leased);
    expect(again?.writtenSeq).not.toBe(first?.state.last_seq);
    // Back to what the thread last wrote, not to what the loop left.
    expect(again?.state).toMatchObject({ code: null, recorded: false, retry: null, outcome: 'unknown' });

    expect(threadedRow).toEqual(inlineRow);
    expect(threadedRow).toMatchObject({ code: null, recorded: 0, retry: null, outcome: 'unknown' });
    const written = rowsAndCounters(threaded.path);
    expect(written).toEqual(rowsAndCounters(inline.path));
    expect(threaded.journal.actionCounts()).toEqual(written.scanned);
  });
});

describe('on the writer thread, a refusal planned over a batch still in flight', () => {
  it('answers only once that batch committed: when it fails instead, the refused caller hears JOURNAL_UNAVAILABLE, not a lost race', async () => {
    // An action at its card; one batch of 100-odd events approves it, its last event failing to seal on the thread.
    const t = await openTempJournal({
      writerThread: true,
      threadBatchEventsMin: 1,
      sealFault: { atSeq: 120, message: 'sealing failed (injected)' },
    });
    opened.push(t);
    const [accepted, validated, card, approved] = actionPaths.httpApproved('act_pipe_card_1');
    for (const event of [accepted, validated, card]) await t.journal.append(event as NewEvent);
    const before = t.journal.stats().last_seq;
    const filler = Array.from({ length: 120 - before - 1 }, (_, i) =>
      t.journal.append(actionPaths.httpNoApproval(`act_pipe_fill_${String(i).padStart(4, '0')}`)[0] as NewEvent),
    );
    const approval = t.journal.append(approved as NewEvent);
    // The batch is posted at the next turn; the rejection is planned over it (approved there) and refused.
    await nextTurn();
    const rejection = t.journal.append(actionPaths.rejectedByPerson('act_pipe_card_1')[3] as NewEvent);
    await expect(approval).rejects.toMatchObject({ code: 'JOURNAL_UNAVAILABLE' });
    await expect(rejection).rejects.toMatchObject({ code: 'JOURNAL_UNAVAILABLE' });
    // The batches before the failing one committed; the failing one and everything after it did not.
    expect((await Promise.allSettled(filler)).at(-1)?.status).toBe('rejected');
    expect(t.journal.stats().state).toBe('failed');
  });
});

describe('when the writer thread dies', () => {
  it('the batch posted to it rejects JOURNAL_UNAVAILABLE, the journal fails closed, and close still ends', async () => {
    const t = await openTempJournal({ writerThread: true, threadBatchEventsMin: 1 });
    const [accepted, validated] = actionPaths.httpNoApproval('act_pipe_dies_1');
    await t.journal.append(accepted as NewEvent);
    // The thread is private to the journal: reached here only to end it as a crash in it would.
    const thread = (t.journal as unknown as { thread: { worker: { terminate(): Promise<number> } } }).thread;
    const posted = t.journal.append(validated as NewEvent);
    const ended = thread.worker.terminate();
    await expect(posted).rejects.toMatchObject({ code: 'JOURNAL_UNAVAILABLE' });
    await ended;
    expect(t.journal.stats().state).toBe('failed');
    await expect(t.journal.append(validated as NewEvent)).rejects.toMatchObject({ code: 'JOURNAL_UNAVAILABLE' });
    // What it committed before it died is in the file.
    expect(t.reader().prepare(`SELECT kind FROM events WHERE action_id = ?`).all('act_pipe_dies_1')).toEqual([
      { kind: 'ACTION_ACCEPTED' },
    ]);
    await t.dispose();
  });
});

describe('when the writer thread dies while idle', () => {
  it('the journal fails closed at once, before any append meets it, and close still records the failed run', async () => {
    const t = await openTempJournal({ writerThread: true, threadBatchEventsMin: 1 });
    const [accepted, validated] = actionPaths.httpNoApproval('act_idle_dies_1');
    await t.journal.append(accepted as NewEvent);
    const thread = (t.journal as unknown as { thread: { worker: { terminate(): Promise<number> } } }).thread;
    await thread.worker.terminate();
    // Nothing was in flight: only the thread's 'exit' can tell the journal.
    const deadline = performance.now() + 5_000;
    while (t.journal.stats().state === 'open' && performance.now() < deadline) await nextTurn();
    expect(t.journal.stats().state).toBe('failed');
    await expect(t.journal.append(validated as NewEvent)).rejects.toMatchObject({ code: 'JOURNAL_UNAVAILABLE' });
    await t.journal.close();
    expect(t.reader().prepare(`SELECT kind FROM events WHERE action_id = ?`).all('act_idle_dies_1')).toEqual([
      { kind: 'ACTION_ACCEPTED' },
    ]);
    expect(await verifyJournal({ dbPath: t.path })).toMatchObject({ ok: true });
    await t.dispose();
  });
});

describe("an 'on-demand' writer thread (the daemon's)", () => {
  it('starts with the first batch for it (which commits inline meanwhile), ends after writerThreadIdleMs without one, and starts again', async () => {
    const launched = vi.spyOn(WriterThread, 'launch');
    const closed = vi.spyOn(WriterThread.prototype, 'close');
    const posted = watchInFlight();
    const t = await tempJournal({ writerThread: 'on-demand', threadBatchEventsMin: 1, writerThreadIdleMs: 100 });
    expect(launched).not.toHaveBeenCalled();
    const appendUntilPosted = async (prefix: string): Promise<void> => {
      const before = posted.posted();
      // Inline until the thread has opened (a few hundred ms, the machine's load permitting), then to the thread.
      const deadline = performance.now() + 20_000;
      for (let i = 0; posted.posted() === before && performance.now() < deadline; i += 1)
        await t.journal.append(actionPaths.httpNoApproval(`${prefix}${String(i).padStart(6, '0')}`)[0] as NewEvent);
      expect(posted.posted()).toBeGreaterThan(before);
    };
    await appendUntilPosted('act_demand_a_');
    expect(launched).toHaveBeenCalledTimes(1);
    expect(closed).not.toHaveBeenCalled();
    // Idle: the thread ends.
    const deadline = performance.now() + 5_000;
    while (closed.mock.calls.length === 0 && performance.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(closed).toHaveBeenCalledTimes(1);
    // Load again: a new thread.
    await appendUntilPosted('act_demand_b_');
    expect(launched).toHaveBeenCalledTimes(2);
    await t.journal.close();
    expect(await verifyJournal({ dbPath: t.path })).toMatchObject({ ok: true });
  });

  it('that cannot start (its SQLite module does not load) leaves the journal committing inline, and stats() says why without a path', async () => {
    const launched = vi.spyOn(WriterThread, 'launch');
    const posted = watchInFlight();
    const t = await openTempJournal({
      writerThread: 'on-demand',
      threadBatchEventsMin: 1,
      // A build whose native module is missing: the worker's `new Database` fails to load it, as a broken install would.
      writerThreadNativeBinding: join(tmpdir(), `postern-no-binding-${process.pid}`, 'better_sqlite3.node'),
    });
    opened.push(t);
    expect(t.journal.stats().writer_thread).toEqual({ state: 'inline' });
    // The first batch asks for the thread and commits inline while it opens; the appends go on until the start failed.
    const deadline = performance.now() + 20_000;
    let i = 0;
    for (; t.journal.stats().writer_thread.state !== 'failed_to_start' && performance.now() < deadline; i += 1) {
      await t.journal.append(actionPaths.httpNoApproval(`act_nostart_${String(i).padStart(6, '0')}`)[0] as NewEvent);
      if (i === 0) expect(t.journal.stats().writer_thread).toEqual({ state: 'starting' });
    }
    const stats = t.journal.stats();
    expect(stats.writer_thread).toEqual({
      state: 'failed_to_start',
      error: { code: 'MODULE_NOT_FOUND', detail: expect.any(String) as unknown, at_ms: t.clock.nowMs() },
    });
    // The message's first line, the native module's path (which says where Postern is installed) left out.
    const detail = stats.writer_thread.error?.detail ?? '';
    expect(detail).toMatch(/^Cannot find module '<path>'$/);
    expect(stats.state).toBe('open');
    // Batches still commit, inline: a large one, which would have gone to the thread, and a lone append.
    const batch = await t.journal.appendBatch(actionPaths.httpNoApproval('act_nostart_batch').slice(0, 3));
    const lone = await t.journal.append(actionPaths.httpNoApproval('act_nostart_lone')[0] as NewEvent);
    expect(lone.event.seq).toBe(i + 4);
    expect(batch.map((a) => a.event.seq)).toEqual([i + 1, i + 2, i + 3]);
    expect(t.journal.stats()).toMatchObject({ state: 'open', events: i + 4, commits: i + 2 });
    expect(t.reader().prepare(`SELECT count(*) AS n FROM events`).get()).toEqual({ n: i + 4 });
    // Never posted to, and not started again.
    expect(posted.posted()).toBe(0);
    expect(launched).toHaveBeenCalledTimes(1);
    expect(t.journal.stats().writer_thread.state).toBe('failed_to_start');
    await t.journal.close();
    expect(await verifyJournal({ dbPath: t.path })).toMatchObject({ ok: true });
  });
});

describe('WriterThread.launch', () => {
  it('answers a thread that cannot even be constructed (data a worker cannot take) as a rejection, never a throw into the flush', async () => {
    const t = await tempJournal({ writerThread: false });
    const launching = (): Promise<WriterThread> =>
      WriterThread.launch(
        {
          dbPath: t.path,
          platform: process.platform,
          syncMode: 'behind',
          busyTimeoutMs: 1_000,
          maxPageCount: 1_000,
          // A function cannot be cloned into the worker's data: `new Worker` throws at once.
          start: { sealer: () => undefined } as unknown as WriterStart,
        },
        () => undefined,
      );
    let answer: Promise<WriterThread> | undefined;
    expect(() => (answer = launching())).not.toThrow();
    await expect(answer).rejects.toMatchObject({ name: 'DataCloneError' });
  });
});
