import type { ApprovalCard } from '../../../broker/contract/index.js';
import type { ApprovalsView } from './approvals-reducer.js';
import { needsDecision } from './card-groups.js';

/**
 * Whether the broker stopped answering the Approvals view's reads: its cards are then only what was last listed, none
 * can be decided, and a restart closes every undecided one (docs/queue.md "What a restart does").
 */
export function brokerStopped(view: Pick<ApprovalsView, 'error'>): boolean {
  return view.error?.code === 'BROKER_UNREACHABLE';
}

/** What the Approvals badge counts and what the panel's header says, from one reading so the two always agree. */
export interface ApprovalsTally {
  /** Cards a person can decide now plus pending credential requests: the tab badge. 0 while the broker is stopped. */
  needYou: number;
  /** The panel's header line, e.g. "5 need you · 1 approved, waiting for #6". */
  text: string;
}

/** Pure: the badge and the header line for the open cards and the pending credential requests. */
export function approvalsTally(
  cards: readonly ApprovalCard[],
  pendingRequests: number,
  stopped: boolean,
): ApprovalsTally {
  if (stopped)
    return {
      needYou: 0,
      text:
        cards.length === 0
          ? 'broker stopped'
          : `${plural(cards.length, 'open card')} as last listed · the broker stopped: none can be decided`,
    };
  const deciding = cards.filter(needsDecision).length;
  const needYou = deciding + pendingRequests;
  const head =
    pendingRequests === 0
      ? `${needYou} need${needYou === 1 ? 's' : ''} you`
      : `${needYou} need${needYou === 1 ? 's' : ''} you (${plural(pendingRequests, 'credential request')})`;
  return { needYou, text: [head, ...notYours(cards)].join(' · ') };
}

/** The open cards no one can decide now, by why: an approved card waiting in its lane, a blocked head, one being sent. */
function notYours(cards: readonly ApprovalCard[]): string[] {
  const waiting = cards.filter((c) => c.state === 'approved_waiting');
  const blocked = cards.filter((c) => c.state === 'blocked_head').length;
  const sending = cards.filter((c) => c.state === 'dispatching').length;
  const parts: string[] = [];
  if (waiting.length > 0) {
    const approved = waiting.every((c) => c.approval === 'none') ? '' : ' approved,';
    const only = waiting.length === 1 ? waiting[0] : undefined;
    const forWhom =
      only !== undefined && only.waiting_for_ticket !== null ? ` for #${only.waiting_for_ticket}` : ' their turn';
    parts.push(`${waiting.length}${approved} waiting${forWhom}`);
  }
  if (blocked > 0) parts.push(`${blocked} outcome unknown (blocking ${blocked === 1 ? 'its lane' : 'their lanes'})`);
  if (sending > 0) parts.push(`${sending} being sent`);
  return parts;
}

function plural(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}
