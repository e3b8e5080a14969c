import { useEffect } from 'react';
import type { BrokerStatus } from '../../../broker/contract/index.js';
import { useAppStore } from '../store/app-store.js';
import { staleStatus } from '../store/status-reducer.js';
import { clockTime, dateTime } from '../../../broker/contract/time-words.js';
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
  const stale = staleStatus(view);

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
          {stale !== null && (
            <span className="muted" data-testid="status-stale">
              Below is the last status received
              {stale.asOfMs === null ? '' : `, as of ${clockTime(stale.asOfMs)}`}: a snapshot, not the broker&apos;s
              state now (its vault, journal and actions may have changed since, or it may be gone).
            </span>
          )}
        </div>
      )}
      {view.status !== null && stale === null && (
        <VaultStepBanner
          step={vaultNextStep(view.status.vault, view.status.data_dir)}
          testId="status-vault-lock-banner"
        />
      )}
      {view.status === null ? (
        view.error === null && <p className="muted">Loading…</p>
      ) : (
        <StatusDetails status={view.status} asOfMs={stale === null ? undefined : stale.asOfMs} />
      )}
    </section>
  );
}

/**
 * The status's facts. `asOfMs` given: a kept snapshot (the last refresh failed) — greyed, its counts said "as of" their
 * time, and the states that only a live broker can vouch for (journal open, vault unlocked, an upstream running) not
 * shown at all.
 */
function StatusDetails({ status, asOfMs }: { status: BrokerStatus; asOfMs: number | null | undefined }) {
  const { journal, actions } = status;
  const stale = asOfMs !== undefined;
  const asOf = asOfMs === undefined || asOfMs === null ? '' : ` (as of ${clockTime(asOfMs)})`;
  return (
    <dl className={stale ? 'facts stale' : 'facts'} data-testid="status-details" data-stale={stale}>
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
        <time dateTime={new Date(status.started_at_ms).toISOString()}>{dateTime(status.started_at_ms)}</time>
      </dd>
      <dt>Data directory</dt>
      <dd>
        <code data-testid="status-data-dir">{status.data_dir}</code>
      </dd>
      <dt>Journal</dt>
      <dd>
        {stale ? (
          <NotKnown testId="status-journal-state" />
        ) : (
          <span className={`badge journal-${journal.state}`} data-testid="status-journal-state">
            {journal.state}
          </span>
        )}{' '}
        <span data-testid="status-journal-events">{journal.events}</span> events, last seq{' '}
        <span data-testid="status-journal-last-seq">{journal.last_seq}</span>, schema v{journal.schema_version}
        {journal.recovered_at_open > 0 && <>, {journal.recovered_at_open} recovered at open</>}
        {asOf}
        {!stale && journal.state === 'closing' && (
          <span className="muted" data-testid="status-journal-closing">
            {' '}
            · the broker is stopping: new actions are refused, accepted ones still commit
          </span>
        )}
        {!stale && <WriterThreadWarning thread={journal.writer_thread} />}
      </dd>
      <dt>Actions</dt>
      <dd>
        {actions.total} total, <span data-testid="status-actions-in-flight">{actions.in_flight}</span> in flight,{' '}
        <span className={actions.unknown > 0 ? 'attention' : undefined} data-testid="status-actions-unknown">
          {actions.unknown}
        </span>{' '}
        unknown{asOf}
      </dd>
      <dt>Vault</dt>
      <dd>
        {stale ? (
          <NotKnown testId="status-vault-state" />
        ) : (
          <span className={`badge vault-${status.vault.state}`} data-testid="status-vault-state">
            {status.vault.state}
          </span>
        )}
      </dd>
      {!stale && status.upstreams !== undefined && status.upstreams.length > 0 && (
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

/**
 * A writer thread that failed to start, as a warning: the journal commits every batch on the broker's event loop for
 * the rest of the run (slower under load, nothing lost; docs/journal-writer-thread.md). Its other states say nothing.
 */
function WriterThreadWarning({ thread }: { thread: BrokerStatus['journal']['writer_thread'] }) {
  if (thread?.state !== 'failed_to_start') return null;
  const { error } = thread;
  return (
    <div className="status-warning" role="status" data-testid="status-journal-writer-thread">
      Writer thread failed to start
      {error !== undefined && (
        <>
          {' '}
          (<code data-testid="status-journal-writer-thread-code">{error.code}</code>: {error.detail}) at{' '}
          {clockTime(error.at_ms)}
        </>
      )}
      ; commits run on the event loop (slower under load, nothing lost)
    </div>
  );
}

/** A live state the broker cannot vouch for now: it does not answer. */
function NotKnown({ testId }: { testId: string }) {
  return (
    <span className="badge" data-testid={testId} data-state="not_known">
      not known: the broker does not answer
    </span>
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
          {u.retry_at_ms !== undefined && <span> · may start again at {clockTime(u.retry_at_ms)}</span>}
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
