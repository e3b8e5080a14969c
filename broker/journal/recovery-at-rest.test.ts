import Database from 'better-sqlite3';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { type ActionState, type JournalEvent, type NewEvent } from '../contract/index.js';
import { actionPathNames, actionPaths, reconciledByLookup } from '../testing/action-paths.js';
import {
  closedNeverSent,
  copyActionRow,
  readsCommitted,
  rewriteActionRow,
  writeActionRowBack,
  type ActionRow,
} from '../testing/action-rows.js';
import type { AuditHeaderFields } from '../core/audit-record.js';
import { appendForgedEventRow } from '../testing/forged-event-row.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { Journal, type ActionRowRefuted } from './journal.js';
import { JournalStore } from './journal-store.js';

const opened: TempJournal[] = [];
afterEach(async () => {
  for (const t of opened.splice(0)) await t.dispose();
});

interface Replayed {
  readonly journal: Journal;
  readonly vault: TempJournal['vault'];
  readonly refuted: ActionRowRefuted[];
  /** The last seq the crashed run wrote: what recovery appends comes after it. */
  readonly lastSeq: number;
}

/**
 * One broker run appends `events` of one action and stops (a crash: nothing after the last event); the row as it stood
 * after the first `copyAfter(open, all)` events is written back while no broker runs, where `open` lists the prefix
 * lengths after which the row read open (no outcome recorded yet) and `all` every prefix length; the next run opens
 * the file with the vault locked, as a daemon starts.
 */
async function replayedRowRun(
  id: string,
  events: readonly NewEvent[],
  copyAfter: (open: readonly number[], all: readonly number[]) => number | undefined,
): Promise<Replayed> {
  const t = await openTempJournal();
  opened.push(t);
  const copies = new Map<number, ActionRow>();
  for (const [i, event] of events.entries()) {
    await t.journal.append(event);
    copies.set(i + 1, copyActionRow(t.path, id));
  }
  const lastSeq = t.journal.stats().last_seq;
  await t.journal.close();
  const open = [...copies].filter(([, row]) => row['outcome'] === null).map(([n]) => n);
  const chosen = copyAfter(open, [...copies.keys()]);
  if (chosen !== undefined) writeActionRowBack(t.path, copies.get(chosen) as ActionRow);

  const { journal, refuted } = await reopenLocked(t);
  return { journal, vault: t.vault, refuted, lastSeq };
}

/** The next broker run on `t`'s file, started with the vault locked (as a daemon starts), telling refuted rows. */
async function reopenLocked(t: TempJournal): Promise<{ journal: Journal; refuted: ActionRowRefuted[] }> {
  const refuted: ActionRowRefuted[] = [];
  t.vault.lock();
  const journal = await Journal.open({
    path: t.path,
    clock: t.clock,
    vault: t.vault,
    onActionRowRefuted: (report) => refuted.push(report),
  });
  opened.push({ ...t, journal, dispose: () => journal.close() });
  return { journal, refuted };
}

/** What recovery appended for the action after the crashed run's last event (at open, or at the unlock). */
function recoveredAfter(journal: Journal, id: string, lastSeq: number): JournalEvent[] {
  // From the crashed run's end on: what this run wrote opens with this run's key, locked or not.
  return [...journal.events(lastSeq + 1)].filter((event) => event.action_id === id);
}

/** The next commits (recoverHeld appends through the normal path): what is queued is durable once this returns. */
async function settle(journal: Journal): Promise<void> {
  await journal.append({
    kind: 'ACTION_ACCEPTED',
    action_id: 'act_marker_0001',
    session_id: 'ses_test',
    lane: 'lane-z',
    payload: {
      channel: 'http',
      target: 'route:x GET /',
      request_fingerprint: `sha256:${'0'.repeat(64)}`,
      approval: 'none',
      idempotent: true,
    },
  } as NewEvent);
}

const dispatchAt = (events: readonly NewEvent[]): number => events.findIndex((e) => e.kind === 'DISPATCH_STARTED');

const person = { kind: 'person', id: 'ann' } as const;

/** The action blocks lane-a, and is not wedged there: a person abandons it and the lane is free again. */
async function expectPersonReleasesLane(journal: Journal, id: string): Promise<void> {
  expect(journal.listLane('lane-a').map((s) => s.action_id)).toEqual([id]);
  await journal.append({ kind: 'ABANDONED', action_id: id, payload: { actor: person, reason: 'checked by hand' } });
  expect(journal.listLane('lane-a')).toEqual([]);
}

/**
 * A held action while the vault is locked: its ticket stands in lane-a and a person's `decision` on it is refused, never
 * folded over the refuted row; then the vault unlocks, what the unlock appends commits, and nothing is held any more.
 */
async function heldUntilTheUnlock(
  journal: Journal,
  vault: TempJournal['vault'],
  id: string,
  decision: 'CANCELLED' | 'ABANDONED',
): Promise<void> {
  expect(journal.listLane('lane-a').map((s) => s.action_id)).toEqual([id]);
  await expect(
    journal.append({ kind: decision, action_id: id, payload: { actor: person, reason: 'stuck' } } as NewEvent),
  ).rejects.toThrow(/its row was found rewritten at this start/);
  vault.unlock();
  await settle(journal);
  expect(journal.heldActions()).toEqual([]);
}

describe("when an action's row is written back to a copy from before its DISPATCH_STARTED while no broker runs (THREAT-MODEL)", () => {
  it('recovery holds it (no not_attempted, its lane blocked, nothing folded over the row) and says which row the log refutes; at the unlock its own events decide: unknown', async () => {
    const id = 'act_replayed_0001';
    const path = actionPaths.httpApproved(id);
    const dispatch = dispatchAt(path);
    // Crashed just after DISPATCH_STARTED was durable; the row copied when the credential was authorized.
    const { journal, vault, refuted, lastSeq } = await replayedRowRun(id, path.slice(0, dispatch + 1), () => dispatch);

    // The premise: the row recovery read said the action had not been dispatched.
    expect(refuted).toEqual([{ action_id: id, row_stage: 'credential_authorized', log_holds: 'DISPATCH_STARTED' }]);
    expect(recoveredAfter(journal, id, lastSeq)).toEqual([]);
    expect(journal.heldActions()).toEqual([id]);
    // Its ticket still holds the lane (the next write on lane-a waits), and no decision is folded over the refuted row
    // while the action's own events cannot be read.
    await heldUntilTheUnlock(journal, vault, id, 'CANCELLED');
    const recovered = recoveredAfter(journal, id, lastSeq);
    expect(recovered.map((e) => [e.kind, e.classification?.outcome, e.classification?.outcome_basis])).toEqual([
      ['OUTCOME_RECORDED', 'unknown', 'broker_restart_after_dispatch'],
    ]);
    // Folded over its own events (attempt 1 dispatched), so the row, memory and the sealed fold agree.
    const sealed = journal.sealedAction(id) as ActionState;
    expect(sealed).toMatchObject({ outcome: 'unknown', recorded: true, phase: 'remote_execution' });
    expect(sealed.attempts.map((a) => a.n)).toEqual([1]);
    expect(journal.getAction(id)).toEqual(sealed);
    expect(journal.laneHeads().heads.get('lane-a')).toBe(sealed.ticket);
  });

  it('one the log had settled after its dispatch gets nothing appended at the unlock, and its lane is released', async () => {
    const id = 'act_settled_0001';
    const path = actionPaths.httpNoApproval(id);
    const { journal, vault, refuted, lastSeq } = await replayedRowRun(id, path, () => dispatchAt(path));
    expect(refuted.map((r) => r.action_id)).toEqual([id]);
    expect(journal.listLane('lane-a').map((s) => s.action_id)).toEqual([id]);
    const heldRecovered: string[][] = [];
    journal.onHeldRecovered((ids) => heldRecovered.push([...ids]));

    vault.unlock();
    await settle(journal);
    expect(recoveredAfter(journal, id, lastSeq)).toEqual([]);
    expect(heldRecovered).toEqual([[id]]);
    expect(journal.listLane('lane-a')).toEqual([]);
    expect(journal.sealedAction(id)).toMatchObject({ outcome: 'committed' });
    // Reads answer the fold, not the rewritten row (which nothing appended to since).
    expect(journal.getAction(id)).toEqual(journal.sealedAction(id));
  });

  it('an action the log shows was never dispatched is still recorded not_attempted at open, and nothing is reported', async () => {
    const id = 'act_undispatched_0001';
    const path = actionPaths.httpApproved(id);
    const { journal, refuted, lastSeq } = await replayedRowRun(id, path.slice(0, dispatchAt(path)), () => undefined);

    expect(refuted).toEqual([]);
    expect(journal.heldActions()).toEqual([]);
    expect(recoveredAfter(journal, id, lastSeq)[0]?.classification).toMatchObject({
      outcome: 'not_attempted',
      outcome_basis: 'broker_restart_before_dispatch',
    });
    expect(journal.listLane('lane-a')).toEqual([]);
  });

  it('for any action path, any crash after DISPATCH_STARTED and any earlier open copy of the row: never not_attempted, and after the unlock its own events fold', async () => {
    const dispatched = actionPathNames.filter((name) => dispatchAt(actionPaths[name]('act_x')) > 0);
    expect(dispatched.length).toBeGreaterThan(5);
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...dispatched), fc.nat(), fc.nat(), async (name, cutSeed, copySeed) => {
        const id = `act_${name.slice(0, 24)}`;
        const path = actionPaths[name](id);
        const dispatch = dispatchAt(path);
        // Crash anywhere from the durable DISPATCH_STARTED on (the whole path included); copy from before it.
        const cut = dispatch + 1 + (cutSeed % (path.length - dispatch));
        // Any copy from before it that read open (a copy that reads closed is not one recovery reads at all:
        // docs/audit.md, "Nor does recovery record over a row the log refutes").
        const { journal, vault, lastSeq } = await replayedRowRun(id, path.slice(0, cut), (open) => {
          const before = open.filter((n) => n <= dispatch);
          return before[copySeed % before.length];
        });
        const outcomes = (): unknown[] => recoveredAfter(journal, id, lastSeq).map((e) => e.classification?.outcome);
        expect(outcomes()).not.toContain('not_attempted');
        expect(journal.getAction(id)?.outcome).not.toBe('not_attempted');
        vault.unlock();
        await settle(journal);
        expect(outcomes()).not.toContain('not_attempted');
        const sealed = journal.sealedAction(id);
        expect(sealed?.outcome).not.toBe('not_attempted');
        expect(sealed?.recorded).toBe(true);
        for (const t of opened.splice(0)) await t.dispose();
      }),
      { numRuns: 40 },
    );
  }, 120_000);
});

describe('when another process inserts a DISPATCH_STARTED header for an action that was never dispatched (THREAT-MODEL 4)', () => {
  it('the action is held until the unlock, then, its events not folding, closed unknown over its row for a person: its lane is not wedged', async () => {
    const t = await openTempJournal();
    opened.push(t);
    const id = 'act_inserted_0001';
    const path = actionPaths.httpApproved(id);
    for (const event of path.slice(0, dispatchAt(path))) await t.journal.append(event);
    await t.journal.close();
    // A header row that does not authenticate, with the audit tree extended over it (the start's tree check passes).
    insertHeader(t, id, 'DISPATCH_STARTED');

    const { journal, refuted } = await reopenLocked(t);
    expect(journal.heldActions()).toEqual([id]);

    t.vault.unlock();
    await settle(journal);
    expect(refuted.map((r) => [r.action_id, r.events_fold])).toEqual([
      [id, undefined],
      [id, false],
    ]);
    expect(journal.heldActions()).toEqual([]);
    expect(journal.getAction(id)).toMatchObject({
      outcome: 'unknown',
      outcome_basis: 'broker_restart_journal_quarantined',
      recorded: true,
    });
    await expectPersonReleasesLane(journal, id);
  });
});

describe('when the rewritten row also names another lane', () => {
  it("the ticket blocks the lane the log's header names, not the row's, and keeps it at the unlock, when its own events fold", async () => {
    const id = 'act_otherlane_0001';
    const path = actionPaths.httpApproved(id);
    const dispatch = dispatchAt(path);
    const t = await openTempJournal();
    opened.push(t);
    for (const event of path.slice(0, dispatch)) await t.journal.append(event);
    const copy = copyActionRow(t.path, id);
    await t.journal.append(path[dispatch] as NewEvent);
    const lastSeq = t.journal.stats().last_seq;
    await t.journal.close();
    const state = JSON.parse(String(copy['state'])) as ActionState;
    writeActionRowBack(t.path, { ...copy, lane: 'lane-b', state: JSON.stringify({ ...state, lane: 'lane-b' }) });
    const { journal } = await reopenLocked(t);
    // The ticket stands in the lane the log's DISPATCH_STARTED header names, not the one the row lists.
    expect(journal.listLane('lane-b')).toEqual([]);
    expect(journal.listLane('lane-a').map((s) => s.action_id)).toEqual([id]);

    t.vault.unlock();
    await settle(journal);
    expect(journal.listLane('lane-b')).toEqual([]);
    expect(journal.listLane('lane-a').map((s) => s.action_id)).toEqual([id]);
    expect(recoveredAfter(journal, id, lastSeq).map((e) => e.classification?.outcome_basis)).toEqual([
      'broker_restart_after_dispatch',
    ]);
  });
});

describe("when the rewritten row's columns read open but its state says not_attempted, never dispatched", () => {
  it('the action is held all the same (a dispatch, once recorded, is never unrecorded): no restart takes the row', async () => {
    const id = 'act_mixedrow_0001';
    const path = actionPaths.httpApproved(id);
    const dispatch = dispatchAt(path);
    const t = await openTempJournal();
    opened.push(t);
    for (const event of path.slice(0, dispatch + 1)) await t.journal.append(event);
    const row = copyActionRow(t.path, id);
    await t.journal.close();
    const state = JSON.parse(String(row['state'])) as ActionState;
    const forged = { ...state, dispatch_seq: null, attempts: [], outcome: 'not_attempted', code: 'BROKER_RESTARTED' };
    writeActionRowBack(t.path, { ...row, state: JSON.stringify(forged) });
    const { journal, refuted } = await reopenLocked(t);
    expect(refuted.map((r) => r.action_id)).toEqual([id]);
    expect(journal.heldActions()).toEqual([id]);
  });
});

/** The seq of an action's first DISPATCH_STARTED, read from the file's plaintext headers. */
function dispatchSeqOf(path: string, id: string): number {
  const db = new Database(path, { readonly: true });
  try {
    const row = db
      .prepare(`SELECT min(seq) AS seq FROM events WHERE action_id = ? AND kind = 'DISPATCH_STARTED'`)
      .get(id) as { seq: number };
    return row.seq;
  } finally {
    db.close();
  }
}

/** Another process appends a header row of `kind` for the action (sealed under no key), the audit tree extended over it. */
function insertHeader(
  t: TempJournal,
  id: string,
  kind: AuditHeaderFields['kind'],
  outcome: AuditHeaderFields['outcome'] = null,
): number {
  const admitted = copyActionRow(t.path, id);
  return appendForgedEventRow(t.path, {
    action_id: id,
    session_id: 'ses_test',
    ticket: Number(admitted['ticket']),
    lane: 'lane-a',
    kind,
    run: 1,
    at_ms: t.clock.nowMs(),
    outcome,
  });
}

/** Another process's one statement on `t`'s file while no broker runs (an edit of the `actions` table). */
function onFile(t: TempJournal, sql: string, ...params: unknown[]): void {
  const db = new Database(t.path);
  try {
    db.prepare(sql).run(...params);
  } finally {
    db.close();
  }
}

/** Crashed with `events` of one action appended (the vault then locked), the row rewritten by `edit`; reopened. */
async function crashedThenRewritten(
  id: string,
  events: readonly NewEvent[],
  edit: (t: TempJournal) => void,
): Promise<Replayed & { t: TempJournal }> {
  const t = await openTempJournal();
  opened.push(t);
  for (const event of events) await t.journal.append(event);
  const lastSeq = t.journal.stats().last_seq;
  await t.journal.close();
  edit(t);
  const { journal, refuted } = await reopenLocked(t);
  return { journal, vault: t.vault, refuted, lastSeq, t };
}

describe('when an action in flight at a crash has its row rewritten to read settled while no broker runs (THREAT-MODEL)', () => {
  it('recovery finds it from the log all the same: held as in flight (unknown, never not_attempted), its lane kept, its SSH recording not sealed never-sent; at the unlock its own events decide', async () => {
    const id = 'act_closedrow_0001';
    const path = actionPaths.httpApproved(id);
    // Crashed with the request sent; the row then made to read as if the broker had recorded not_attempted.
    const { journal, vault, refuted, lastSeq, t } = await crashedThenRewritten(
      id,
      path.slice(0, dispatchAt(path) + 2),
      (t) => rewriteActionRow(t.path, id, closedNeverSent),
    );

    expect(refuted).toEqual([{ action_id: id, row_stage: 'credential_authorized', log_holds: 'DISPATCH_STARTED' }]);
    expect(journal.heldActions()).toEqual([id]);
    expect(recoveredAfter(journal, id, lastSeq)).toEqual([]);
    // Reads say what the log establishes, not what the row says.
    const held = journal.getAction(id) as ActionState;
    expect(held).toMatchObject({ outcome: 'unknown', recorded: false, stage: 'dispatch_started', lane: 'lane-a' });
    // Dispatched at the log's DISPATCH_STARTED (so an SSH recording's never-sent seal, unsentCast, is refused too).
    expect(held.dispatch_seq).toBe(dispatchSeqOf(t.path, id));
    // Its ticket still holds its lane.
    await heldUntilTheUnlock(journal, vault, id, 'CANCELLED');
    expect(recoveredAfter(journal, id, lastSeq).map((e) => e.classification?.outcome_basis)).toEqual([
      'broker_restart_after_dispatch',
    ]);
    const sealed = journal.sealedAction(id) as ActionState;
    expect(sealed).toMatchObject({ outcome: 'unknown', recorded: true });
    expect(journal.getAction(id)).toEqual(sealed);
    expect(journal.listLane('lane-a').map((s) => s.action_id)).toEqual([id]);
  });

  it("a retry's dispatch with the row copied back from its first attempt's classified outcome: held as in flight, the log's last dispatch unclassified", async () => {
    const id = 'act_retrycopy_0001';
    const path = actionPaths.throttledThenRetried(id);
    const secondDispatch = path.findIndex((e) => e.kind === 'DISPATCH_STARTED' && e.payload.attempt === 2);
    const { journal, vault, refuted, lastSeq } = await replayedRowRun(
      id,
      path.slice(0, secondDispatch + 1),
      (_open, all) =>
        // The copy taken when attempt 1's throttled outcome was recorded: it reads settled, rejected, retry backoff.
        all.find((n) => path[n - 1]?.kind === 'OUTCOME_RECORDED'),
    );
    expect(refuted).toEqual([
      { action_id: id, row_stage: 'response_complete', log_holds: 'DISPATCH_STARTED_UNCLASSIFIED' },
    ]);
    expect(journal.getAction(id)).toMatchObject({ outcome: 'unknown', recorded: false, lane: 'lane-b' });
    expect(journal.listLane('lane-b').map((s) => s.action_id)).toEqual([id]);

    vault.unlock();
    await settle(journal);
    const sealed = journal.sealedAction(id) as ActionState;
    expect(sealed.attempts.map((a) => a.n)).toEqual([1, 2]);
    expect(sealed).toMatchObject({ outcome: 'unknown', recorded: true });
    expect(recoveredAfter(journal, id, lastSeq).map((e) => e.classification?.outcome)).toEqual(['unknown']);
  });

  it('a row deleted outright: held, and at the unlock its own events decide', async () => {
    const id = 'act_deletedrow_0001';
    const path = actionPaths.httpApproved(id);
    const { journal, vault, refuted, lastSeq } = await crashedThenRewritten(
      id,
      path.slice(0, dispatchAt(path) + 1),
      (t) => onFile(t, 'DELETE FROM actions WHERE action_id = ?', id),
    );
    expect(refuted).toEqual([{ action_id: id, row_stage: null, log_holds: 'DISPATCH_STARTED_UNCLASSIFIED' }]);
    expect(journal.heldActions()).toEqual([id]);
    vault.unlock();
    await settle(journal);
    expect(recoveredAfter(journal, id, lastSeq).map((e) => e.classification?.outcome_basis)).toEqual([
      'broker_restart_after_dispatch',
    ]);
    expect(journal.getAction(id)).toMatchObject({ outcome: 'unknown', recorded: true });
  });
});

describe('when a settled action has its row written back to a copy from while it was in flight', () => {
  it('recovery records nothing over it (no unknown on top of committed): held until the unlock, then its own events say committed', async () => {
    const id = 'act_settledcopy_0001';
    const path = actionPaths.httpNoApproval(id);
    // The copy taken when the request was handed over: it reads in flight.
    const { journal, vault, refuted, lastSeq } = await replayedRowRun(id, path, () => dispatchAt(path) + 2);
    expect(refuted).toEqual([{ action_id: id, row_stage: 'request_sent', log_holds: 'CLASSIFIED' }]);
    expect(journal.heldActions()).toEqual([id]);
    expect(recoveredAfter(journal, id, lastSeq)).toEqual([]);
    vault.unlock();
    await settle(journal);
    expect(recoveredAfter(journal, id, lastSeq)).toEqual([]);
    expect(journal.getAction(id)).toMatchObject({ outcome: 'committed', recorded: true });
    expect(journal.listLane('lane-a')).toEqual([]);
  });
});

describe('for any action path, any crash point and any copy of the row written back (THREAT-MODEL)', () => {
  it("recovery never says not_attempted after a dispatch, an action the log shows in flight keeps its lane and reads unknown, an honest row is never held, and after the unlock every read is the action's own fold", async () => {
    const names = actionPathNames.filter((name) => dispatchAt(actionPaths[name]('act_x')) > 0);
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...names), fc.nat(), fc.nat(), async (name, cutSeed, copySeed) => {
        const id = `act_${name.slice(0, 24)}`;
        const path = actionPaths[name](id);
        const cut = 1 + (cutSeed % path.length);
        let honest = false;
        const { journal, vault, refuted, lastSeq } = await replayedRowRun(id, path.slice(0, cut), (_open, all) => {
          const chosen = all[copySeed % all.length] as number;
          honest = chosen === cut;
          return chosen;
        });
        const events = path.slice(0, cut);
        const lastDispatch = events.findLastIndex((e) => e.kind === 'DISPATCH_STARTED');
        const inFlight = lastDispatch >= 0 && !events.slice(lastDispatch).some((e) => e.classification !== undefined);
        if (honest) expect(refuted).toEqual([]);
        const outcomes = (): unknown[] => recoveredAfter(journal, id, lastSeq).map((e) => e.classification?.outcome);
        if (lastDispatch >= 0) {
          expect(outcomes()).not.toContain('not_attempted');
          expect(journal.getAction(id)?.outcome).not.toBe('not_attempted');
        }
        if (inFlight) {
          expect(journal.getAction(id)?.outcome).toBe('unknown');
          const lane = journal.getAction(id)?.lane;
          if (lane !== null && lane !== undefined) expect(journal.listLane(lane).map((s) => s.action_id)).toContain(id);
        }
        vault.unlock();
        await settle(journal);
        if (lastDispatch >= 0) expect(outcomes()).not.toContain('not_attempted');
        expect(journal.heldActions()).toEqual([]);
        const sealed = journal.sealedAction(id) as ActionState;
        expect(journal.getAction(id)).toEqual(sealed);
        // Nor did any read find an honest row refuted (the checks a read makes, the outcome header's among them).
        if (honest) expect(refuted).toEqual([]);
        for (const t of opened.splice(0)) await t.dispose();
      }),
      { numRuns: 60 },
    );
  }, 180_000);
});

describe('when a settled action, which recovery never reads, has its row rewritten to say it was never sent', () => {
  it('a read checks the row against the log all the same: never not_attempted; unknown to be looked up while its events are sealed, its own fold after the unlock', async () => {
    const id = 'act_oldrow_0001';
    const path = actionPaths.httpNoApproval(id);
    const { journal, vault, refuted, lastSeq, t } = await crashedThenRewritten(id, path, (t) =>
      rewriteActionRow(t.path, id, (state) => ({
        ...state,
        stage: 'credential_authorized',
        dispatch_seq: null,
        attempts: [],
        outcome: 'not_attempted',
        phase: 'connection_setup',
        code: 'CONNECT_REFUSED',
        effect: 'no_effect',
        outcome_basis: 'connect_refused',
        retry: 'backoff',
        source: 'transport_observed',
        recorded: true,
        result_id: null,
        result_digest: null,
      })),
    );
    // Settled by the log and resolved by its row: not one recovery reads, so nothing is held at open.
    expect(refuted).toEqual([]);
    expect(journal.heldActions()).toEqual([]);

    const read = journal.getAction(id) as ActionState;
    expect(read).toMatchObject({
      dispatch_seq: dispatchSeqOf(t.path, id),
      outcome: 'unknown',
      recorded: true,
      retry: 'reconcile',
      outcome_basis: 'row_refuted_events_sealed',
      result_id: null,
    });
    journal.getAction(id);
    expect(refuted).toEqual([
      { action_id: id, row_stage: 'credential_authorized', log_holds: 'DISPATCH_STARTED', on_read: true },
    ]);

    vault.unlock();
    expect(journal.getAction(id)).toEqual(journal.sealedAction(id));
    expect(journal.getAction(id)).toMatchObject({ outcome: 'committed' });
    // A read appends nothing.
    await settle(journal);
    expect(recoveredAfter(journal, id, lastSeq)).toEqual([]);
  });
});

/** A recorded unknown after dispatch (a lookup's answer never came): the head lane-a waits on. */
const recordedUnknown = (id: string): NewEvent[] =>
  actionPaths.lostThenReconciled(id).filter((e) => e.kind !== 'RECONCILIATION_RESULT');

describe("when a recorded unknown's row is edited to read committed, every other header fact left as it was (THREAT-MODEL)", () => {
  it('recovery finds it from the outcome headers and holds it: its lane stays blocked, it reads unknown, a decision on it is refused; after the unlock its own events say unknown, and only a person frees the lane', async () => {
    const id = 'act_unknownrow_0001';
    const { journal, vault, refuted, lastSeq } = await crashedThenRewritten(id, recordedUnknown(id), (t) =>
      rewriteActionRow(t.path, id, readsCommitted),
    );
    // The premise: the row reads settled and resolved, so no column of it says in flight or waiting.
    expect(refuted).toEqual([{ action_id: id, row_stage: 'request_sent', log_holds: 'OUTCOME' }]);
    expect(journal.heldActions()).toEqual([id]);
    expect(journal.getAction(id)).toMatchObject({ outcome: 'unknown', retry: 'reconcile', recorded: true });
    await heldUntilTheUnlock(journal, vault, id, 'ABANDONED');
    // Recorded already: the unlock appends nothing over it, and reads answer its own fold.
    expect(recoveredAfter(journal, id, lastSeq)).toEqual([]);
    expect(journal.getAction(id)).toMatchObject({ outcome: 'unknown', recorded: true, code: 'REMOTE_OUTCOME_UNKNOWN' });
    expect(journal.getAction(id)).toEqual(journal.sealedAction(id));
    await expectPersonReleasesLane(journal, id);
  });

  it('rewritten to read abandoned instead: held all the same, its lane blocked', async () => {
    const id = 'act_abandonrow_0001';
    const { journal, refuted } = await crashedThenRewritten(id, recordedUnknown(id), (t) =>
      rewriteActionRow(t.path, id, (state) => ({ ...state, abandoned: true })),
    );
    expect(refuted).toEqual([{ action_id: id, row_stage: 'request_sent', log_holds: 'ABANDONED' }]);
    expect(journal.listLane('lane-a').map((s) => s.action_id)).toEqual([id]);
    expect(journal.getAction(id)).toMatchObject({ outcome: 'unknown', abandoned: false });
  });

  it('its row deleted outright: held, and at the unlock its own events fold it back into its lane, blocked', async () => {
    const id = 'act_unknowngone_0001';
    const { journal, vault, refuted } = await crashedThenRewritten(id, recordedUnknown(id), (t) =>
      onFile(t, 'DELETE FROM actions WHERE action_id = ?', id),
    );
    expect(refuted).toEqual([{ action_id: id, row_stage: null, log_holds: 'OUTCOME' }]);
    expect(journal.heldActions()).toEqual([id]);
    vault.unlock();
    await settle(journal);
    expect(journal.heldActions()).toEqual([]);
    expect(journal.getAction(id)).toMatchObject({ outcome: 'unknown', recorded: true });
    await expectPersonReleasesLane(journal, id);
  });

  it('only its resolved_at_ms column edited to read resolved (the column a lane is loaded by), its state left as written: its lane comes from the checked state, blocked', async () => {
    const id = 'act_resolvedcol_0001';
    const { journal, refuted } = await crashedThenRewritten(id, recordedUnknown(id), (t) =>
      onFile(t, 'UPDATE actions SET resolved_at_ms = updated_at_ms WHERE action_id = ?', id),
    );
    // Its state agrees with every header: nothing to refute, and nothing released either.
    expect(refuted).toEqual([]);
    expect(journal.listLane('lane-a').map((s) => s.action_id)).toEqual([id]);
  });

  it('one a person abandoned is not among the unknowns recovery checks, a lookup after that notwithstanding, and an honest row of either is never held', async () => {
    const kept = 'act_unknownkept_0001';
    const left = 'act_unknownleft_0001';
    const t = await openTempJournal();
    opened.push(t);
    for (const event of recordedUnknown(kept)) await t.journal.append(event);
    for (const event of recordedUnknown(left).map((e) => ({ ...e, lane: 'lane-b' }) as NewEvent))
      await t.journal.append(event);
    await t.journal.append({ kind: 'ABANDONED', action_id: left, payload: { actor: person, reason: 'by hand' } });
    // A lookup after the abandonment that learned nothing: unknown again, and still abandoned.
    await t.journal.append({
      ...reconciledByLookup(left, 'act_lookup_0002'),
      classification: {
        phase: 'remote_execution',
        outcome: 'unknown',
        retry: 'reconcile',
        code: 'REMOTE_OUTCOME_UNKNOWN',
        effect: 'unknown_effect',
        outcome_basis: 'remote_operation_lookup',
        source: 'remote_query',
      },
    } as NewEvent);
    await t.journal.close();
    const { journal, refuted } = await reopenLocked(t);
    expect(refuted).toEqual([]);
    const db = new Database(t.path, { readonly: true });
    try {
      expect(new JournalStore(db).openOutcomes()).toEqual([kept]);
    } finally {
      db.close();
    }
    expect(journal.listLane('lane-a').map((s) => s.action_id)).toEqual([kept]);
  });
});

describe('when only the lane, ticket or abandonment of an in-flight action is rewritten', () => {
  it('the row is held all the same: its ticket stands in the lane its admission names, never released', async () => {
    const id = 'act_lanerow_0001';
    const path = actionPaths.httpApproved(id);
    const { journal, refuted } = await crashedThenRewritten(id, path.slice(0, dispatchAt(path) + 2), (t) =>
      rewriteActionRow(t.path, id, (state) => ({ ...state, lane: 'lane-x', abandoned: true })),
    );
    expect(refuted).toEqual([{ action_id: id, row_stage: 'request_sent', log_holds: 'ADMISSION' }]);
    expect(journal.listLane('lane-x')).toEqual([]);
    expect(journal.listLane('lane-a').map((s) => s.action_id)).toEqual([id]);
    expect(journal.getAction(id)).toMatchObject({ lane: 'lane-a', abandoned: false, outcome: 'unknown' });
  });
});

describe("when a recorded unknown's row is rewritten to say not_attempted, its dispatch left in place", () => {
  it('a read with the vault locked never answers not_attempted: the row contradicts itself (no dispatch is not attempted)', async () => {
    const id = 'act_selfcontra_0001';
    const path = actionPaths.lostThenReconciled(id).filter((e) => e.kind !== 'RECONCILIATION_RESULT');
    const { journal, refuted } = await crashedThenRewritten(id, path, (t) =>
      rewriteActionRow(t.path, id, (state) => ({
        ...state,
        outcome: 'not_attempted',
        effect: 'no_effect',
        retry: 'backoff',
        code: 'CONNECT_REFUSED',
      })),
    );
    const read = journal.getAction(id) as ActionState;
    expect(read.outcome).toBe('unknown');
    expect(read).toMatchObject({ retry: 'reconcile', source: 'local_gate', phase: 'remote_execution' });
    // Refuted where it is first read: at open (the row still blocks its lane, so the lanes load it) or by a read.
    expect(refuted.map((r) => [r.action_id, r.log_holds])).toEqual([[id, 'DISPATCH_STARTED']]);
  });
});

describe('when another process inserts a classified header naming committed after an in-flight dispatch and rewrites the row to agree', () => {
  it('reads after the unlock do not answer the row: the events do not authenticate, so it reads unknown, to be looked up', async () => {
    const id = 'act_insertedoutcome_0001';
    const path = actionPaths.httpApproved(id);
    const { journal, vault, refuted } = await crashedThenRewritten(id, path.slice(0, dispatchAt(path) + 2), (t) => {
      const forged = insertHeader(t, id, 'OUTCOME_RECORDED', 'committed');
      rewriteActionRow(t.path, id, (state) => ({
        ...state,
        outcome: 'committed',
        effect: 'succeeded',
        retry: 'never',
        code: null,
        outcome_basis: 'complete_response',
        source: 'remote_response',
        recorded: true,
        last_seq: forged,
      }));
    });
    vault.unlock();
    expect(journal.getAction(id)).toMatchObject({ outcome: 'unknown', retry: 'reconcile', recorded: true });
    expect(refuted.filter((r) => r.on_read === true).map((r) => r.log_holds)).toEqual(['SEALED_EVENTS']);
  });
});

describe("when a settled action's stored state is rewritten to an unknown recorded before dispatch, its columns left reading resolved", () => {
  it('a decision on it while the vault is locked is refused, never folded over the row', async () => {
    const id = 'act_attestrow_0001';
    const path = actionPaths.httpNoApproval(id);
    const { journal, refuted } = await crashedThenRewritten(id, path, (t) => {
      rewriteActionRow(t.path, id, (state) => ({
        ...state,
        stage: 'credential_authorized',
        dispatch_seq: null,
        attempts: [],
        outcome: 'unknown',
        phase: 'connection_setup',
        code: 'BROKER_RESTARTED',
        effect: 'unknown_effect',
        retry: 'reconcile',
        outcome_basis: 'broker_restart_journal_quarantined',
        source: 'local_gate',
        result_id: null,
        result_digest: null,
      }));
      // Its columns left as the journal wrote them for the settled action: resolved, so no lane loads the row.
      onFile(t, 'UPDATE actions SET resolved_at_ms = updated_at_ms WHERE action_id = ?', id);
    });
    // Its columns read resolved: not a row recovery or a lane reads.
    expect(refuted).toEqual([]);
    const attest = { ...(actionPaths.sshClosedNoExitAttested(id).at(-1) as NewEvent) };
    await expect(journal.append(attest)).rejects.toThrow(/its row differs from the journal's log/);
  });
});

describe("when an in-flight action's row says abandoned, in another lane, at a far later event, and a header row is inserted after it", () => {
  it('at the unlock its events do not fold, and it closes over what the headers establish: unknown, in its own lane, not abandoned, for a person', async () => {
    const id = 'act_closeheld_0001';
    const path = actionPaths.httpApproved(id);
    const { journal, vault, refuted } = await crashedThenRewritten(id, path.slice(0, dispatchAt(path) + 2), (t) => {
      insertHeader(t, id, 'CONNECTION_LOST');
      rewriteActionRow(t.path, id, (state) => ({ ...state, lane: 'lane-x', abandoned: true, last_seq: 1e12 }));
    });
    expect(journal.listLane('lane-a').map((s) => s.action_id)).toEqual([id]);

    vault.unlock();
    await settle(journal);
    expect(refuted.map((r) => r.events_fold)).toEqual([undefined, false]);
    expect(journal.heldActions()).toEqual([]);
    expect(journal.getAction(id)).toMatchObject({
      outcome: 'unknown',
      recorded: true,
      retry: 'reconcile',
      outcome_basis: 'broker_restart_journal_quarantined',
      lane: 'lane-a',
      abandoned: false,
    });
    expect(journal.listLane('lane-x')).toEqual([]);
    await expectPersonReleasesLane(journal, id);
  });
});

describe("when a recorded unknown head's row is rewritten to list it in another lane", () => {
  it('the lanes, loaded from the rows at open, are checked too: it blocks the lane its admission names, not the other', async () => {
    const id = 'act_blockedhead_0001';
    const path = actionPaths.lostThenReconciled(id).filter((e) => e.kind !== 'RECONCILIATION_RESULT');
    const { journal, refuted } = await crashedThenRewritten(id, path, (t) =>
      rewriteActionRow(t.path, id, (state) => ({ ...state, lane: 'lane-x' })),
    );
    expect(refuted).toEqual([{ action_id: id, row_stage: 'request_sent', log_holds: 'ADMISSION' }]);
    expect(journal.listLane('lane-x')).toEqual([]);
    expect(journal.listLane('lane-a').map((s) => s.action_id)).toEqual([id]);
  });
});

/** The restart record recovery appended for the action after the crashed run's last event: its classification. */
function restartRecordOf(journal: Journal, id: string, lastSeq: number): JournalEvent['classification'][] {
  return recoveredAfter(journal, id, lastSeq).map((event) => event.classification);
}

/** Recovery appended one restart record for the action after `lastSeq`: unknown, advising `retry`. */
function expectRestartRecord(journal: Journal, id: string, lastSeq: number, retry: string): void {
  expect(restartRecordOf(journal, id, lastSeq)).toEqual([
    expect.objectContaining({ outcome: 'unknown', code: 'BROKER_RESTARTED', retry }),
  ]);
}

/** An action in flight at a crash: sent, nothing heard back (its path up to its first attempt's REQUEST_SENT). */
const inFlight = (path: readonly NewEvent[]): NewEvent[] => path.slice(0, dispatchAt(path) + 2);

describe("when an in-flight POST's row is rewritten to say idempotent, or to hold a live key, while no broker runs (THREAT-MODEL)", () => {
  it('no restart record is taken from the row at open (it reads in flight); at the unlock its own events decide the retry: reconcile, never backoff, and the rewrite is told', async () => {
    const id = 'act_forgedidem_0001';
    // A POST: not idempotent, no key. The row then claims idempotent, which would advise `backoff` (send it again).
    const { journal, vault, refuted, lastSeq, t } = await crashedThenRewritten(
      id,
      inFlight(actionPaths.httpApproved(id)),
      (t) => rewriteActionRow(t.path, id, (state) => ({ ...state, idempotent: true })),
    );
    // Its row agrees with every header: nothing refuted, nothing held, and nothing recorded over it yet.
    expect(refuted).toEqual([]);
    expect(journal.heldActions()).toEqual([]);
    expect(journal.deferredRecoveries()).toEqual([id]);
    expect(restartRecordOf(journal, id, lastSeq)).toEqual([]);
    expect(journal.stats().recovered_at_open).toBe(0);
    // In flight, as its DISPATCH_STARTED leaves it: unknown, no advice, and the head of its lane.
    expect(journal.getAction(id)).toMatchObject({ outcome: 'unknown', recorded: false, retry: null });
    expect(journal.listLane('lane-a').map((s) => s.action_id)).toEqual([id]);

    vault.unlock();
    await settle(journal);
    expectRestartRecord(journal, id, lastSeq, 'reconcile');
    expect(refuted).toEqual([{ action_id: id, row_stage: 'request_sent', log_holds: 'RETRY_BASIS' }]);
    expect(journal.deferredRecoveries()).toEqual([]);
    expect(journal.stats().recovered_at_open).toBe(1);
    // The record folded over its own events, so the row's claim goes with it: in reads, in its lane, and on the file.
    expect(journal.getAction(id)).toMatchObject({
      outcome: 'unknown',
      recorded: true,
      retry: 'reconcile',
      idempotent: false,
    });
    expect(journal.listLane('lane-a').map((s) => [s.action_id, s.idempotent])).toEqual([[id, false]]);
    await journal.close();
    expect(JSON.parse(String(copyActionRow(t.path, id)['state']))).toMatchObject({ idempotent: false });
  });

  it("a key's expiry written into the row of a POST that bound none: reconcile, never a same-key retry", async () => {
    const id = 'act_forgedkey_0001';
    let expiry = 0;
    const { journal, vault, refuted, lastSeq } = await crashedThenRewritten(
      id,
      inFlight(actionPaths.httpApproved(id)),
      (t) => {
        expiry = t.clock.nowMs() + 3_600_000;
        rewriteActionRow(t.path, id, (state) => ({ ...state, key_expires_at_ms: expiry }));
      },
    );
    expect(journal.deferredRecoveries()).toEqual([id]);
    expect(restartRecordOf(journal, id, lastSeq)).toEqual([]);
    vault.unlock();
    await settle(journal);
    expectRestartRecord(journal, id, lastSeq, 'reconcile');
    expect(refuted.map((r) => r.log_holds)).toEqual(['RETRY_BASIS']);
    // No same-key retry is offered or fenced by the forged expiry: the state folds over its own events.
    expect(journal.getAction(id)).toMatchObject({ key_expires_at_ms: null });
    expect(journal.listLane('lane-a').map((s) => s.key_expires_at_ms)).toEqual([null]);
  });

  it('an expiry the row says has passed advises reconcile whatever it says, so it is recorded at open', async () => {
    const id = 'act_pastkey_0001';
    const { journal, lastSeq } = await crashedThenRewritten(id, inFlight(actionPaths.httpApproved(id)), (t) =>
      rewriteActionRow(t.path, id, (state) => ({ ...state, key_expires_at_ms: t.clock.nowMs() - 1 })),
    );
    expect(journal.deferredRecoveries()).toEqual([]);
    expectRestartRecord(journal, id, lastSeq, 'reconcile');
  });

  it('an honest idempotent action in flight waits for the unlock the same way, and is then advised backoff, nothing told', async () => {
    const id = 'act_honestidem_0001';
    const { journal, vault, refuted, lastSeq } = await crashedThenRewritten(
      id,
      inFlight(actionPaths.deadlineInFlight(id)),
      () => undefined,
    );
    expect(journal.deferredRecoveries()).toEqual([id]);
    expect(restartRecordOf(journal, id, lastSeq)).toEqual([]);
    vault.unlock();
    await settle(journal);
    expectRestartRecord(journal, id, lastSeq, 'backoff');
    expect(refuted).toEqual([]);
    expect(journal.stats().recovered_at_open).toBe(1);
  });

  it('a POST in flight whose row claims neither is recorded at open as before: reconcile rests on nothing the row says', async () => {
    const id = 'act_plainpost_0001';
    const { journal, lastSeq } = await crashedThenRewritten(
      id,
      inFlight(actionPaths.httpApproved(id)),
      () => undefined,
    );
    expect(journal.deferredRecoveries()).toEqual([]);
    expectRestartRecord(journal, id, lastSeq, 'reconcile');
    expect(journal.stats().recovered_at_open).toBe(1);
  });

  it('opened with the vault unlocked already, the record from its own events is durable once the open returns', async () => {
    const id = 'act_openunlocked_0001';
    const t = await openTempJournal();
    opened.push(t);
    for (const event of inFlight(actionPaths.httpApproved(id))) await t.journal.append(event);
    const lastSeq = t.journal.stats().last_seq;
    await t.journal.close();
    rewriteActionRow(t.path, id, (state) => ({ ...state, idempotent: true }));
    const journal = await Journal.open({ path: t.path, clock: t.clock, vault: t.vault });
    opened.push({ ...t, journal, dispose: () => journal.close() });
    // Committed to the file (another connection's read), not only queued behind the journal's own reads.
    const reader = new Database(t.path, { readonly: true });
    const kinds = reader.prepare('SELECT kind FROM events WHERE action_id = ? AND seq > ?').pluck().all(id, lastSeq);
    reader.close();
    expect(kinds).toEqual(['OUTCOME_RECORDED']);
    expect(journal.deferredRecoveries()).toEqual([]);
    expectRestartRecord(journal, id, lastSeq, 'reconcile');
    expect(journal.stats().recovered_at_open).toBe(1);
  });

  it('where its events do not fold at the unlock (a header row inserted, the row made to agree), nothing proves its idempotency: unknown, reconcile', async () => {
    const id = 'act_idemunfold_0001';
    let inserted = 0;
    const { journal, vault, refuted } = await crashedThenRewritten(
      id,
      inFlight(actionPaths.deadlineInFlight(id)),
      (t) => {
        inserted = insertHeader(t, id, 'CONNECTION_LOST');
        rewriteActionRow(t.path, id, (state) => ({ ...state, last_seq: inserted }));
      },
    );
    expect(refuted).toEqual([]);
    expect(journal.deferredRecoveries()).toEqual([id]);
    vault.unlock();
    await settle(journal);
    // Closed over the state checked at open, without the idempotency nothing proves.
    expect(journal.getAction(id)).toMatchObject({ idempotent: false, key_expires_at_ms: null });
    // After the inserted row, which does not open.
    expect(restartRecordOf(journal, id, inserted)).toEqual([
      expect.objectContaining({
        outcome: 'unknown',
        retry: 'reconcile',
        outcome_basis: 'broker_restart_journal_quarantined',
      }),
    ]);
    expect(refuted).toEqual([
      { action_id: id, row_stage: 'request_sent', log_holds: 'SEALED_EVENTS', events_fold: false, deferred: true },
    ]);
    await expectPersonReleasesLane(journal, id);
  });

  it('its row rewritten again while the broker runs, to read settled, before an unlock at which its events do not fold: it still closes over what recovery checked at open', async () => {
    const id = 'act_idemlate_0001';
    let inserted = 0;
    const { journal, vault, t } = await crashedThenRewritten(id, inFlight(actionPaths.deadlineInFlight(id)), (t) => {
      inserted = insertHeader(t, id, 'CONNECTION_LOST');
      rewriteActionRow(t.path, id, (state) => ({ ...state, last_seq: inserted }));
    });
    expect(journal.deferredRecoveries()).toEqual([id]);
    // Another process of the user, while the broker runs: the row made to read committed, recorded.
    rewriteActionRow(t.path, id, (state) => ({ ...readsCommitted(state), recorded: true }));
    vault.unlock();
    await settle(journal);
    expect(restartRecordOf(journal, id, inserted)).toEqual([
      expect.objectContaining({ outcome: 'unknown', retry: 'reconcile' }),
    ]);
    expect(journal.getAction(id)).toMatchObject({ outcome: 'unknown', recorded: true });
    await expectPersonReleasesLane(journal, id);
  });
});

describe("when a recorded unknown head's row is rewritten to offer a same-key retry, elsewhere, while no broker runs (THREAT-MODEL)", () => {
  it('its lane entry, loaded from that row at open, is its own fold from the unlock on: no forged key expiry, target or retry budget is what its card or the lease fence reads', async () => {
    const id = 'act_headforged_0001';
    const { journal, vault, refuted, t } = await crashedThenRewritten(id, recordedUnknown(id), (t) =>
      rewriteActionRow(t.path, id, (state) => ({
        ...state,
        key_expires_at_ms: t.clock.nowMs() + 3_600_000,
        target: 'route:x GET /harmless',
        retry_budget: 9,
        // Not a header fact either: a lane entry is never told an earlier run's from this run's by it.
        first_seq: 1e12,
      })),
    );
    // None of those is a header fact: the row is taken at open, and its lane entry reads what the row says.
    expect(refuted).toEqual([]);
    const forgedEntry = journal.listLane('lane-a')[0];
    expect(forgedEntry).toMatchObject({ action_id: id, target: 'route:x GET /harmless', retry_budget: 9 });

    vault.unlock();
    await settle(journal);
    const sealed = journal.sealedAction(id) as ActionState;
    expect(sealed).toMatchObject({ key_expires_at_ms: null, retry_budget: 0 });
    expect(sealed.target).not.toBe('route:x GET /harmless');
    expect(journal.listLane('lane-a')).toEqual([sealed]);
    // Nothing was appended over it: a recorded unknown stays for a lookup or a person.
    expect(journal.getAction(id)).toEqual(sealed);
    expect(JSON.parse(String(copyActionRow(t.path, id)['state']))).toMatchObject({ retry_budget: 9 });
  });

  it('where its events do not fold at the unlock (a header row inserted, the row made to agree), its entry keeps no retry basis nothing proves, and that is told', async () => {
    const id = 'act_headunfold_0001';
    const { journal, vault, refuted } = await crashedThenRewritten(id, recordedUnknown(id), (t) => {
      const inserted = insertHeader(t, id, 'RESULT_DELIVERED');
      rewriteActionRow(t.path, id, (state) => ({
        ...state,
        last_seq: inserted,
        key_expires_at_ms: t.clock.nowMs() + 3_600_000,
        retry_budget: 9,
      }));
    });
    expect(refuted).toEqual([]);
    vault.unlock();
    await settle(journal);
    expect(refuted).toEqual([
      { action_id: id, row_stage: 'request_sent', log_holds: 'SEALED_EVENTS', events_fold: false, laned: true },
    ]);
    expect(journal.listLane('lane-a')).toEqual([
      expect.objectContaining({ action_id: id, key_expires_at_ms: null, retry_budget: 0, idempotent: false }),
    ]);
  });
});
