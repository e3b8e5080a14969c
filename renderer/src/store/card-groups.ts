import type { ApprovalCard } from '../../../broker/contract/index.js';

/** One lane's open cards, oldest ticket first; `blockedBy` is its unknown head, if any. */
export interface LaneGroup {
  /** The lane's name, or null for reads that bypass lanes (scheduled on their own). */
  lane: string | null;
  cards: ApprovalCard[];
  blockedBy: number | null;
}

/**
 * Cards grouped by lane, lanes in name order and tickets in ticket order, the lane-less reads
 * last: the same order the broker lists them in (OperatorQueue.cards), re-derived here so the view
 * never depends on the order a reply happened to arrive in.
 */
export function groupCardsByLane(cards: readonly ApprovalCard[]): LaneGroup[] {
  const byLane = new Map<string | null, ApprovalCard[]>();
  for (const card of cards) {
    const group = byLane.get(card.lane);
    if (group === undefined) byLane.set(card.lane, [card]);
    else group.push(card);
  }
  const lanes = [...byLane.keys()].sort(compareLanes);
  return lanes.map((lane) => {
    const laneCards = [...(byLane.get(lane) ?? [])].sort((a, b) => a.ticket - b.ticket);
    const head = laneCards[0];
    return { lane, cards: laneCards, blockedBy: lane !== null && head?.state === 'blocked_head' ? head.ticket : null };
  });
}

function compareLanes(a: string | null, b: string | null): number {
  if (a === b) return 0;
  if (a === null) return 1;
  if (b === null) return -1;
  return a < b ? -1 : 1;
}

/**
 * The card's state line, e.g. "approved, waiting for #42". The broker sends the same line as
 * `card.text` (broker/core/lane-schedule.ts); the view derives it from the structured fields so it
 * can render the ticket it waits for as a link to that card, and so a blocked lane reads as
 * blocked even on a card listed before its head's state changed. `blockedBy` is the lane's unknown
 * head (from groupCardsByLane).
 */
export function cardStatusLabel(card: ApprovalCard, blockedBy: number | null): string {
  const approvedPrefix = card.approval === 'none' ? '' : 'approved, ';
  const blocked = blockedBy !== null && blockedBy !== card.ticket ? `blocked by #${blockedBy} (outcome unknown)` : null;
  switch (card.state) {
    case 'blocked_head':
      return `#${card.ticket} outcome unknown: the lane is blocked until it is settled or abandoned`;
    case 'dispatching':
      return card.text;
    case 'approved_waiting':
      if (blocked !== null) return `${approvedPrefix}${blocked}`;
      return card.waiting_for_ticket === null ? card.text : `${approvedPrefix}waiting for #${card.waiting_for_ticket}`;
    case 'pending':
    case 'awaiting_session': {
      const what = card.state === 'awaiting_session' ? 'waiting for session approval' : 'waiting for approval';
      if (blocked !== null) return `${what}; ${blocked}`;
      return card.waiting_for_ticket === null ? what : `${what} (behind #${card.waiting_for_ticket})`;
    }
  }
}

/** Whether a person can decide this card now (approve or reject). */
export function needsDecision(card: ApprovalCard): boolean {
  return card.state === 'pending' || card.state === 'awaiting_session';
}

/**
 * The card's state line while the broker is stopped (brokerStopped): nothing on it can be decided, and what the next
 * start's recovery does to it (docs/queue.md "What a restart does") — undispatched tickets close as not_attempted
 * (BROKER_RESTARTED), a dispatched one without an outcome becomes unknown, an unknown head stays blocking its lane.
 */
export function stoppedCardLabel(card: ApprovalCard): string {
  switch (card.state) {
    case 'pending':
    case 'awaiting_session':
    case 'approved_waiting':
      return 'The broker stopped: this card cannot be decided until it answers again. A restart closes it unsent (not_attempted, BROKER_RESTARTED); the agent would have to ask again.';
    case 'dispatching':
      return 'The broker stopped while this call was being sent: if no outcome was recorded, a restart records it as unknown.';
    case 'blocked_head':
      return 'The broker stopped: its ways out wait until it answers again. The lane stays blocked across a restart until this outcome is settled or abandoned.';
  }
}
