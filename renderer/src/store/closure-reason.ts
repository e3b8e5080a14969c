import type { ActivityEvent, BrokerApi } from '../../../broker/contract/index.js';

type ShownAction = BrokerApi['actions.show']['output'];

/** Why a card left the list, from the action's own journal events (never guessed). */
export interface ClosureReason {
  /** What happened, e.g. "cancelled by the agent", "expired", "committed". */
  headline: string;
  /** The recorded detail: the reason a person or the agent gave, or the outcome's basis. */
  detail: string;
  /** The journal position of the event it was read from (null when read from the state alone). */
  seq: number | null;
}

/**
 * A dispatched action with no outcome recorded yet: the words for it wherever the console says it runs (a closed
 * card's reason, the Action detail's status line), so both say it one way.
 */
export const dispatchedWaiting = { headline: 'dispatched', detail: 'sent; waiting for its outcome' } as const;

/** Events that close or settle a ticket, so that its card leaves the list. */
const closingKinds = new Set<ActivityEvent['kind']>([
  'REJECTED',
  'EXPIRED',
  'CANCELLED',
  'ABANDONED',
  'OPERATOR_ATTESTED',
  'RECONCILIATION_RESULT',
  'OUTCOME_RECORDED',
  'DISPATCH_STARTED',
]);

/**
 * The recorded reason a ticket's card is gone: the LAST closing event in append order (a
 * dispatched action's outcome comes after its DISPATCH_STARTED). Activity summaries read
 * `by <actor kind>:<actor id>: <reason>` for decisions (broker/host/operator-reads.ts). Null when
 * nothing has closed it (yet).
 */
export function closureReason(shown: ShownAction): ClosureReason | null {
  const closing = shown.events.filter((e) => closingKinds.has(e.kind)).at(-1);
  const { state } = shown;
  if (closing === undefined) {
    if (state.outcome !== null) return { headline: state.outcome, detail: state.outcome_basis ?? '', seq: null };
    // Nothing closed it yet (read too early, or it was only briefly missing): read again later.
    return null;
  }
  const actor = actorKindOf(closing.summary);
  const because = reasonOf(closing.summary);
  switch (closing.kind) {
    case 'REJECTED':
      return { headline: `rejected by ${actorName(actor)}`, detail: because, seq: closing.seq };
    case 'EXPIRED':
      return { headline: 'expired', detail: 'no decision before the approval window closed', seq: closing.seq };
    case 'CANCELLED':
      if (because === 'session ended')
        return {
          headline: 'session ended',
          detail: 'the agent process exited; its undispatched tickets were cancelled',
          seq: closing.seq,
        };
      if (because.startsWith('session '))
        return { headline: because, detail: 'cancelled with its session', seq: closing.seq };
      return { headline: `cancelled by ${actorName(actor)}`, detail: because, seq: closing.seq };
    case 'ABANDONED':
      return {
        headline: `abandoned by ${actorName(actor)}`,
        detail: `${because} (the outcome stays unknown)`,
        seq: closing.seq,
      };
    case 'OPERATOR_ATTESTED':
      return { headline: `attested ${state.outcome ?? ''}`.trim(), detail: because, seq: closing.seq };
    case 'RECONCILIATION_RESULT':
      return { headline: `reconciled: ${state.outcome ?? 'unknown'}`, detail: closing.summary, seq: closing.seq };
    default:
      return state.outcome === null
        ? { ...dispatchedWaiting, seq: closing.seq }
        : {
            headline: state.outcome,
            detail: [state.code, state.outcome_basis].filter((x) => x !== null).join(': '),
            seq: closing.seq,
          };
  }
}

type ActorKind = 'person' | 'policy' | 'agent' | 'broker' | 'process' | null;

function actorKindOf(summary: string): ActorKind {
  const match = /^by (person|policy|agent|broker|process):/.exec(summary);
  return (match?.[1] as ActorKind | undefined) ?? null;
}

/** The text after `by <kind>:<id>: `; actor ids never contain ": " (a colon then a space). */
function reasonOf(summary: string): string {
  if (!summary.startsWith('by ')) return summary;
  const cut = summary.indexOf(': ');
  return cut === -1 ? summary : summary.slice(cut + 2);
}

function actorName(kind: ActorKind): string {
  switch (kind) {
    case 'agent':
      return 'the agent';
    case 'person':
      return 'a person';
    case 'policy':
      return 'policy';
    case 'broker':
      return 'the broker';
    case 'process':
      return 'a process (unattended, no person)';
    case null:
      return 'someone';
  }
}
