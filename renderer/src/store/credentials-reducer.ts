import type { BrokerApi, CredentialSummary, Reply } from '../../../broker/contract/index.js';
import type { ReplyError } from '../api/operator-api.js';
import type { VaultState } from './vault-reducer.js';

/**
 * The Credentials screen: names, kinds, bindings and versions — never a secret. An add carries its
 * secret only inside the API call; the events below hold the credential's name at most.
 */
export interface CredentialsView {
  phase: 'idle' | 'loading' | 'ready' | 'error';
  credentials: CredentialSummary[];
  vaultState: VaultState | null;
  error: ReplyError | null;
  replies: number;
  /** The name being added, while the call runs. */
  adding: string | null;
  /** How the last add ended: the added credential's name (and version), or the broker's refusal. */
  added: { ok: true; name: string; version_tag: string } | { ok: false; error: ReplyError } | null;
  /** The credential whose removal waits for a second click. */
  confirming: string | null;
  removing: string | null;
  removed: { ok: true; name: string } | { ok: false; name: string; error: ReplyError } | null;
}

export type CredentialsEvent =
  | { type: 'requested' }
  | { type: 'received'; reply: Reply<BrokerApi['credentials.list']['output']> }
  | { type: 'add_started'; name: string }
  | { type: 'add_finished'; reply: Reply<CredentialSummary> }
  | { type: 'remove_asked'; name: string }
  | { type: 'remove_dismissed' }
  | { type: 'remove_started'; name: string }
  | { type: 'remove_finished'; name: string; reply: Reply<unknown> };

export const initialCredentialsView: CredentialsView = {
  phase: 'idle',
  credentials: [],
  vaultState: null,
  error: null,
  replies: 0,
  adding: null,
  added: null,
  confirming: null,
  removing: null,
  removed: null,
};

/** Pure: the next view from the current one and one event. */
export function credentialsReducer(view: CredentialsView, event: CredentialsEvent): CredentialsView {
  switch (event.type) {
    case 'requested':
      return { ...view, phase: 'loading' };
    case 'received':
      return event.reply.ok
        ? {
            ...view,
            phase: 'ready',
            credentials: sortedByName(event.reply.value.credentials),
            vaultState: event.reply.value.state,
            error: null,
            replies: view.replies + 1,
          }
        : { ...view, phase: 'error', error: event.reply.error, replies: view.replies + 1 };
    case 'add_started':
      return { ...view, adding: event.name, added: null };
    case 'add_finished':
      return {
        ...view,
        adding: null,
        added: event.reply.ok
          ? { ok: true, name: event.reply.value.name, version_tag: event.reply.value.version_tag }
          : { ok: false, error: event.reply.error },
      };
    case 'remove_asked':
      return { ...view, confirming: event.name, removed: null };
    case 'remove_dismissed':
      return { ...view, confirming: null };
    case 'remove_started':
      return { ...view, confirming: null, removing: event.name, removed: null };
    case 'remove_finished':
      return {
        ...view,
        removing: null,
        removed: event.reply.ok
          ? { ok: true, name: event.name }
          : { ok: false, name: event.name, error: event.reply.error },
      };
  }
}

function sortedByName(credentials: readonly CredentialSummary[]): CredentialSummary[] {
  return [...credentials].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** Bindings as a person types them: separated by commas or whitespace, blanks dropped. */
export function parseBindings(text: string): string[] {
  return text
    .split(/[\s,]+/)
    .map((binding) => binding.trim())
    .filter((binding) => binding !== '');
}
