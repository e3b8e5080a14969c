import type {
  ActionListRow,
  ActionState,
  ActionWait,
  ActivityEvent,
  BrokerApi,
  EventKind,
  LaneRelease,
  Reply,
} from '../../../broker/contract/index.js';
import { actorLabel } from '../../../broker/contract/operator-actor.js';
import { shownSummary } from '../../../broker/contract/event-row-text.js';
import type { ReplyError } from '../api/operator-api.js';
import { waitLine } from './action-wait.js';

export type ActionDetail = BrokerApi['actions.show']['output'];

/** One action's detail as last read (kept, as stale, beside a refresh error). */
export interface ActionDetailView {
  actionId: string | null;
  phase: 'idle' | 'loading' | 'ready' | 'error';
  detail: ActionDetail | null;
  error: ReplyError | null;
  /** The action's plaintext row (actions.list), read when its events are sealed: what is known while locked. */
  plain: ActionListRow | null;
}

export type ActionDetailEvent =
  | { type: 'opened'; actionId: string }
  | { type: 'requested' }
  | { type: 'received'; actionId: string; reply: Reply<ActionDetail> }
  | { type: 'plain_read'; actionId: string; row: ActionListRow | null };

export const initialActionDetailView: ActionDetailView = {
  actionId: null,
  phase: 'idle',
  detail: null,
  error: null,
  plain: null,
};

/** Pure: the next view from the current one and one event. A reply for another action is dropped. */
export function actionDetailReducer(view: ActionDetailView, event: ActionDetailEvent): ActionDetailView {
  switch (event.type) {
    case 'opened':
      return event.actionId === view.actionId
        ? view
        : { actionId: event.actionId, phase: 'idle', detail: null, error: null, plain: null };
    case 'requested':
      return { ...view, phase: 'loading' };
    case 'received':
      if (event.actionId !== view.actionId) return view;
      return event.reply.ok
        ? { ...view, phase: 'ready', detail: event.reply.value, error: null }
        : { ...view, phase: 'error', error: event.reply.error };
    case 'plain_read':
      return event.actionId === view.actionId ? { ...view, plain: event.row } : view;
  }
}

/**
 * Who or what a chronology entry comes from. A person's and the reconciliation's entries are marked
 * so an investigation never mistakes them for what the remote or the transport reported.
 */
export type EntrySource = 'operator' | 'reconciliation' | 'policy' | 'agent' | 'remote' | 'transport' | 'broker';

const remoteKinds: ReadonlySet<EventKind> = new Set<EventKind>([
  'REMOTE_RESPONSE_STARTED',
  'REMOTE_RESPONSE_COMPLETE',
  'OUTPUT_RECEIVED',
  'EXIT_STATUS',
  'EXIT_SIGNAL',
]);
const transportKinds: ReadonlySet<EventKind> = new Set<EventKind>([
  'DISPATCH_STARTED',
  'REQUEST_SENT',
  'CONNECTION_LOST',
  'CHANNEL_CLOSED',
  'SETUP_ATTEMPT_FAILED',
]);
/** Kinds whose summary starts "by <actor kind>:<id>" (broker/host/operator-reads.ts summarize). */
const actorKinds: ReadonlySet<EventKind> = new Set<EventKind>([
  'APPROVED',
  'REJECTED',
  'CANCELLED',
  'ABANDONED',
  'OPERATOR_ATTESTED',
]);

export function entrySource(event: Pick<ActivityEvent, 'kind' | 'summary'>): EntrySource {
  if (event.kind === 'RECONCILIATION_RESULT') return 'reconciliation';
  if (event.kind === 'OPERATOR_ATTESTED' || event.kind === 'ABANDONED') return 'operator';
  if (actorKinds.has(event.kind)) {
    const actor = /^by (\w+):/.exec(event.summary)?.[1];
    if (actor === 'person') return 'operator';
    if (actor === 'policy') return 'policy';
    if (actor === 'agent') return 'agent';
    return 'broker';
  }
  if (event.kind.startsWith('CALLER_')) return 'agent';
  if (remoteKinds.has(event.kind)) return 'remote';
  if (transportKinds.has(event.kind)) return 'transport';
  return 'broker';
}

export interface ChronologyEntry {
  seq: number;
  at_ms: number;
  kind: EventKind;
  /**
   * The event's evidence as one line (its summary as the console writes it, a time in the viewer's zone; its outcome
   * and code when it carries a classification).
   */
  evidence: string;
  outcome: string | null;
  code: string | null;
  source: EntrySource;
  /** The entry after which the lane this action blocked moved on (actions.show released_by). */
  releasedLane: boolean;
}

/**
 * Running: dispatched and no outcome recorded yet (actions.show leaves an open action's outcome null, never the
 * dispatch's provisional unknown). Not yet dispatched (dispatch_seq null) or settled is not running.
 */
export function isRunning(state: Pick<ActionState, 'dispatch_seq' | 'outcome'>): boolean {
  return state.dispatch_seq !== null && state.outcome === null;
}

/** Pure: the chronology in append order (never wall time), each entry marked by its source. */
export function chronologyOf(detail: ActionDetail): ChronologyEntry[] {
  return [...detail.events]
    .sort((a, b) => a.seq - b.seq)
    .map((e) => ({
      seq: e.seq,
      at_ms: e.at_ms,
      kind: e.kind,
      evidence: shownSummary(e),
      outcome: e.outcome,
      code: e.code,
      source: entrySource(e),
      releasedLane: detail.released_by?.seq === e.seq,
    }));
}

/** The three orders DESIGN §4 keeps apart, for one action: where it stood in each, by journal position. */
export interface ThreeOrders {
  /** Card order: the ticket (issued at admission) and the position of its card, if one was shown. */
  card: { ticket: number | null; cardSeq: number | null; acceptedSeq: number };
  /** Dispatch order: the position of every DISPATCH_STARTED (the first is the action's dispatch_seq). */
  dispatch: { seqs: number[] };
  /** Completion order: the position of the event whose classification settled the current outcome, if any. */
  completion: { seq: number | null; kind: EventKind | null; outcome: string | null };
}

export function threeOrdersOf(detail: ActionDetail): ThreeOrders {
  const events = [...detail.events].sort((a, b) => a.seq - b.seq);
  const card = events.find((e) => e.kind === 'CARD_SHOWN');
  const dispatchSeqs = events.filter((e) => e.kind === 'DISPATCH_STARTED').map((e) => e.seq);
  if (detail.state.dispatch_seq !== null && !dispatchSeqs.includes(detail.state.dispatch_seq))
    dispatchSeqs.unshift(detail.state.dispatch_seq);
  const outcome = detail.state.outcome;
  // The last classified event that says the current outcome is where the action completed in the log.
  const settling = outcome === null ? undefined : events.findLast((e) => e.outcome === outcome);
  return {
    card: { ticket: detail.state.ticket, cardSeq: card?.seq ?? null, acceptedSeq: detail.state.first_seq },
    dispatch: { seqs: dispatchSeqs },
    completion: { seq: settling?.seq ?? null, kind: settling?.kind ?? null, outcome },
  };
}

const releaseText: Record<LaneRelease['kind'], string> = {
  idempotent_repeat: 'an idempotent repeat under the same action id settled it',
  same_key_retry: 'a retry with the same idempotency key settled it',
  retry_after_backoff: 'a retry after backoff settled it',
  reconciliation: 'a reconciliation lookup settled it',
  operator_attested: 'a person attested the outcome',
  abandoned: 'a person abandoned it (the outcome stays as it was)',
};

/** One line for people: what released the lane this action blocked as its unknown head, by whom and how proven. */
export function releaseLine(release: LaneRelease): string {
  const who = release.actor === undefined ? '' : ` by ${actorLabel(release.actor)}`;
  return `Lane released at seq ${release.seq}: ${releaseText[release.kind]}${who}; outcome ${release.outcome}${release.source === undefined ? '' : ` (source ${release.source})`}.`;
}

/**
 * What the action waited for in its lane, one line per earlier ticket ("#5 waited 41 s for #4",
 * "#5 waiting for #4 for 12 s"), longest wait first; empty when it waited for nothing.
 */
export function waitLines(ticket: number | null, waits: readonly ActionWait[]): string[] {
  return [...waits].sort((a, b) => b.waited_ms - a.waited_ms || a.ticket - b.ticket).map((w) => waitLine(ticket, w));
}
