import { performance } from 'node:perf_hooks';
import { nextSlice, slicesWaiting } from '../ports/loop-slices.js';

/**
 * CPU-heavy work written once as a generator that yields between units of work (a view searched, a decoder call), and
 * run either way (THREAT-MODEL 4: one agent's large answer must not wedge the event loop for everyone else):
 * to completion at once (`runSteps`), or in slices (`runStepsSliced`) that give the event loop a turn whenever
 * `sliceMs` of work has passed since the last one. Both run the same steps in the same order: same result, same cost.
 */
export type Steps<T> = Generator<void, T, void>;

/** Slice length: short enough that other callers, timers and the operator API wait at most about this long. */
export const sliceMsDefault = 5;

export function runSteps<T>(steps: Steps<T>): T {
  for (;;) {
    const next = steps.next();
    if (next.done === true) return next.value;
  }
}

export async function runStepsSliced<T>(steps: Steps<T>, sliceMs = sliceMsDefault): Promise<T> {
  // Behind other sliced work that waits for its turn, this one's first slice waits too: eight answers starting in one
  // turn would otherwise run eight first slices back to back. Alone (the common case) it starts at once.
  if (slicesWaiting() > 0) await nextSlice();
  let sliceStart = performance.now();
  for (;;) {
    const next = steps.next();
    if (next.done === true) return next.value;
    if (performance.now() - sliceStart >= sliceMs) {
      // A later loop turn, not a resolved promise: I/O callbacks and timers run before the next slice, and the other
      // sliced work waiting has its turn first (one slice per turn: loop-slices.ts).
      await nextSlice();
      sliceStart = performance.now();
    }
  }
}
