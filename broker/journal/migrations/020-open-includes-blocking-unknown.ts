import type { Migration } from '../migration.js';
import { rebuildPartialIndex } from './rebuild-partial-index.js';

/**
 * `actions list --open` is where an operator looks for what needs them, and an action whose recorded outcome is
 * unknown blocks its lane until a person settles or abandons it — yet its outcome is recorded (`settled_at_ms` set),
 * so the open filter (`settled_at_ms IS NULL`) left it out while `approvals list` showed it as a blocked head. Open
 * now also means a ticket its lane still waits on: `resolved_at_ms` is null while the ticket is unresolved (the
 * fold's ticketStanding; a recorded unknown stays unresolved until attested, reconciled or abandoned). The partial
 * index behind the filter is rebuilt with the same condition (the query must name it exactly: action-list-query.ts
 * openCondition). An index only: no row changes.
 */
export const openActionsCondition = 'settled_at_ms IS NULL OR (ticket IS NOT NULL AND resolved_at_ms IS NULL)';

export const migration020OpenIncludesBlockingUnknown: Migration = {
  version: 20,
  name: 'open-includes-blocking-unknown',
  up(db) {
    rebuildPartialIndex(db, 'actions_list_open', 'actions (first_seq)', openActionsCondition);
  },
};
