import { isCodedError, type NewEvent } from '../contract/index.js';
import type { Journal } from '../journal/journal.js';
import type { FakeClock } from './fake-clock.js';

export interface DriveResult {
  appended: number;
  /** Codes of the refused events, in the order they were refused. */
  refused: string[];
}

/**
 * Drives several action scripts concurrently, the way independent dispatchers would: in each wave
 * every unfinished script appends its next event at once (so the journal groups them into one
 * commit), then the clock moves 1 ms. `extra(wave)` may add events to a wave, e.g. impossible ones
 * that the journal must refuse without failing the rest of the batch.
 */
export async function drivePaths(
  journal: Journal,
  clock: FakeClock,
  scripts: readonly (readonly NewEvent[])[],
  extra: (wave: number) => readonly NewEvent[] = () => [],
): Promise<DriveResult> {
  const result: DriveResult = { appended: 0, refused: [] };
  const longest = Math.max(0, ...scripts.map((s) => s.length));
  for (let wave = 0; wave < longest; wave += 1) {
    const events = [...scripts.flatMap((s) => s.slice(wave, wave + 1)), ...extra(wave)];
    const settled = await Promise.allSettled(events.map((event) => journal.append(event)));
    for (const s of settled) {
      if (s.status === 'fulfilled') result.appended += 1;
      else if (isCodedError(s.reason)) result.refused.push(s.reason.code);
      else throw s.reason;
    }
    clock.advance(1);
  }
  return result;
}
