import { performance } from 'node:perf_hooks';

/** What watchEventLoop saw: the work's value, the largest gap between two ticks of the loop, and how long it all took. */
export interface WatchedLoop<T> {
  readonly value: T;
  readonly maxGapMs: number;
  readonly tookMs: number;
}

/**
 * Runs `work` while a 1 ms ticker watches the event loop (THREAT-MODEL 4 tests: no answer may hold the loop): the
 * largest gap between two ticks, the last stretch up to the work's end included. A loop that other callers share never
 * shows a gap much longer than the longest stretch of work that ran without yielding.
 */
export async function watchEventLoop<T>(work: () => Promise<T>): Promise<WatchedLoop<T>> {
  let last = performance.now();
  let maxGapMs = 0;
  const ticker = setInterval(() => {
    const now = performance.now();
    maxGapMs = Math.max(maxGapMs, now - last);
    last = now;
  }, 1);
  const started = (last = performance.now());
  try {
    const value = await work();
    maxGapMs = Math.max(maxGapMs, performance.now() - last);
    return { value, maxGapMs, tookMs: performance.now() - started };
  } finally {
    clearInterval(ticker);
  }
}
