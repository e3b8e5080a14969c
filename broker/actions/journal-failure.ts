import {
  CodedError,
  errorCodeMeanings,
  transitionRefusalOf,
  type ActionState,
  type Classification,
} from '../contract/index.js';
import type { Journal } from '../journal/index.js';

/**
 * What the agent hears when the journal failed at or after the dispatch boundary. If
 * DISPATCH_STARTED may have become durable (the journal failed while or after writing it), the
 * honest answer is unknown — a restart's recovery would say the same — never not_attempted. The
 * broker stopped dispatching; reconciling is the way out.
 */
export const journalFailedClassification: Classification = {
  phase: 'remote_execution',
  outcome: 'unknown',
  retry: 'reconcile',
  code: 'JOURNAL_UNAVAILABLE',
  effect: 'unknown_effect',
  outcome_basis: 'journal_failed_at_or_after_dispatch_boundary',
  source: 'transport_observed',
};

export interface JournalFailedFacts {
  readonly state: ActionState;
  readonly classification: Classification;
  readonly message: string;
}

export type DispatchJournalFailure =
  { readonly kind: 'closed'; readonly state: ActionState } | ({ readonly kind: 'unknown' } & JournalFailedFacts);

/**
 * DISPATCH_STARTED (or the CREDENTIAL_AUTHORIZED before it) was not accepted. A refusal because a
 * CANCELLED won the race just before is a closure: nothing was sent, answer the cancellation. A
 * failed journal is unknown (the row may be durable). Any other refusal, and a bug, rethrows.
 */
export function dispatchJournalFailure(journal: Journal, actionId: string, error: unknown): DispatchJournalFailure {
  const refusal = transitionRefusalOf(error);
  switch (refusal?.kind) {
    case undefined:
      // A bug (IMPOSSIBLE_TRANSITION no race explains) is never dressed up as a failed journal.
      if (isTransitionBug(error)) throw error;
      return { kind: 'unknown', ...journalFailedFacts(journal, actionId) };
    case 'lease_lost':
    case 'lease_held':
      // The lease fence (LEASE_LOST) is answered as unknown, as it always was; retry runs catch it before this.
      return { kind: 'unknown', ...journalFailedFacts(journal, actionId) };
    default: {
      const state = closedBeforeDispatch(journal, actionId);
      if (state !== undefined) return { kind: 'closed', state };
      throw error;
    }
  }
}

/** The last durable state with the unknown/JOURNAL_UNAVAILABLE classification for the answer (not journaled: it cannot be). */
export function journalFailedFacts(journal: Journal, actionId: string): JournalFailedFacts {
  let state: ActionState | undefined;
  try {
    state = journal.getAction(actionId);
  } catch (cause) {
    throw new CodedError('JOURNAL_UNAVAILABLE', 'the journal is closed; the action record cannot be read', { cause });
  }
  if (state === undefined)
    throw new CodedError('JOURNAL_UNAVAILABLE', 'the journal failed before the action was admitted');
  return { state, classification: journalFailedClassification, message: errorCodeMeanings.JOURNAL_UNAVAILABLE };
}

/** The action's state when it was closed before dispatch (rejected, expired, cancelled, refused), else undefined. */
export function closedBeforeDispatch(journal: Journal, actionId: string): ActionState | undefined {
  const state = journal.getAction(actionId);
  return state !== undefined && state.dispatch_seq === null && state.outcome !== null ? state : undefined;
}

/**
 * Awaits the CREDENTIAL_AUTHORIZED append. Refused because a closure (an operator's CANCELLED, a
 * session revocation) landed between the queue's release and the append: the closed state — the
 * projection then refused DISPATCH_STARTED too, so nothing was sent. Any other failure rethrows.
 */
export async function authorizationRefusal(
  journal: Journal,
  actionId: string,
  authorized: Promise<unknown>,
): Promise<ActionState | undefined> {
  try {
    await authorized;
    return undefined;
  } catch (error) {
    // Whatever kind the refusal (closed, already_decided, settled…), only a record closed before dispatch is an answer.
    const closed = transitionRefusalOf(error) === undefined ? undefined : closedBeforeDispatch(journal, actionId);
    if (closed === undefined) throw error;
    return closed;
  }
}

/** An impossible transition that is no lost race: a bug upstream, always rethrown. */
function isTransitionBug(error: unknown): boolean {
  return error instanceof CodedError && error.code === 'IMPOSSIBLE_TRANSITION';
}
