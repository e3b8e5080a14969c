import { afterEach, describe, expect, it, vi } from 'vitest';
import { measureUntilMet, watchEventLoop, watchEventLoopQuietest } from './event-loop-gaps.js';

/** Holds the loop for `ms` without a turn, as code that does not yield does. */
function holdLoop(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // busy
  }
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 20));

describe('watchEventLoop', () => {
  it('sees a stretch of work that never yields as one gap at least that long', async () => {
    const watched = await watchEventLoop(async () => {
      await settle();
      holdLoop(120);
      await settle();
      return 'done';
    });
    expect(watched.value).toBe('done');
    expect(watched.maxGapMs).toBeGreaterThanOrEqual(120);
    expect(watched.tookMs).toBeGreaterThanOrEqual(watched.maxGapMs);
  });
});

describe('watchEventLoopQuietest', () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('runs the work again after a run over the bound, and keeps the run that met it', async () => {
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    let runs = 0;
    const watched = await watchEventLoopQuietest(async () => {
      runs += 1;
      await settle();
      if (runs === 1) holdLoop(500);
      return runs;
    }, 400);
    expect(runs).toBe(2);
    expect(watched.value).toBe(2);
    expect(watched.maxGapMs).toBeLessThan(400);
    expect(stderr).toHaveBeenCalledWith(
      expect.stringMatching(/^watchEventLoopQuietest: run 1 of 3 had a gap of \d{3,}\.\d ms \(bound 400 ms\)/),
    );
  });

  it('code that never yields breaks the bound in every run: all three are run, and the smallest gap is still over it', async () => {
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    let runs = 0;
    const watched = await watchEventLoopQuietest(async () => {
      runs += 1;
      await settle();
      holdLoop(runs === 2 ? 150 : 250);
      return runs;
    }, 100);
    expect(runs).toBe(3);
    expect(watched.maxGapMs).toBeGreaterThanOrEqual(150);
    // Each run's gap is said on stderr, and the run kept is the quietest of the three.
    const said = stderr.mock.calls.map(([line]) => Number(/had a gap of ([\d.]+) ms/.exec(String(line))?.[1]));
    expect(said).toHaveLength(3);
    expect(watched.maxGapMs.toFixed(1)).toBe(Math.min(...said).toFixed(1));
  });

  it('runs once when the first run meets the bound', async () => {
    let runs = 0;
    const watched = await watchEventLoopQuietest(async () => {
      runs += 1;
      await settle();
      return runs;
    }, 400);
    expect(runs).toBe(1);
    expect(watched.value).toBe(1);
  });
});

describe('measureUntilMet', () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  const counted = (values: number[]) => {
    let runs = 0;
    return {
      measure: async () => values[runs++] ?? Number.NaN,
      get runs() {
        return runs;
      },
    };
  };

  it('stops at the first run that meets the bound and says each miss before it on stderr', async () => {
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    const source = counted([9, 2, 1]);
    const runs = await measureUntilMet({
      label: 'probe',
      measure: source.measure,
      meets: (n) => n < 5,
      describe: (n) => `measured ${n}`,
    });
    expect(runs).toEqual([9, 2]);
    expect(source.runs).toBe(2);
    expect(stderr.mock.calls.map(([line]) => String(line))).toEqual([
      'probe: run 1 of 3 measured 9; running it again\n',
    ]);
  });

  it('runs every attempt when none meets the bound, and returns them all with the last last', async () => {
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    const source = counted([9, 8, 7, 6]);
    const runs = await measureUntilMet({
      label: 'probe',
      attempts: 3,
      measure: source.measure,
      meets: (n) => n < 5,
      describe: (n) => `measured ${n}`,
    });
    expect(runs).toEqual([9, 8, 7]);
    expect(source.runs).toBe(3);
    expect(stderr.mock.calls.map(([line]) => String(line))).toEqual([
      'probe: run 1 of 3 measured 9; running it again\n',
      'probe: run 2 of 3 measured 8; running it again\n',
      'probe: run 3 of 3 measured 7\n',
    ]);
  });
});
