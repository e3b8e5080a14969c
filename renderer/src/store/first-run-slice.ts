import type { StateCreator } from 'zustand';
import type { OperatorApi } from '../api/operator-api.js';
import {
  firstRunReducer,
  initialFirstRunView,
  type FirstRunEvent,
  type FirstRunStepId,
  type FirstRunView,
} from './first-run.js';
import { coalescedRefresh } from './coalesced-refresh.js';
import { bridgeFailed } from './operator-call.js';

export interface FirstRunSlice {
  firstRunView: FirstRunView;
  /** Creates the vault with the passphrase, which goes only into the API call (never into the store). Resolves true once created. */
  createVault(passphrase: string): Promise<boolean>;
  /** Reads this broker's hookup lines (agent.hookup). */
  refreshHookup(): Promise<void>;
  /** Reads the newest action (the guide's last step waits for it). */
  refreshFirstAction(): Promise<void>;
  markHookupCopied(): void;
  skipFirstRunStep(step: FirstRunStepId): void;
  unskipFirstRunStep(step: FirstRunStepId): void;
}

export function createFirstRunSlice(api: OperatorApi): StateCreator<FirstRunSlice, [], [], FirstRunSlice> {
  return (set, get) => {
    const dispatch = (event: FirstRunEvent): void =>
      set((state) => ({ firstRunView: firstRunReducer(state.firstRunView, event) }));
    const firstAction = coalescedRefresh(async () => {
      dispatch({ type: 'actions_received', reply: await api['actions.list']({ limit: 1 }).catch(bridgeFailed) });
    });
    return {
      firstRunView: initialFirstRunView,
      createVault: async (passphrase) => {
        if (get().firstRunView.creating) return false;
        dispatch({ type: 'create_started' });
        const reply = await api['vault.init']({ passphrase }).catch(bridgeFailed);
        dispatch({ type: 'create_finished', reply });
        return reply.ok;
      },
      refreshHookup: async () => {
        dispatch({ type: 'hookup_received', reply: await api['agent.hookup']({}).catch(bridgeFailed) });
      },
      refreshFirstAction: firstAction.run,
      markHookupCopied: () => dispatch({ type: 'hookup_copied' }),
      skipFirstRunStep: (step) => dispatch({ type: 'skipped', step }),
      unskipFirstRunStep: (step) => dispatch({ type: 'unskipped', step }),
    };
  };
}
