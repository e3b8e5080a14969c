import { CodedError, type Classification, type Effect } from '../contract/index.js';

/** What a person may attest about a dispatched action whose outcome is unknown. */
export type AttestedOutcome = 'committed' | 'rejected';

const effectsFor: Readonly<Record<AttestedOutcome, readonly Effect[]>> = {
  committed: ['succeeded', 'failed', 'partial_effect'],
  rejected: ['rejected', 'no_effect'],
};

/**
 * The classification a person's attestation records (source operator_attested). A person can say
 * the remote did it (committed, with what effect) or refused it (rejected) — never not_attempted:
 * after DISPATCH_STARTED nothing, a person included, may claim the action was not attempted. The
 * retry is `never`: the question is settled by a person, not by evidence automation could re-check.
 */
export function attestClassification(outcome: AttestedOutcome, effect: Effect): Classification {
  if (!effectsFor[outcome].includes(effect)) {
    throw new CodedError(
      'INVALID_ARGUMENT',
      `an attested ${outcome} outcome has effect ${effectsFor[outcome].join(' or ')}, not ${effect}`,
      { field: 'effect' },
    );
  }
  return {
    phase: 'remote_execution',
    outcome,
    retry: 'never',
    // Not REMOTE_REJECTED, whose meaning is a refusal the remote returned: here only a person says so.
    code: outcome === 'rejected' ? 'ATTESTED_REJECTED' : null,
    effect,
    outcome_basis: 'operator_attested',
    source: 'operator_attested',
  };
}
