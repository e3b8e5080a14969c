import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { isCodedError, type NewEvent } from '../contract/index.js';
import { foldMetrics, type OutcomeCountRow } from '../core/index.js';
import { actionPathNames, actionPaths, impossibleEvents, type ActionPathName } from '../testing/action-paths.js';
import { rateOf } from '../testing/rate-of.js';
import { readSessionCounters, scanSessionCounts } from '../testing/session-counts.js';
import { inSession } from '../testing/session-events.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { Journal } from './journal.js';
import { readJournalSnapshot, scanActionCounts, scanOutcomeCounts, scanRestingActionCounts } from './read-snapshot.js';

const minuteMs = 60_000;

const opened: TempJournal[] = [];
const readers: Database.Database[] = [];
afterEach(async () => {
  for (const r of readers.splice(0)) r.close();
  for (const t of opened.splice(0)) await t.dispose();
});

async function tempJournal(): Promise<TempJournal> {
  const t = await openTempJournal();
  opened.push(t);
  return t;
}

function reader(path: string): Database.Database {
  const db = new Database(path, { readonly: true, fileMustExist: true });
  readers.push(db);
  return db;
}

function sorted(rows: readonly OutcomeCountRow[]): OutcomeCountRow[] {
  const id = (r: OutcomeCountRow): string =>
    JSON.stringify([r.phase, r.outcome, r.code, r.decision, r.dispatched, r.minute, r.in_flight ?? 0]);
  return rows.map((r) => ({ ...r })).sort((a, b) => (id(a) < id(b) ? -1 : 1));
}

/** The counters' answers against the full-scan queries they replaced, over the same committed rows. */
function expectCountersEqualScan(journal: Journal, scan: Database.Database): void {
  const rows = journal.outcomeCounts();
  const scanned = scanOutcomeCounts(scan);
  expect(sorted(rows)).toEqual(sorted(scanned));
  expect(foldMetrics(rows)).toEqual(foldMetrics(scanned));
  expect(journal.actionCounts()).toEqual(scanActionCounts(scan));
  expect(readJournalSnapshot(dirname(scan.name)).actions).toEqual(scanRestingActionCounts(scan));
  // sessions.list's figures (migration 017), moved by the same writes: the scripts' actions in two sessions or none.
  expect(readSessionCounters(scan)).toEqual(scanSessionCounts(scan));
}

const spec = fc.record({
  path: fc.constantFrom(...actionPathNames),
  // How many of its events the script appends before it stops (undefined: all), and the wave it starts in.
  cut: fc.option(fc.integer({ min: 1, max: 15 }), { nil: undefined }),
  start: fc.integer({ min: 0, max: 6 }),
  // The agent session that asked for it (null: one no session asked for, e.g. a person's retry).
  session: fc.constantFrom('ses_test', 'ses_other', null),
});

/** One wave: every started, unfinished script appends its next event at once (one group commit), plus extras. */
async function wave(journal: Journal, events: readonly NewEvent[]): Promise<void> {
  const settled = await Promise.allSettled(events.map((event) => journal.append(event)));
  for (const s of settled) if (s.status === 'rejected' && !isCodedError(s.reason)) throw s.reason;
}

describe('when random mixes of action paths run for hours of event time, with refusals and a restart', () => {
  it('after every commit the counters (status, metrics, sessions) answer exactly what full scans of the actions table answer', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(spec, { minLength: 1, maxLength: 8 }),
        // Between waves the clock moves up to 25 minutes, so the rate's hour rolls and its minutes are pruned.
        fc.array(fc.integer({ min: 0, max: 25 * minuteMs }), { minLength: 22, maxLength: 22 }),
        fc.integer({ min: 0, max: 21 }),
        fc.boolean(),
        async (specs, advances, restartWave, injectImpossible) => {
          const live = await tempJournal();
          let journal = live.journal;
          const scan = reader(live.path);
          const scripts = specs.map(({ path, cut, session }, i) =>
            inSession(actionPaths[path as ActionPathName](`act_${path.slice(0, 20)}_${i}`).slice(0, cut), session),
          );
          const firstId = scripts[0]?.[0]?.action_id ?? 'act_none';
          for (const [w, advanceMs] of advances.entries()) {
            if (w === restartWave) {
              await journal.close();
              // Recovery at open classifies what was left in flight, through the same counted writes.
              journal = await Journal.open({ path: live.path, clock: live.clock, vault: live.vault });
              opened.push({ ...live, journal, dispose: () => journal.close() });
              expectCountersEqualScan(journal, scan);
            }
            const events = scripts.flatMap((s, i) => {
              const next = w - (specs[i]?.start ?? 0);
              return next < 0 ? [] : s.slice(next, next + 1);
            });
            // Refused in the same group commit as accepted events, or alone (a commit that rolls back).
            const extra = injectImpossible ? impossibleEvents(firstId).slice(w % 3, (w % 3) + 1) : [];
            await wave(journal, [...events, ...extra]);
            expectCountersEqualScan(journal, scan);
            live.clock.advance(advanceMs);
          }
        },
      ),
      { numRuns: 40 },
    );
  });
});

describe('when the wall clock steps back and forth between commits', () => {
  it('status and every count of metrics but the rate still equal the scans exactly', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(spec, { minLength: 1, maxLength: 6 }),
        // Steps of up to two hours either way: the rate follows event time, which may now go backwards.
        fc.array(fc.integer({ min: -120 * minuteMs, max: 120 * minuteMs }), { minLength: 16, maxLength: 16 }),
        async (specs, steps) => {
          const t = await tempJournal();
          const scan = reader(t.path);
          const scripts = specs.map(({ path, cut }, i) =>
            actionPaths[path as ActionPathName](`act_${path.slice(0, 20)}_${i}`).slice(0, cut),
          );
          for (const [w, stepMs] of steps.entries()) {
            await wave(
              t.journal,
              scripts.flatMap((s) => s.slice(w, w + 1)),
            );
            const { rate: _counted, ...counted } = foldMetrics(t.journal.outcomeCounts());
            const { rate: _scanned, ...scanned } = foldMetrics(scanOutcomeCounts(scan));
            expect(counted).toEqual(scanned);
            expect(t.journal.actionCounts()).toEqual(scanActionCounts(scan));
            t.clock.set(t.clock.nowMs() + stepMs);
          }
        },
      ),
      { numRuns: 20 },
    );
  });
});

describe('when postern status reads a data directory beside the writer', () => {
  it('its counts come from the counters and the audit tree, and equal the scans', async () => {
    const t = await tempJournal();
    for (const [i, name] of actionPathNames.entries()) {
      const script = actionPaths[name](`act_snapshot_${i}`);
      await t.journal.appendBatch(script.slice(0, i % 3 === 0 ? 3 : undefined));
      t.clock.advance(7 * minuteMs);
    }
    const snapshot = readJournalSnapshot(t.dir.path);
    const scan = reader(t.path);
    const events = scan.prepare<[], { n: number }>('SELECT count(*) AS n FROM events').get()?.n;
    expect(snapshot).toMatchObject({ exists: true, events, last_seq: events, actions: scanRestingActionCounts(scan) });
    expect(snapshot.actions.total).toBe(actionPathNames.length);
    expect(snapshot.actions.in_flight).toBeGreaterThan(0);
  });
});

describe('when postern status reads a journal no broker is running', () => {
  it('counts a dispatched action with no outcome recorded as unknown, never in flight', async () => {
    const t = await tempJournal();
    const id = 'act_cut_at_request_sent';
    // Accepted, validated, authorized, dispatched, sent: then the broker stopped (cut) or crashed.
    const script = actionPaths.httpNoApproval(id);
    await t.journal.appendBatch(script.slice(0, script.findIndex((e) => e.kind === 'REQUEST_SENT') + 1));
    // One waiting before dispatch: still open (the next start closes it not_attempted), not unknown.
    await t.journal.appendBatch(actionPaths.httpApproved('act_waiting_for_a_card').slice(0, 3));
    await t.journal.close();
    const { actions } = readJournalSnapshot(t.dir.path);
    expect(actions).toEqual({ total: 2, in_flight: 1, unknown: 1, dispatched_unrecorded: 1 });
    // A journal no broker migrated to the counters (schema 11) is scanned: the same answer.
    expect(scanRestingActionCounts(reader(t.path))).toEqual(actions);
  });
});

describe('when a dispatched action is still running (its row says unknown provisionally)', () => {
  it('the rate leaves it out until it settles, then counts it under its outcome in the minute it settled; a real unknown counts unknown', async () => {
    const t = await tempJournal();
    const scan = reader(t.path);
    const dispatchMinute = Math.trunc(t.clock.nowMs() / minuteMs);
    // One that really ends unknown (the caller cancelled after the request left), in the same minute.
    await t.journal.appendBatch(actionPaths.callerCancelledAfterDispatch('act_really_unknown'));
    const running = 'act_running_for_minutes';
    const script = actionPaths.httpNoApproval(running);
    const sentAt = script.findIndex((e) => e.kind === 'REQUEST_SENT') + 1;
    await t.journal.appendBatch(script.slice(0, sentAt));
    expect(t.journal.getAction(running)).toMatchObject({ outcome: 'unknown', recorded: false });

    // While it runs: open, and in no minute of the rate — only the real unknown is counted unknown.
    expect(foldMetrics(t.journal.outcomeCounts())).toMatchObject({ open: 1, total: 2 });
    expect(rateOf(t.journal.outcomeCounts())).toEqual({ unknown: { [dispatchMinute]: 1 } });
    expectCountersEqualScan(t.journal, scan);

    // Three minutes later it settles committed: counted there, under committed, and never under unknown.
    t.clock.advance(3 * minuteMs);
    await t.journal.appendBatch(script.slice(sentAt));
    expect(t.journal.getAction(running)).toMatchObject({ outcome: 'committed', recorded: true });
    expect(foldMetrics(t.journal.outcomeCounts())).toMatchObject({ open: 0, total: 2 });
    expect(rateOf(t.journal.outcomeCounts())).toEqual({
      committed: { [dispatchMinute + 3]: 1 },
      unknown: { [dispatchMinute]: 1 },
    });
    expectCountersEqualScan(t.journal, scan);
  });

  it('when it runs in a later minute than the last settled action, the hour ends at its minute: settled minutes more than an hour before it are out, the rest counted where they settled', async () => {
    const t = await tempJournal();
    const scan = reader(t.path);
    const first = Math.trunc(t.clock.nowMs() / minuteMs);
    // One settled action a minute for 61 minutes (first .. first + 60), then a dispatch 30 minutes later that runs on.
    for (let i = 0; i <= 60; i++) {
      await t.journal.appendBatch(actionPaths.httpNoApproval(`act_settled_${i}`));
      t.clock.advance(minuteMs);
    }
    t.clock.set((first + 90) * minuteMs);
    const dispatchMinute = first + 90;
    const running = 'act_running_after_the_rest';
    const script = actionPaths.httpNoApproval(running);
    const sentAt = script.findIndex((e) => e.kind === 'REQUEST_SENT') + 1;
    await t.journal.appendBatch(script.slice(0, sentAt));
    expect(t.journal.getAction(running)).toMatchObject({ outcome: 'unknown', recorded: false });

    /** A scan of the settled actions in the hour ending with `last` (inclusive): how many settled in each minute. */
    const settledIn = (last: number): Record<number, number> =>
      Object.fromEntries(
        scan
          .prepare<[number, number], { minute: number; n: number }>(
            `SELECT updated_at_ms / 60000 AS minute, count(*) AS n FROM actions
             WHERE recorded = 1 AND updated_at_ms / 60000 > ? - 60 AND updated_at_ms / 60000 <= ? GROUP BY 1`,
          )
          .all(last, last)
          .map((r) => [r.minute, r.n]),
      );
    const everyMinute = (from: number, to: number): Record<number, number> =>
      Object.fromEntries(Array.from({ length: to - from + 1 }, (_, i) => [from + i, 1]));

    // The hour ends with the running action's minute (docs/operator.md): first + 31 .. first + 90.
    const { rate, open } = foldMetrics(t.journal.outcomeCounts());
    expect(open).toBe(1);
    expect(rate.until_ms).toBe((dispatchMinute + 1) * minuteMs);
    const shown = settledIn(dispatchMinute);
    expect(shown).toEqual(everyMinute(first + 31, first + 60));
    expect(rateOf(t.journal.outcomeCounts())).toEqual({ committed: shown });
    expectCountersEqualScan(t.journal, scan);

    // It settles two minutes on: the hour moves with it, and it counts there, once.
    t.clock.advance(2 * minuteMs);
    await t.journal.appendBatch(script.slice(sentAt));
    const after = foldMetrics(t.journal.outcomeCounts()).rate;
    expect(after.until_ms).toBe((dispatchMinute + 3) * minuteMs);
    const shownAfter = settledIn(dispatchMinute + 2);
    expect(shownAfter).toEqual({ ...everyMinute(first + 33, first + 60), [dispatchMinute + 2]: 1 });
    expect(rateOf(t.journal.outcomeCounts())).toEqual({ committed: shownAfter });
    expectCountersEqualScan(t.journal, scan);
  });

  it('one a stopped broker left dispatched is counted once, in the minute the next start records it unknown', async () => {
    const t = await tempJournal();
    const dispatchMinute = Math.trunc(t.clock.nowMs() / minuteMs);
    const script = actionPaths.httpNoApproval('act_cut_while_running');
    await t.journal.appendBatch(script.slice(0, script.findIndex((e) => e.kind === 'REQUEST_SENT') + 1));
    expect(rateOf(t.journal.outcomeCounts())).toEqual({});
    await t.journal.close();
    t.clock.advance(5 * minuteMs);
    const reopened = await Journal.open({ path: t.path, clock: t.clock, vault: t.vault });
    try {
      expect(reopened.getAction('act_cut_while_running')).toMatchObject({ outcome: 'unknown', recorded: true });
      expect(rateOf(reopened.outcomeCounts())).toEqual({ unknown: { [dispatchMinute + 5]: 1 } });
      expectCountersEqualScan(reopened, reader(t.path));
    } finally {
      await reopened.close();
    }
  });
});

describe('when a rate key has actions running and settled, inside the hour and before it', () => {
  it('every row metrics folds counts at least one action, and no pair or code is listed at zero', async () => {
    const t = await tempJournal();
    const scan = reader(t.path);
    // Per rate key, a row per minute inside the hour and a rest row for the minutes before it: the settled actions'
    // (committed) and the running ones' (in flight, apart), each kept to what its own minute rows leave.
    const startRunning = async (id: string): Promise<void> => {
      const script = actionPaths.httpNoApproval(id);
      await t.journal.appendBatch(script.slice(0, script.findIndex((e) => e.kind === 'REQUEST_SENT') + 1));
    };
    await startRunning('act_running_before_the_hour');
    await t.journal.appendBatch(actionPaths.httpNoApproval('act_settled_before_the_hour'));
    t.clock.advance(90 * minuteMs);
    await startRunning('act_running_in_the_hour');
    await t.journal.appendBatch(actionPaths.httpNoApproval('act_settled_in_the_hour'));
    await t.journal.appendBatch(actionPaths.callerCancelledAfterDispatch('act_unknown_in_the_hour'));

    const rows = t.journal.outcomeCounts();
    for (const row of rows) expect(row.n, JSON.stringify(row)).toBeGreaterThan(0);
    const rest = rows.filter((r) => r.minute === null).map((r) => ({ outcome: r.outcome, in_flight: r.in_flight }));
    expect(rest).toEqual(
      expect.arrayContaining([
        { outcome: 'committed', in_flight: undefined },
        { outcome: 'unknown', in_flight: 1 },
      ]),
    );
    expect(foldMetrics(rows)).toMatchObject({
      open: 2,
      total: 5,
      by_phase_outcome: [
        { phase: 'remote_execution', outcome: 'committed', count: 2 },
        { phase: 'remote_execution', outcome: 'unknown', count: 1 },
      ],
      by_code: [{ code: 'CALLER_CANCELLED', count: 1 }],
    });
    expectCountersEqualScan(t.journal, scan);
  });
});
