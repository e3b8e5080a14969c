import {
  actionStageOrder,
  CodedError,
  dispatchEvidenceRank,
  isoTime,
  transitionRefusalOf,
  TransitionRefused,
  kindsRequiringClassification,
  restartJournalQuarantinedBasis,
  type ActionStage,
  type ActionState,
  type AttemptState,
  type Classification,
  type DispatchEvidence,
  type EventKind,
  type JournalEvent,
  type TransitionRefusal,
  type TransitionRefusalKind,
} from '../contract/index.js';

/** One event folded: the state after it, or the typed refusal of a lost race. */
export type Folded<S> =
  { readonly ok: true; readonly state: S } | { readonly ok: false; readonly refusal: TransitionRefusal };

/**
 * The projection as the journal's compare-and-swap: an event that lost a race (another decision, a
 * dispatch, a settlement or a lease landed first) is a refusal value the caller switches on; an event
 * no race explains (wrong subject, seq out of order, a fingerprint other than the bound one) is a bug
 * and throws IMPOSSIBLE_TRANSITION. Either way the event is not folded.
 */
export function foldEvent(state: ActionState | undefined, event: JournalEvent): Folded<ActionState> {
  try {
    return { ok: true, state: applyEvent(state, event) };
  } catch (error) {
    const refusal = transitionRefusalOf(error);
    if (refusal === undefined) throw error;
    return { ok: false, refusal };
  }
}

/**
 * Rules for new events only, checked before the fold when an event is appended (broker/journal plan-unit), never on
 * replay: journals written before a rule existed may hold what it now refuses, and their histories must still fold.
 * - A caller event (CALLER_CANCELLED, CALLER_DEADLINE_EXCEEDED, CALLER_DISCONNECTED) after ABANDONED: a person closed
 *   the action for good, and its call had ended before (only a recorded unknown is abandoned), so no caller of it is
 *   left to cancel, time out or go away; recording one would rewrite how that call ended.
 */
export function refuseNewEvent(state: ActionState | undefined, event: JournalEvent): TransitionRefusal | undefined {
  if (state === undefined || !state.abandoned || !callerEventKinds.has(event.kind)) return undefined;
  return {
    kind: 'abandoned',
    code: 'IMPOSSIBLE_TRANSITION',
    message: `seq ${event.seq} ${event.kind} on ${event.action_id}: a caller event after a person abandoned it`,
  };
}

const callerEventKinds: ReadonlySet<EventKind> = new Set([
  'CALLER_CANCELLED',
  'CALLER_DEADLINE_EXCEEDED',
  'CALLER_DISCONNECTED',
]);

/**
 * The projection: current action state as a pure fold of its events in append order. Anything that
 * would contradict the recorded history (not_attempted after DISPATCH_STARTED, committed → unknown,
 * two terminal decisions) throws: a refusal (refused(), a lost race) as TransitionRefused, a bug as
 * IMPOSSIBLE_TRANSITION, both with the same code and message shape. The journal refuses to append
 * such an event, so the stored log never holds one; replaying one (project()) is corruption either way.
 */
export function applyEvent(state: ActionState | undefined, event: JournalEvent): ActionState {
  if (state === undefined) return acceptedState(event);
  requireInOrder(state, event);
  const next: ActionState = { ...state, attempts: state.attempts, last_seq: event.seq, updated_at_ms: event.at_ms };
  // A kind missing from the table is a contract the projection has not learned (the schema admits only known kinds).
  if (!Object.hasOwn(foldByKind, event.kind)) return assertNever(event as never);
  // The table is keyed by kind, so each handler gets its own kind's event; TypeScript cannot correlate the two.
  (foldByKind[event.kind] as FoldKind<EventKind>)(event, state, next);
  if (event.classification !== undefined) applyClassification(event, state, next, event.classification);
  return next;
}

/** The state an action starts in: only ACTION_ACCEPTED opens one. */
function acceptedState(event: JournalEvent): ActionState {
  if (event.kind !== 'ACTION_ACCEPTED') {
    return impossible(event, 'the first event of an action must be ACTION_ACCEPTED');
  }
  const p = event.payload;
  return {
    action_id: event.action_id,
    session_id: event.session_id,
    ticket: event.ticket,
    lane: event.lane,
    channel: p.channel,
    target: p.target,
    request_fingerprint: p.request_fingerprint,
    approval: p.approval,
    idempotent: p.idempotent,
    stage: 'accepted',
    decision: null,
    dispatch_evidence: 'never_started',
    dispatch_seq: null,
    attempts: [],
    outcome: null,
    phase: null,
    retry: null,
    code: null,
    effect: null,
    outcome_basis: null,
    source: null,
    retry_after_ms: null,
    caller_disposition: null,
    recorded: false,
    result_id: null,
    result_digest: null,
    abandoned: false,
    retry_budget: p.retry_budget ?? 0,
    approval_rule: p.approval_rule ?? null,
    retry_generation: 0,
    lease: null,
    key_expires_at_ms: null,
    first_seq: event.seq,
    last_seq: event.seq,
    accepted_at_ms: event.at_ms,
    updated_at_ms: event.at_ms,
  };
}

/** Checks every kind shares: this action, after its last event, classified where the kind must be. */
function requireInOrder(state: ActionState, event: JournalEvent): void {
  if (event.action_id !== state.action_id) {
    impossible(event, `event for ${event.action_id} folded into ${state.action_id}`);
  }
  if (event.seq <= state.last_seq) {
    impossible(event, `seq ${event.seq} is not after ${state.last_seq}: events must fold in append order`);
  }
  if (kindsRequiringClassification.has(event.kind) && event.classification === undefined) {
    impossible(event, `${event.kind} must carry a classification`);
  }
}

type EventOf<K extends EventKind> = Extract<JournalEvent, { readonly kind: K }>;

/**
 * One kind's step of the fold: it reads the state before the event and changes `next` (a shallow copy
 * with the new seq and time), or throws a refusal or a bug; the classification, if any, is applied after.
 */
type FoldKind<K extends EventKind> = (event: EventOf<K>, state: ActionState, next: ActionState) => void;

/** Keyed by every kind, so a new kind fails the typecheck until the projection says what it does. */
const foldByKind: { readonly [K in EventKind]: FoldKind<K> } = {
  ACTION_ACCEPTED: (event) => impossible(event, 'an action is accepted once'),
  PREFLIGHT_VALIDATED: foldPreflightValidated,
  PREFLIGHT_FAILED: (event, state) =>
    requireStage(event, state, ['accepted'], 'PREFLIGHT_FAILED follows ACTION_ACCEPTED'),
  CARD_SHOWN: foldCardShown,
  APPROVED: foldApproved,
  REJECTED: foldRejectedOrExpired,
  EXPIRED: foldRejectedOrExpired,
  CANCELLED: foldCancelled,
  CREDENTIAL_AUTHORIZED: foldCredentialAuthorized,
  SETUP_ATTEMPT_FAILED: foldSetupAttemptFailed,
  DISPATCH_STARTED: foldDispatchStarted,
  REQUEST_SENT: foldRequestSent,
  REMOTE_RESPONSE_STARTED: foldResponseStarted,
  REMOTE_RESPONSE_COMPLETE: foldResponseComplete,
  RESULT_COMMITTED: foldResultCommitted,
  RESULT_DELIVERED: foldResultDelivered,
  OPERATION_SUBMITTED: foldOperationSubmitted,
  OUTCOME_RECORDED: () => undefined,
  CALLER_CANCELLED: (_event, state, next) => {
    next.caller_disposition = state.caller_disposition ?? 'canceled';
  },
  CALLER_DEADLINE_EXCEEDED: (_event, state, next) => {
    next.caller_disposition = state.caller_disposition ?? 'timed_out';
  },
  CALLER_DISCONNECTED: (_event, state, next) => {
    next.caller_disposition = state.caller_disposition ?? 'disconnected';
  },
  CONNECTION_LOST: (event, _state, next) =>
    updateAttempt(event, next, event.payload.attempt, (a) => {
      a.connection_lost = true;
    }),
  OUTPUT_RECEIVED: foldOutputReceived,
  EXIT_STATUS: foldExit,
  EXIT_SIGNAL: foldExit,
  CHANNEL_CLOSED: (event, _state, next) =>
    updateAttempt(event, next, event.payload.attempt, (a) => {
      a.channel_closed = true;
    }),
  RECONCILIATION_RESULT: foldLateSettlement,
  OPERATOR_ATTESTED: foldLateSettlement,
  RETRY_LEASED: foldRetryLeased,
  ABANDONED: foldAbandoned,
  SESSION_STARTED: foldSessionEvent,
  SESSION_APPROVED: foldSessionEvent,
  SESSION_REVOKED: foldSessionEvent,
  SESSION_ENDED: foldSessionEvent,
  SESSION_RECONNECTED: foldSessionEvent,
  CONFIG_APPLIED: (event) => impossible(event, 'a configuration event folds into no action'),
  ALLOWLIST_ENTRY_ADDED: (event) => impossible(event, 'an allowlist event folds into no action'),
  ALLOWLIST_ENTRY_REMOVED: (event) => impossible(event, 'an allowlist event folds into no action'),
  INTEGRITY_READOPTED: (event) => impossible(event, 'an integrity event folds into no action'),
  CREDENTIAL_REQUESTED: foldCredentialRequestEvent,
  CREDENTIAL_PROVISIONED: foldCredentialRequestEvent,
  CREDENTIAL_REQUEST_DECLINED: foldCredentialRequestEvent,
  CREDENTIAL_REQUEST_EXPIRED: foldCredentialRequestEvent,
};

function foldPreflightValidated(event: EventOf<'PREFLIGHT_VALIDATED'>, state: ActionState, next: ActionState): void {
  requireStage(event, state, ['accepted'], 'PREFLIGHT_VALIDATED follows ACTION_ACCEPTED');
  next.stage = 'validated';
  if (event.payload.idempotency !== undefined) next.key_expires_at_ms = event.payload.idempotency.expires_at_ms;
}

function foldCardShown(event: EventOf<'CARD_SHOWN'>, state: ActionState, next: ActionState): void {
  requireOpenBeforeDispatch(event, state);
  requireStage(event, state, ['validated'], 'a card is shown only for a validated action');
  next.stage = 'card_shown';
}

function foldApproved(event: EventOf<'APPROVED'>, state: ActionState, next: ActionState): void {
  if (state.decision !== null) refused('already_decided', event, `a second decision after ${state.decision}`);
  requireOpenBeforeDispatch(event, state);
  requireStage(event, state, ['validated', 'card_shown'], 'approval needs a validated action');
  if (event.payload.request_fingerprint !== state.request_fingerprint) {
    impossible(event, 'the approval names a different fingerprint than the one bound at admission');
  }
  next.decision = 'approved';
  next.stage = 'approved';
}

function foldRejectedOrExpired(event: EventOf<'REJECTED' | 'EXPIRED'>, state: ActionState, next: ActionState): void {
  if (state.decision !== null) refused('already_decided', event, `a second terminal decision after ${state.decision}`);
  requireOpenBeforeDispatch(event, state);
  next.decision = event.kind === 'REJECTED' ? 'rejected' : 'expired';
}

function foldCancelled(event: EventOf<'CANCELLED'>, state: ActionState, next: ActionState): void {
  if (state.decision !== null && state.decision !== 'approved') {
    refused('already_decided', event, `a second terminal decision after ${state.decision}`);
  }
  requireOpenBeforeDispatch(event, state);
  next.decision = 'cancelled';
}

function foldCredentialAuthorized(
  event: EventOf<'CREDENTIAL_AUTHORIZED'>,
  state: ActionState,
  next: ActionState,
): void {
  requireDispatchable(event, state);
  if (state.approval !== 'none' && state.decision !== 'approved') {
    impossible(event, 'a credential is authorized only after approval');
  }
  if (stageIndex(state.stage) < stageIndex('validated')) {
    impossible(event, 'a credential is authorized only for a validated action');
  }
  if (event.payload.request_fingerprint !== state.request_fingerprint) {
    impossible(event, 'the authorized fingerprint differs from the approved one');
  }
  if (state.dispatch_seq === null) next.stage = 'credential_authorized';
}

function foldSetupAttemptFailed(event: EventOf<'SETUP_ATTEMPT_FAILED'>, state: ActionState, next: ActionState): void {
  requireDispatchable(event, state);
  requireAuthorized(event, state);
  requireNextAttempt(event, state, event.payload.attempt);
  next.attempts = [...state.attempts, newAttempt(event.payload.attempt, 'setup_failed', event.payload.stage)];
}

function foldDispatchStarted(event: EventOf<'DISPATCH_STARTED'>, state: ActionState, next: ActionState): void {
  requireDispatchable(event, state);
  requireAuthorized(event, state);
  requireNextAttempt(event, state, event.payload.attempt);
  requireLease(event, state, event.payload.generation);
  const attempt = newAttempt(event.payload.attempt, 'dispatched', null);
  attempt.connection = event.payload.connection;
  attempt.connection_id = event.payload.connection_id ?? null;
  attempt.dispatch_seq = event.seq;
  next.attempts = [...state.attempts, attempt];
  next.dispatch_seq = state.dispatch_seq ?? event.seq;
  next.dispatch_evidence = strongest(state.dispatch_evidence, 'started_locally');
  next.stage = 'dispatch_started';
  // From here on the default is unknown until an authoritative result is recorded.
  next.outcome = 'unknown';
  next.phase = 'remote_execution';
  next.effect = 'unknown_effect';
  next.retry = null;
  next.code = null;
  next.outcome_basis = 'dispatch_started_no_result_recorded';
  next.source = null;
  next.retry_after_ms = null;
  next.recorded = false;
}

function foldRequestSent(event: EventOf<'REQUEST_SENT'>, state: ActionState, next: ActionState): void {
  updateAttempt(event, next, event.payload.attempt, (a) => {
    a.request_complete = a.request_complete || event.payload.request_complete;
  });
  next.dispatch_evidence = strongest(state.dispatch_evidence, 'handed_to_transport');
  advanceStage(next, 'request_sent');
}

function foldResponseStarted(event: EventOf<'REMOTE_RESPONSE_STARTED'>, state: ActionState, next: ActionState): void {
  updateAttempt(event, next, event.payload.attempt, (a) => {
    a.response_started = true;
    a.response_status = event.payload.status ?? a.response_status;
  });
  next.dispatch_evidence = strongest(state.dispatch_evidence, 'remote_receipt');
  advanceStage(next, 'response_started');
}

function foldResponseComplete(event: EventOf<'REMOTE_RESPONSE_COMPLETE'>, state: ActionState, next: ActionState): void {
  updateAttempt(event, next, event.payload.attempt, (a) => {
    a.response_started = true;
    a.response_complete = true;
  });
  next.dispatch_evidence = strongest(state.dispatch_evidence, 'remote_receipt');
  advanceStage(next, 'response_complete');
}

function foldResultCommitted(event: EventOf<'RESULT_COMMITTED'>, state: ActionState, next: ActionState): void {
  updateAttempt(event, next, event.payload.attempt, () => undefined);
  if (event.classification?.outcome !== 'committed' && event.classification?.outcome !== 'rejected') {
    impossible(event, 'RESULT_COMMITTED settles committed or rejected only');
  }
  // One result per run: a retry after a throttled (rejected, backoff) answer commits its own,
  // but only while its attempt is in flight — never over a settled one.
  if (state.result_id !== null && (state.recorded || state.outcome !== 'unknown'))
    refused('settled', event, 'a result is committed once');
  next.result_id = event.payload.result_id;
  next.result_digest = event.payload.result_digest;
  advanceStage(next, 'result_committed');
}

function foldResultDelivered(event: EventOf<'RESULT_DELIVERED'>, state: ActionState, next: ActionState): void {
  if (state.result_id === null) impossible(event, 'RESULT_DELIVERED needs a committed result');
  // A handoff acknowledged late names its result: an earlier attempt's (a retry dispatched since, or committed its
  // own) is not the action's result, and must not make the next one read as delivered.
  const named = event.payload.result_id;
  if (named !== undefined && (named !== state.result_id || stageIndex(state.stage) < stageIndex('result_committed')))
    refused('wrong_stage', event, `RESULT_DELIVERED of ${named}, not the action's current committed result`);
  next.caller_disposition = state.caller_disposition ?? 'completed';
  advanceStage(next, 'result_delivered');
}

function foldOperationSubmitted(event: EventOf<'OPERATION_SUBMITTED'>, state: ActionState): void {
  // The submission itself is the committed result; the job is tracked by this record.
  if (state.result_id !== event.payload.result_id) {
    impossible(event, 'OPERATION_SUBMITTED names the committed result of its submission');
  }
}

function foldOutputReceived(event: EventOf<'OUTPUT_RECEIVED'>, state: ActionState, next: ActionState): void {
  updateAttempt(event, next, event.payload.attempt, (a) => {
    a.output_bytes = {
      ...a.output_bytes,
      [event.payload.stream]: a.output_bytes[event.payload.stream] + event.payload.bytes,
    };
  });
  next.dispatch_evidence = strongest(state.dispatch_evidence, 'remote_receipt');
}

function foldExit(event: EventOf<'EXIT_STATUS' | 'EXIT_SIGNAL'>, state: ActionState, next: ActionState): void {
  updateAttempt(event, next, event.payload.attempt, (a) => {
    if (a.exit_status !== null || a.exit_signal !== null) impossible(event, 'a command exits once');
    if (event.kind === 'EXIT_STATUS') a.exit_status = event.payload.exit_status;
    else a.exit_signal = event.payload.signal;
  });
  next.dispatch_evidence = strongest(state.dispatch_evidence, 'remote_receipt');
}

/**
 * A lookup's answer or a person's attestation: it settles a dispatched action only once no attempt can still answer,
 * or an unknown that recovery in a quarantined journal recorded before any DISPATCH_STARTED (unknownBeforeDispatch).
 */
function foldLateSettlement(event: EventOf<'RECONCILIATION_RESULT' | 'OPERATOR_ATTESTED'>, state: ActionState): void {
  if (state.dispatch_seq === null && !unknownBeforeDispatch(state)) {
    // Such an unknown, settled already: the same answer as a dispatched action's second settlement.
    if (state.recorded && (state.outcome === 'committed' || state.outcome === 'rejected'))
      refused('settled', event, `${state.outcome} → ${event.classification?.outcome}: the action was already settled`);
    refused('not_dispatched', event, `${event.kind} settles only a dispatched action or a recorded unknown`);
  }
  // Never over an attempt in flight, nor under another worker's live retry lease: that attempt's
  // own answer decides, and a lookup that ran before it says nothing about it.
  if (!state.recorded)
    refused('attempt_in_flight', event, `${event.kind} while attempt ${state.attempts.length} has no recorded outcome`);
  if (leaseLive(state, event.at_ms))
    refused(
      'lease_held',
      event,
      `${event.kind} while retry generation ${state.lease?.generation ?? 0} holds a live lease`,
    );
  if (
    event.kind === 'RECONCILIATION_RESULT' &&
    event.payload.attempts_seen !== undefined &&
    event.payload.attempts_seen !== state.attempts.length
  ) {
    refused(
      'stale_lookup',
      event,
      `the lookup started after attempt ${event.payload.attempts_seen}, but attempt ${state.attempts.length} ran since: its answer is stale`,
    );
  }
}

function foldRetryLeased(event: EventOf<'RETRY_LEASED'>, state: ActionState, next: ActionState): void {
  // One active attempt per invocation (DESIGN §3): a lease is taken only on a recorded outcome
  // a retry may leave, only as the next generation, only within the recorded budget, and only
  // when no other lease is still live. Two workers racing for it: the journal folds one first,
  // and the other's generation is no longer next.
  const generation = state.retry_generation;
  if (!retriableRecord(state))
    refused(
      'not_retriable',
      event,
      `a retry lease needs a recorded unknown after dispatch or a backoff outcome (outcome ${state.outcome}, recorded ${state.recorded}, dispatched ${state.dispatch_seq !== null})`,
    );
  const lease = state.lease;
  if (
    event.payload.decision === 'RETRY_SAME_KEY' &&
    (state.key_expires_at_ms === null || event.at_ms >= state.key_expires_at_ms)
  ) {
    refused('not_retriable', event, 'a same-key retry needs the bound key inside its earliest safe expiry');
  }
  if (lease?.open === true && event.at_ms < lease.expires_at_ms) {
    refused(
      'lease_held',
      event,
      `generation ${lease.generation} is held by ${lease.holder} until ${isoTime(lease.expires_at_ms)}`,
      'LEASE_LOST',
    );
  }
  if (event.payload.generation !== generation + 1) {
    refused(
      'lease_lost',
      event,
      `generation ${event.payload.generation} is not the next (${generation + 1})`,
      'LEASE_LOST',
    );
  }
  if (event.payload.generation > state.retry_budget) {
    refused(
      'not_retriable',
      event,
      `retry ${event.payload.generation} exceeds the recorded budget of ${state.retry_budget}`,
    );
  }
  next.retry_generation = event.payload.generation;
  next.lease = {
    generation: event.payload.generation,
    holder: event.payload.holder,
    expires_at_ms: event.payload.expires_at_ms,
    open: true,
    decision: event.payload.decision,
  };
}

function foldAbandoned(event: EventOf<'ABANDONED'>, state: ActionState, next: ActionState): void {
  // Only a recorded unknown: a blocked head (dispatched, its attempt classified), or one recovery recorded unknown
  // before dispatch in a quarantined journal (unknownBeforeDispatch).
  if (state.outcome !== 'unknown' || !state.recorded) {
    refused(abandonRefusal(state), event, 'only an action whose recorded outcome is unknown can be abandoned');
  }
  if (state.abandoned) refused('abandoned', event, 'the action was already abandoned');
  next.abandoned = true;
  // An abandoned action is never sent again: a lease taken before the abandon dies with it.
  if (state.lease?.open === true) next.lease = { ...state.lease, open: false };
}

function foldSessionEvent(event: JournalEvent): void {
  impossible(event, 'a session event folds into a session, not an action');
}

function foldCredentialRequestEvent(event: JournalEvent): void {
  impossible(event, 'a credential request event folds into its request (project-credential-request.ts), not an action');
}

/**
 * Folds events (any number of actions) in append order into their current states; session, configuration and
 * credential request events are skipped.
 */
export function project(events: Iterable<JournalEvent>): Map<string, ActionState> {
  const states = new Map<string, ActionState>();
  let lastSeq = 0;
  for (const event of events) {
    if (event.seq <= lastSeq) impossible(event, `seq ${event.seq} follows ${lastSeq}: events must be in append order`);
    lastSeq = event.seq;
    // Session events share the log (and its seq) but fold into sessions: project-session.ts; configuration events fold nowhere.
    if (event.action_id.startsWith('ses_') || event.action_id.startsWith('cfg_') || event.action_id.startsWith('crq_'))
      continue;
    states.set(event.action_id, applyEvent(states.get(event.action_id), event));
  }
  return states;
}

function applyClassification(event: JournalEvent, before: ActionState, next: ActionState, c: Classification): void {
  // Judge against the state including this event: a DISPATCH_STARTED cannot carry not_attempted.
  if (next.dispatch_seq !== null && c.outcome === 'not_attempted') {
    refused('already_dispatched', event, 'not_attempted after DISPATCH_STARTED');
  }
  if (
    next.dispatch_seq === null &&
    c.outcome !== 'not_attempted' &&
    !quarantinedRecovery(event, before, c) &&
    !lateSettlementBeforeDispatch(event, before)
  ) {
    impossible(event, `${c.outcome} without DISPATCH_STARTED`);
  }
  // Never back from unknown: before dispatch only a quarantined journal's recovery records one (quarantinedRecovery).
  if (before.outcome === 'unknown' && c.outcome === 'not_attempted') impossible(event, 'not_attempted after unknown');
  const settled = before.outcome === 'committed' || before.outcome === 'rejected';
  if (settled && before.recorded) {
    const deliveryNote = c.phase === 'result_delivery' && c.outcome === before.outcome && c.effect === before.effect;
    if (!deliveryNote) refused('settled', event, `${before.outcome} → ${c.outcome}: the action was already settled`);
  }
  next.outcome = c.outcome;
  next.phase = c.phase;
  next.retry = c.retry;
  next.code = recordedCode(c);
  next.effect = c.effect;
  next.outcome_basis = c.outcome_basis;
  next.source = c.source;
  next.retry_after_ms = c.retry_after_ms ?? null;
  next.recorded = true;
  // A classification after a lease's attempt ends that lease (its worker is done).
  if (next.lease?.open === true) next.lease = { ...next.lease, open: false };
}

/**
 * The code a classification leaves in the record. A person's attested rejection is ATTESTED_REJECTED; attestations
 * written before that code (101f91b) carry REMOTE_REJECTED, which means a refusal the remote returned — none did. Their
 * events are sealed and never rewritten, so the fold reads them as what they are: any re-fold of an old journal agrees
 * with new attestations, and with the rows journal migration 016 recoded (the same test on the same two fields, source
 * and code, which a stored row keeps).
 */
function recordedCode(c: Classification): ActionState['code'] {
  return c.source === 'operator_attested' && c.code === 'REMOTE_REJECTED' ? 'ATTESTED_REJECTED' : c.code;
}

/**
 * Recovery in a quarantined journal (classify-restart.ts): an open action's record may have lost a later
 * DISPATCH_STARTED, so it closes unknown, not not_attempted. Only that record, only on an action nothing closed yet.
 */
function quarantinedRecovery(event: JournalEvent, before: ActionState, c: Classification): boolean {
  return (
    event.kind === 'OUTCOME_RECORDED' &&
    before.outcome === null &&
    c.outcome === 'unknown' &&
    c.outcome_basis === restartJournalQuarantinedBasis
  );
}

/**
 * An unknown with no DISPATCH_STARTED: only recovery in a quarantined journal records one (quarantinedRecovery). It is
 * left like any unknown, by a lookup, a person's attestation or abandonment — never by a retry (foldRetryLeased).
 */
function unknownBeforeDispatch(state: ActionState): boolean {
  return state.dispatch_seq === null && state.outcome === 'unknown' && state.recorded;
}

/** A lookup's answer or a person's attestation on an unknown recorded before dispatch (foldLateSettlement admits it). */
function lateSettlementBeforeDispatch(event: JournalEvent, before: ActionState): boolean {
  return (
    (event.kind === 'RECONCILIATION_RESULT' || event.kind === 'OPERATOR_ATTESTED') && unknownBeforeDispatch(before)
  );
}

function newAttempt(n: number, state: AttemptState['state'], setupStage: string | null): AttemptState {
  return {
    n,
    state,
    setup_stage: setupStage,
    connection: null,
    connection_id: null,
    dispatch_seq: null,
    request_complete: false,
    response_started: false,
    response_complete: false,
    response_status: null,
    connection_lost: false,
    exit_status: null,
    exit_signal: null,
    channel_closed: false,
    output_bytes: { stdout: 0, stderr: 0, body: 0 },
  };
}

function updateAttempt(event: JournalEvent, next: ActionState, n: number, change: (a: AttemptState) => void): void {
  const index = next.attempts.findIndex((a) => a.n === n);
  const found = next.attempts[index];
  if (found === undefined || found.state !== 'dispatched') {
    impossible(event, `${event.kind} names attempt ${n}, which never crossed DISPATCH_STARTED`);
  }
  const copy: AttemptState = { ...found, output_bytes: { ...found.output_bytes } };
  change(copy);
  next.attempts = next.attempts.map((a, i) => (i === index ? copy : a));
}

function requireStage(event: JournalEvent, state: ActionState, allowed: readonly ActionStage[], why: string): void {
  if (allowed.includes(state.stage) && state.outcome === null) return;
  // The record moved on (or not yet there) since its writer read it: a card shown after a decision, a late decision.
  const kind = state.dispatch_seq !== null ? 'already_dispatched' : state.outcome !== null ? 'closed' : 'wrong_stage';
  refused(kind, event, `${why} (stage ${state.stage})`);
}

function requireOpenBeforeDispatch(event: JournalEvent, state: ActionState): void {
  if (state.dispatch_seq !== null) refused('already_dispatched', event, `${event.kind} after DISPATCH_STARTED`);
  if (closedByGate(state)) refused('closed', event, `${event.kind} after the ticket was ${state.decision}`);
  if (state.phase === 'validation') refused('closed', event, `${event.kind} after preflight failed`);
  // Closed before dispatch by a gate or a restart (BROKER_RESTARTED, VAULT_LOCKED…): exactly one terminal record.
  if (state.outcome !== null)
    refused('closed', event, `${event.kind} after the ticket was closed (${state.code ?? 'recorded'})`);
}

/** A person's or the clock's decision closed the ticket before any dispatch. */
function closedByGate(state: ActionState): boolean {
  return state.decision === 'rejected' || state.decision === 'expired' || state.decision === 'cancelled';
}

function requireDispatchable(event: JournalEvent, state: ActionState): void {
  if (closedByGate(state)) refused('closed', event, `${event.kind} after the ticket was ${state.decision}`);
  if (state.phase === 'validation') refused('closed', event, `${event.kind} after a validation failure`);
  if (state.outcome === 'committed') refused('settled', event, `${event.kind} after a committed result`);
  if (state.abandoned) refused('abandoned', event, `${event.kind} after a person abandoned it`);
  if ((state.outcome === 'rejected' || state.outcome === 'not_attempted') && state.retry !== 'backoff') {
    refused(
      state.outcome === 'rejected' ? 'settled' : 'closed',
      event,
      `${event.kind} after ${state.outcome} without a backoff disposition`,
    );
  }
  if (state.outcome === 'unknown' && !state.recorded) {
    refused('attempt_in_flight', event, `${event.kind} while attempt ${state.attempts.length} has no recorded outcome`);
  }
}

/**
 * The fence: once any retry lease exists, a dispatch must name the current generation and land
 * before that lease expires. The check runs inside the journal's commit (the projection is the
 * compare-and-swap), and the channel hands nothing to the transport until DISPATCH_STARTED is
 * durable, so a paused worker whose lease lapsed is stopped before its first byte.
 */
function requireLease(event: JournalEvent, state: ActionState, generation: number | undefined): void {
  const lease = state.lease;
  if (lease === null) {
    if (generation !== undefined)
      impossible(event, `DISPATCH_STARTED names generation ${generation} but no retry lease was taken`);
    // A recorded outcome ends the first run; any later dispatch is a retry and needs the lease.
    if (state.recorded && state.outcome !== null)
      refused('no_lease', event, 'a retry after a recorded outcome needs a retry lease (RETRY_LEASED)');
    return;
  }
  // A same-key retry must also land inside the key's window: past it the remote may have forgotten the key.
  const keyLapsed =
    lease.decision === 'RETRY_SAME_KEY' && (state.key_expires_at_ms === null || event.at_ms >= state.key_expires_at_ms);
  if (generation !== lease.generation || !lease.open || event.at_ms >= lease.expires_at_ms || keyLapsed) {
    refused(
      'lease_lost',
      event,
      `generation ${generation ?? 'none'} is not the live lease (generation ${lease.generation}, ${lease.open ? `expires ${isoTime(lease.expires_at_ms)}` : 'its attempt is recorded'})`,
      'LEASE_LOST',
    );
  }
}

/**
 * Whether the record is one a retry may leave, the first rule of a retry lease (foldRetryLeased refuses RETRY_LEASED
 * with not_retriable otherwise): a recorded unknown after dispatch, or a backoff outcome, never abandoned. An unknown
 * never dispatched (a quarantined journal's recovery) is not retried: its record may lack the attempt a retry would
 * follow, and a setup failure could not be recorded without reading not_attempted. The lease's other rules (the key's
 * window for a same-key retry, no live lease, the next generation) are about the moment of asking, not the record.
 * The approval card reads it (retry_possible), so the desktop offers no retry the journal would refuse.
 */
export function retriableRecord(state: ActionState): boolean {
  return (
    state.recorded &&
    !state.abandoned &&
    ((state.outcome === 'unknown' && state.dispatch_seq !== null) ||
      ((state.outcome === 'not_attempted' || state.outcome === 'rejected') && state.retry === 'backoff'))
  );
}

/** Whether a retry lease is held now: open (its attempt not yet recorded) and not expired. */
export function leaseLive(state: ActionState, nowMs: number): boolean {
  return state.lease?.open === true && nowMs < state.lease.expires_at_ms;
}

function requireAuthorized(event: JournalEvent, state: ActionState): void {
  if (stageIndex(state.stage) < stageIndex('credential_authorized')) {
    impossible(event, `${event.kind} before CREDENTIAL_AUTHORIZED`);
  }
}

function requireNextAttempt(event: JournalEvent, state: ActionState, n: number): void {
  if (n !== state.attempts.length + 1)
    refused('attempt_taken', event, `attempt ${n} after ${state.attempts.length} attempts`);
}

function advanceStage(next: ActionState, stage: ActionStage): void {
  if (stageIndex(stage) > stageIndex(next.stage)) next.stage = stage;
}

function stageIndex(stage: ActionStage): number {
  return actionStageOrder.indexOf(stage);
}

function strongest(a: DispatchEvidence, b: DispatchEvidence): DispatchEvidence {
  return dispatchEvidenceRank[a] >= dispatchEvidenceRank[b] ? a : b;
}

/** Why an ABANDONED lost: the head was settled meanwhile, its attempt is still in flight, or it never dispatched. */
function abandonRefusal(state: ActionState): TransitionRefusalKind {
  if (state.dispatch_seq === null) return 'not_dispatched';
  return state.recorded ? 'settled' : 'attempt_in_flight';
}

/** A lost race: right for the record its writer read, refused for the one that is durable now (foldEvent returns it). */
function refused(
  kind: TransitionRefusalKind,
  event: JournalEvent,
  why: string,
  code: TransitionRefusal['code'] = 'IMPOSSIBLE_TRANSITION',
): never {
  throw new TransitionRefused({ kind, code, message: `seq ${event.seq} ${event.kind} on ${event.action_id}: ${why}` });
}

/** A bug upstream: no race explains this event. */
function impossible(event: JournalEvent, why: string): never {
  throw new CodedError('IMPOSSIBLE_TRANSITION', `seq ${event.seq} ${event.kind} on ${event.action_id}: ${why}`);
}

function assertNever(value: never): never {
  throw new Error(`unhandled event ${JSON.stringify(value)}`);
}
