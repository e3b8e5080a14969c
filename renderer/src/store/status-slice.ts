import type { StateCreator } from 'zustand';
import type { OperatorApi } from '../api/operator-api.js';
import { initialStatusView, statusReducer, type StatusEvent, type StatusView } from './status-reducer.js';
import { bridgeFailed } from './operator-call.js';

export interface StatusSlice {
  statusView: StatusView;
  /** Fetches the status once; a call while one is in flight is a no-op. */
  refreshStatus(): Promise<void>;
}

export function createStatusSlice(api: OperatorApi): StateCreator<StatusSlice, [], [], StatusSlice> {
  return (set, get) => {
    const dispatch = (event: StatusEvent): void =>
      set((state) => ({ statusView: statusReducer(state.statusView, event) }));
    return {
      statusView: initialStatusView,
      refreshStatus: async () => {
        if (get().statusView.phase === 'loading') return;
        dispatch({ type: 'requested' });
        const reply = await api.status({}).catch(bridgeFailed);
        dispatch({ type: 'received', reply, at_ms: Date.now() });
      },
    };
  };
}
