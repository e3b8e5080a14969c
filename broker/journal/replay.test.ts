import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import type { NewEvent } from '../contract/index.js';
import { project } from '../core/index.js';
import {
  actionPathNames,
  actionPaths,
  impossibleEvents,
  reconciledByLookup,
  type ActionPathName,
} from '../testing/action-paths.js';
import { drivePaths } from '../testing/drive-paths.js';
import { replayJournal } from '../testing/replay-journal.js';
import { readStateTables } from '../testing/state-tables.js';
import { tempJournals } from '../testing/temp-journal.js';
import { Journal } from './journal.js';

const { open: tempJournal, disposeOpened } = tempJournals();
afterEach(disposeOpened);

/** Replays `source`'s whole log into an empty journal and returns both sides' state tables. */
async function replayAndCompare(source: Journal, sourcePath: string): Promise<void> {
  const target = await tempJournal();
  const replayed = await replayJournal(source.events(), target.journal, target.clock);
  expect(replayed).toBe(source.stats().events);
  expect(readStateTables(target.path)).toEqual(readStateTables(sourcePath));
  // And the stored state is the pure fold of the stored log.
  const folded = project(source.events());
  for (const state of source.listActions()) expect(folded.get(state.action_id)).toEqual(state);
}

function idOf(name: string, n: number): string {
  return `act_${name.slice(0, 24)}_${String(n).padStart(3, '0')}`;
}

describe('when many actions went through varied paths, a restart and late evidence', () => {
  it('replaying the log into an empty journal rebuilds the current-state tables row for row', async () => {
    const live = await tempJournal();
    const scripts: NewEvent[][] = [];
    for (const name of actionPathNames) {
      for (const n of [1, 2]) scripts.push(actionPaths[name](idOf(name, n)));
    }
    // Left in flight at every step of the approved path, and mid-retry: recovery's work.
    const approvedLength = actionPaths.httpApproved('act_x_000000').length;
    for (let cut = 1; cut < approvedLength - 1; cut += 1)
      scripts.push(actionPaths.httpApproved(idOf('inflight', cut)).slice(0, cut));
    scripts.push(actionPaths.setupFailedThenSent(idOf('retrying', 1)).slice(0, 4));
    scripts.push(actionPaths.setupFailedThenSent(idOf('retrying', 2)).slice(0, 8));

    const impossibleEvery = 3;
    const driven = await drivePaths(live.journal, live.clock, scripts, (wave) =>
      wave % impossibleEvery === 0 ? impossibleEvents(idOf('httpNoApproval', 1)) : [],
    );
    expect(driven.refused.length).toBeGreaterThan(0);
    expect(new Set(driven.refused)).toEqual(new Set(['IMPOSSIBLE_TRANSITION']));
    await live.journal.close();

    const reopened = await Journal.open({ path: live.path, clock: live.clock, vault: live.vault });
    const recovered = reopened.stats().recovered_at_open;
    // Cuts 1..9 of the approved path (all before RESULT_COMMITTED), deadlineInFlight twice, and
    // the two interrupted retries; every other script ended classified.
    expect(recovered).toBe(approvedLength - 2 + 2 + 2);
    for (const state of reopened.listActions()) {
      if (state.dispatch_seq !== null) expect(state.outcome).not.toBe('not_attempted');
    }
    // Late evidence after the restart, and a new action continuing the ticket sequence.
    live.clock.advance(1_000);
    await reopened.append(reconciledByLookup(idOf('inflight', 7), 'act_lookup_0002'));
    const after = await reopened.appendBatch(actionPaths.callerCancelledBeforeDispatch(idOf('afterRestart', 1)));
    expect(after[0]?.event.ticket).toBe(scripts.length + 1);

    await replayAndCompare(reopened, live.path);
    await reopened.close();
  });
});

const pathSpec = fc.record({
  path: fc.constantFrom(...actionPathNames),
  // How many of its events the script gets to append before it stops (undefined: all).
  cut: fc.option(fc.integer({ min: 1, max: 15 }), { nil: undefined }),
});

describe('when generated mixes of paths are interrupted by a restart at any wave', () => {
  it('the live state tables always equal a replay of the log, and dispatched actions are never not_attempted', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(pathSpec, { minLength: 1, maxLength: 8 }),
        fc.integer({ min: 0, max: 16 }),
        fc.boolean(),
        async (specs, restartWave, injectImpossible) => {
          const live = await tempJournal();
          const scripts = specs.map(({ path, cut }, i) =>
            actionPaths[path as ActionPathName](idOf(path, i)).slice(0, cut),
          );
          const extra = (wave: number): NewEvent[] =>
            injectImpossible ? impossibleEvents(idOf(specs[0]?.path ?? 'x', 0)).slice(wave % 3, (wave % 3) + 1) : [];
          await drivePaths(
            live.journal,
            live.clock,
            scripts.map((s) => s.slice(0, restartWave)),
            extra,
          );
          await live.journal.close();

          const reopened = await Journal.open({ path: live.path, clock: live.clock, vault: live.vault });
          // The old dispatchers' continuations arrive late; the projection decides what still fits.
          await drivePaths(
            reopened,
            live.clock,
            scripts.map((s) => s.slice(restartWave)),
          );
          for (const state of reopened.listActions()) {
            if (state.dispatch_seq !== null) expect(state.outcome).not.toBe('not_attempted');
          }
          await replayAndCompare(reopened, live.path);
          await reopened.close();
          await disposeOpened();
        },
      ),
      { numRuns: 25 },
    );
  }, 120_000);
});
