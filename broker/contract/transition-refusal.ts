import { CodedError } from './coded-error.js';
import type { ClosedSet } from './closed-set.js';

/**
 * Why the projection refused an event that was right for the record its writer read: another commit
 * moved the record first. These are expected answers to a lost race, reported as values
 * (broker/core foldEvent, Journal.tryAppend*) that callers switch on. An event no race explains (a
 * wrong id, an out-of-order seq, a fingerprint other than the bound one) is a bug and throws
 * IMPOSSIBLE_TRANSITION instead; there is no refusal kind for it.
 */
export const TransitionRefusalKind = {
  already_decided: 'already_decided',
  already_dispatched: 'already_dispatched',
  closed: 'closed',
  wrong_stage: 'wrong_stage',
  not_dispatched: 'not_dispatched',
  attempt_in_flight: 'attempt_in_flight',
  attempt_taken: 'attempt_taken',
  settled: 'settled',
  abandoned: 'abandoned',
  not_retriable: 'not_retriable',
  lease_held: 'lease_held',
  lease_lost: 'lease_lost',
  no_lease: 'no_lease',
  stale_lookup: 'stale_lookup',
  session_exists: 'session_exists',
  session_not_pending: 'session_not_pending',
  session_closed: 'session_closed',
  session_ended: 'session_ended',
} as const satisfies ClosedSet<
  | 'already_decided'
  | 'already_dispatched'
  | 'closed'
  | 'wrong_stage'
  | 'not_dispatched'
  | 'attempt_in_flight'
  | 'attempt_taken'
  | 'settled'
  | 'abandoned'
  | 'not_retriable'
  | 'lease_held'
  | 'lease_lost'
  | 'no_lease'
  | 'stale_lookup'
  | 'session_exists'
  | 'session_not_pending'
  | 'session_closed'
  | 'session_ended'
>;
export type TransitionRefusalKind = keyof typeof TransitionRefusalKind;

export const transitionRefusalMeanings: { readonly [K in TransitionRefusalKind]: string } = {
  already_decided: 'A decision (approved, rejected, expired, cancelled) is already recorded.',
  already_dispatched: 'DISPATCH_STARTED is recorded; the event belongs before it.',
  closed: 'The ticket was closed before dispatch (rejected, expired, cancelled, or its preflight failed).',
  wrong_stage: 'The action is not at the stage the event belongs to (it moved on, or has not got there).',
  not_dispatched: 'The event settles a dispatched action, and this one never dispatched.',
  attempt_in_flight: 'An attempt is dispatched and its outcome is not recorded yet; its own answer decides.',
  attempt_taken: 'Another attempt already took this attempt number.',
  settled: 'A committed or rejected outcome is recorded; the action is settled.',
  abandoned: 'A person abandoned the action; it is never sent again.',
  not_retriable: 'No retry may leave the recorded outcome now (its outcome, the retry budget or the key window).',
  lease_held: "Another worker's retry lease is live.",
  lease_lost: "The event's lease generation is not the live one (lapsed, recorded, or another worker's is next).",
  no_lease: 'The dispatch would be a retry (an outcome is recorded), and no retry lease was taken for it.',
  stale_lookup: 'A reconciliation lookup started before an attempt that ran since; its answer is stale.',
  session_exists: 'The session was already started (the same process under the same boot).',
  session_not_pending: 'The session is no longer pending approval.',
  session_closed: 'The session was revoked or ended.',
  session_ended: 'The session end is already recorded.',
};

/**
 * One refusal: its kind, and the code and message the refused append has always answered with
 * (IMPOSSIBLE_TRANSITION, or LEASE_LOST from the retry-lease fence), kept byte-identical.
 */
export interface TransitionRefusal {
  readonly kind: TransitionRefusalKind;
  readonly code: 'IMPOSSIBLE_TRANSITION' | 'LEASE_LOST';
  readonly message: string;
}

/**
 * A refusal on its way through a caller that does not expect one (Journal.append, a replay): the
 * same code and message as ever, with the typed refusal for any catch site to switch on.
 */
export class TransitionRefused extends CodedError {
  readonly refusal: TransitionRefusal;

  constructor(refusal: TransitionRefusal) {
    super(refusal.code, refusal.message);
    this.refusal = refusal;
  }
}

/** The typed refusal an error carries, or undefined (a bug, an I/O failure, anything else). */
export function transitionRefusalOf(error: unknown): TransitionRefusal | undefined {
  return error instanceof TransitionRefused ? error.refusal : undefined;
}
