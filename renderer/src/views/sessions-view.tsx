import { useMemo, useState } from 'react';
import type { SessionSummary } from '../../../broker/contract/index.js';
import { useAppStore } from '../store/app-store.js';
import { orderSessions } from '../store/sessions-reducer.js';
import { CallResultLine } from './approval-card.js';
import { ReasonForm } from './reason-form.js';

/** Sessions: one row per agent process; a new one is approved once by a person, or revoked. */
export function SessionsView() {
  const view = useAppStore((state) => state.sessionsView);
  const sessions = useMemo(() => orderSessions(view.sessions), [view.sessions]);
  return (
    <section className="panel" aria-labelledby="sessions-heading" data-testid="sessions-view">
      <header className="panel-header">
        <h2 id="sessions-heading">Sessions</h2>
        <span className="muted">{view.replies === 0 ? 'loading…' : `${sessions.length} agent ${sessions.length === 1 ? 'process' : 'processes'}`}</span>
      </header>
      <p className="muted intro">
        Each agent process is a session. A new one must be approved once before its session-mode calls run; revoking refuses its new calls and cancels what it has not sent.
      </p>
      {view.error !== null && (
        <div className="error" role="alert" data-testid="sessions-error">
          <strong>{view.error.code}</strong>
          <span>{view.error.message}</span>
        </div>
      )}
      {view.replies > 0 && sessions.length === 0 && view.error === null && <p className="empty">No agent has connected yet.</p>}
      {sessions.length > 0 && (
        <table className="sessions">
          <thead>
            <tr>
              <th scope="col">Agent</th>
              <th scope="col">Status</th>
              <th scope="col">Calls</th>
              <th scope="col">Started / ended</th>
              <th scope="col">
                <span className="visually-hidden">Decisions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {sessions.map((session) => (
              <SessionRow key={session.session_id} session={session} />
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

function SessionRow({ session }: { session: SessionSummary }) {
  const id = session.session_id;
  const busy = useAppStore((state) => state.sessionsView.calls.busy[id]);
  const last = useAppStore((state) => state.sessionsView.calls.last[id]);
  const approve = useAppStore((state) => state.approveSession);
  const revoke = useAppStore((state) => state.revokeSession);
  const [revoking, setRevoking] = useState(false);
  const exeName = session.exe?.split(/[\\/]/).at(-1) ?? '(process unknown)';
  const live = session.status === 'pending' || session.status === 'approved';
  return (
    <tr data-testid={`session-${id}`} aria-label={`Session ${id}, pid ${session.pid}`}>
      <td>
        <strong>{exeName}</strong> · pid <span data-testid={`session-${id}-pid`}>{session.pid}</span>
        {session.client_name !== null && (
          <>
            {' '}
            · client {session.client_name}
            {session.client_version !== null && ` ${session.client_version}`}
          </>
        )}
        <br />
        <code>{session.exe ?? '(executable unknown)'}</code>
        {session.cwd !== null && (
          <>
            {' '}
            in <code>{session.cwd}</code>
          </>
        )}
        <br />
        <span className="muted">{id}</span>
      </td>
      <td>
        <span className={`badge session-${session.status}`} data-testid={`session-${id}-status`}>
          {session.status}
        </span>
        <div className="muted">{session.connected ? 'connected' : 'not connected'}</div>
        {session.approved_by !== null && <div className="muted">approved by {session.approved_by}</div>}
        {session.revoke_reason !== null && <div className="muted">revoked: {session.revoke_reason}</div>}
        {session.end_reason !== null && <div className="muted">ended: {session.end_reason}</div>}
      </td>
      <td>
        <span data-testid={`session-${id}-calls`}>{session.calls}</span> calls
        {session.pending > 0 && <div className="muted">{session.pending} not sent yet</div>}
      </td>
      <td>
        <time dateTime={new Date(session.started_at_ms).toISOString()}>{new Date(session.started_at_ms).toLocaleString()}</time>
        {session.ended_at_ms !== null && (
          <>
            <br />
            <time dateTime={new Date(session.ended_at_ms).toISOString()}>{new Date(session.ended_at_ms).toLocaleString()}</time>
          </>
        )}
      </td>
      <td>
        {!revoking && (
          <div className="form-actions">
            {session.status === 'pending' && (
              <button type="button" className="primary" disabled={busy !== undefined} onClick={() => void approve(id)}>
                Approve
              </button>
            )}
            {live && (
              <button type="button" className="danger" disabled={busy !== undefined} onClick={() => setRevoking(true)}>
                Revoke…
              </button>
            )}
          </div>
        )}
        {revoking && (
          <ReasonForm label={`Why revoke pid ${session.pid}?`} submitLabel="Revoke" busy={busy !== undefined} onSubmit={(reason) => revoke(id, reason)} onClose={() => setRevoking(false)} />
        )}
        {last !== undefined && <CallResultLine result={last} />}
      </td>
    </tr>
  );
}
