import type { StateCreator } from 'zustand';
import { clientError, type OperatorApi } from '../api/operator-api.js';
import { actionListInput, actionListReducer, initialActionListView, type ActionListEvent, type ActionListFilter, type ActionListView } from './action-list-reducer.js';

export interface ActionListSlice {
  actionListView: ActionListView;
  /** Reads the newest page again (the first read too): new actions join the top, open ones change in place. */
  refreshActionsHead(): Promise<void>;
  /** Reads the next older page (no-op while one is in flight or after the oldest). */
  loadOlderActions(): Promise<void>;
  /** Shows a new filter: the list starts again from the newest action. */
  setActionListFilter(filter: ActionListFilter): void;
}

const bridgeFailed = () => clientError('BROKER_UNREACHABLE', 'The broker bridge failed to answer.');

export function createActionListSlice(api: OperatorApi): StateCreator<ActionListSlice, [], [], ActionListSlice> {
  return (set, get) => {
    const dispatch = (event: ActionListEvent): void => set((state) => ({ actionListView: actionListReducer(state.actionListView, event) }));
    let headInFlight: Promise<void> | null = null;
    // A pushed notice that comes while a read is in flight may name a change that read began before:
    // it is folded into one more read after it (however many came), never a second read at once.
    let again = false;
    const readHead = async (): Promise<void> => {
      do {
        again = false;
        const { filter, generation } = get().actionListView;
        const reply = await api['actions.list'](actionListInput(filter, null)).catch(bridgeFailed);
        dispatch({ type: 'head_received', generation, reply });
      } while (again);
    };
    return {
      actionListView: initialActionListView,
      refreshActionsHead: () => {
        if (headInFlight !== null) {
          again = true;
          return headInFlight;
        }
        const reading: Promise<void> = readHead().finally(() => {
          // A filter change may have started a newer read meanwhile: only this read's own slot is freed.
          if (headInFlight === reading) headInFlight = null;
        });
        headInFlight = reading;
        return reading;
      },
      loadOlderActions: async () => {
        const view = get().actionListView;
        if (!view.loaded || !view.more || view.paging || view.nextBefore === null) return;
        const { generation } = view;
        dispatch({ type: 'page_requested' });
        const reply = await api['actions.list'](actionListInput(view.filter, view.nextBefore)).catch(bridgeFailed);
        dispatch({ type: 'page_received', generation, reply });
      },
      setActionListFilter: (filter) => {
        dispatch({ type: 'filter_changed', filter });
        // A head read in flight answers for the old filter (dropped by generation): read the new one now.
        headInFlight = null;
        again = false;
        void get().refreshActionsHead();
      },
    };
  };
}
