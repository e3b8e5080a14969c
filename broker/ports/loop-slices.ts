/**
 * One loop turn per slice of CPU-heavy work, whoever it belongs to (THREAT-MODEL 4: one agent's large answers must not
 * wedge the event loop for the others). Work that runs in slices (the secret scrubber's search, the join of a decoded
 * body) waits here between slices: the waiting slices are released one per turn of the loop, first come first served,
 * and a slice that waits again goes to the back. With setImmediate alone, every waiting slice ran in the same check
 * phase, back to back: N answers in slices held the loop ~N × 5 ms between turns; here it is one slice, whatever N.
 */
const waiting: Array<() => void> = [];

function releaseNext(): void {
  const next = waiting.shift();
  // Scheduled from the check phase, the next release is a loop turn later: I/O and timers run in between.
  if (waiting.length > 0) setImmediate(releaseNext);
  next?.();
}

/** Resolves on a later turn of the event loop, when every slice that asked before has had its turn. */
export function nextSlice(): Promise<void> {
  return new Promise((resolve) => {
    waiting.push(resolve);
    if (waiting.length === 1) setImmediate(releaseNext);
  });
}

/** Slices waiting for their turn now (tests). */
export function slicesWaiting(): number {
  return waiting.length;
}
