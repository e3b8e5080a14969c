import Database from 'better-sqlite3';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { restartRowRefutedBasis, type ActionState, type JournalEvent, type NewEvent } from '../contract/index.js';
import { actionPathNames, actionPaths } from '../testing/action-paths.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { Journal, type ActionRowRefuted } from './journal.js';

const opened: TempJournal[] = [];
afterEach(async () => {
  for (const t of opened.splice(0)) await t.dispose();
});

type Row = Record<string, unknown>;

/** Every column of an action's row as the table holds it now: what another process of the user can copy aside. */
function copyRow(path: string, actionId: string): Row {
  const reader = new Database(path, { readonly: true, fileMustExist: true });
  try {
    return reader.prepare('SELECT * FROM actions WHERE action_id = ?').get(actionId) as Row;
  } finally {
    reader.close();
  }
}

/** THREAT-MODEL: with no broker running, another process of the user writes an earlier copy of the row back. */
function writeRowBack(path: string, row: Row): void {
  const forger = new Database(path, { fileMustExist: true });
  try {
    const columns = Object.keys(row).filter((column) => column !== 'action_id');
    forger
      .prepare(`UPDATE actions SET ${columns.map((c) => `${c} = @${c}`).join(', ')} WHERE action_id = @action_id`)
      .run(row);
  } finally {
    forger.close();
  }
}

interface Replayed {
  readonly journal: Journal;
  readonly refuted: ActionRowRefuted[];
  /** The OUTCOME_RECORDED recovery appended at this open, if any. */
  readonly recovered: JournalEvent | undefined;
}

/**
 * One broker run appends `events` of one action and stops (a crash: nothing after the last event); the row as it stood
 * after the first `copyAfter(open)` events is written back while no broker runs, where `open` lists the prefix
 * lengths after which the row read open (no outcome recorded yet); the next run opens the file.
 */
async function replayedRowRun(
  id: string,
  events: readonly NewEvent[],
  copyAfter: (open: readonly number[]) => number | undefined,
): Promise<Replayed> {
  const t = await openTempJournal();
  opened.push(t);
  const copies = new Map<number, Row>();
  for (const [i, event] of events.entries()) {
    await t.journal.append(event);
    copies.set(i + 1, copyRow(t.path, id));
  }
  const lastSeq = t.journal.stats().last_seq;
  await t.journal.close();
  const open = [...copies].filter(([, row]) => row['outcome'] === null).map(([n]) => n);
  const chosen = copyAfter(open);
  if (chosen !== undefined) writeRowBack(t.path, copies.get(chosen) as Row);

  const refuted: ActionRowRefuted[] = [];
  const journal = await Journal.open({
    path: t.path,
    clock: t.clock,
    vault: t.vault,
    onActionRowRefuted: (report) => refuted.push(report),
  });
  opened.push({ ...t, journal, dispose: () => journal.close() });
  const recovered = [...journal.events()].find(
    (event) => event.seq > lastSeq && event.kind === 'OUTCOME_RECORDED' && event.action_id === id,
  );
  return { journal, refuted, recovered };
}

const dispatchAt = (events: readonly NewEvent[]): number => events.findIndex((e) => e.kind === 'DISPATCH_STARTED');

describe("when an action's row is written back to a copy from before its DISPATCH_STARTED while no broker runs (THREAT-MODEL)", () => {
  it('recovery records it unknown (reconcile), never not_attempted, keeps its lane blocked, and says which row the log refutes', async () => {
    const id = 'act_replayed_0001';
    const path = actionPaths.httpApproved(id);
    const dispatch = dispatchAt(path);
    // Crashed just after DISPATCH_STARTED was durable; the row copied when the credential was authorized.
    const { journal, refuted, recovered } = await replayedRowRun(id, path.slice(0, dispatch + 1), () => dispatch);

    // The premise: the row recovery read said the action had not been dispatched.
    expect(refuted).toEqual([{ action_id: id, row_stage: 'credential_authorized', log_holds: 'DISPATCH_STARTED' }]);
    expect(recovered?.classification).toMatchObject({
      outcome: 'unknown',
      phase: 'remote_execution',
      retry: 'reconcile',
      effect: 'unknown_effect',
      outcome_basis: restartRowRefutedBasis,
      code: 'BROKER_RESTARTED',
    });
    const state = journal.getAction(id) as ActionState;
    expect(state).toMatchObject({ outcome: 'unknown', recorded: true });
    // An unknown head blocks its lane: the next write on lane-a waits for a lookup or a person.
    expect(journal.laneHeads().heads.get('lane-a')).toBe(state.ticket);
    expect(journal.listLane('lane-a').map((s) => s.action_id)).toEqual([id]);
    // The record also folds from its sealed events (which hold the dispatch): a person's later decision folds there.
    expect(journal.sealedAction(id)).toMatchObject({
      dispatch_seq: expect.any(Number),
      outcome: 'unknown',
      phase: 'remote_execution',
      outcome_basis: restartRowRefutedBasis,
      recorded: true,
    });
  });

  it('an action the log shows was never dispatched is still recorded not_attempted, and nothing is reported', async () => {
    const id = 'act_undispatched_0001';
    const path = actionPaths.httpApproved(id);
    const { journal, refuted, recovered } = await replayedRowRun(id, path.slice(0, dispatchAt(path)), () => undefined);

    expect(refuted).toEqual([]);
    expect(recovered?.classification).toMatchObject({
      outcome: 'not_attempted',
      outcome_basis: 'broker_restart_before_dispatch',
    });
    expect(journal.listLane('lane-a')).toEqual([]);
  });

  it('for any action path, any crash after DISPATCH_STARTED and any earlier copy of the row, no restart says not_attempted', async () => {
    const dispatched = actionPathNames.filter((name) => dispatchAt(actionPaths[name]('act_x')) > 0);
    expect(dispatched.length).toBeGreaterThan(5);
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...dispatched), fc.nat(), fc.nat(), async (name, cutSeed, copySeed) => {
        const id = `act_${name.slice(0, 24)}`;
        const path = actionPaths[name](id);
        const dispatch = dispatchAt(path);
        // Crash anywhere from the durable DISPATCH_STARTED on (the whole path included); copy from before it.
        const cut = dispatch + 1 + (cutSeed % (path.length - dispatch));
        // Any copy from before it that read open (recovery does not read a row that reads closed at all: docs/audit.md,
        // "Nor over a row the log refutes").
        const { journal, recovered } = await replayedRowRun(id, path.slice(0, cut), (open) => {
          const before = open.filter((n) => n <= dispatch);
          return before[copySeed % before.length];
        });
        expect(recovered?.classification?.outcome).not.toBe('not_attempted');
        expect(journal.getAction(id)?.outcome).not.toBe('not_attempted');
        for (const t of opened.splice(0)) await t.dispose();
      }),
      { numRuns: 40 },
    );
  });
});
