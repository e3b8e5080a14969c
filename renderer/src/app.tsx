import { useState, type KeyboardEvent } from 'react';
import { useAppStore } from './store/app-store.js';
import { needsDecision } from './store/card-groups.js';
import { pendingSessionCount } from './store/sessions-reducer.js';
import { ApprovalsView } from './views/approvals-view.js';
import { SessionsView } from './views/sessions-view.js';
import { StatusPanel } from './views/status-panel.js';
import { usePolling } from './views/use-polling.js';

/**
 * How often the shell re-reads cards and sessions. The operator API has no push event yet, so the
 * app polls; half a second keeps "approved, waiting for #42" and a new card close to live.
 */
export const queueRefreshMs = 500;

const tabs = [
  { id: 'approvals', label: 'Approvals' },
  { id: 'sessions', label: 'Sessions' },
  { id: 'status', label: 'Status' },
] as const;
type TabId = (typeof tabs)[number]['id'];

/**
 * The tab shown first. Status, for now: the existing first-minute e2e (e2e/operator-ui.e2e.ts)
 * expects the broker's status on the opened page. The Approvals tab carries a live badge with the
 * cards that wait for a decision, so a waiting card is one click away.
 */
const initialTab: TabId = 'status';

export function App() {
  const [tab, setTab] = useState<TabId>(initialTab);
  const refreshApprovals = useAppStore((state) => state.refreshApprovals);
  const refreshSessions = useAppStore((state) => state.refreshSessions);
  // Both are polled whichever tab is shown, so the tabs' badges stay current.
  usePolling(refreshApprovals, queueRefreshMs);
  usePolling(refreshSessions, queueRefreshMs);
  const decisions = useAppStore((state) => state.approvalsView.cards.filter(needsDecision).length);
  const pendingSessions = useAppStore((state) => pendingSessionCount(state.sessionsView.sessions));
  const badges: Record<TabId, number> = { approvals: decisions, sessions: pendingSessions, status: 0 };

  const onKeyDown = (event: KeyboardEvent<HTMLDivElement>) => {
    const step = event.key === 'ArrowRight' ? 1 : event.key === 'ArrowLeft' ? -1 : 0;
    if (step === 0) return;
    const index = tabs.findIndex((t) => t.id === tab);
    const next = tabs[(index + step + tabs.length) % tabs.length];
    if (next === undefined) return;
    setTab(next.id);
    document.getElementById(`tab-${next.id}`)?.focus();
  };

  return (
    <div className="shell">
      <header className="topbar">
        <h1>Postern</h1>
        <span className="muted">operator console</span>
        <div className="tabs" role="tablist" aria-label="Views" onKeyDown={onKeyDown}>
          {tabs.map((t) => (
            <button
              key={t.id}
              id={`tab-${t.id}`}
              type="button"
              role="tab"
              aria-selected={tab === t.id}
              aria-controls={`panel-${t.id}`}
              tabIndex={tab === t.id ? 0 : -1}
              onClick={() => setTab(t.id)}
            >
              {t.label}
              {badges[t.id] > 0 && (
                <span className="tab-badge" data-testid={`tab-${t.id}-badge`} aria-label={`${badges[t.id]} waiting`}>
                  {badges[t.id]}
                </span>
              )}
            </button>
          ))}
        </div>
      </header>
      <main id={`panel-${tab}`} role="tabpanel" aria-labelledby={`tab-${tab}`}>
        {tab === 'approvals' && <ApprovalsView />}
        {tab === 'sessions' && <SessionsView />}
        {tab === 'status' && <StatusPanel />}
      </main>
    </div>
  );
}
