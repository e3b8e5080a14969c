import type { StateCreator } from 'zustand';
import type { BrokerApi } from '../../../broker/contract/index.js';
import type { OperatorApi } from '../api/operator-api.js';
import {
  credentialsReducer,
  initialCredentialsView,
  type CredentialsEvent,
  type CredentialsView,
} from './credentials-reducer.js';
import { coalescedRefresh } from './coalesced-refresh.js';
import { bridgeFailed } from './operator-call.js';

export type NewCredential = BrokerApi['credentials.add']['input'];

export interface CredentialsSlice {
  credentialsView: CredentialsView;
  refreshCredentials(): Promise<void>;
  /** Sends the new credential; its secret is passed to the API and kept nowhere. Resolves true when added. */
  addCredential(input: NewCredential): Promise<boolean>;
  askRemoveCredential(name: string): void;
  dismissRemoveCredential(): void;
  /** The second click of a removal. */
  removeCredential(name: string): Promise<boolean>;
}

export function createCredentialsSlice(api: OperatorApi): StateCreator<CredentialsSlice, [], [], CredentialsSlice> {
  return (set, get) => {
    const dispatch = (event: CredentialsEvent): void =>
      set((state) => ({ credentialsView: credentialsReducer(state.credentialsView, event) }));
    const refreshCredentials = coalescedRefresh(async () => {
      dispatch({ type: 'requested' });
      dispatch({ type: 'received', reply: await api['credentials.list']({}).catch(bridgeFailed) });
    }).run;
    return {
      credentialsView: initialCredentialsView,
      refreshCredentials,
      addCredential: async (input) => {
        if (get().credentialsView.adding !== null) return false;
        dispatch({ type: 'add_started', name: input.name });
        const reply = await api['credentials.add'](input).catch(bridgeFailed);
        dispatch({ type: 'add_finished', reply });
        await refreshCredentials();
        return reply.ok;
      },
      askRemoveCredential: (name) => dispatch({ type: 'remove_asked', name }),
      dismissRemoveCredential: () => dispatch({ type: 'remove_dismissed' }),
      removeCredential: async (name) => {
        if (get().credentialsView.removing !== null) return false;
        dispatch({ type: 'remove_started', name });
        const reply = await api['credentials.remove']({ name }).catch(bridgeFailed);
        dispatch({ type: 'remove_finished', name, reply });
        await refreshCredentials();
        return reply.ok;
      },
    };
  };
}
