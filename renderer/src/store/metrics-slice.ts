import type { StateCreator } from 'zustand';
import type { OperatorApi } from '../api/operator-api.js';
import { initialMetricsView, metricsReducer, type MetricsEvent, type MetricsView } from './metrics-reducer.js';
import { bridgeFailed } from './operator-call.js';

export interface MetricsSlice {
  metricsView: MetricsView;
  /** Reads the metrics once; a call while one is in flight is a no-op. */
  refreshMetrics(): Promise<void>;
}

export function createMetricsSlice(api: OperatorApi): StateCreator<MetricsSlice, [], [], MetricsSlice> {
  return (set, get) => {
    const dispatch = (event: MetricsEvent): void =>
      set((state) => ({ metricsView: metricsReducer(state.metricsView, event) }));
    return {
      metricsView: initialMetricsView,
      refreshMetrics: async () => {
        if (get().metricsView.phase === 'loading') return;
        dispatch({ type: 'requested' });
        dispatch({ type: 'received', reply: await api.metrics({}).catch(bridgeFailed) });
      },
    };
  };
}
