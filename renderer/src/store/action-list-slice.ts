import type { StateCreator } from 'zustand';
import type { OperatorApi } from '../api/operator-api.js';
import {
  actionListInput,
  actionListReducer,
  initialActionListView,
  type ActionListEvent,
  type ActionListFilter,
  type ActionListView,
} from './action-list-reducer.js';
import { coalescedRefresh } from './coalesced-refresh.js';
import { bridgeFailed } from './operator-call.js';

export interface ActionListSlice {
  actionListView: ActionListView;
  /** Reads the newest page again (the first read too): new actions join the top, open ones change in place. */
  refreshActionsHead(): Promise<void>;
  /** Reads the next older page (no-op while one is in flight or after the oldest). */
  loadOlderActions(): Promise<void>;
  /** Shows a new filter: the list starts again from the newest action. */
  setActionListFilter(filter: ActionListFilter): void;
}

export function createActionListSlice(api: OperatorApi): StateCreator<ActionListSlice, [], [], ActionListSlice> {
  return (set, get) => {
    const dispatch = (event: ActionListEvent): void =>
      set((state) => ({ actionListView: actionListReducer(state.actionListView, event) }));
    // A pushed notice that comes while a read is in flight may name a change that read began before:
    // it is folded into one more read after it (however many came), never a second read at once.
    const head = coalescedRefresh(async () => {
      const { filter, generation } = get().actionListView;
      const reply = await api['actions.list'](actionListInput(filter, null)).catch(bridgeFailed);
      dispatch({ type: 'head_received', generation, reply });
    });
    return {
      actionListView: initialActionListView,
      refreshActionsHead: head.run,
      loadOlderActions: async () => {
        const view = get().actionListView;
        if (!view.loaded || !view.more || view.paging || view.nextBefore === null) return;
        const { generation, nextBefore: beforeSeq } = view;
        dispatch({ type: 'page_requested' });
        const reply = await api['actions.list'](actionListInput(view.filter, beforeSeq)).catch(bridgeFailed);
        dispatch({ type: 'page_received', generation, beforeSeq, reply });
      },
      setActionListFilter: (filter) => {
        dispatch({ type: 'filter_changed', filter });
        // A head read in flight answers for the old filter (dropped by generation): read the new one now.
        head.restart();
        void get().refreshActionsHead();
      },
    };
  };
}
