import type { BrokerApi, Reply } from '../../../broker/contract/index.js';
import type { ReplyError } from '../api/operator-api.js';

export type ShownConfig = BrokerApi['config.show']['output'];
export type ConfigEdit = BrokerApi['config.edit']['input'];
export type EditedConfig = BrokerApi['config.edit']['output'];
export type PendingConfig = BrokerApi['config.pending']['output'];
export type AcceptedConfig = BrokerApi['config.accept']['output'];

/**
 * Routes and SSH hosts as the broker loaded them at start, and the last edit of the file (which
 * applies at the next start, never to the running broker).
 */
export interface ConfigView {
  phase: 'idle' | 'loading' | 'ready' | 'error';
  config: ShownConfig | null;
  error: ReplyError | null;
  /** The edit in flight, e.g. "add_route". */
  editing: ConfigEdit['op'] | null;
  edited: { ok: true; op: ConfigEdit['op']; file: EditedConfig } | { ok: false; op: ConfigEdit['op']; error: ReplyError } | null;
  /** The entry whose removal from the file waits for a second click, e.g. "route:docs". */
  confirming: string | null;
  /** postern.yaml against the last accepted configuration (the pending-change card), and its trust. */
  pending: PendingConfig | null;
  /** The digest of the change being accepted now. */
  accepting: string | null;
  accepted: { ok: true; value: AcceptedConfig } | { ok: false; error: ReplyError } | null;
}

export type ConfigEvent =
  | { type: 'requested' }
  | { type: 'received'; reply: Reply<ShownConfig> }
  | { type: 'edit_started'; op: ConfigEdit['op'] }
  | { type: 'edit_finished'; op: ConfigEdit['op']; reply: Reply<EditedConfig> }
  | { type: 'remove_asked'; entry: string }
  | { type: 'remove_dismissed' }
  | { type: 'pending_received'; reply: Reply<PendingConfig> }
  | { type: 'accept_started'; digest: string }
  | { type: 'accept_finished'; reply: Reply<AcceptedConfig> };

export const initialConfigView: ConfigView = { phase: 'idle', config: null, error: null, editing: null, edited: null, confirming: null, pending: null, accepting: null, accepted: null };

/** Pure: the next view from the current one and one event. */
export function configReducer(view: ConfigView, event: ConfigEvent): ConfigView {
  switch (event.type) {
    case 'requested':
      return { ...view, phase: 'loading' };
    case 'received':
      return event.reply.ok ? { ...view, phase: 'ready', config: event.reply.value, error: null } : { ...view, phase: 'error', error: event.reply.error };
    case 'edit_started':
      return { ...view, editing: event.op, edited: null, confirming: null };
    case 'edit_finished':
      return {
        ...view,
        editing: null,
        edited: event.reply.ok ? { ok: true, op: event.op, file: event.reply.value } : { ok: false, op: event.op, error: event.reply.error },
      };
    case 'remove_asked':
      return { ...view, confirming: event.entry };
    case 'remove_dismissed':
      return { ...view, confirming: null };
    // A failed read keeps the last card: an unreachable broker is the status panel's to report.
    case 'pending_received':
      return event.reply.ok ? { ...view, pending: event.reply.value } : view;
    case 'accept_started':
      return { ...view, accepting: event.digest, accepted: null };
    case 'accept_finished':
      return { ...view, accepting: null, accepted: event.reply.ok ? { ok: true, value: event.reply.value } : { ok: false, error: event.reply.error } };
  }
}

/** Methods as a person types them ("GET, post"); empty means the route's default (all). */
export function parseMethods(text: string): string[] {
  return text
    .split(/[\s,]+/)
    .map((method) => method.trim().toUpperCase())
    .filter((method) => method !== '');
}
