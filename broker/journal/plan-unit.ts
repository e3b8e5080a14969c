import {
  bindIdempotencyKey,
  foldCredentialRequestEvent,
  foldEvent,
  foldSessionEvent,
  idempotencyKeyId,
  refuseNewEvent,
  type BoundIdempotencyKey,
  type KeyBinding,
  type CredentialRequestState,
} from '../core/index.js';
import {
  CodedError,
  type ActionState,
  type JournalEvent,
  type NewEvent,
  type SessionState,
  type TransitionRefusal,
} from '../contract/index.js';

/** Where the unit lands: the next append position, the last issued ticket, the wall time. */
export interface PlanContext {
  readonly nextSeq: number;
  readonly lastTicket: number;
  readonly atMs: number;
  /** The state as of everything planned so far in this transaction, then as stored. */
  stateOf(actionId: string): ActionState | undefined;
  /** The same for sessions (SESSION_* events, `ses_` subjects). */
  sessionOf(sessionId: string): SessionState | undefined;
  /** The same for idempotency keys (by idempotencyKeyId): planned in this transaction, then stored. */
  idempotencyKeyOf(route: string, scope: string, key: string): KeyBinding | undefined;
  /** The same for credential requests (CREDENTIAL_* request events, `crq_` subjects), folded from their headers. */
  credentialRequestOf(requestId: string): CredentialRequestState | undefined;
}

/** One durable event and the action's state right after it. */
export interface Appended {
  readonly event: JournalEvent;
  readonly state: ActionState;
}

/** One durable session event and the session's state right after it. */
export interface AppendedSession {
  readonly event: JournalEvent;
  readonly session: SessionState;
}

/** One durable configuration event (CONFIG_APPLIED): no state folds from it, the log is its record. */
export interface AppendedConfig {
  readonly event: JournalEvent;
}

/** One durable credential request event and the request's state right after it. */
export interface AppendedCredentialRequest {
  readonly event: JournalEvent;
  readonly request: CredentialRequestState;
}

type AnyAppended = Appended | AppendedSession | AppendedConfig | AppendedCredentialRequest;

export interface PlannedUnit {
  readonly appended: readonly AnyAppended[];
  /** Each touched action's state after the unit, in first-touched order. */
  readonly states: ReadonlyMap<string, ActionState>;
  readonly sessions: ReadonlyMap<string, SessionState>;
  readonly credentialRequests: ReadonlyMap<string, CredentialRequestState>;
  /** Keys this unit bound (new, or rebound after expiry), by idempotencyKeyId. */
  readonly idempotencyKeys: ReadonlyMap<string, BoundIdempotencyKey>;
  readonly lastTicket: number;
}

/** A unit planned, or refused whole because one of its events lost a race (nothing of it is written). */
export type PlanResult =
  { readonly ok: true; readonly plan: PlannedUnit } | { readonly ok: false; readonly refusal: TransitionRefusal };

/**
 * Turns validated new events into durable events (seq, wall time, ticket, session and lane filled
 * in) and folds each through broker/core foldEvent, the single source of transition rules. An event
 * that lost a race refuses the unit as a value (the first refusal); a bug (IMPOSSIBLE_TRANSITION)
 * or a contradicted field (INVALID_ARGUMENT, IDEMPOTENCY_MISMATCH) throws. Either way without side
 * effects, so the caller can drop the whole unit and keep the rest of the batch.
 */
export function planUnit(newEvents: readonly NewEvent[], ctx: PlanContext): PlanResult {
  const states = new Map<string, ActionState>();
  const sessions = new Map<string, SessionState>();
  const idempotencyKeys = new Map<string, BoundIdempotencyKey>();
  const credentialRequests = new Map<string, CredentialRequestState>();
  const appended: AnyAppended[] = [];
  let lastTicket = ctx.lastTicket;
  for (const [i, input] of newEvents.entries()) {
    if (input.action_id.startsWith('ses_')) {
      // A session event: its own subject, stamped with itself as the session.
      const event = journalEvent(input, ctx.nextSeq + i, ctx.atMs, input.action_id, null, null);
      const folded = foldSessionEvent(sessions.get(input.action_id) ?? ctx.sessionOf(input.action_id), event);
      if (!folded.ok) return folded;
      sessions.set(input.action_id, folded.state);
      appended.push({ event, session: folded.state });
      continue;
    }
    if (input.action_id.startsWith('cfg_')) {
      // A configuration event: no action, session, ticket or lane; it is recorded, not folded.
      appended.push({ event: journalEvent(input, ctx.nextSeq + i, ctx.atMs, null, null, null) });
      continue;
    }
    if (input.action_id.startsWith('crq_')) {
      // A credential request event: its own subject; the session that asked rides in the header.
      const event = journalEvent(input, ctx.nextSeq + i, ctx.atMs, input.session_id ?? null, null, null);
      const id = input.action_id;
      const folded = foldCredentialRequestEvent(credentialRequests.get(id) ?? ctx.credentialRequestOf(id), event);
      if (!folded.ok) return folded;
      credentialRequests.set(id, folded.state);
      appended.push({ event, request: folded.state });
      continue;
    }
    const before = states.get(input.action_id) ?? ctx.stateOf(input.action_id);
    const stamped = stamp(input, before, ctx.nextSeq + i, ctx.atMs, lastTicket);
    if (input.kind === 'ACTION_ACCEPTED' && stamped.ticket !== null) lastTicket = stamped.ticket;
    const late = refuseNewEvent(before, stamped);
    if (late !== undefined) return { ok: false, refusal: late };
    const folded = foldEvent(before, stamped);
    if (!folded.ok) return folded;
    bindKey(stamped, idempotencyKeys, ctx);
    states.set(input.action_id, folded.state);
    appended.push({ event: stamped, state: folded.state });
  }
  return { ok: true, plan: { appended, states, sessions, credentialRequests, idempotencyKeys, lastTicket } };
}

/**
 * The idempotency-key compare-and-swap: a PREFLIGHT_VALIDATED that names a key is checked against
 * the key's binding as of everything before it (this unit, this transaction, then the table, all
 * under the journal's write lock). A mismatch throws, which refuses the whole unit, so a refused
 * binding never reaches the log and two concurrent admissions cannot both bind one key.
 */
function bindKey(event: JournalEvent, planned: Map<string, BoundIdempotencyKey>, ctx: PlanContext): void {
  if (event.kind !== 'PREFLIGHT_VALIDATED' || event.payload.idempotency === undefined) return;
  const binding = event.payload.idempotency;
  const id = idempotencyKeyId(binding.route, binding.scope, binding.key);
  const existing = planned.get(id) ?? ctx.idempotencyKeyOf(binding.route, binding.scope, binding.key);
  const decision = bindIdempotencyKey(existing, {
    binding,
    action_id: event.action_id,
    seq: event.seq,
    at_ms: event.at_ms,
  });
  if (decision.kind === 'bound') planned.set(id, decision.row);
}

/**
 * Issues the ticket on acceptance, and copies session, ticket and lane from the action afterwards.
 * A caller-supplied ticket (a replay) must still be above every ticket issued: tickets increase
 * and are never reused. Later events may omit the copied fields but never contradict them.
 */
function stamp(
  input: NewEvent,
  before: ActionState | undefined,
  seq: number,
  atMs: number,
  lastTicket: number,
): JournalEvent {
  if (input.kind === 'ACTION_ACCEPTED') {
    const ticket = input.ticket ?? lastTicket + 1;
    if (ticket <= lastTicket) {
      throw new CodedError('INVALID_ARGUMENT', `ticket ${ticket} is not above the last issued ticket ${lastTicket}`, {
        field: 'ticket',
      });
    }
    return journalEvent(input, seq, atMs, input.session_id ?? null, ticket, input.lane ?? null);
  }
  if (before === undefined) {
    // foldEvent throws: the first event of an action must be ACTION_ACCEPTED.
    return journalEvent(input, seq, atMs, input.session_id ?? null, input.ticket ?? null, input.lane ?? null);
  }
  const session_id = copied(input, 'session_id', before.session_id);
  const ticket = copied(input, 'ticket', before.ticket);
  const lane = copied(input, 'lane', before.lane);
  return journalEvent(input, seq, atMs, session_id, ticket, lane);
}

/**
 * The event as stored: the contract's envelope fields named one by one, not spread. Events of different kinds (with
 * and without a classification or session) have different shapes, and a spread over them takes V8's generic copy,
 * ~10× slower than this literal; once per event on the commit path.
 */
function journalEvent(
  input: NewEvent,
  seq: number,
  atMs: number,
  session_id: string | null,
  ticket: number | null,
  lane: string | null,
): JournalEvent {
  const event = {
    kind: input.kind,
    action_id: input.action_id,
    session_id,
    ticket,
    lane,
    payload: input.payload,
    seq,
    at_ms: atMs,
  } as JournalEvent;
  if (input.classification !== undefined) event.classification = input.classification;
  return event;
}

function copied<K extends 'session_id' | 'ticket' | 'lane'>(
  input: NewEvent,
  field: K,
  recorded: NonNullable<NewEvent[K]> | null,
): NonNullable<NewEvent[K]> | null {
  const given = input[field];
  if (given === undefined || given === null) return recorded;
  if (given !== recorded) {
    throw new CodedError('INVALID_ARGUMENT', `${field} differs from the one recorded for ${input.action_id}`, {
      field,
    });
  }
  return given;
}
