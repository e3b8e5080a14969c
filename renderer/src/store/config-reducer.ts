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
  edited:
    | { ok: true; op: ConfigEdit['op']; file: EditedConfig }
    | { ok: false; op: ConfigEdit['op']; error: ReplyError }
    | null;
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

export const initialConfigView: ConfigView = {
  phase: 'idle',
  config: null,
  error: null,
  editing: null,
  edited: null,
  confirming: null,
  pending: null,
  accepting: null,
  accepted: null,
};

/** Pure: the next view from the current one and one event. */
export function configReducer(view: ConfigView, event: ConfigEvent): ConfigView {
  switch (event.type) {
    case 'requested':
      return { ...view, phase: 'loading' };
    case 'received':
      return event.reply.ok
        ? { ...view, phase: 'ready', config: event.reply.value, error: null }
        : { ...view, phase: 'error', error: event.reply.error };
    case 'edit_started':
      return { ...view, editing: event.op, edited: null, confirming: null };
    case 'edit_finished':
      return {
        ...view,
        editing: null,
        edited: event.reply.ok
          ? { ok: true, op: event.op, file: event.reply.value }
          : { ok: false, op: event.op, error: event.reply.error },
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
      return {
        ...view,
        accepting: null,
        accepted: event.reply.ok ? { ok: true, value: event.reply.value } : { ok: false, error: event.reply.error },
      };
  }
}

/** Methods as a person types them ("GET, post"); empty means the route's default (all). */
export function parseMethods(text: string): string[] {
  return text
    .split(/[\s,]+/)
    .map((method) => method.trim().toUpperCase())
    .filter((method) => method !== '');
}

/**
 * What the file holds after the last successful edit against what the broker runs (config.show, read
 * again after the edit): entries added to the file and not loaded yet, entries loaded and no longer in
 * the file. Null when no edit was written in this page. `applies` is the broker's word: `next_start`
 * unless it says the edit is in force `now` (then the lists already show it and nothing differs).
 */
export interface FileChanges {
  file: string;
  applies: string;
  routes: { added: string[]; removed: string[] };
  ssh_hosts: { added: string[]; removed: string[] };
}

export function fileChanges(config: ShownConfig | null, edited: ConfigView['edited']): FileChanges | null {
  if (edited === null || !edited.ok) return null;
  const inFile = edited.file;
  const applies: string = inFile.applies;
  const diff = (file: readonly string[], loaded: readonly string[]) => ({
    added: file.filter((name) => !loaded.includes(name)),
    removed: loaded.filter((name) => !file.includes(name)),
  });
  const loadedRoutes = config?.routes.map((r) => r.name) ?? [];
  const loadedHosts = config?.ssh_hosts.map((h) => h.name) ?? [];
  return {
    file: inFile.file,
    applies,
    routes: diff(inFile.routes, loadedRoutes),
    ssh_hosts: diff(inFile.ssh_hosts, loadedHosts),
  };
}

/** How the page words when a change takes effect, from what the broker answered. */
export function appliesWords(applies: string): string {
  return applies === 'now' ? 'in force now' : 'applies at the next start';
}

/**
 * The console-wide banner while postern.yaml is not accepted (trust `untrusted`: no accepted copy where one is
 * needed, or the copy failed its check): every route and SSH host is refused, however healthy the rest looks. Says
 * why (the broker's reason, as a sentence) and where a person accepts it. Null while routes can run.
 */
export interface ConfigTrustBanner {
  headline: string;
  detail: string;
  /** What the person does, and where. */
  next: string;
  href: string;
}

export function configTrustBanner(pending: PendingConfig | null): ConfigTrustBanner | null {
  if (pending === null || pending.trust !== 'untrusted') return null;
  if (pending.restart_needed)
    return {
      headline: 'Every route and SSH host is refused until the broker restarts',
      detail: 'A configuration was accepted in this run; the broker uses it from its next start.',
      next: 'Restart the broker',
      href: '#/routes',
    };
  return {
    headline: 'Every route and SSH host is refused: postern.yaml is not accepted',
    detail: sentence(pending.untrusted_reason ?? 'The accepted configuration failed its check.'),
    next: 'Review and accept it in Routes & hosts',
    href: '#/routes',
  };
}

/** A reason as the broker words it ("the accepted copy failed…"), as a sentence: capital first, full stop last. */
export function sentence(text: string): string {
  const trimmed = text.trim();
  if (trimmed === '') return trimmed;
  const capital = trimmed.charAt(0).toUpperCase() + trimmed.slice(1);
  return /[.!?]$/.test(capital) ? capital : `${capital}.`;
}

/**
 * The Routes & hosts heading: the lists are the configuration in force (config.show reads it live, whatever was
 * applied since start), refused as a whole while postern.yaml is not accepted.
 */
export function routesHeadingWords(pending: PendingConfig | null): string {
  if (pending?.trust === 'untrusted') return 'as loaded, all refused until postern.yaml is accepted';
  return 'as the broker runs them now';
}
