import { useAppStore } from '../store/app-store.js';
import { integrityLine, progressText } from '../store/integrity-reducer.js';
import { usePolling } from './use-polling.js';
import { dateTime } from '../../../broker/contract/time-words.js';

/** How often the banner re-reads the broker's last result (another window may have verified). */
export const integrityRefreshMs = 5_000;

/**
 * The journal's integrity as the last `audit verify` found it (broker/audit, over ciphertext): green with its counts
 * and time when the signatures were checked under the vault's key, amber "signing key not checked" when the vault was
 * locked, red with the first bad append position, or "not verified yet". "Verify now" runs it again over the live
 * journal file, read-only.
 */
export function IntegrityBanner() {
  const view = useAppStore((state) => state.integrityView);
  const load = useAppStore((state) => state.loadIntegrity);
  const verify = useAppStore((state) => state.verifyIntegrity);
  usePolling(load, integrityRefreshMs);
  const line = integrityLine(view.last);
  return (
    <section
      className={`integrity integrity-${line.tone}`}
      aria-label="Journal integrity"
      data-testid="integrity-banner"
      data-state={view.loaded ? line.tone : 'loading'}
    >
      <div className="integrity-text" role={line.tone === 'failed' ? 'alert' : 'status'}>
        <strong data-testid="integrity-headline">{view.loaded ? line.headline : 'Journal integrity: loading…'}</strong>{' '}
        {view.loaded && <span data-testid="integrity-detail">{line.detail}</span>}
        {view.loaded && line.next !== null && (
          <span className="integrity-next" data-testid="integrity-next">
            {' '}
            — {line.next}
          </span>
        )}
        {view.last !== null && (
          <span className="muted">
            {' '}
            · checked{' '}
            <time dateTime={new Date(view.last.checked_at_ms).toISOString()}>{dateTime(view.last.checked_at_ms)}</time>
          </span>
        )}
        {view.progress !== null && (
          <span className="integrity-progress" data-testid="integrity-progress">
            {' '}
            · verifying: {progressText(view.progress)}
            <progress max={Math.max(view.progress.total, 1)} value={view.progress.checked} />
          </span>
        )}
        {view.error !== null && (
          <span className="call-result error" data-testid="integrity-error">
            {' '}
            <strong>{view.error.code}</strong> {view.error.message}
          </span>
        )}
      </div>
      <button
        type="button"
        onClick={() => void verify()}
        disabled={view.verifying || view.progress !== null}
        data-testid="integrity-verify"
      >
        {view.verifying || view.progress !== null ? 'Verifying…' : 'Verify now'}
      </button>
    </section>
  );
}
