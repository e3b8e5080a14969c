import type { StateCreator } from 'zustand';
import type { Reply } from '../../../broker/contract/index.js';
import { clientError, type OperatorApi } from '../api/operator-api.js';
import { initialSessionsView, sessionsReducer, type SessionsEvent, type SessionsView } from './sessions-reducer.js';

export interface SessionsSlice {
  sessionsView: SessionsView;
  /** Lists the sessions once; a call while one is in flight asks for one more right after it. */
  refreshSessions(): Promise<void>;
  /** Resolve true when the broker accepted the call. */
  approveSession(sessionId: string): Promise<boolean>;
  revokeSession(sessionId: string, reason: string): Promise<boolean>;
}

const bridgeFailed = () => clientError('BROKER_UNREACHABLE', 'The broker bridge failed to answer.');

export function createSessionsSlice(api: OperatorApi): StateCreator<SessionsSlice, [], [], SessionsSlice> {
  return (set, get) => {
    const dispatch = (event: SessionsEvent): void => set((state) => ({ sessionsView: sessionsReducer(state.sessionsView, event) }));
    let inFlight: Promise<void> | null = null;
    let again = false;

    const refreshSessions = (): Promise<void> => {
      if (inFlight !== null) {
        again = true;
        return inFlight;
      }
      inFlight = (async () => {
        do {
          again = false;
          dispatch({ type: 'requested' });
          dispatch({ type: 'received', reply: await api['sessions.list']({}).catch(bridgeFailed) });
        } while (again);
      })().finally(() => {
        inFlight = null;
      });
      return inFlight;
    };

    const act = async <T>(sessionId: string, call: string, send: () => Promise<Reply<T>>, message: string): Promise<boolean> => {
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
      approveSession: (sessionId) => act(sessionId, 'approve', () => api['sessions.approve']({ session_id: sessionId }), 'session approved'),
      revokeSession: (sessionId, reason) => act(sessionId, 'revoke', () => api['sessions.revoke']({ session_id: sessionId, reason }), 'session revoked'),
    };
  };
}
