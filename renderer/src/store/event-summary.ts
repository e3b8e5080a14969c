import type { ActivityEvent } from '../../../broker/contract/index.js';
import { dateTime, type TimeOptions } from '../../../broker/contract/time-words.js';

/**
 * An event's summary as the console writes it. The broker's summary writes a time ISO UTC, as the terminal does
 * (broker/host/operator-reads.ts); a time it names comes as data too (a CARD_SHOWN's `expires_at_ms`), and the console
 * writes that one as every console time: the viewer's zone, 24-hour, the zone named (time-words.ts). The daemon's
 * zone need not be the person's, so the page, not the broker, formats it. `options` is for tests (a fixed zone).
 */
export function shownSummary(
  event: Pick<ActivityEvent, 'kind' | 'summary' | 'expires_at_ms'>,
  options: TimeOptions = {},
): string {
  if (event.kind === 'CARD_SHOWN' && event.expires_at_ms !== null)
    return `expires at ${dateTime(event.expires_at_ms, options)}`;
  return event.summary;
}
