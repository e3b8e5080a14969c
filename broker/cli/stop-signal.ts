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
