import { useAppStore } from '../store/app-store.js';
import { quarantineWords } from '../store/quarantine-reducer.js';
import { usePolling } from './use-polling.js';

/** How often the banner re-reads the broker's anchor state (a re-adoption from the CLI or another window). */
export const quarantineRefreshMs = 5_000;

/**
 * Shown only while the broker is quarantined: its start found the journal disagreeing with the signed integrity
 * anchor kept outside the data directory (docs/audit.md). Every action tool is refused until a person re-adopts the
 * journal as it is; the stable code says which failure, so a person can look it up and act on the right one.
 */
export function QuarantineBanner() {
  const view = useAppStore((state) => state.quarantineView);
  const load = useAppStore((state) => state.loadQuarantine);
  const readopt = useAppStore((state) => state.readoptJournal);
  usePolling(load, quarantineRefreshMs);
  const report = view.report;
  if (report === null || report.state !== 'quarantined' || report.code === null) return null;
  return (
    <section className="integrity integrity-failed" aria-label="Journal quarantined" data-testid="quarantine-banner">
      <div className="integrity-text" role="alert">
        <strong data-testid="quarantine-code">{report.code}</strong>{' '}
        <span data-testid="quarantine-words">{quarantineWords[report.code]}</span>{' '}
        <span className="muted" data-testid="quarantine-detail">
          ({report.detail}.) Agents are refused with JOURNAL_QUARANTINED until you re-adopt the journal as it is now.
          Keep a copy of the data directory first if you want to investigate.
        </span>
        {view.error !== null && (
          <span className="call-result error" data-testid="quarantine-error">
            {' '}
            <strong>{view.error.code}</strong> {view.error.message}
          </span>
        )}
      </div>
      <button type="button" onClick={() => void readopt()} disabled={view.readopting} data-testid="quarantine-readopt">
        {view.readopting ? 'Re-adopting…' : 'Re-adopt the journal as it is'}
      </button>
    </section>
  );
}
