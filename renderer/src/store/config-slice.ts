import type { StateCreator } from 'zustand';
import type { OperatorApi } from '../api/operator-api.js';
import {
  configReducer,
  initialConfigView,
  type ConfigEdit,
  type ConfigEvent,
  type ConfigView,
} from './config-reducer.js';
import { bridgeFailed } from './operator-call.js';

export interface ConfigSlice {
  configView: ConfigView;
  /** Reads the routes and SSH hosts in force, and postern.yaml against the accepted copy. */
  refreshConfig(): Promise<void>;
  /** Reads only postern.yaml against the accepted copy (its trust): the console-wide banner's read. */
  refreshConfigPending(): Promise<void>;
  /** Edits postern.yaml (applies at the next start); resolves true when written. */
  editConfig(edit: ConfigEdit): Promise<boolean>;
  /** Accepts the pending change of postern.yaml whose digest the card shows (applies at the next start). */
  acceptConfigChange(digest: string): Promise<boolean>;
  askRemoveConfigEntry(entry: string): void;
  dismissRemoveConfigEntry(): void;
}

export function createConfigSlice(api: OperatorApi): StateCreator<ConfigSlice, [], [], ConfigSlice> {
  return (set, get) => {
    const dispatch = (event: ConfigEvent): void =>
      set((state) => ({ configView: configReducer(state.configView, event) }));
    const refreshConfig = async (): Promise<void> => {
      dispatch({ type: 'requested' });
      dispatch({ type: 'received', reply: await api['config.show']({}).catch(bridgeFailed) });
      dispatch({ type: 'pending_received', reply: await api['config.pending']({}).catch(bridgeFailed) });
    };
    return {
      configView: initialConfigView,
      refreshConfig,
      refreshConfigPending: async () => {
        dispatch({ type: 'pending_received', reply: await api['config.pending']({}).catch(bridgeFailed) });
      },
      editConfig: async (edit) => {
        if (get().configView.editing !== null) return false;
        dispatch({ type: 'edit_started', op: edit.op });
        const reply = await api['config.edit'](edit).catch(bridgeFailed);
        dispatch({ type: 'edit_finished', op: edit.op, reply });
        await refreshConfig();
        return reply.ok;
      },
      acceptConfigChange: async (digest) => {
        if (get().configView.accepting !== null) return false;
        dispatch({ type: 'accept_started', digest });
        const reply = await api['config.accept']({ digest }).catch(bridgeFailed);
        dispatch({ type: 'accept_finished', reply });
        await refreshConfig();
        return reply.ok;
      },
      askRemoveConfigEntry: (entry) => dispatch({ type: 'remove_asked', entry }),
      dismissRemoveConfigEntry: () => dispatch({ type: 'remove_dismissed' }),
    };
  };
}
