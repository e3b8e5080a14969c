import { performance } from 'node:perf_hooks';
import { describe, expect, it } from 'vitest';
import { slicesWaiting } from '../ports/loop-slices.js';
import { watchEventLoop } from '../testing/event-loop-gaps.js';
import { runSteps, runStepsSliced, sliceMsDefault, type Steps } from './sliced-work.js';

/** `count` steps of `stepMs` of CPU each (a busy wait: the clock, not the machine's speed, sets its length). */
function* busySteps(count: number, stepMs: number, done: number[], id: number): Steps<number> {
  for (let i = 0; i < count; i++) {
    const until = performance.now() + stepMs;
    while (performance.now() < until);
    yield;
  }
  done.push(id);
  return id;
}

const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

describe('sliced work', () => {
  it('runs the same steps to the same result at once and in slices', async () => {
    expect(runSteps(busySteps(3, 0, [], 7))).toBe(7);
    expect(await runStepsSliced(busySteps(3, 0, [], 7))).toBe(7);
  });

  it('of many answers at once gives the loop a turn after each slice, not after one slice of every answer', async () => {
    // Eight answers in slices at once (say, eight agents' large bodies being scrubbed). Released by setImmediate alone,
    // every waiting slice ran in the same check phase: ~8 × 5 ms between two turns of the loop. One slice per turn
    // keeps the gap near one slice (5 ms plus the step that crossed it) however many wait.
    const runners = 8;
    const gaps: number[] = [];
    for (let round = 0; round < 3; round++) {
      const done: number[] = [];
      const { value, maxGapMs, tookMs } = await watchEventLoop(() =>
        Promise.all(Array.from({ length: runners }, (_, id) => runStepsSliced(busySteps(40, 1, done, id)))),
      );
      expect(value).toEqual([...Array(runners).keys()]);
      // All the work ran (8 × 40 × 1 ms), and every runner finished: none was starved by the others.
      expect(tookMs).toBeGreaterThan(runners * 40);
      expect(done).toHaveLength(runners);
      gaps.push(maxGapMs);
    }
    expect(slicesWaiting()).toBe(0);
    // Between one slice (~6 ms) and all eight (~48 ms): a bound that holds under load, since the busy waits are timed.
    expect(median(gaps), `largest gaps ms: ${gaps.map((g) => g.toFixed(1)).join(', ')}`).toBeLessThan(
      4 * (sliceMsDefault + 1),
    );
  });
});
