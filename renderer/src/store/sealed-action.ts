import type { ActionListRow } from '../../../broker/contract/index.js';
import type { OperatorApi, ReplyError } from '../api/operator-api.js';

/** Where a person unlocks the vault (the Vault tab), the one step that makes a sealed action's events readable. */
export const unlockHref = '#/vault';

/**
 * Whether an actions.show refusal means the action's events are sealed (AUDIT_KEY_UNAVAILABLE): encrypted under a key
 * the locked vault holds, or for good (sealedForGood). Its plaintext row (actions.list, read from the journal's
 * projection) still answers.
 */
export function eventsSealed(error: ReplyError | null): boolean {
  return error?.code === 'AUDIT_KEY_UNAVAILABLE';
}

/**
 * Whether the sealed events are sealed for good (the broker says `sealed_for_good`): a broker run that ended before any
 * audit key existed recorded them, so no unlock opens them, locked or not. The page then asks for no unlock.
 */
export function sealedForGood(error: ReplyError | null): boolean {
  return eventsSealed(error) && error?.sealed_for_good === true;
}

/** What a closed card and an action page say of events sealed for good, in the words the agent's answer uses. */
export const sealedForGoodText =
  'its events are sealed in the journal for good: the broker run that recorded them ended before any audit key existed, and no unlock opens them';

/**
 * The action's row as actions.list has it (the projection's plaintext: stage, outcome, code), readable while the vault
 * is locked; null when the list does not find it or refuses. Searched by its id (the list's text filter matches ids).
 */
export async function readPlainRow(api: OperatorApi, actionId: string): Promise<ActionListRow | null> {
  const reply = await api['actions.list']({ text: actionId, limit: 5 }).catch(() => null);
  if (reply === null || !reply.ok) return null;
  return reply.value.actions.find((row) => row.action_id === actionId) ?? null;
}

/** Pure: what the plaintext row says of the action, e.g. "not_attempted (BROKER_RESTARTED)" or "open (card_shown)". */
export function plainOutcome(row: ActionListRow): string {
  if (row.outcome === null) return `open (${row.stage})`;
  return row.code === null ? row.outcome : `${row.outcome} (${row.code})`;
}
