import type { ActionWait } from '../../../broker/contract/index.js';

/** A span for people: "850 ms", "41 s", "4 min 5 s", "2 h 3 min". */
export function spanText(ms: number): string {
  const span = Math.max(0, Math.round(ms));
  if (span < 1_000) return `${span} ms`;
  const s = Math.round(span / 1_000);
  if (s < 60) return `${s} s`;
  const min = Math.floor(s / 60);
  if (min < 60) return s % 60 === 0 ? `${min} min` : `${min} min ${s % 60} s`;
  const h = Math.floor(min / 60);
  return min % 60 === 0 ? `${h} h` : `${h} h ${min % 60} min`;
}

const ticketText = (ticket: number | null): string => (ticket === null ? 'this action' : `#${ticket}`);

/**
 * What one action waited for in its lane, worded for people: "#5 waited 41 s for #4" once over,
 * "#5 waiting for #4 for 12 s" while it still waits.
 */
export function waitLine(ticket: number | null, wait: LaneWait): string {
  return `${ticketText(ticket)} ${waitPhrase(wait)}`;
}

export type LaneWait = Pick<ActionWait, 'ticket' | 'waited_ms' | 'ongoing'>;

/** The wait without its subject: "waited 41 s for #4", "waiting for #4 for 12 s". */
export function waitPhrase(wait: LaneWait): string {
  const span = spanText(wait.waited_ms);
  return wait.ongoing ? `waiting for #${wait.ticket} for ${span}` : `waited ${span} for #${wait.ticket}`;
}
