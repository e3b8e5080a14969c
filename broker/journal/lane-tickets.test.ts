import Database from 'better-sqlite3';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { isCodedError, type ActionState, type NewEvent } from '../contract/index.js';
import { ticketStanding } from '../core/index.js';
import { actionPathNames, actionPaths, type ActionPathName } from '../testing/action-paths.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { Journal } from './journal.js';
import { LaneTickets } from './lane-tickets.js';

const opened: TempJournal[] = [];
const readers: Database.Database[] = [];
afterEach(async () => {
  for (const r of readers.splice(0)) r.close();
  for (const t of opened.splice(0)) await t.dispose();
});

/** Just the fields ticketStanding and the index read. */
function ticket(
  action_id: string,
  lane: string | null,
  n: number | null,
  standing: 'open' | 'in_flight' | 'blocked' | 'resolved',
  last_seq = n ?? 0,
): ActionState {
  const fields = {
    open: { dispatch_seq: null, outcome: null, recorded: false, abandoned: false },
    in_flight: { dispatch_seq: 1, outcome: null, recorded: false, abandoned: false },
    blocked: { dispatch_seq: 1, outcome: 'unknown', recorded: true, abandoned: false },
    resolved: { dispatch_seq: 1, outcome: 'committed', recorded: true, abandoned: false },
  }[standing];
  return { action_id, lane, ticket: n, last_seq, ...fields } as unknown as ActionState;
}

describe('the lanes’ unresolved tickets in memory', () => {
  it('keep each lane in ticket order whatever order the states arrive in, and list from a ticket on', () => {
    const lanes = LaneTickets.load([ticket('a7', 'x', 7, 'open'), ticket('a2', 'x', 2, 'blocked')]);
    lanes.moved(ticket('a5', 'x', 5, 'in_flight'));
    lanes.moved(ticket('a9', 'y', 9, 'open'));
    expect(lanes.list('x', 1, 10).map((t) => t.ticket)).toEqual([2, 5, 7]);
    expect(lanes.list('x', 3, 10).map((t) => t.ticket)).toEqual([5, 7]);
    expect(lanes.list('x', 5, 1).map((t) => t.ticket)).toEqual([5]);
    expect(lanes.list('x', 8, 10)).toEqual([]);
    expect(lanes.list('nowhere', 1, 10)).toEqual([]);
    expect(lanes.heads()).toEqual(
      new Map([
        ['x', 2],
        ['y', 9],
      ]),
    );
    expect(lanes.size()).toBe(4);
  });

  it('move a ticket to its new position, drop it once resolved, and forget a lane left empty', () => {
    const lanes = LaneTickets.load([ticket('a1', 'x', 1, 'in_flight', 10), ticket('a2', 'x', 2, 'open', 11)]);
    lanes.moved(ticket('a1', 'x', 1, 'blocked', 14));
    expect(
      lanes.list('x', 1, 10).map(({ ticket: n, action_id, last_seq }) => ({ ticket: n, action_id, last_seq })),
    ).toEqual([
      { ticket: 1, action_id: 'a1', last_seq: 14 },
      { ticket: 2, action_id: 'a2', last_seq: 11 },
    ]);
    // Each entry is the state as written, found by id too until it resolves.
    expect(lanes.list('x', 1, 1)[0]?.state).toBe(lanes.stateOf('a1'));
    expect(lanes.stateOf('a1')?.last_seq).toBe(14);
    lanes.moved(ticket('a1', 'x', 1, 'resolved', 15));
    expect(lanes.stateOf('a1')).toBeUndefined();
    expect(lanes.list('x', 1, 10).map((t) => t.action_id)).toEqual(['a2']);
    lanes.moved(ticket('a2', 'x', 2, 'resolved', 16));
    expect(lanes.heads()).toEqual(new Map());
    expect(lanes.size()).toBe(0);
    // A resolved ticket never seen, a read without a lane and one without a ticket leave nothing behind.
    lanes.moved(ticket('a3', 'x', 3, 'resolved'));
    lanes.moved(ticket('a4', null, 4, 'open'));
    lanes.moved(ticket('a5', 'x', null, 'open'));
    expect(lanes.size()).toBe(0);
  });
});

const laneNames = ['lane-a', 'lane-b', 'lane-c'] as const;

/** Each lane as the actions table says: every row of the lane, parsed, in ticket order, minus the resolved ones. */
function lanesFromDisk(scan: Database.Database): Map<string, ActionState[]> {
  const read = scan.prepare<[string], { state: string }>(`SELECT state FROM actions WHERE lane = ? ORDER BY ticket`);
  return new Map(
    laneNames.map((lane) => [
      lane,
      read
        .all(lane)
        .map((row) => JSON.parse(row.state) as ActionState)
        .filter((s) => ticketStanding(s) !== 'resolved'),
    ]),
  );
}

function expectLanesEqualDisk(journal: Journal, scan: Database.Database): void {
  const disk = lanesFromDisk(scan);
  for (const lane of laneNames) expect([lane, journal.listLane(lane)]).toEqual([lane, disk.get(lane)]);
  const heads = new Map([...disk].flatMap(([lane, states]) => (states[0] ? [[lane, states[0].ticket]] : [])));
  const lastTicket = scan.prepare<[], { n: number }>(`SELECT coalesce(max(ticket), 0) AS n FROM actions`).get()?.n;
  expect(journal.laneHeads()).toEqual({ heads, lastTicket });
}

function inLane(events: readonly NewEvent[], lane: string): NewEvent[] {
  return events.map((event) => (event.kind === 'ACTION_ACCEPTED' ? { ...event, lane } : event));
}

const spec = fc.record({
  path: fc.constantFrom(...actionPathNames),
  lane: fc.constantFrom(...laneNames),
  // How many of its events the script appends before it stops (undefined: all), and the wave it starts in.
  cut: fc.option(fc.integer({ min: 1, max: 15 }), { nil: undefined }),
  start: fc.integer({ min: 0, max: 6 }),
});

describe('when random mixes of action paths share three lanes, with refusals and a restart', () => {
  it('after every commit each lane lists from memory exactly the unresolved tickets the actions table holds', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(spec, { minLength: 1, maxLength: 10 }),
        // The wave of the first lane read (the tickets are loaded then, and moved by every commit after) and the
        // wave of the restart (loaded again from disk, after recovery closed what was left open).
        fc.integer({ min: 0, max: 20 }),
        fc.integer({ min: 0, max: 21 }),
        async (specs, firstReadWave, restartWave) => {
          const live = await openTempJournal();
          opened.push(live);
          let journal = live.journal;
          const scan = new Database(live.path, { readonly: true, fileMustExist: true });
          readers.push(scan);
          const scripts = specs.map(({ path, lane, cut }, i) =>
            inLane(actionPaths[path as ActionPathName](`act_${path.slice(0, 20)}_${i}`), lane).slice(0, cut),
          );
          for (let w = 0; w < 22; w += 1) {
            if (w === restartWave) {
              await journal.close();
              journal = await Journal.open({ path: live.path, clock: live.clock, vault: live.vault });
              opened.push({ ...live, journal, dispose: () => journal.close() });
            }
            const events = scripts.flatMap((s, i) => {
              const next = w - (specs[i]?.start ?? 0);
              return next < 0 ? [] : s.slice(next, next + 1);
            });
            // One group commit per wave; a lost race (another ticket's event first) is refused and changes nothing.
            const settled = await Promise.allSettled(events.map((event) => journal.append(event)));
            for (const s of settled) if (s.status === 'rejected' && !isCodedError(s.reason)) throw s.reason;
            if (w >= firstReadWave) expectLanesEqualDisk(journal, scan);
          }
          expectLanesEqualDisk(journal, scan);
        },
      ),
      { numRuns: 40 },
    );
  });
});

describe("when another process edits an unknown head's row while the broker runs (THREAT-MODEL)", () => {
  it('the lane reads the head as the journal wrote it: still blocking, so the next ticket is not released', async () => {
    const t = await openTempJournal();
    opened.push(t);
    // An earlier run left an unknown head (cut after dispatch) and a ticket waiting behind it.
    for (const event of inLane(actionPaths.callerCancelledAfterDispatch('act_head_0001'), 'deploy'))
      await t.journal.append(event);
    await t.journal.close();
    const journal = await Journal.open({ path: t.path, clock: t.clock, vault: t.vault });
    opened.push({ ...t, journal, dispose: () => journal.close() });
    // At once, before any lane read of this run: the agent's own connection to the file makes the head's row say a
    // person abandoned it, and settled.
    const forger = new Database(t.path, { timeout: 5_000 });
    try {
      const row = forger.prepare('SELECT state FROM actions WHERE action_id = ?').get('act_head_0001') as {
        state: string;
      };
      const forged = { ...(JSON.parse(row.state) as ActionState), abandoned: true, outcome: 'committed' };
      forger
        .prepare('UPDATE actions SET state = ?, outcome = ? WHERE action_id = ?')
        .run(JSON.stringify(forged), 'committed', 'act_head_0001');
    } finally {
      forger.close();
    }
    // The attack's premise: read back from the table, the head no longer blocks.
    const scan = new Database(t.path, { readonly: true, fileMustExist: true });
    readers.push(scan);
    const stored = scan.prepare('SELECT state FROM actions WHERE action_id = ?').get('act_head_0001') as {
      state: string;
    };
    expect(ticketStanding(JSON.parse(stored.state) as ActionState)).toBe('resolved');

    // This run: a ticket joins the lane behind the head (the cache holds it; the head, from the earlier run, it does not).
    for (const event of inLane(actionPaths.httpNoApproval('act_next_0002').slice(0, 3), 'deploy'))
      await journal.append(event);
    expect(journal.laneHeads().heads.get('deploy')).toBe(journal.getAction('act_head_0001')?.ticket);

    const lane = journal.listLane('deploy');
    expect(lane.map((s) => [s.action_id, ticketStanding(s)])).toEqual([
      ['act_head_0001', 'blocked'],
      ['act_next_0002', 'open_before_dispatch'],
    ]);
    expect(journal.getAction('act_head_0001')).toMatchObject({ outcome: 'unknown', abandoned: false });
    // A person's own decision still folds over the journal's state, not the forged row: abandoning is accepted once.
    expect(lane[0]?.abandoned).toBe(false);
  });
});
