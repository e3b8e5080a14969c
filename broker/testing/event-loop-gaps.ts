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

/**
 * watchEventLoop, run again (up to `attempts` runs in all) while a run's largest gap is not under `gapBelowMs`: the
 * first run under it, or else the one with the smallest gap. For a bound that the code meets but that a loaded
 * machine can break once, when the OS or a full GC stops the whole process between two ticks. Code that does not
 * yield breaks it in every run (its gap is its whole work), so the test still fails on it. A run that did not meet
 * the bound is said on stderr, so a CI log shows the noise that was met.
 */
export async function watchEventLoopQuietest<T>(
  work: () => Promise<T>,
  gapBelowMs: number,
  attempts = 3,
): Promise<WatchedLoop<T>> {
  let latest = await watchEventLoop(work);
  let quietest = latest;
  for (let attempt = 1; attempt < attempts && latest.maxGapMs >= gapBelowMs; attempt += 1) {
    process.stderr.write(
      `watchEventLoopQuietest: run ${attempt} of ${attempts} had a gap of ${latest.maxGapMs.toFixed(1)} ms (bound ${gapBelowMs} ms); running it again\n`,
    );
    latest = await watchEventLoop(work);
    if (latest.maxGapMs < quietest.maxGapMs) quietest = latest;
  }
  if (latest.maxGapMs >= gapBelowMs)
    process.stderr.write(
      `watchEventLoopQuietest: run ${attempts} of ${attempts} had a gap of ${latest.maxGapMs.toFixed(1)} ms\n`,
    );
  return quietest;
}
