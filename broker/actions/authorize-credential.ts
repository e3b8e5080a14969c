import type { ActionState, EventPayload } from '../contract/index.js';
import type { Journal } from '../journal/index.js';

/**
 * Appends CREDENTIAL_AUTHORIZED and returns its append unawaited, for both channels. The caller hands the request
 * to its channel first and awaits this only after: the journal commits in FIFO order and holds this row for the next
 * commit (appendLater), so the DISPATCH_STARTED the channel awaits is durable with this row before it in the same
 * commit (one transaction, one fsync), and a refusal of
 * this row (a closure that landed first) makes DISPATCH_STARTED impossible too (projection: authorized first).
 * Awaiting it before the channel runs costs a commit on every action; appending it after would be refused.
 */
export function startAuthorization(
  journal: Journal,
  actionId: string,
  payload: EventPayload<'CREDENTIAL_AUTHORIZED'>,
): Promise<ActionState> {
  const authorized = journal
    .appendLater({ kind: 'CREDENTIAL_AUTHORIZED', action_id: actionId, payload })
    .then((appended) => appended.state);
  // Read later by the caller (authorizationRefusal); until then a rejection is not unhandled.
  authorized.catch(() => undefined);
  return authorized;
}
