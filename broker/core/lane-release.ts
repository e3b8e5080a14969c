import {
  CodedError,
  type ActionState,
  type EventPayload,
  type JournalEvent,
  type LaneRelease,
  type LaneReleaseKind,
} from '../contract/index.js';
import { ticketStanding } from './lane-schedule.js';
import { applyEvent } from './project.js';

type RetryDecision = EventPayload<'RETRY_LEASED'>['decision'];

const retryKinds: Readonly<Record<RetryDecision, LaneReleaseKind>> = {
  RETRY_NEW_ATTEMPT: 'idempotent_repeat',
  RETRY_SAME_KEY: 'same_key_retry',
  RETRY_WHEN_ALLOWED: 'retry_after_backoff',
};

/**
 * Whether this action ever blocked its lane as an unknown head, and what released it — from its
 * own events in append order, folded through the projection so "blocked" means exactly what the
 * dispatcher reads (`ticketStanding`: dispatched, unknown recorded, not abandoned). A blocked head
 * is left only by (invariant 7): a retry under the same action id (RETRY_LEASED, then an attempt
 * that settles committed or rejected — an attempt that ends unknown again keeps it blocked), a
 * reconciliation (RECONCILIATION_RESULT that settles), a person's attestation (OPERATOR_ATTESTED),
 * or a person's abandonment (ABANDONED; the outcome stays unknown).
 *
 * null: the action never blocked a lane (never dispatched, settled by its first attempt, or
 * outside any lane — a lookup or a lane-less read), or it is blocked now. Blocked, released,
 * retried and blocked again: the latest release, or null while blocked again. A history whose
 * unknown head was settled by anything else contradicts invariant 7 and throws
 * IMPOSSIBLE_TRANSITION (the projection alone does not refuse a late settlement).
 */
export function laneRelease(events: readonly JournalEvent[]): LaneRelease | null {
  let state: ActionState | undefined;
  let lease: Extract<JournalEvent, { kind: 'RETRY_LEASED' }> | undefined;
  let blockedSince: number | null = null;
  let release: LaneRelease | null = null;
  for (const event of events) {
    state = applyEvent(state, event);
    if (state.lane === null) return null;
    if (event.kind === 'RETRY_LEASED') lease = event;
    const standing = ticketStanding(state);
    if (blockedSince === null) {
      if (standing === 'blocked') blockedSince = event.seq;
      continue;
    }
    // A retry's attempt in flight keeps the lane busy: not released yet.
    if (standing === 'blocked' || standing === 'in_flight') continue;
    release = releasedBy(event, state, lease !== undefined && lease.seq > blockedSince ? lease : undefined);
    blockedSince = null;
  }
  return blockedSince === null ? release : null;
}

function releasedBy(
  event: JournalEvent,
  state: ActionState,
  lease: Extract<JournalEvent, { kind: 'RETRY_LEASED' }> | undefined,
): LaneRelease {
  const outcome = state.outcome ?? 'unknown';
  const source = state.source === null ? {} : { source: state.source };
  switch (event.kind) {
    case 'ABANDONED':
      return { kind: 'abandoned', seq: event.seq, actor: event.payload.actor, outcome, reason: event.payload.reason };
    case 'OPERATOR_ATTESTED':
      return {
        kind: 'operator_attested',
        seq: event.seq,
        actor: event.payload.actor,
        outcome,
        ...source,
        reason: event.payload.basis,
      };
    case 'RECONCILIATION_RESULT':
      return {
        kind: 'reconciliation',
        seq: event.seq,
        ...(event.payload.actor === undefined ? {} : { actor: event.payload.actor }),
        outcome,
        ...source,
      };
    default:
      if (lease === undefined) {
        throw new CodedError(
          'IMPOSSIBLE_TRANSITION',
          `seq ${event.seq} ${event.kind} on ${event.action_id}: an unknown head was settled without a retry lease, a reconciliation, an attestation or an abandonment`,
        );
      }
      return {
        kind: retryKinds[lease.payload.decision],
        seq: event.seq,
        actor: lease.payload.requested_by,
        lease_seq: lease.seq,
        outcome,
        ...source,
      };
  }
}
