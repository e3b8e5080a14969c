import type { Classification, NewEvent } from '../contract/index.js';
import { attestClassification } from '../core/index.js';

/**
 * A rejection a person attested, as journals hold it: since 101f91b coded ATTESTED_REJECTED, and before that coded
 * as a refusal the remote returned (REMOTE_REJECTED), which a new event may no longer carry and migration 016 recodes.
 */

/** What attestClassification returned before 101f91b for a rejection, and what a journal written then still holds. */
export const oldAttestedRejection: Classification = {
  ...attestClassification('rejected', 'no_effect'),
  code: 'REMOTE_REJECTED',
};

/** A complete refusal the remote returned: REMOTE_REJECTED as the remote's own word. */
export const remoteRefusal: Classification = {
  phase: 'remote_execution',
  outcome: 'rejected',
  retry: 'after_correction',
  code: 'REMOTE_REJECTED',
  effect: 'rejected',
  outcome_basis: 'complete_refusal',
  source: 'remote_response',
};

const person = { kind: 'person', id: 'ann', surface: 'cli', auth: 'vault_passphrase_tty' } as const;

/** A person at the CLI attesting that `actionId` never ran, classified as given (as an older broker did, unless told). */
export function attestedRejection(actionId: string, classification: Classification = oldAttestedRejection): NewEvent {
  return {
    kind: 'OPERATOR_ATTESTED',
    action_id: actionId,
    payload: { actor: person, basis: 'the remote team says it never ran' },
    classification,
  };
}
