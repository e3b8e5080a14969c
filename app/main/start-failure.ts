import { dateTime, type TimeOptions } from '../../broker/contract/time-words.js';
import { BrokerAlreadyRunning } from '../../broker/host/index.js';

/**
 * The text of the desktop's "Postern could not start" box. A time in it is written as every console time (local,
 * 24-hour, the zone named: time-words.ts), never the terminal's ISO UTC that the error's own message carries: a
 * broker already holding the data directory is named with its start in this machine's zone. `zone` is for tests.
 */
export function startFailureText(error: unknown, zone?: TimeOptions['zone']): string {
  if (error instanceof BrokerAlreadyRunning) return error.describe((ms) => dateTime(ms, { zone }));
  return error instanceof Error ? error.message : String(error);
}
