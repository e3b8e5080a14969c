import type { BrokerStatus, Reply } from '../../../broker/contract/index.js';
import type { ReplyError } from '../api/operator-api.js';

/**
 * What the shell knows about the broker's status. After a failed refresh the last good status is
 * kept (and shown as stale) beside the error, so a blip does not blank the screen.
 */
export interface StatusView {
  phase: 'idle' | 'loading' | 'ready' | 'error';
  status: BrokerStatus | null;
  error: ReplyError | null;
  /** How many replies have been applied; lets the view say "never loaded" vs "stale". */
  replies: number;
  /** When `status` was received (the page's clock): a kept status is shown "as of" this time. */
  received_at_ms: number | null;
}

export type StatusEvent = { type: 'requested' } | { type: 'received'; reply: Reply<BrokerStatus>; at_ms: number };

export const initialStatusView: StatusView = {
  phase: 'idle',
  status: null,
  error: null,
  replies: 0,
  received_at_ms: null,
};

/** Pure: the next view from the current one and one event. */
export function statusReducer(view: StatusView, event: StatusEvent): StatusView {
  switch (event.type) {
    case 'requested':
      return { ...view, phase: 'loading' };
    case 'received':
      return event.reply.ok
        ? {
            phase: 'ready',
            status: event.reply.value,
            error: null,
            replies: view.replies + 1,
            received_at_ms: event.at_ms,
          }
        : { ...view, phase: 'error', error: event.reply.error, replies: view.replies + 1 };
  }
}

/**
 * A status the broker no longer vouches for: the last refresh failed and an older one is kept. Its live states (the
 * vault unlocked, the journal open, an upstream running) may have changed since, or the broker may be gone: the page
 * shows such a status only as a snapshot "as of" its time, never as current. Null while the status is current.
 */
export function staleStatus(view: StatusView): { status: BrokerStatus; asOfMs: number | null } | null {
  if (view.error === null || view.status === null) return null;
  return { status: view.status, asOfMs: view.received_at_ms };
}
