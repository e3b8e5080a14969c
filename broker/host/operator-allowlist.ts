import type { Logger } from 'pino';
import { isCodedError } from '../contract/index.js';
import type { ProcessAllowlist } from '../actions/process-allowlist.js';
import type { ApprovalQueue } from '../queue/index.js';
import type { OperatorBroker } from './operator-broker.js';

/**
 * The operator methods over the process allowlist. `allowlist.add` from a pending session's card ("always allow this
 * executable") also approves that session in the same decision, as the person who clicked: the entry would approve
 * the process at its next open anyway, and one click should need one proof.
 */
export function createAllowlistOperator(deps: {
  readonly allowlist: ProcessAllowlist;
  readonly queue: ApprovalQueue;
  readonly logger?: Logger;
}): Pick<OperatorBroker, 'allowlist.list' | 'allowlist.preview' | 'allowlist.add' | 'allowlist.remove'> {
  const { allowlist, queue, logger } = deps;
  return {
    'allowlist.list': () => allowlist.list(),
    'allowlist.preview': (input) => allowlist.preview(input),
    'allowlist.add': async (input, actor) => {
      const added = await allowlist.add(input, actor);
      logger?.info({ entry_id: added.entry.entry_id, added: added.added }, 'process allowlist entry added');
      if (!('session_id' in input) || !allowlist.isUnscopedEntry(added.entry.entry_id)) return added;
      try {
        await queue.approveSession(input.session_id, actor);
        return { ...added, session_approved: true };
      } catch (error) {
        // Approved, revoked or ended meanwhile, or a record the journal cannot confirm now: the entry stands, the
        // session's own record decides.
        if (isCodedError(error) && (error.code === 'DECISION_CONFLICT' || error.code === 'VAULT_LOCKED'))
          return { ...added, session_approved: false };
        throw error;
      }
    },
    'allowlist.remove': async (input, actor) => {
      const removed = await allowlist.remove(input, actor);
      logger?.info({ entry_id: input.entry_id }, 'process allowlist entry removed');
      return removed;
    },
  };
}
