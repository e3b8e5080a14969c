/**
 * How a broker host stops (the desktop's quit, the headless daemon's SIGTERM/SIGINT), as one sequence with injected
 * steps and time (no timers of its own, so the tests drive it with a fake clock): stop intake → drain the actions
 * already released to their executors, bounded → close the runtime (sockets, queue, vault, journal). A drain that runs
 * out of time still closes: the runtime cuts what is still in flight once its journal is closed, and the journal's
 * recovery records it at the next start (dispatched → unknown, BROKER_RESTARTED), never guessed.
 */
import type { BrokerRuntime } from './broker-runtime.js';

/** How long a stop waits for dispatched actions to settle before closing anyway (docs/desktop.md, docs/operator.md). */
export const drainBoundMs = 10_000;
/** How often the drain looks again. */
export const drainPollMs = 100;

export interface ShutdownSteps {
  /** Refuse new work (the host's own surfaces, then the runtime's sockets and releases). */
  stopIntake(): void | Promise<void>;
  /** Actions released to their executors and not settled yet (BrokerRuntime.inFlight). */
  inFlight(): number | Promise<number>;
  /** Close the broker runtime: agent and control sockets, queue, vault, journal; then cut what is left in flight. */
  closeRuntime(): Promise<void>;
  nowMs(): number;
  sleep(ms: number): Promise<void>;
}

export interface ShutdownReport {
  /** True when nothing was in flight any more when the runtime closed. */
  readonly drained: boolean;
  /** In flight at the last look (0 when drained). */
  readonly leftInFlight: number;
  readonly waitedMs: number;
}

export interface ShutdownBounds {
  readonly drainBoundMs: number;
  readonly drainPollMs: number;
}

export async function runShutdown(
  steps: ShutdownSteps,
  bounds: ShutdownBounds = { drainBoundMs, drainPollMs },
): Promise<ShutdownReport> {
  await steps.stopIntake();
  const startedMs = steps.nowMs();
  let left = await countSafely(steps);
  while (left > 0 && steps.nowMs() - startedMs < bounds.drainBoundMs) {
    await steps.sleep(Math.min(bounds.drainPollMs, Math.max(0, bounds.drainBoundMs - (steps.nowMs() - startedMs))));
    left = await countSafely(steps);
  }
  const waitedMs = steps.nowMs() - startedMs;
  await steps.closeRuntime();
  return { drained: left === 0, leftInFlight: left, waitedMs };
}

/** A count that cannot be read (the journal already failed) means there is nothing left to wait for. */
async function countSafely(steps: ShutdownSteps): Promise<number> {
  try {
    return await steps.inFlight();
  } catch {
    return 0;
  }
}

/**
 * The one stop both hosts run on a runtime: their own intake first (`stopHostIntake`: the desktop's IPC gate and
 * approval watcher, the daemon's operator HTTP host), then the runtime's (control socket, agent socket's listener,
 * the queue's releases), the drain on `runtime.inFlight()`, and `runtime.close()`.
 */
export function shutDownRuntime(
  runtime: Pick<BrokerRuntime, 'stopIntake' | 'inFlight' | 'close'>,
  options: {
    readonly stopHostIntake: () => void | Promise<void>;
    readonly bounds?: ShutdownBounds;
    readonly nowMs?: () => number;
    readonly sleep?: (ms: number) => Promise<void>;
  },
): Promise<ShutdownReport> {
  return runShutdown(
    {
      stopIntake: async () => {
        await options.stopHostIntake();
        await runtime.stopIntake();
      },
      inFlight: () => runtime.inFlight(),
      closeRuntime: () => runtime.close(),
      nowMs: options.nowMs ?? (() => Date.now()),
      sleep: options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms))),
    },
    options.bounds,
  );
}

/** One line for the operator when the drain ran out: how long it waited and how many actions it cut. */
export function describeCutShutdown(report: ShutdownReport): string | undefined {
  if (report.drained) return undefined;
  return (
    `stopped after draining ${report.waitedMs} ms with ${report.leftInFlight} action(s) still in flight: cut, ` +
    'and recorded at the next start (outcome unknown after dispatch)'
  );
}
