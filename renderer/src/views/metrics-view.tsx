import { useMemo } from 'react';
import { useAppStore } from '../store/app-store.js';
import { barPercent, phaseOutcomeGrid } from '../store/metrics-reducer.js';
import { usePolling } from './use-polling.js';

/** How often the metrics are read again while the view is shown. */
export const metricsRefreshMs = 2_000;

/**
 * Metrics: actions by phase × outcome, each pair its own cell with a bar (connection_setup /
 * not_attempted and remote_execution / unknown are different alarms, never one "failures" count),
 * then the codes.
 */
export function MetricsView() {
  const view = useAppStore((state) => state.metricsView);
  const refresh = useAppStore((state) => state.refreshMetrics);
  usePolling(refresh, metricsRefreshMs);
  const metrics = view.metrics;
  const grid = useMemo(() => phaseOutcomeGrid(metrics?.by_phase_outcome ?? []), [metrics]);
  return (
    <section className="panel metrics" aria-labelledby="metrics-heading" data-testid="metrics-view">
      <header className="panel-header">
        <h2 id="metrics-heading">Metrics</h2>
        <span className="muted" data-testid="metrics-total">
          {metrics === null ? 'loading…' : `${metrics.total.toLocaleString('en-US')} actions · ${metrics.open.toLocaleString('en-US')} open (not classified yet)`}
        </span>
      </header>
      {view.error !== null && (
        <div className="error" role="alert" data-testid="metrics-error">
          <strong>{view.error.code}</strong>
          <span>{view.error.message}</span>
        </div>
      )}
      {metrics !== null && (
        <>
          <h3>Phase × outcome</h3>
          <table className="phase-outcome" data-testid="phase-outcome">
            <thead>
              <tr>
                <th scope="col">Phase \ outcome</th>
                {grid.outcomes.map((o) => (
                  <th key={o} scope="col">
                    {o}
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {grid.phases.map((p) => (
                <tr key={p}>
                  <th scope="row">{p}</th>
                  {grid.outcomes.map((o) => {
                    const n = grid.count[p][o];
                    return (
                      <td key={o} data-testid={`cell-${p}-${o}`} data-count={n} className={n === 0 ? 'zero' : `outcome-${o}`}>
                        <span className="bar-track" aria-hidden="true">
                          <span className={`bar outcome-${o}`} style={{ width: `${barPercent(n, grid.max)}%` }} />
                        </span>
                        <span className="bar-count">{n.toLocaleString('en-US')}</span>
                      </td>
                    );
                  })}
                </tr>
              ))}
            </tbody>
          </table>
          <h3>Codes</h3>
          {metrics.by_code.length === 0 ? (
            <p className="muted">No action carries an error code.</p>
          ) : (
            <table className="codes" data-testid="metrics-codes">
              <tbody>
                {metrics.by_code.map((c) => (
                  <tr key={c.code}>
                    <th scope="row">
                      <code>{c.code}</code>
                    </th>
                    <td>{c.count.toLocaleString('en-US')}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </>
      )}
    </section>
  );
}
