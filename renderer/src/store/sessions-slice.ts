import type { StateCreator } from 'zustand';
import type { Reply } from '../../../broker/contract/index.js';
import type { OperatorApi } from '../api/operator-api.js';
import { initialSessionsView, sessionsReducer, type SessionsEvent, type SessionsView } from './sessions-reducer.js';
import { coalescedRefresh } from './coalesced-refresh.js';
import { bridgeFailed } from './operator-call.js';

/** The executable the broker hashed for a session's card (allowlist.preview): what "Always allow" would record. */
export type ExecutablePreview =
  | { readonly state: 'loading' }
  | { readonly state: 'ready'; readonly path: string; readonly sha256: string }
  | { readonly state: 'failed'; readonly message: string };

export interface SessionsSlice {
  sessionsView: SessionsView;
  /** By session id: the hash shown beside "Always allow this executable", and the one its add must match. */
  executablePreviews: Readonly<Record<string, ExecutablePreview>>;
  /** Asks the broker to hash the session's executable now (again after a refused add: the bytes changed). */
  previewExecutable(sessionId: string): Promise<void>;
  /** Lists the sessions once; a call while one is in flight asks for one more right after it. */
  refreshSessions(): Promise<void>;
  /** Resolve true when the broker accepted the call. */
  approveSession(sessionId: string): Promise<boolean>;
  revokeSession(sessionId: string, reason: string): Promise<boolean>;
  /**
   * "Always allow this executable": a process allowlist entry for the session's executable, and the session approved —
   * only for the sha256 the card showed (the broker refuses the add when the file now hashes otherwise).
   */
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

    const setPreview = (sessionId: string, preview: ExecutablePreview | undefined): void =>
      set((state) => {
        const { [sessionId]: _dropped, ...rest } = state.executablePreviews;
        return { executablePreviews: preview === undefined ? rest : { ...rest, [sessionId]: preview } };
      });
    const previewExecutable = async (sessionId: string): Promise<void> => {
      setPreview(sessionId, { state: 'loading' });
      const reply = await api['allowlist.preview']({ session_id: sessionId }).catch(bridgeFailed);
      setPreview(
        sessionId,
        reply.ok
          ? { state: 'ready', path: reply.value.path, sha256: reply.value.sha256 }
          : { state: 'failed', message: reply.error.message },
      );
    };
    const alwaysAllowSession = async (sessionId: string): Promise<boolean> => {
      const preview = get().executablePreviews[sessionId];
      if (preview?.state !== 'ready') return false;
      const ok = await act(
        sessionId,
        'always_allow',
        () => api['allowlist.add']({ session_id: sessionId, expected_sha256: preview.sha256 }),
        'executable allowed; session approved',
      );
      // Refused (the bytes changed since the look, or the process is gone): hash again, so the card shows what is now.
      if (!ok) await previewExecutable(sessionId);
      return ok;
    };

    return {
      sessionsView: initialSessionsView,
      executablePreviews: {},
      previewExecutable,
      alwaysAllowSession,
      refreshSessions,
      approveSession: (sessionId) =>
        act(sessionId, 'approve', () => api['sessions.approve']({ session_id: sessionId }), 'session approved'),
      revokeSession: (sessionId, reason) =>
        act(sessionId, 'revoke', () => api['sessions.revoke']({ session_id: sessionId, reason }), 'session revoked'),
    };
  };
}
