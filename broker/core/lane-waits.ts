import type { ActionWait } from '../contract/index.js';

/** The action whose waits are asked for: when it was free to go but for its lane, and when it stopped waiting. */
export interface LaneWaitSubject {
  readonly ticket: number;
  /** Its approval's wall time, or its acceptance when it needed none; null while it holds no allow decision. */
  readonly ready_at_ms: number | null;
  readonly dispatched_at_ms: number | null;
  /** When its own lane standing resolved (closed before dispatch, e.g. cancelled while waiting). */
  readonly resolved_at_ms: number | null;
}

/** An earlier ticket of the same lane and when the lane stopped waiting on it (null: it still blocks). */
export interface LaneWaitTicket {
  readonly ticket: number;
  readonly action_id: string;
  readonly resolved_at_ms: number | null;
}

/**
 * What one ticket waited for in its lane ("#5 waited 41 s for #4"), pure: each earlier ticket still
 * unresolved when this one became ready, and how long this one waited on it — from ready until that
 * ticket resolved or this one was dispatched or closed, whichever came first. A wait with neither
 * end yet is `ongoing` and counted up to `asOfMs`, a wall time the journal recorded (its latest
 * event), never the reader's clock. Ticket order; the lane rule lets nothing overtake, so every
 * earlier unresolved ticket is one it waited behind.
 */
export function laneWaits(subject: LaneWaitSubject, earlier: readonly LaneWaitTicket[], asOfMs: number): ActionWait[] {
  const start = subject.ready_at_ms;
  if (start === null) return [];
  const ownEnd = minKnown(subject.dispatched_at_ms, subject.resolved_at_ms);
  if (ownEnd !== null && ownEnd <= start) return [];
  const waits: ActionWait[] = [];
  for (const e of [...earlier].sort((a, b) => a.ticket - b.ticket)) {
    if (e.ticket >= subject.ticket) continue;
    if (e.resolved_at_ms !== null && e.resolved_at_ms <= start) continue;
    const end = minKnown(e.resolved_at_ms, ownEnd);
    waits.push({
      ticket: e.ticket,
      action_id: e.action_id,
      waited_ms: Math.max(0, (end ?? asOfMs) - start),
      ongoing: end === null,
    });
  }
  return waits;
}

function minKnown(a: number | null, b: number | null): number | null {
  if (a === null) return b;
  if (b === null) return a;
  return Math.min(a, b);
}
