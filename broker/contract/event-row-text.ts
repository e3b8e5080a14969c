import type { ActivityEvent } from './operator-api.js';
import { dateTime, type TimeOptions } from './time-words.js';

/**
 * An activity row's text as a person reads it, in one place, so what the Events view writes and what its Text filter
 * (activity.list `text`) matches cannot drift apart.
 *
 * The broker's summary writes a time ISO UTC, as the terminal does (broker/host/operator-reads.ts); a time it names
 * comes as data too (a CARD_SHOWN's `expires_at_ms`), and the console writes that one as every console time: the
 * viewer's zone, 24-hour, the zone named (time-words.ts). The daemon's zone need not be the person's, so the page
 * names its zone when it filters (activity.list `zone`) and the broker matches the summary as that page writes it.
 */

type SummaryFields = Pick<ActivityEvent, 'kind' | 'summary' | 'expires_at_ms'>;

/** An event's summary as the console writes it: its times in the viewer's zone. `options.zone` fixes the zone. */
export function shownSummary(event: SummaryFields, options: TimeOptions = {}): string {
  if (event.kind === 'CARD_SHOWN' && event.expires_at_ms !== null)
    return `expires at ${dateTime(event.expires_at_ms, options)}`;
  return event.summary;
}

/** The cells of an Events row that hold text from the event (its seq and time are columns of their own). */
export interface EventRowCells {
  kind: string;
  action: string;
  ticket: string;
  lane: string;
  session: string;
  outcome: string;
  code: string;
  /** The evidence: the summary as written for the reader (shownSummary, or the terminal's). */
  evidence: string;
}

/**
 * How a row's text is written: as the console shows it in a zone (`{zone}`, an IANA name; `{}` is the runtime's own
 * zone, the page's), or as the terminal prints it (`'terminal'`: the summary as the broker wrote it, ISO UTC).
 */
export type RowWriting = TimeOptions | 'terminal';

/** The row's cells as the reader sees them: the one function the Events view renders and the Text filter matches. */
export function eventRowCells(event: ActivityEvent, writing: RowWriting = {}): EventRowCells {
  return {
    kind: event.kind,
    action: event.action_id,
    ticket: event.ticket === null ? '' : `#${event.ticket}`,
    lane: event.lane ?? '',
    session: event.session_id ?? '',
    outcome: event.outcome ?? '',
    code: event.code ?? '',
    evidence: writing === 'terminal' ? event.summary : shownSummary(event, writing),
  };
}

/** Whether `text` is a case-insensitive substring of one of the row's cells as that reader sees them. */
export function rowMatchesText(event: ActivityEvent, text: string, writing: RowWriting = {}): boolean {
  const needle = text.toLowerCase();
  return Object.values(eventRowCells(event, writing)).some((cell) => cell.toLowerCase().includes(needle));
}
