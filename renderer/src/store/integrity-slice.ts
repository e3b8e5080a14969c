import type { StateCreator } from 'zustand';
import type { OperatorApi } from '../api/operator-api.js';
import {
  initialIntegrityView,
  integrityReducer,
  type IntegrityEvent,
  type IntegrityView,
} from './integrity-reducer.js';
import { bridgeFailed } from './operator-call.js';

/** How often a verify started here re-reads its progress (audit.last) until it answers. */
export const integrityProgressPollMs = 500;

export interface IntegritySlice {
  integrityView: IntegrityView;
  /** Reads the broker's last verification result (it may have none). */
  loadIntegrity(): Promise<void>;
  /** Runs `audit verify` over the live journal now (read-only); a click while one runs does nothing. */
  verifyIntegrity(): Promise<void>;
}

export function createIntegritySlice(api: OperatorApi): StateCreator<IntegritySlice, [], [], IntegritySlice> {
  return (set, get) => {
    const dispatch = (event: IntegrityEvent): void =>
      set((state) => ({ integrityView: integrityReducer(state.integrityView, event) }));
    return {
      integrityView: initialIntegrityView,
      loadIntegrity: async () => {
        dispatch({ type: 'last_received', reply: await api['audit.last']({}).catch(bridgeFailed) });
      },
      verifyIntegrity: async () => {
        if (get().integrityView.verifying) return;
        dispatch({ type: 'verify_started' });
        let finished = false;
        const pollProgress = async (): Promise<void> => {
          while (!finished) {
            await new Promise((resolve) => setTimeout(resolve, integrityProgressPollMs));
            if (finished) return;
            const reply = await api['audit.last']({}).catch(bridgeFailed);
            // A read that lands after the verify answered would bring back a progress that is over.
            if (!finished) dispatch({ type: 'last_received', reply });
          }
        };
        void pollProgress();
        try {
          dispatch({ type: 'verify_finished', reply: await api['audit.verify']({}).catch(bridgeFailed) });
        } finally {
          finished = true;
        }
      },
    };
  };
}
