import type { Actor, ApprovalMode, EventKind, JournalEvent } from '../contract/index.js';

/**
 * One action's chronology, arranged as the five questions an investigation asks in order (article
 * 003, "the investigation starts from the chronology, not the final label"):
 *  1. who authorized it, and which agent process asked;
 *  2. did the broker cross the dispatch boundary;
 *  3. which transport observations followed;
 *  4. did a trusted remote receipt arrive;
 *  5. if not, which reconciliation can identify the original operation.
 * Every answer cites the append positions (`seq`) it rests on; nothing is inferred from wall time.
 */
export interface Chronology {
  readonly action_id: string;
  readonly events: readonly JournalEvent[];
  readonly authorization: {
    /** The agent process that asked (its session). */
    readonly session_id: string | null;
    readonly accepted_seq: number | null;
    readonly approval: ApprovalMode | null;
    /** The decision event (APPROVED / REJECTED / EXPIRED / CANCELLED) and who made it. */
    readonly decision: { readonly seq: number; readonly kind: EventKind; readonly actor: Actor | null } | null;
    readonly credential: {
      readonly seq: number;
      readonly credential_id: string;
      readonly version_tag: string;
      readonly injection_mode: string;
    } | null;
  };
  readonly dispatch: {
    readonly crossed: boolean;
    /** Every DISPATCH_STARTED (one per attempt that crossed) and every setup failure before one. */
    readonly attempts: ReadonlyArray<{
      readonly seq: number;
      readonly attempt: number;
      readonly connection: 'fresh' | 'reused';
    }>;
    readonly setup_failures: ReadonlyArray<{ readonly seq: number; readonly attempt: number; readonly stage: string }>;
  };
  /** Transport facts after the first dispatch, in append order. */
  readonly transport: readonly JournalEvent[];
  /** The first fact that came from the remote itself (or a lookup of it), or null. */
  readonly receipt: { readonly seq: number; readonly kind: EventKind } | null;
  readonly reconciliation: {
    /** True when dispatch was crossed and no receipt or settlement says what happened. */
    readonly needed: boolean;
    /** What identifies the original logical operation to a lookup. */
    readonly request_fingerprint: string | null;
    readonly target: string | null;
    readonly idempotent: boolean | null;
    readonly lookups: ReadonlyArray<{
      readonly seq: number;
      readonly correlation: string;
      readonly lookup_action_id: string;
    }>;
    readonly attested: ReadonlyArray<{ readonly seq: number; readonly actor: Actor; readonly basis: string }>;
  };
}

const transportKinds: ReadonlySet<EventKind> = new Set<EventKind>([
  'REQUEST_SENT',
  'REMOTE_RESPONSE_STARTED',
  'REMOTE_RESPONSE_COMPLETE',
  'OUTPUT_RECEIVED',
  'CONNECTION_LOST',
  'EXIT_STATUS',
  'EXIT_SIGNAL',
  'CHANNEL_CLOSED',
]);
/** Facts only the remote could have produced: its complete answer, its exit report, or a lookup. */
const receiptKinds: ReadonlySet<EventKind> = new Set<EventKind>([
  'REMOTE_RESPONSE_COMPLETE',
  'EXIT_STATUS',
  'EXIT_SIGNAL',
  'RECONCILIATION_RESULT',
]);
const decisionKinds: ReadonlySet<EventKind> = new Set<EventKind>(['APPROVED', 'REJECTED', 'EXPIRED', 'CANCELLED']);

/** Pure: the chronology of `actionId` from the log (other actions' events are skipped). */
export function chronologyOf(actionId: string, log: Iterable<JournalEvent>): Chronology {
  const events: JournalEvent[] = [];
  let decision: Chronology['authorization']['decision'] = null;
  let credential: Chronology['authorization']['credential'] = null;
  let accepted: (JournalEvent & { kind: 'ACTION_ACCEPTED' }) | undefined;
  const attempts: Array<Chronology['dispatch']['attempts'][number]> = [];
  const setupFailures: Array<Chronology['dispatch']['setup_failures'][number]> = [];
  const transport: JournalEvent[] = [];
  let receipt: Chronology['receipt'] = null;
  let settled = false;
  const lookups: Array<Chronology['reconciliation']['lookups'][number]> = [];
  const attested: Array<Chronology['reconciliation']['attested'][number]> = [];

  for (const e of log) {
    if (e.action_id !== actionId) continue;
    events.push(e);
    if (e.kind === 'ACTION_ACCEPTED') accepted = e;
    if (decisionKinds.has(e.kind)) {
      const payload = e.payload as { actor?: Actor };
      decision = { seq: e.seq, kind: e.kind, actor: payload.actor ?? null };
    }
    if (e.kind === 'CREDENTIAL_AUTHORIZED')
      credential = {
        seq: e.seq,
        credential_id: e.payload.credential_id,
        version_tag: e.payload.version_tag,
        injection_mode: e.payload.injection_mode,
      };
    if (e.kind === 'DISPATCH_STARTED')
      attempts.push({ seq: e.seq, attempt: e.payload.attempt, connection: e.payload.connection });
    if (e.kind === 'SETUP_ATTEMPT_FAILED')
      setupFailures.push({ seq: e.seq, attempt: e.payload.attempt, stage: e.payload.stage });
    if (attempts.length > 0 && transportKinds.has(e.kind)) transport.push(e);
    if (receipt === null && attempts.length > 0 && receiptKinds.has(e.kind)) receipt = { seq: e.seq, kind: e.kind };
    if (e.kind === 'RECONCILIATION_RESULT')
      lookups.push({ seq: e.seq, correlation: e.payload.correlation, lookup_action_id: e.payload.lookup_action_id });
    if (e.kind === 'OPERATOR_ATTESTED') attested.push({ seq: e.seq, actor: e.payload.actor, basis: e.payload.basis });
    // A settled, known outcome (not unknown) needs no reconciliation.
    if (e.classification !== undefined) settled = e.classification.outcome !== 'unknown';
  }

  const crossed = attempts.length > 0;
  return {
    action_id: actionId,
    events,
    authorization: {
      session_id: accepted?.session_id ?? events[0]?.session_id ?? null,
      accepted_seq: accepted?.seq ?? null,
      approval: accepted?.payload.approval ?? null,
      decision,
      credential,
    },
    dispatch: { crossed, attempts, setup_failures: setupFailures },
    transport,
    receipt,
    reconciliation: {
      needed: crossed && receipt === null && !settled,
      request_fingerprint: accepted?.payload.request_fingerprint ?? null,
      target: accepted?.payload.target ?? null,
      idempotent: accepted?.payload.idempotent ?? null,
      lookups,
      attested,
    },
  };
}
