import type { StateCreator } from 'zustand';
import type { Reply } from '../../../broker/contract/index.js';
import type { OperatorApi } from '../api/operator-api.js';
import { initialSessionsView, sessionsReducer, type SessionsEvent, type SessionsView } from './sessions-reducer.js';
import { coalescedRefresh } from './coalesced-refresh.js';
import { bridgeFailed } from './operator-call.js';

export interface SessionsSlice {
  sessionsView: SessionsView;
  /** Lists the sessions once; a call while one is in flight asks for one more right after it. */
  refreshSessions(): Promise<void>;
  /** Resolve true when the broker accepted the call. */
  approveSession(sessionId: string): Promise<boolean>;
  revokeSession(sessionId: string, reason: string): Promise<boolean>;
  /** "Always allow this executable": a process allowlist entry for the session's executable (hashed by the broker), and the session approved. */
  alwaysAllowSession(sessionId: string): Promise<boolean>;
}

export function createSessionsSlice(api: OperatorApi): StateCreator<SessionsSlice, [], [], SessionsSlice> {
  return (set, get) => {
    const dispatch = (event: SessionsEvent): void =>
      set((state) => ({ sessionsView: sessionsReducer(state.sessionsView, event) }));
    const refreshSessions = coalescedRefresh(async () => {
      dispatch({ type: 'requested' });
      dispatch({ type: 'received', reply: await api['sessions.list']({}).catch(bridgeFailed) });
    }).run;

    const act = async <T>(
      sessionId: string,
      call: string,
      send: () => Promise<Reply<T>>,
      message: string,
    ): Promise<boolean> => {
      if (get().sessionsView.calls.busy[sessionId] !== undefined) return false;
      dispatch({ type: 'call_started', sessionId, call });
      const reply: Reply<T> = await send().catch(bridgeFailed);
      dispatch({ type: 'call_finished', sessionId, call, reply, message });
      await refreshSessions();
      return reply.ok;
    };

    return {
      sessionsView: initialSessionsView,
      refreshSessions,
      approveSession: (sessionId) =>
        act(sessionId, 'approve', () => api['sessions.approve']({ session_id: sessionId }), 'session approved'),
      revokeSession: (sessionId, reason) =>
        act(sessionId, 'revoke', () => api['sessions.revoke']({ session_id: sessionId, reason }), 'session revoked'),
      alwaysAllowSession: (sessionId) =>
        act(
          sessionId,
          'always_allow',
          () => api['allowlist.add']({ session_id: sessionId }),
          'executable allowed; session approved',
        ),
    };
  };
}
