import type { Migration } from '../migration.js';
import { rebuildPartialIndex } from './rebuild-partial-index.js';

/**
 * `actions list --outcome O` means the actions settled with outcome O — as `status` counts unknown (the actions
 * settled with an unknown outcome). A dispatched action's row says unknown from DISPATCH_STARTED on (its provisional
 * outcome), so `--outcome unknown` by `outcome = ?` alone also returned a command still running, whose line prints its
 * stage, while status said 0 unknown; the running ones are what `--open` finds. The filter now also asks
 * `settledOutcomeCondition`, and the index behind it is rebuilt partial on the same condition (the query names it
 * exactly, so INDEXED BY still applies and a page is one range read of it: no running row to skip). For any other
 * outcome nothing changes (an open action's outcome is null or that provisional unknown). An index only: no row
 * changes.
 */
export const settledOutcomeCondition = 'settled_at_ms IS NOT NULL';

export const migration021OutcomeFilterSettled: Migration = {
  version: 21,
  name: 'outcome-filter-settled',
  up(db) {
    rebuildPartialIndex(db, 'actions_list_by_outcome', 'actions (outcome, first_seq)', settledOutcomeCondition);
  },
};
