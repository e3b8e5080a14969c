import type { ActionListRow, ApprovalCard, BrokerApi, Reply } from '../../../broker/contract/index.js';
import type { ReplyError } from '../api/operator-api.js';
import { closureReason, type ClosureReason } from './closure-reason.js';
import { callFinished, callStarted, emptyCallBook, type CallBook } from './operator-call.js';

/** How many closed cards the view keeps (newest first); older ones are in Activity. */
export const closedCardsMax = 50;

/** A card that left the open list, with the reason its journal records once it has been read. */
export interface ClosedCard {
  card: ApprovalCard;
  reason: ClosureReason | null;
  /** The last failed attempt to read the reason (it is read again on the next refresh). */
  lookupError: ReplyError | null;
  /**
   * The action's plaintext row (actions.list), read when its events are sealed (the vault is locked): what the
   * projection knows of how it closed while the reason itself cannot be read.
   */
  plain: ActionListRow | null;
}

export interface ApprovalsView {
  phase: 'idle' | 'loading' | 'ready' | 'error';
  /** The open cards as last listed (kept, as stale, beside a refresh error). */
  cards: ApprovalCard[];
  error: ReplyError | null;
  replies: number;
  /**
   * Cards that were listed and no longer are, newest first. A card never just vanishes: it moves
   * here and shows why (expired, rejected, cancelled by the agent, session ended, sent…), read
   * from the action's own events.
   */
  closed: ClosedCard[];
  calls: CallBook<number>;
}

export type ApprovalsEvent =
  | { type: 'requested' }
  | { type: 'received'; reply: Reply<BrokerApi['approvals.list']['output']> }
  | { type: 'closure_read'; ticket: number; reply: Reply<BrokerApi['actions.show']['output']> }
  | { type: 'closure_plain'; ticket: number; row: ActionListRow | null }
  | { type: 'call_started'; ticket: number; call: string }
  | { type: 'call_finished'; ticket: number; call: string; reply: Reply<unknown>; message: string };

export const initialApprovalsView: ApprovalsView = {
  phase: 'idle',
  cards: [],
  error: null,
  replies: 0,
  closed: [],
  calls: emptyCallBook(),
};

/** Pure: the next view from the current one and one event. */
export function approvalsReducer(view: ApprovalsView, event: ApprovalsEvent): ApprovalsView {
  switch (event.type) {
    case 'requested':
      return { ...view, phase: 'loading' };
    case 'received': {
      if (!event.reply.ok) return { ...view, phase: 'error', error: event.reply.error, replies: view.replies + 1 };
      const cards = event.reply.value.cards;
      return {
        ...view,
        phase: 'ready',
        cards,
        error: null,
        replies: view.replies + 1,
        closed: moveVanished(view.cards, cards, view.closed),
      };
    }
    case 'closure_read':
      return {
        ...view,
        closed: view.closed.map((entry) => {
          if (entry.card.ticket !== event.ticket) return entry;
          return event.reply.ok
            ? { ...entry, reason: closureReason(event.reply.value), lookupError: null }
            : { ...entry, lookupError: event.reply.error };
        }),
      };
    case 'closure_plain':
      return {
        ...view,
        closed: view.closed.map((entry) =>
          entry.card.ticket === event.ticket ? { ...entry, plain: event.row } : entry,
        ),
      };
    case 'call_started':
      return { ...view, calls: callStarted(view.calls, event.ticket, event.call) };
    case 'call_finished':
      return { ...view, calls: callFinished(view.calls, event.ticket, event.call, event.reply, event.message) };
  }
}

/**
 * Cards listed before and not now join `closed` (newest first, bounded); a ticket listed again
 * (it was only briefly missing) leaves `closed`.
 */
function moveVanished(
  before: readonly ApprovalCard[],
  now: readonly ApprovalCard[],
  closed: readonly ClosedCard[],
): ClosedCard[] {
  const open = new Set(now.map((c) => c.ticket));
  const vanished = before.filter((c) => !open.has(c.ticket)).sort((a, b) => b.ticket - a.ticket);
  const kept = closed.filter(
    (entry) => !open.has(entry.card.ticket) && !vanished.some((c) => c.ticket === entry.card.ticket),
  );
  return [...vanished.map((card) => ({ card, reason: null, lookupError: null, plain: null })), ...kept].slice(
    0,
    closedCardsMax,
  );
}

/**
 * Closed cards whose reason is not read yet: the slice asks actions.show for each — but not again for one whose events
 * are sealed for good (`sealed_for_good`): no unlock and no later read opens them.
 */
export function closuresToRead(view: ApprovalsView): ClosedCard[] {
  return view.closed.filter((entry) => entry.reason === null && entry.lookupError?.sealed_for_good !== true);
}
