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
}

export type StatusEvent = { type: 'requested' } | { type: 'received'; reply: Reply<BrokerStatus> };

export const initialStatusView: StatusView = { phase: 'idle', status: null, error: null, replies: 0 };

/** Pure: the next view from the current one and one event. */
export function statusReducer(view: StatusView, event: StatusEvent): StatusView {
  switch (event.type) {
    case 'requested':
      return { ...view, phase: 'loading' };
    case 'received':
      return event.reply.ok
        ? { phase: 'ready', status: event.reply.value, error: null, replies: view.replies + 1 }
        : { phase: 'error', status: view.status, error: event.reply.error, replies: view.replies + 1 };
  }
}
