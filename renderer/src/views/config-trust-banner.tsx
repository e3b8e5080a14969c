import { useAppStore } from '../store/app-store.js';
import { configTrustBanner } from '../store/config-reducer.js';
import { usePolling } from './use-polling.js';

/** How often the banner re-reads postern.yaml's trust (an acceptance from the CLI or another window). */
export const configTrustRefreshMs = 5_000;
/** An unlock verifies (or fails) the accepted copy's seal: the trust may change with the vault. */
const configTrustTopics = ['vault'] as const;

/**
 * Shown on every view while postern.yaml is not accepted (config-integrity.ts: no accepted copy where a person must
 * accept one, or a copy that failed its check): every route and SSH host is refused, however healthy Status looks.
 * Names why and links to Routes & hosts, where the person reads the file and accepts it.
 */
export function ConfigTrustBanner() {
  const pending = useAppStore((state) => state.configView.pending);
  const load = useAppStore((state) => state.refreshConfigPending);
  usePolling(load, configTrustRefreshMs, configTrustTopics);
  const banner = configTrustBanner(pending);
  if (banner === null) return null;
  return (
    <section className="integrity integrity-failed" aria-label="Configuration not accepted" data-testid="config-banner">
      <div className="integrity-text" role="alert">
        <strong data-testid="config-banner-code">CONFIG_UNTRUSTED</strong>{' '}
        <strong data-testid="config-banner-headline">{banner.headline}.</strong>{' '}
        <span data-testid="config-banner-detail">{banner.detail}</span>
      </div>
      <a href={banner.href} data-testid="config-banner-next">
        {banner.next}
      </a>
    </section>
  );
}
