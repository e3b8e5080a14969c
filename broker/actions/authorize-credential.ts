import type { ActionState, EventPayload } from '../contract/index.js';
import type { Journal } from '../journal/index.js';
import { appendState } from './record-refusal.js';

/**
 * Appends CREDENTIAL_AUTHORIZED and returns its append unawaited, for both channels. The caller hands the request
 * to its channel first and awaits this only after: the journal commits in FIFO order, so the DISPATCH_STARTED the
 * channel awaits is durable only with this row before it (often in the same commit, one fsync), and a refusal of
 * this row (a closure that landed first) makes DISPATCH_STARTED impossible too (projection: authorized first).
 * Awaiting it before the channel runs costs a commit on every action; appending it after would be refused.
 */
export function startAuthorization(
  journal: Journal,
  actionId: string,
  payload: EventPayload<'CREDENTIAL_AUTHORIZED'>,
): Promise<ActionState> {
  const authorized = appendState(journal, { kind: 'CREDENTIAL_AUTHORIZED', action_id: actionId, payload });
  // Read later by the caller (authorizationRefusal); until then a rejection is not unhandled.
  authorized.catch(() => undefined);
  return authorized;
}
