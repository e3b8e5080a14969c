import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { type ActionState, type JournalEvent, type NewEvent } from '../contract/index.js';
import { actionPathNames, actionPaths } from '../testing/action-paths.js';
import { copyActionRow, writeActionRowBack, type ActionRow } from '../testing/action-rows.js';
import { appendForgedEventRow } from '../testing/forged-event-row.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { Journal, type ActionRowRefuted } from './journal.js';

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
 * after the first `copyAfter(open)` events is written back while no broker runs, where `open` lists the prefix
 * lengths after which the row read open (no outcome recorded yet); the next run opens the file with the vault locked,
 * as a daemon starts.
 */
async function replayedRowRun(
  id: string,
  events: readonly NewEvent[],
  copyAfter: (open: readonly number[]) => number | undefined,
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
  const chosen = copyAfter(open);
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
    // Its ticket still holds the lane: the next write on lane-a waits.
    expect(journal.listLane('lane-a').map((s) => s.action_id)).toEqual([id]);
    // No decision is folded over the refuted row while the action's own events cannot be read.
    await expect(
      journal.append({ kind: 'CANCELLED', action_id: id, payload: { actor: person, reason: 'stuck' } } as NewEvent),
    ).rejects.toThrow(/its row was found rewritten at this start/);

    vault.unlock();
    await settle(journal);
    expect(journal.heldActions()).toEqual([]);
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
    const admitted = copyActionRow(t.path, id);
    appendForgedEventRow(t.path, {
      action_id: id,
      session_id: 'ses_test',
      ticket: Number(admitted['ticket']),
      lane: 'lane-a',
      kind: 'DISPATCH_STARTED',
      run: 1,
      at_ms: t.clock.nowMs(),
    });

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
    expect(journal.listLane('lane-a').map((s) => s.action_id)).toEqual([id]);
    // A person can end it: the lane is free again.
    await journal.append({ kind: 'ABANDONED', action_id: id, payload: { actor: person, reason: 'checked by hand' } });
    expect(journal.listLane('lane-a')).toEqual([]);
  });
});

describe('when the rewritten row also names another lane', () => {
  it("the row's ticket blocks that lane only until the unlock, when the ticket moves to the lane its own events name", async () => {
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
    expect(journal.listLane('lane-b').map((s) => s.action_id)).toEqual([id]);

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
