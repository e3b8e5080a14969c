import type { StateCreator } from 'zustand';
import type { OperatorApi } from '../api/operator-api.js';
import {
  actionDetailReducer,
  initialActionDetailView,
  type ActionDetailEvent,
  type ActionDetailView,
} from './action-detail.js';
import { bridgeFailed } from './operator-call.js';
import { eventsSealed, readPlainRow } from './sealed-action.js';

export interface ActionDetailSlice {
  actionDetailView: ActionDetailView;
  /** Shows `actionId` (a different one drops the previous detail) and reads it. */
  openActionDetail(actionId: string): Promise<void>;
  /** Reads the shown action again (later evidence is appended, never rewritten). */
  refreshActionDetail(): Promise<void>;
}

export function createActionDetailSlice(api: OperatorApi): StateCreator<ActionDetailSlice, [], [], ActionDetailSlice> {
  return (set, get) => {
    const dispatch = (event: ActionDetailEvent): void =>
      set((state) => ({ actionDetailView: actionDetailReducer(state.actionDetailView, event) }));
    const refresh = async (): Promise<void> => {
      const { actionId, phase } = get().actionDetailView;
      if (actionId === null || phase === 'loading') return;
      dispatch({ type: 'requested' });
      const reply = await api['actions.show']({ action_id: actionId }).catch(bridgeFailed);
      dispatch({ type: 'received', actionId, reply });
      // Sealed while the vault is locked: what the plaintext projection knows is read once, so the view says it.
      if (!reply.ok && eventsSealed(reply.error) && get().actionDetailView.plain === null)
        dispatch({ type: 'plain_read', actionId, row: await readPlainRow(api, actionId) });
    };
    return {
      actionDetailView: initialActionDetailView,
      openActionDetail: (actionId) => {
        dispatch({ type: 'opened', actionId });
        return refresh();
      },
      refreshActionDetail: refresh,
    };
  };
}
