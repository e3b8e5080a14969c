import type { BrokerApi, Reply } from '../../../broker/contract/index.js';
import type { ReplyError } from '../api/operator-api.js';

export type VaultState = BrokerApi['vault.status']['output']['state'];

/**
 * The vault as the shell knows it. The passphrase is never part of this state: the unlock form
 * hands it straight to the API call and clears its field.
 */
export interface VaultView {
  phase: 'idle' | 'loading' | 'ready' | 'error';
  /** null until the first status arrives. */
  state: VaultState | null;
  credentials: number;
  /** The last refresh error (the last known state is kept beside it). */
  error: ReplyError | null;
  /** The unlock or lock in flight. */
  busy: 'unlock' | 'lock' | null;
  /** How the last unlock or lock ended, e.g. VAULT_PASSPHRASE_INVALID. */
  last: { call: 'unlock' | 'lock'; ok: true } | { call: 'unlock' | 'lock'; ok: false; error: ReplyError } | null;
  replies: number;
}

export type VaultEvent =
  | { type: 'requested' }
  | { type: 'received'; reply: Reply<BrokerApi['vault.status']['output']> }
  | { type: 'call_started'; call: 'unlock' | 'lock' }
  | { type: 'call_finished'; call: 'unlock' | 'lock'; reply: Reply<{ state: VaultState }> };

export const initialVaultView: VaultView = {
  phase: 'idle',
  state: null,
  credentials: 0,
  error: null,
  busy: null,
  last: null,
  replies: 0,
};

/** Pure: the next view from the current one and one event. */
export function vaultReducer(view: VaultView, event: VaultEvent): VaultView {
  switch (event.type) {
    case 'requested':
      return { ...view, phase: 'loading' };
    case 'received':
      return event.reply.ok
        ? {
            ...view,
            phase: 'ready',
            state: event.reply.value.state,
            credentials: event.reply.value.credentials,
            error: null,
            replies: view.replies + 1,
          }
        : { ...view, phase: 'error', error: event.reply.error, replies: view.replies + 1 };
    case 'call_started':
      return { ...view, busy: event.call, last: null };
    case 'call_finished':
      return event.reply.ok
        ? { ...view, busy: null, state: event.reply.value.state, last: { call: event.call, ok: true } }
        : { ...view, busy: null, last: { call: event.call, ok: false, error: event.reply.error } };
  }
}

/** The Approvals view's hint: approved HTTP/SSH actions cannot get their credential while this holds. */
export function vaultBlocksCredentials(state: VaultState | null): boolean {
  return state === 'locked' || state === 'uninitialized';
}
