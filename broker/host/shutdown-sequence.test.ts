import { describe, expect, it } from 'vitest';
import { runShutdown, type ShutdownSteps } from './shutdown-sequence.js';

/** A fake clock whose sleep advances time; `inFlight` answers from a script, one value per look. */
function fakeSteps(script: number[], options: { failCount?: boolean } = {}): ShutdownSteps & { log: string[] } {
  let now = 1_000;
  const log: string[] = [];
  let looks = 0;
  return {
    log,
    stopIntake: () => void log.push('stop intake'),
    inFlight: () => {
      if (options.failCount === true) throw new Error('journal closed');
      const n = script[Math.min(looks, script.length - 1)] ?? 0;
      looks += 1;
      log.push(`in flight ${n}`);
      return n;
    },
    closeRuntime: () => {
      log.push('close runtime');
      return Promise.resolve();
    },
    nowMs: () => now,
    sleep: (ms) => {
      now += ms;
      log.push(`sleep ${ms}`);
      return Promise.resolve();
    },
  };
}

const bounds = { drainBoundMs: 1_000, drainPollMs: 100 };

describe('the shutdown sequence (desktop quit, daemon SIGTERM)', () => {
  it('when nothing is in flight, stops intake and closes at once', async () => {
    const steps = fakeSteps([0]);
    await expect(runShutdown(steps, bounds)).resolves.toEqual({ drained: true, leftInFlight: 0, waitedMs: 0 });
    expect(steps.log).toEqual(['stop intake', 'in flight 0', 'close runtime']);
  });

  it('when actions are in flight, waits for them to settle before closing the journal', async () => {
    const steps = fakeSteps([2, 1, 0]);
    await expect(runShutdown(steps, bounds)).resolves.toEqual({ drained: true, leftInFlight: 0, waitedMs: 200 });
    expect(steps.log).toEqual([
      'stop intake',
      'in flight 2',
      'sleep 100',
      'in flight 1',
      'sleep 100',
      'in flight 0',
      'close runtime',
    ]);
  });

  it('when an action never settles, closes anyway once the bound has passed', async () => {
    const steps = fakeSteps([1]);
    const report = await runShutdown(steps, bounds);
    expect(report).toEqual({ drained: false, leftInFlight: 1, waitedMs: 1_000 });
    expect(steps.log.at(-1)).toBe('close runtime');
    expect(steps.log.filter((line) => line.startsWith('sleep'))).toHaveLength(10);
  });

  it('never sleeps past the bound', async () => {
    const steps = fakeSteps([1]);
    await runShutdown(steps, { drainBoundMs: 250, drainPollMs: 100 });
    expect(steps.log.filter((line) => line.startsWith('sleep'))).toEqual(['sleep 100', 'sleep 100', 'sleep 50']);
  });

  it('when the count cannot be read (the journal already failed), closes without waiting', async () => {
    const steps = fakeSteps([], { failCount: true });
    await expect(runShutdown(steps, bounds)).resolves.toMatchObject({ drained: true, waitedMs: 0 });
    expect(steps.log).toEqual(['stop intake', 'close runtime']);
  });

  it('stops intake before the first look, so nothing new starts while it drains', async () => {
    const steps = fakeSteps([0]);
    await runShutdown(steps, bounds);
    expect(steps.log.indexOf('stop intake')).toBeLessThan(steps.log.indexOf('in flight 0'));
  });
});
