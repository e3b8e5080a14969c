import type { ActionState, AgentDecision, EventKind, JournalEvent, QueuePosition } from '../contract/index.js';
import type { ActionTimeline } from '../core/index.js';
import type { CallProgress } from '../ports/index.js';

/** What the waits read: the journal's current state of an action, its queue position, and change notices. */
export interface WaitSource {
  getAction(actionId: string): ActionState | undefined;
  position(actionId: string): QueuePosition | null;
  /** Fires after anything that may change a position or a state (cards, decisions, releases, settlements). */
  onChange(listener: () => void): () => void;
}

/**
 * Settled for a waiting caller: an outcome is recorded and no retry lease is open, so the record will not change
 * again on its own (a person may still reconcile an unknown one). A long-poll ends there.
 */
export function settledForCaller(state: ActionState): boolean {
  return state.outcome !== null && state.recorded && state.lease?.open !== true;
}

/**
 * action_status's long-poll: resolves once the action is settled for its caller, the wait passed, or the caller
 * stopped (its signal). Woken by the queue's change notices, never by polling on a timer: the executor calls the
 * queue's settled() after recording, which notifies.
 */
export function waitForSettled(
  source: WaitSource,
  actionId: string,
  waitMs: number,
  signal: AbortSignal,
): Promise<void> {
  return new Promise<void>((resolve) => {
    let done = false;
    const finish = (): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      unsubscribe();
      signal.removeEventListener('abort', finish);
      resolve();
    };
    const check = (): void => {
      const state = source.getAction(actionId);
      if (state === undefined || settledForCaller(state)) finish();
    };
    const timer = setTimeout(finish, waitMs);
    timer.unref();
    const unsubscribe = source.onChange(check);
    signal.addEventListener('abort', finish, { once: true });
    if (signal.aborted) finish();
    else check();
  });
}

/**
 * One line per state a waiting caller can be in, for MCP progress notifications: the queue's own text while the
 * ticket waits ("card shown, waiting for a person", "approved, waiting for #42"), then dispatched, then answered.
 * Never anything of the request's or the response's content.
 */
export function progressLine(state: ActionState, position: QueuePosition | null): string | undefined {
  if (state.outcome !== null && state.recorded)
    return state.dispatch_seq === null ? `closed: ${state.code ?? state.outcome}` : `remote answered: ${state.outcome}`;
  if (state.dispatch_seq !== null) return 'dispatched';
  if (position === null) return undefined;
  if (position.waiting === 'approval') return `card shown (ticket #${position.ticket}), waiting for a person`;
  if (position.waiting === 'dispatching') return 'approved, dispatching';
  return position.text;
}

/**
 * Watches one action for its waiting caller and reports each new state line once, with a monotonic progress
 * number. `actionId` is read lazily: the action has no id until it is admitted. Returns the stop function.
 */
export function watchProgress(
  source: WaitSource,
  actionId: () => string | undefined,
  onProgress: (p: CallProgress) => void,
  heartbeatMs: number = progressHeartbeatMsDefault,
): () => void {
  let progress = 0;
  let last: string | undefined;
  const send = (message: string): void => {
    progress += 1;
    onProgress({ progress, message: message.slice(0, 200) });
  };
  const report = (): void => {
    const id = actionId();
    const state = id === undefined ? undefined : source.getAction(id);
    if (id === undefined || state === undefined) return;
    const line = progressLine(state, source.position(id));
    if (line === undefined || line === last) return;
    last = line;
    send(line);
  };
  const unsubscribe = source.onChange(report);
  // A person may take longer than a client's request timeout: while nothing changes, the state is repeated so a
  // client that resets its timeout on progress (MCP resetTimeoutOnProgress) keeps waiting instead of cancelling.
  const heartbeat = setInterval(() => {
    report();
    if (last !== undefined) send(`${last} (still waiting)`);
  }, heartbeatMs);
  heartbeat.unref();
  return () => {
    clearInterval(heartbeat);
    report();
    unsubscribe();
  };
}

/** How often a waiting call repeats its state as progress when nothing changed (agents.progress_heartbeat_ms). */
export const progressHeartbeatMsDefault = 15_000;

/** The events decisionFacts reads: an action with none of them has no decision to tell. */
export const decisionEventKinds: ReadonlySet<EventKind> = new Set([
  'CARD_SHOWN',
  'APPROVED',
  'REJECTED',
  'CANCELLED',
  'EXPIRED',
]);

/**
 * The decision on a ticket as recorded: who decided and when, a person's reason, and the card's expiry while it
 * waits. Undefined for an action that needed no decision (approval none) and got none. A card still waiting when the
 * action's outcome was recorded (the broker restarted under it: recovery's BROKER_RESTARTED) was closed without a
 * decision: `closed`, with that outcome's code and time, never `waiting` with an expiry nobody will act on.
 */
export function decisionFacts(events: readonly JournalEvent[]): AgentDecision | undefined {
  let decision: AgentDecision | undefined;
  for (const e of events) {
    switch (e.kind) {
      case 'CARD_SHOWN':
        decision = {
          state: 'waiting',
          by: null,
          reason: null,
          decided_at_ms: null,
          expires_at_ms: e.payload.expires_at_ms,
        };
        break;
      case 'APPROVED':
        decision = {
          state: 'approved',
          by: actorOf(e.payload.actor),
          reason: null,
          decided_at_ms: e.at_ms,
          expires_at_ms: decision?.expires_at_ms ?? null,
        };
        break;
      case 'REJECTED':
      case 'CANCELLED':
        decision = {
          state: e.kind === 'REJECTED' ? 'rejected' : 'cancelled',
          by: actorOf(e.payload.actor),
          reason: e.payload.reason,
          decided_at_ms: e.at_ms,
          expires_at_ms: decision?.expires_at_ms ?? null,
        };
        break;
      case 'OUTCOME_RECORDED': {
        if (decision?.state !== 'waiting') break;
        const code = e.classification?.code ?? null;
        decision = {
          state: 'closed',
          by: null,
          reason: null,
          decided_at_ms: null,
          expires_at_ms: decision.expires_at_ms,
          ...(code === null ? {} : { closed_code: code }),
          closed_at_ms: e.at_ms,
        };
        break;
      }
      case 'EXPIRED':
        decision = {
          state: 'expired',
          by: { kind: 'broker', id: 'approval-expiry' },
          reason: null,
          decided_at_ms: e.at_ms,
          expires_at_ms: decision?.expires_at_ms ?? null,
        };
        break;
      default:
        break;
    }
  }
  return decision;
}

/** Who decided, as the agent may see it: kind, id and surface (never how the person authenticated). */
function actorOf(actor: {
  kind: NonNullable<AgentDecision['by']>['kind'];
  id: string;
  surface?: string | undefined;
}): NonNullable<AgentDecision['by']> {
  return { kind: actor.kind, id: actor.id, ...(actor.surface === undefined ? {} : { surface: actor.surface }) };
}

/**
 * The decision as the plaintext record tells it, for an action whose events are sealed under an earlier run's key while
 * the vault is locked (or under a run that never had a key): its state (the projection's `decision`; an undecided card —
 * CARD_SHOWN in the plaintext headers — `closed` once an outcome was recorded, else `waiting`), when it was decided (the
 * timeline's column), and for `closed` the time and code of the outcome that closed the card, as decisionFacts reads
 * them. That outcome is the action's first classified event (`classified`: the plaintext headers of its first
 * sealedClosingHeadersMax events of a kind that carries a classification; nothing else can classify an undecided card
 * before it is closed), so its time is that header's. Its code is the projection's only while no later classification
 * replaced it (a reconciliation, a person's attestation, a retry's outcome): after one, that code is in the sealed events
 * only and `closed_code` is left out, never the later code in its place. Who decided (but the expiry's fixed actor), a
 * person's reason and the card's expiry are in the sealed events only: null, and `sealed` says so.
 */
export function sealedDecisionFacts(
  state: ActionState,
  kinds: ReadonlySet<EventKind>,
  timeline: ActionTimeline | undefined,
  classified: ReadonlyArray<Pick<JournalEvent, 'at_ms' | 'kind'>>,
): AgentDecision | undefined {
  const sealed = { by: null, reason: null, expires_at_ms: null, sealed: true as const };
  if (state.decision !== null)
    return {
      ...sealed,
      state: state.decision,
      ...(state.decision === 'expired' ? { by: { kind: 'broker' as const, id: 'approval-expiry' } } : {}),
      decided_at_ms: timeline?.decided_at_ms ?? null,
    };
  if (!kinds.has('CARD_SHOWN')) return undefined;
  if (!state.recorded || state.outcome === null) return { ...sealed, state: 'waiting', decided_at_ms: null };
  const closing = classified[0]?.kind === 'OUTCOME_RECORDED' ? classified[0] : undefined;
  const code = closing !== undefined && classified.length === 1 ? state.code : null;
  return {
    ...sealed,
    state: 'closed',
    decided_at_ms: null,
    ...(code === null ? {} : { closed_code: code }),
    ...(closing === undefined ? {} : { closed_at_ms: closing.at_ms }),
  };
}

/** How many classified headers sealedDecisionFacts needs: the closing outcome's, and whether any came after it. */
export const sealedClosingHeadersMax = 2;
