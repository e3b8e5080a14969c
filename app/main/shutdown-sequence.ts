/**
 * How the desktop app stops, as a sequence with injected steps and time (no Electron, no timers of
 * its own, so the tests drive it with a fake clock): stop intake → drain in-flight work, bounded →
 * close the runtime (sockets, queue, vault, journal). A drain that runs out of time still closes:
 * what is still in flight at that point is recorded by the journal's recovery at the next start
 * (dispatched → unknown), never guessed.
 */

/** How long a quit waits for dispatched actions to settle before closing anyway. */
export const drainBoundMs = 10_000;
/** How often the drain looks again. */
export const drainPollMs = 100;

export interface ShutdownSteps {
  /** Refuse new work (IPC answers SHUTTING_DOWN, the approval watcher stops). */
  stopIntake(): void | Promise<void>;
  /** Actions on their way or in flight now (the queue's `dispatching` cards). */
  inFlight(): number | Promise<number>;
  /** Close the broker runtime: agent and control sockets, queue, vault, journal. */
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

export async function runShutdown(
  steps: ShutdownSteps,
  bounds: { drainBoundMs: number; drainPollMs: number } = { drainBoundMs, drainPollMs },
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
 * Electron's will-quit fires again for every app.quit(); the first one holds the quit and starts the
 * shutdown, later ones while it runs keep holding, and the one after it finished lets the app go.
 */
export type QuitDecision = 'start-shutdown' | 'hold' | 'let-quit';

export function createQuitGate(): { onWillQuit(): QuitDecision; finished(): void } {
  let state: 'running' | 'stopping' | 'stopped' = 'running';
  return {
    onWillQuit() {
      if (state === 'running') {
        state = 'stopping';
        return 'start-shutdown';
      }
      return state === 'stopping' ? 'hold' : 'let-quit';
    },
    finished() {
      state = 'stopped';
    },
  };
}
