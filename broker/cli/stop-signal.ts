import type { CliIo } from './cli-io.js';

const stopSignals = ['SIGINT', 'SIGTERM'] as const;
export type StopSignal = (typeof stopSignals)[number];

/**
 * Resolves with the first SIGINT or SIGTERM. A second signal while shutting down exits at once
 * (exit code 130), for the operator whose shutdown is stuck.
 */
export function waitForStopSignal(io: CliIo): Promise<StopSignal> {
  return new Promise((resolve) => {
    let received = false;
    for (const signal of stopSignals) {
      process.on(signal, () => {
        if (received) {
          io.err(`Received ${signal} again; exiting without waiting.`);
          process.exit(130);
        }
        received = true;
        resolve(signal);
      });
    }
  });
}

/**
 * How long the stop drains: the bound for SIGINT/SIGTERM; none once an inspector was found open — whoever connected to
 * it could run code in this process, so the broker closes at once (vault locked, journal closed) rather than keep its
 * vault unlocked for a drain; what is in flight is cut and the next start records it.
 */
export function stopDrainBoundMs(signal: StopSignal | 'DEBUGGER_OPEN', boundMs: number): number {
  return signal === 'DEBUGGER_OPEN' ? 0 : boundMs;
}
