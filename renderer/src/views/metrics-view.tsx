import { useMemo } from 'react';
import { useAppStore } from '../store/app-store.js';
import {
  barPercent,
  decisionMeaning,
  decisionRows,
  phaseOutcomeGrid,
  rateLines,
  sparklinePoints,
  type Metrics,
} from '../store/metrics-reducer.js';
import { usePolling } from './use-polling.js';
import { clockTime } from '../../../broker/contract/time-words.js';

/** How often the metrics are read again while the view is shown. */
export const metricsRefreshMs = 2_000;

/**
 * Metrics: actions by phase × outcome, each pair its own cell with a bar (connection_setup /
 * not_attempted and remote_execution / unknown are different alarms, never one "failures" count),
 * then the decisions that closed actions before dispatch (a person's rejection is not a failure of
 * credential_injection), the rate per minute as sparklines, then the codes.
 */
export function MetricsView() {
  const view = useAppStore((state) => state.metricsView);
  const refresh = useAppStore((state) => state.refreshMetrics);
  usePolling(refresh, metricsRefreshMs);
  const metrics = view.metrics;
  return (
    <section className="panel metrics" aria-labelledby="metrics-heading" data-testid="metrics-view">
      <header className="panel-header">
        <h2 id="metrics-heading">Metrics</h2>
        <span className="muted" data-testid="metrics-total">
          {metrics === null
            ? 'loading…'
            : `${metrics.total.toLocaleString('en-US')} actions · ${metrics.open.toLocaleString('en-US')} open (not classified yet)`}
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
          <PhaseOutcome byPhaseOutcome={metrics.by_phase_outcome} />
          <Decisions decisions={metrics.decisions} />
          <Rate rate={metrics.rate} />
          <Codes byCode={metrics.by_code} />
        </>
      )}
    </section>
  );
}

/** Each phase × outcome pair its own cell, its bar scaled to the largest cell. */
function PhaseOutcome({ byPhaseOutcome }: { byPhaseOutcome: Metrics['by_phase_outcome'] }) {
  const grid = useMemo(() => phaseOutcomeGrid(byPhaseOutcome), [byPhaseOutcome]);
  return (
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
                  <td
                    key={o}
                    data-testid={`cell-${p}-${o}`}
                    data-count={n}
                    className={n === 0 ? 'zero' : `outcome-${o}`}
                  >
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
    </>
  );
}

function Codes({ byCode }: { byCode: Metrics['by_code'] }) {
  return (
    <>
      <h3>Codes</h3>
      {byCode.length === 0 ? (
        <p className="muted">No action carries an error code.</p>
      ) : (
        <table className="codes" data-testid="metrics-codes">
          <tbody>
            {byCode.map((c) => (
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
  );
}

/** Actions closed before dispatch by a decision or a restart: their own breakdown, never counted as a failed phase. */
function Decisions({ decisions }: { decisions: Metrics['decisions'] }) {
  const rows = decisionRows(decisions);
  return (
    <>
      <h3>Closed before dispatch by a decision or a restart</h3>
      <p className="muted">Nothing was sent for these; they are decisions or restarts, not failures of a phase.</p>
      <table className="codes decisions" data-testid="metrics-decisions">
        <tbody>
          {rows.map((row) => (
            <tr key={row.decision} data-testid={`decision-${row.decision}`} data-count={row.count}>
              <th scope="row">{row.decision}</th>
              <td>{row.count.toLocaleString('en-US')}</td>
              <td className="muted">{decisionMeaning[row.decision]}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}

const sparkWidth = 240;
const sparkHeight = 28;

/** Per-minute counts for the hour up to the newest settled or running action, one inline SVG sparkline per outcome and decision. */
function Rate({ rate }: { rate: Metrics['rate'] }) {
  const lines = rateLines(rate);
  const until = rate.until_ms;
  return (
    <>
      <h3>Rate per minute</h3>
      {until === null || lines.length === 0 ? (
        <p className="muted" data-testid="metrics-rate-empty">
          No action has been classified yet.
        </p>
      ) : (
        <>
          <p className="muted">
            The hour up to the newest settled or running action (
            <time dateTime={new Date(until).toISOString()}>{clockTime(until)}</time>), by the time each action last
            changed.
          </p>
          <table className="codes rate" data-testid="metrics-rate">
            <tbody>
              {lines.map((line) => (
                <tr key={line.key} data-testid={`rate-${line.key}`} data-total={line.total}>
                  <th scope="row">{line.label}</th>
                  <td>
                    <svg
                      className={`sparkline ${line.key}`}
                      width={sparkWidth}
                      height={sparkHeight}
                      viewBox={`0 0 ${sparkWidth} ${sparkHeight}`}
                      role="img"
                      aria-label={`${line.label}: ${line.total} in the hour, per minute`}
                    >
                      <polyline
                        points={sparklinePoints(line.counts, sparkWidth, sparkHeight - 2)}
                        fill="none"
                        strokeWidth="1.5"
                      />
                    </svg>
                  </td>
                  <td>{line.total.toLocaleString('en-US')}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
    </>
  );
}
