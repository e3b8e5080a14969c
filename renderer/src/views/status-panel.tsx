import { useEffect } from 'react';
import type { BrokerStatus } from '../../../broker/contract/index.js';
import { useAppStore } from '../store/app-store.js';
import { vaultNextStep } from '../store/vault-lock-banner.js';
import { VaultStepBanner } from './vault-view.js';

/** How often the shell re-reads the status while it is open. */
export const statusRefreshMs = 5_000;

export function StatusPanel() {
  const view = useAppStore((state) => state.statusView);
  const refresh = useAppStore((state) => state.refreshStatus);

  useEffect(() => {
    void refresh();
    const timer = window.setInterval(() => void refresh(), statusRefreshMs);
    return () => window.clearInterval(timer);
  }, [refresh]);

  return (
    <section className="panel" aria-labelledby="status-heading" aria-busy={view.phase === 'loading'}>
      <header className="panel-header">
        <h2 id="status-heading">Broker status</h2>
        <button
          type="button"
          onClick={() => void refresh()}
          disabled={view.phase === 'loading'}
          data-testid="status-refresh"
        >
          Refresh
        </button>
      </header>
      {view.error !== null && (
        <div className="error" role="alert" data-testid="status-error">
          <strong data-testid="status-error-code">{view.error.code}</strong>
          <span>{view.error.message}</span>
          {view.status !== null && <span className="muted">Showing the last status received.</span>}
        </div>
      )}
      {view.status !== null && (
        <VaultStepBanner
          step={vaultNextStep(view.status.vault, view.status.data_dir)}
          testId="status-vault-lock-banner"
        />
      )}
      {view.status === null ? (
        view.error === null && <p className="muted">Loading…</p>
      ) : (
        <StatusDetails status={view.status} stale={view.error !== null} />
      )}
    </section>
  );
}

function StatusDetails({ status, stale }: { status: BrokerStatus; stale: boolean }) {
  const { journal, actions } = status;
  return (
    <dl className={stale ? 'facts stale' : 'facts'} data-testid="status-details">
      <dt>Mode</dt>
      <dd>
        <span className="badge" data-testid="status-mode">
          {status.mode}
        </span>
      </dd>
      <dt>Version</dt>
      <dd data-testid="status-version">{status.version}</dd>
      <dt>Started</dt>
      <dd>
        <time dateTime={new Date(status.started_at_ms).toISOString()}>
          {new Date(status.started_at_ms).toLocaleString()}
        </time>
      </dd>
      <dt>Data directory</dt>
      <dd>
        <code data-testid="status-data-dir">{status.data_dir}</code>
      </dd>
      <dt>Journal</dt>
      <dd>
        <span className={`badge journal-${journal.state}`} data-testid="status-journal-state">
          {journal.state}
        </span>{' '}
        <span data-testid="status-journal-events">{journal.events}</span> events, last seq{' '}
        <span data-testid="status-journal-last-seq">{journal.last_seq}</span>, schema v{journal.schema_version}
        {journal.recovered_at_open > 0 && <>, {journal.recovered_at_open} recovered at open</>}
      </dd>
      <dt>Actions</dt>
      <dd>
        {actions.total} total, <span data-testid="status-actions-in-flight">{actions.in_flight}</span> in flight,{' '}
        <span className={actions.unknown > 0 ? 'attention' : undefined} data-testid="status-actions-unknown">
          {actions.unknown}
        </span>{' '}
        unknown
      </dd>
      <dt>Vault</dt>
      <dd>
        <span className={`badge vault-${status.vault.state}`} data-testid="status-vault-state">
          {status.vault.state}
        </span>
      </dd>
      {status.upstreams !== undefined && status.upstreams.length > 0 && (
        <>
          <dt>Upstream MCP servers</dt>
          <dd>
            <UpstreamList upstreams={status.upstreams} />
          </dd>
        </>
      )}
    </dl>
  );
}

/** One line per configured upstream server: its state, and for a crashing one its restarts and last failure. */
function UpstreamList({ upstreams }: { upstreams: NonNullable<BrokerStatus['upstreams']> }) {
  return (
    <ul className="upstreams" data-testid="status-upstreams">
      {upstreams.map((u) => (
        <li key={u.server} data-testid={`status-upstream-${u.server}`}>
          <code>{u.server}</code> <span className="muted">({u.transport})</span>{' '}
          <span
            className={u.state === 'backoff' || u.state === 'failed' ? 'badge attention' : 'badge'}
            data-testid={`status-upstream-${u.server}-state`}
          >
            {u.state}
          </span>
          {u.auth === 'required' && (
            <span
              className="badge attention"
              title={`Run: postern mcp-servers authorize ${u.server}`}
              data-testid={`status-upstream-${u.server}-auth`}
            >
              authorization required
            </span>
          )}
          {u.pid !== undefined && <span className="muted"> pid {u.pid}</span>}
          {u.restarts > 0 && <span> · {u.restarts} restarts</span>}
          {u.retry_at_ms !== undefined && (
            <span> · may start again at {new Date(u.retry_at_ms).toLocaleTimeString()}</span>
          )}
          {u.last_error !== undefined && (
            <span className="attention" title={u.last_error.detail} data-testid={`status-upstream-${u.server}-error`}>
              {' '}
              · last: {u.last_error.code} ({u.last_error.detail})
            </span>
          )}
        </li>
      ))}
    </ul>
  );
}
