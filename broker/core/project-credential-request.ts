import {
  CodedError,
  transitionRefusalOf,
  TransitionRefused,
  type JournalEvent,
  type TransitionRefusalKind,
} from '../contract/index.js';
import type { Folded } from './project.js';

export type CredentialRequestStatus = 'pending' | 'provisioned' | 'declined' | 'expired';

/** An agent's credential request (`crq_…`) as its events leave it: only what the plaintext event headers say. */
export interface CredentialRequestState {
  readonly request_id: string;
  readonly status: CredentialRequestStatus;
  readonly session_id: string | null;
  readonly requested_at_ms: number;
  readonly decided_at_ms: number | null;
  readonly first_seq: number;
  readonly last_seq: number;
}

/**
 * What the fold reads of an event: its header, never its payload. The header is stored in plaintext beside the sealed
 * body, so the state of a request an earlier run wrote is known (and its expiry kept) while the vault is locked.
 */
export type CredentialRequestEventHeader = Pick<JournalEvent, 'seq' | 'at_ms' | 'kind' | 'action_id' | 'session_id'>;

/** applyCredentialRequestEvent for the journal's compare-and-swap: a second answer is a refusal value; a bug throws. */
export function foldCredentialRequestEvent(
  state: CredentialRequestState | undefined,
  event: CredentialRequestEventHeader,
): Folded<CredentialRequestState> {
  try {
    return { ok: true, state: applyCredentialRequestEvent(state, event) };
  } catch (error) {
    const refusal = transitionRefusalOf(error);
    if (refusal === undefined) throw error;
    return { ok: false, refusal };
  }
}

/**
 * A request's state as a pure fold of its events in append order. Rules: it is requested once; exactly one answer
 * (provisioned, declined or expired) ends it, and only while it is pending — a second answer lost a race.
 */
export function applyCredentialRequestEvent(
  state: CredentialRequestState | undefined,
  event: CredentialRequestEventHeader,
): CredentialRequestState {
  if (state === undefined) {
    if (event.kind !== 'CREDENTIAL_REQUESTED')
      return impossible(event, 'the first event of a credential request must be CREDENTIAL_REQUESTED');
    return {
      request_id: event.action_id,
      status: 'pending',
      session_id: event.session_id,
      requested_at_ms: event.at_ms,
      decided_at_ms: null,
      first_seq: event.seq,
      last_seq: event.seq,
    };
  }
  if (event.action_id !== state.request_id)
    return impossible(event, `event for ${event.action_id} folded into ${state.request_id}`);
  if (event.seq <= state.last_seq) return impossible(event, `seq ${event.seq} is not after ${state.last_seq}`);
  const status = answerStatus(event);
  if (state.status !== 'pending') return refused('already_decided', event, `an answer after ${state.status}`);
  return { ...state, status, decided_at_ms: event.at_ms, last_seq: event.seq };
}

/** Folds credential request events (any number of requests) in append order; other kinds are skipped. */
export function projectCredentialRequests(
  events: Iterable<CredentialRequestEventHeader>,
): Map<string, CredentialRequestState> {
  const states = new Map<string, CredentialRequestState>();
  for (const event of events) {
    if (!event.action_id.startsWith('crq_')) continue;
    states.set(event.action_id, applyCredentialRequestEvent(states.get(event.action_id), event));
  }
  return states;
}

function answerStatus(event: CredentialRequestEventHeader): Exclude<CredentialRequestStatus, 'pending'> {
  switch (event.kind) {
    case 'CREDENTIAL_PROVISIONED':
      return 'provisioned';
    case 'CREDENTIAL_REQUEST_DECLINED':
      return 'declined';
    case 'CREDENTIAL_REQUEST_EXPIRED':
      return 'expired';
    case 'CREDENTIAL_REQUESTED':
      return impossible(event, 'a credential request is made once');
    default:
      return impossible(event, `${event.kind} is not a credential request event`);
  }
}

function refused(kind: TransitionRefusalKind, event: CredentialRequestEventHeader, why: string): never {
  const message = `seq ${event.seq} ${event.kind} on ${event.action_id}: ${why}`;
  throw new TransitionRefused({ kind, code: 'IMPOSSIBLE_TRANSITION', message });
}

function impossible(event: CredentialRequestEventHeader, why: string): never {
  throw new CodedError('IMPOSSIBLE_TRANSITION', `seq ${event.seq} ${event.kind} on ${event.action_id}: ${why}`);
}
