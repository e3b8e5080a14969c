import type { StateCreator } from 'zustand';
import type { OperatorApi } from '../api/operator-api.js';
import { initialVaultView, vaultReducer, type VaultEvent, type VaultView } from './vault-reducer.js';
import { coalescedRefresh } from './coalesced-refresh.js';
import { bridgeFailed } from './operator-call.js';

export interface VaultSlice {
  vaultView: VaultView;
  /** Reads the vault's state once; a call while one is in flight asks for one more read right after it. */
  refreshVault(): Promise<void>;
  /** Unlocks with the passphrase, which goes only into the API call (never into the store). Resolves true on success. */
  unlockVault(passphrase: string): Promise<boolean>;
  lockVault(): Promise<boolean>;
}

export function createVaultSlice(api: OperatorApi): StateCreator<VaultSlice, [], [], VaultSlice> {
  return (set, get) => {
    const dispatch = (event: VaultEvent): void => set((state) => ({ vaultView: vaultReducer(state.vaultView, event) }));
    const refreshVault = coalescedRefresh(async () => {
      dispatch({ type: 'requested' });
      dispatch({ type: 'received', reply: await api['vault.status']({}).catch(bridgeFailed) });
    }).run;
    return {
      vaultView: initialVaultView,
      refreshVault,
      unlockVault: async (passphrase) => {
        if (get().vaultView.busy !== null) return false;
        dispatch({ type: 'call_started', call: 'unlock' });
        const reply = await api['vault.unlock']({ passphrase }).catch(bridgeFailed);
        dispatch({ type: 'call_finished', call: 'unlock', reply });
        await refreshVault();
        return reply.ok;
      },
      lockVault: async () => {
        if (get().vaultView.busy !== null) return false;
        dispatch({ type: 'call_started', call: 'lock' });
        const reply = await api['vault.lock']({}).catch(bridgeFailed);
        dispatch({ type: 'call_finished', call: 'lock', reply });
        await refreshVault();
        return reply.ok;
      },
    };
  };
}
