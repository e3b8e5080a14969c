import type { BrokerApi, Reply, SessionSummary } from '../../../broker/contract/index.js';
import type { ReplyError } from '../api/operator-api.js';
import { callFinished, callStarted, emptyCallBook, type CallBook } from './operator-call.js';

export interface SessionsView {
  phase: 'idle' | 'loading' | 'ready' | 'error';
  /** As last listed (kept, as stale, beside a refresh error). */
  sessions: SessionSummary[];
  error: ReplyError | null;
  replies: number;
  calls: CallBook<string>;
}

export type SessionsEvent =
  | { type: 'requested' }
  | { type: 'received'; reply: Reply<BrokerApi['sessions.list']['output']> }
  | { type: 'call_started'; sessionId: string; call: string }
  | { type: 'call_finished'; sessionId: string; call: string; reply: Reply<unknown>; message: string };

export const initialSessionsView: SessionsView = { phase: 'idle', sessions: [], error: null, replies: 0, calls: emptyCallBook() };

/** Pure: the next view from the current one and one event. */
export function sessionsReducer(view: SessionsView, event: SessionsEvent): SessionsView {
  switch (event.type) {
    case 'requested':
      return { ...view, phase: 'loading' };
    case 'received':
      return event.reply.ok
        ? { ...view, phase: 'ready', sessions: event.reply.value.sessions, error: null, replies: view.replies + 1 }
        : { ...view, phase: 'error', error: event.reply.error, replies: view.replies + 1 };
    case 'call_started':
      return { ...view, calls: callStarted(view.calls, event.sessionId, event.call) };
    case 'call_finished':
      return { ...view, calls: callFinished(view.calls, event.sessionId, event.call, event.reply, event.message) };
  }
}

const statusOrder: Record<SessionSummary['status'], number> = { pending: 0, approved: 1, revoked: 2, ended: 3 };

/**
 * Sessions for the view: those waiting for a person first, then live ones, then revoked and
 * ended; newest first within each.
 */
export function orderSessions(sessions: readonly SessionSummary[]): SessionSummary[] {
  return [...sessions].sort((a, b) => statusOrder[a.status] - statusOrder[b.status] || b.started_at_ms - a.started_at_ms || (a.session_id < b.session_id ? -1 : 1));
}

/** How many sessions wait for a person's approval (the tab's badge). */
export function pendingSessionCount(sessions: readonly SessionSummary[]): number {
  return sessions.filter((s) => s.status === 'pending').length;
}
