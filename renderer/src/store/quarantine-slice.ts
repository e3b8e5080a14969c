import type { StateCreator } from 'zustand';
import type { OperatorApi } from '../api/operator-api.js';
import { bridgeFailed } from './operator-call.js';
import {
  initialQuarantineView,
  quarantineReducer,
  type QuarantineEvent,
  type QuarantineView,
} from './quarantine-reducer.js';

export interface QuarantineSlice {
  quarantineView: QuarantineView;
  /** Reads what the broker's start found of its integrity anchor. */
  loadQuarantine(): Promise<void>;
  /** A person's decision: adopt the journal as it is, naming the failure the banner showed. */
  readoptJournal(): Promise<void>;
}

export function createQuarantineSlice(api: OperatorApi): StateCreator<QuarantineSlice, [], [], QuarantineSlice> {
  return (set, get) => {
    const dispatch = (event: QuarantineEvent): void =>
      set((state) => ({ quarantineView: quarantineReducer(state.quarantineView, event) }));
    return {
      quarantineView: initialQuarantineView,
      loadQuarantine: async () => {
        dispatch({ type: 'report_received', reply: await api['integrity.anchor']({}).catch(bridgeFailed) });
      },
      readoptJournal: async () => {
        const { report, readopting } = get().quarantineView;
        if (readopting || report?.code == null) return;
        dispatch({ type: 'readopt_started' });
        const reply = await api['integrity.readopt']({ code: report.code }).catch(bridgeFailed);
        dispatch({ type: 'readopt_finished', reply });
      },
    };
  };
}
