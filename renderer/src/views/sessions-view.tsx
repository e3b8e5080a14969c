import { useEffect, useMemo, useState } from 'react';
import type { SessionSummary } from '../../../broker/contract/index.js';
import { useAppStore } from '../store/app-store.js';
import {
  orderSessions,
  sessionApprovalUse,
  sessionDecisionWords,
  sessionStanding,
  type SessionApprovalUse,
} from '../store/sessions-reducer.js';
import type { ExecutablePreview } from '../store/sessions-slice.js';
import { CallResultLine } from './approval-card.js';
import { ReasonForm } from './reason-form.js';
import { noun } from '../store/plural.js';
import { dateTime } from '../../../broker/contract/time-words.js';

/**
 * Sessions: one card per agent process. Whether a pending one needs a person depends on the routes
 * and hosts the broker runs (config.show): only approval: session entries wait for a session's
 * approval, so for a per-call-only configuration the card says approving would change nothing and
 * offers no Approve button.
 */
export function SessionsView() {
  const view = useAppStore((state) => state.sessionsView);
  const config = useAppStore((state) => state.configView.config);
  const refreshConfig = useAppStore((state) => state.refreshConfig);
  // Read on each visit: which entries use session approval decides what Approve would change.
  useEffect(() => {
    void refreshConfig();
  }, [refreshConfig]);
  const sessions = useMemo(() => orderSessions(view.sessions), [view.sessions]);
  const use = useMemo(() => sessionApprovalUse(config), [config]);
  return (
    <section className="panel" aria-labelledby="sessions-heading" data-testid="sessions-view">
      <header className="panel-header">
        <h2 id="sessions-heading">Sessions</h2>
        <span className="muted">
          {view.replies === 0
            ? 'loading…'
            : `${sessions.length} agent ${sessions.length === 1 ? 'process' : 'processes'}`}
        </span>
      </header>
      <p className="muted intro" data-testid="sessions-use">
        Each agent process is a session. {useSentence(use)} Revoking refuses its new calls and cancels what it has not
        sent.
      </p>
      {view.error !== null && (
        <div className="error" role="alert" data-testid="sessions-error">
          <strong>{view.error.code}</strong>
          <span>{view.error.message}</span>
        </div>
      )}
      {view.replies > 0 && sessions.length === 0 && view.error === null && (
        <p className="empty">No agent has connected yet.</p>
      )}
      {sessions.length > 0 && (
        <div className="session-cards">
          {sessions.map((session) => (
            <SessionCard key={session.session_id} session={session} use={use} />
          ))}
        </div>
      )}
    </section>
  );
}

function useSentence(use: SessionApprovalUse): string {
  if (!use.known)
    return 'A session with calls on approval: session routes or hosts is approved once by a person before those calls run.';
  if (use.entries.length === 0 && use.maybe.length === 0) {
    return 'No route or SSH host uses approval: session, so no session needs approving: per_call calls get a card each, approval: none calls run in their lane.';
  }
  const where = [...use.entries, ...use.maybe.map((name) => `${name} (command rules)`)].join(', ');
  return `Approving a session once lets its calls on ${where} run without a card; per_call calls still get a card each.`;
}

// eslint-disable-next-line max-lines-per-function -- one session's facts and its approve/revoke controls in one card's JSX
export function SessionCard({ session, use }: { session: SessionSummary; use: SessionApprovalUse }) {
  const id = session.session_id;
  const busy = useAppStore((state) => state.sessionsView.calls.busy[id]);
  const last = useAppStore((state) => state.sessionsView.calls.last[id]);
  const approve = useAppStore((state) => state.approveSession);
  const revoke = useAppStore((state) => state.revokeSession);
  const alwaysAllow = useAppStore((state) => state.alwaysAllowSession);
  const preview = useAppStore((state) => state.executablePreviews[id]);
  const previewExecutable = useAppStore((state) => state.previewExecutable);
  const [revoking, setRevoking] = useState(false);
  const exeName = session.exe?.split(/[\\/]/).at(-1) ?? '(process unknown)';
  const live = session.status === 'pending' || session.status === 'approved';
  const standing = sessionStanding(session, use);
  // An earlier run's row the journal has not confirmed: who decided is the file's word, never shown as a person's.
  const fromFile = session.record === 'unconfirmed' || session.record === 'unverifiable';
  const decisions = sessionDecisionWords(session);
  const offersAllow = standing.approvable && session.exe !== null;
  // The broker hashes the executable when the card offers "Always allow": the person sees the bytes the entry binds.
  useEffect(() => {
    if (offersAllow && preview === undefined) void previewExecutable(id);
  }, [offersAllow, preview, previewExecutable, id]);
  return (
    <article
      className={`session-card tone-${standing.tone}`}
      data-testid={`session-${id}`}
      data-record={session.record}
      aria-label={`Session ${id}, pid ${session.pid}`}
    >
      <header className="session-card-header">
        <span className="session-agent">
          <strong>{exeName}</strong> · pid <span data-testid={`session-${id}-pid`}>{session.pid}</span>
          {session.client_name !== null && (
            <>
              {' '}
              · client {session.client_name}
              {session.client_version !== null && ` ${session.client_version}`}
            </>
          )}
        </span>
        <span
          className={`badge session-${standing.tone}`}
          data-testid={`session-${id}-status`}
          data-status={session.status}
        >
          {standing.label}
        </span>
      </header>
      <p className="session-explanation" data-testid={`session-${id}-explanation`}>
        {standing.explanation}
      </p>
      <dl className="card-facts">
        <dt>Executable</dt>
        <dd>
          <code>{session.exe ?? '(executable unknown)'}</code>
          {session.cwd !== null && (
            <>
              {' '}
              in <code>{session.cwd}</code>
            </>
          )}
        </dd>
        <dt>Session</dt>
        <dd>
          <span className="muted">{id}</span> · {session.connected ? 'connected' : 'not connected'}
          {decisions.length > 0 &&
            (fromFile ? (
              <span data-testid={`session-${id}-file-says`}> · the file says {decisions.join(', ')}, unconfirmed</span>
            ) : (
              <> · {decisions.join(' · ')}</>
            ))}
        </dd>
        {session.allowlist_withheld !== null && (
          <>
            <dt>Allowlist</dt>
            <dd data-testid={`session-${id}-allowlist-withheld`}>
              allowlist not applied: {session.allowlist_withheld}
            </dd>
          </>
        )}
        <dt>Calls</dt>
        <dd>
          <span data-testid={`session-${id}-calls`}>{session.calls}</span> {noun(session.calls, 'call')}
          {session.pending > 0 && <>, {session.pending} not sent yet</>}
        </dd>
        <dt>Started</dt>
        <dd>
          <time dateTime={new Date(session.started_at_ms).toISOString()}>{dateTime(session.started_at_ms)}</time>
          {session.ended_at_ms !== null && (
            <>
              {' '}
              · ended{' '}
              <time dateTime={new Date(session.ended_at_ms).toISOString()}>{dateTime(session.ended_at_ms)}</time>
            </>
          )}
        </dd>
      </dl>
      {!revoking && (standing.approvable || live) && (
        <div className="form-actions">
          {standing.approvable && (
            <button type="button" className="primary" disabled={busy !== undefined} onClick={() => void approve(id)}>
              Approve
            </button>
          )}
          {offersAllow && (
            <>
              <button
                type="button"
                disabled={busy !== undefined || preview?.state !== 'ready'}
                title="Adds this executable (its path and the sha256 shown, which the broker computed) to the process allowlist, then approves: its later sessions skip this card; per-call cards stay. Refused if the file changed since."
                data-testid={`session-${id}-always-allow`}
                onClick={() => void alwaysAllow(id)}
              >
                Always allow this executable
              </button>
              <ExecutableHash id={id} preview={preview} />
            </>
          )}
          {live && (
            <button type="button" className="danger" disabled={busy !== undefined} onClick={() => setRevoking(true)}>
              Revoke…
            </button>
          )}
        </div>
      )}
      {revoking && (
        <ReasonForm
          label={`Why revoke pid ${session.pid}?`}
          submitLabel="Revoke"
          busy={busy !== undefined}
          onSubmit={(reason) => revoke(id, reason)}
          onClose={() => setRevoking(false)}
        />
      )}
      {last !== undefined && <CallResultLine result={last} />}
    </article>
  );
}

/** The sha256 the broker computed for the card's executable, short (the full one on hover): the bytes "Always allow" binds. */
function ExecutableHash({ id, preview }: { id: string; preview: ExecutablePreview | undefined }) {
  const testId = `session-${id}-exe-sha256`;
  if (preview === undefined || preview.state === 'loading')
    return (
      <span className="muted" data-testid={testId} data-state="loading">
        hashing…
      </span>
    );
  if (preview.state === 'failed')
    return (
      <span className="muted" data-testid={testId} data-state="failed">
        not hashed: {preview.message}
      </span>
    );
  return (
    <code title={preview.sha256} data-testid={testId} data-state="ready" data-sha256={preview.sha256}>
      {preview.sha256.slice(0, 'sha256:'.length + 12)}…
    </code>
  );
}
