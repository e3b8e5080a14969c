import type { StateCreator } from 'zustand';
import type { OperatorApi } from '../api/operator-api.js';
import {
  activityBlockRows,
  activityReducer,
  blockFirstSeq,
  blocksToLoad,
  filterActive,
  filterInput,
  initialActivityView,
  type ActivityFilter,
  type ActivityView,
  type ActivityViewEvent,
} from './activity-reducer.js';
import { coalescedRefresh } from './coalesced-refresh.js';
import { bridgeFailed } from './operator-call.js';

export interface ActivitySlice {
  activityView: ActivityView;
  /** Reads the journal's last position (status), so the unfiltered list knows its length. */
  refreshActivityHead(): Promise<void>;
  /** Unfiltered: fetches the blocks rows firstIndex..lastIndex need (each once at a time). */
  loadActivityRows(firstIndex: number, lastIndex: number): Promise<void>;
  /** Shows a new filter: the filtered scan starts again at position 1. */
  setActivityFilter(filter: ActivityFilter): void;
  /** Filtered: reads the next page of matches (no-op while one is in flight or at the end). */
  loadActivityPage(): Promise<void>;
}

export function createActivitySlice(api: OperatorApi): StateCreator<ActivitySlice, [], [], ActivitySlice> {
  return (set, get) => {
    const dispatch = (event: ActivityViewEvent): void =>
      set((state) => ({ activityView: activityReducer(state.activityView, event) }));
    const head = coalescedRefresh(async () => {
      dispatch({ type: 'head', reply: await api.status({}).catch(bridgeFailed) });
    });

    return {
      activityView: initialActivityView,
      refreshActivityHead: head.run,
      loadActivityRows: async (firstIndex, lastIndex) => {
        const loadBlock = async (block: number): Promise<void> => {
          dispatch({ type: 'block_requested', block });
          const reply = await api['activity.list']({
            from_seq: blockFirstSeq(block),
            limit: activityBlockRows,
          }).catch(bridgeFailed);
          dispatch({ type: 'block_received', block, reply });
          // A late answer, short of what a status since its request says, is asked again at once (not at the next
          // status). A failed read is not: it waits for the next status, as the view does.
          const { blocks, loading } = get().activityView;
          if (blocks[block]?.behind === true && loading[block] === undefined) await loadBlock(block);
        };
        await Promise.all(blocksToLoad(get().activityView, firstIndex, lastIndex).map(loadBlock));
      },
      setActivityFilter: (filter) => dispatch({ type: 'filter_changed', filter }),
      loadActivityPage: async () => {
        const view = get().activityView;
        if (!filterActive(view.filter) || view.next === null || view.scanning) return;
        const { generation } = view;
        dispatch({ type: 'page_requested' });
        const reply = await api['activity.list'](filterInput(view.filter, view.next)).catch(bridgeFailed);
        dispatch({ type: 'page_received', generation, reply });
      },
    };
  };
}
