import { useEffect, useState, useSyncExternalStore, type KeyboardEvent } from 'react';
import type { OperatorSession } from './api/page-session.js';
import type { PagePassphrasePrompt } from './api/person-proof.js';
import { useAppStore } from './store/app-store.js';
import { approvalsTally, brokerStopped } from './store/approvals-tally.js';
import { backOf, tabChoiceHref, type HashRoute } from './store/hash-route.js';
import { consoleTabs, tabIds, tabLabel, type TabId } from './store/tabs.js';
import { pendingSessionCount, sessionApprovalUse } from './store/sessions-reducer.js';
import { tabKeyTarget } from './store/tab-keys.js';
import { ActionDetailView } from './views/action-detail-view.js';
import { ActivityView } from './views/activity-view.js';
import { ApprovalsView } from './views/approvals-view.js';
import { ConfigTrustBanner } from './views/config-trust-banner.js';
import { CredentialsView } from './views/credentials-view.js';
import { FirstRunStrip, FirstRunView } from './views/first-run-view.js';
import { IntegrityBanner } from './views/integrity-banner.js';
import { QuarantineBanner } from './views/quarantine-banner.js';
import { RoutesView } from './views/routes-view.js';
import { VaultLockedHint, VaultView } from './views/vault-view.js';
import { MetricsView } from './views/metrics-view.js';
import { SessionsView } from './views/sessions-view.js';
import { ProofDialog } from './views/proof-dialog.js';
import { SignInView } from './views/sign-in-view.js';
import { StatusPanel } from './views/status-panel.js';
import { useHashRoute } from './views/use-hash-route.js';
import { usePolling } from './views/use-polling.js';

/**
 * How often the shell re-reads cards and sessions while the broker's change stream is down (a
 * restart, a reconnect): half a second keeps "approved, waiting for #42" and a new card close to
 * live. While the stream is up the broker pushes a notice per change and these reads happen on a
 * notice, with a slow fallback poll (use-polling.ts livePollMs).
 */
export const queueRefreshMs = 500;
/** How often the shell re-reads the vault's state while the change stream is down. */
export const vaultRefreshMs = 2_000;
const queueTopics = ['approvals'] as const;
/**
 * A session's status changes with SESSION_* events ('sessions'), but its calls and how many are not sent yet move with
 * its actions' events, which publish 'activity' (every commit does): the card re-reads on both (coalesced, one read
 * in flight at most, as every refresh here).
 */
const sessionTopics = ['sessions', 'activity'] as const;
const credentialRequestTopics = ['credential_requests'] as const;
const vaultTopics = ['vault'] as const;

/**
 * The tab shown first. Status, for now: the existing first-minute e2e (e2e/operator-ui.e2e.ts)
 * expects the broker's status on the opened page. The Approvals tab carries a live badge with the
 * cards that wait for a decision, so a waiting card is one click away.
 */
const initialTab: TabId = 'status';

/**
 * The console. On the headless host (`session` given) a tab that holds no session shows the sign-in view instead, and
 * the console once it is signed in; inside Electron the bridge needs no session.
 */
export function App({
  session,
  prompt,
}: {
  session?: OperatorSession | undefined;
  /** The headless host's passphrase prompt (a decision from a tab that has not shown the passphrase asks it). */
  prompt?: PagePassphrasePrompt | undefined;
}) {
  const signedIn = useSyncExternalStore(
    (listener) => session?.subscribe(listener) ?? (() => undefined),
    () => session === undefined || session.secret() !== null,
  );
  return signedIn || session === undefined ? <Console prompt={prompt} /> : <SignInView session={session} />;
}

function Console({ prompt }: { prompt?: PagePassphrasePrompt | undefined }) {
  const route = useHashRoute();
  const [tab, setTab] = useRoutedTab(route);
  usePollingShellState();
  const badges = useTabBadges();
  return (
    <div className="shell">
      <header className="topbar">
        <h1>Postern</h1>
        <span className="muted">operator console</span>
        <TabList tab={tab} badges={badges} setTab={setTab} />
      </header>
      {prompt !== undefined && <ProofDialog prompt={prompt} />}
      <QuarantineBanner />
      <IntegrityBanner />
      <ConfigTrustBanner />
      <FirstRunStrip hidden={tab === 'welcome'} />
      <main id={`panel-${tab}`} role="tabpanel" aria-labelledby={`tab-${tab}`}>
        {route.kind === 'action' && (
          <ActionDetailView
            actionId={route.actionId}
            backHref={backOf(route, tab).href}
            backLabel={tabLabel(backOf(route, tab).tab)}
          />
        )}
        {route.kind !== 'action' && <TabView tab={tab} />}
      </main>
    </div>
  );
}

/**
 * The tab shown, kept in step with the address: #/<tab> selects a tab; #/action/<id> shows one action over its tab,
 * the one it was opened from when the address names it (`?from=approvals`: a reload keeps Approvals selected).
 */
function useRoutedTab(route: HashRoute): [TabId, (id: TabId) => void] {
  const [tab, setTabState] = useState<TabId>(() => routeTab(route) ?? initialTab);
  useEffect(() => {
    const named = routeTab(route);
    if (named !== null) setTabState(named);
  }, [route]);
  const setTab = (id: TabId) => {
    setTabState(id);
    // The address names the tab shown from the first click on, so a reload or a re-sign-in (which mounts the console
    // again from the address) returns to it, and back steps through the tabs shown.
    const href = tabChoiceHref(route, id);
    if (href !== null) window.location.hash = href;
  };
  return [tab, setTab];
}

/** Cards, sessions and the vault are refreshed whichever tab is shown, so the badges and the vault hint stay current. */
function usePollingShellState(): void {
  const refreshApprovals = useAppStore((state) => state.refreshApprovals);
  const refreshSessions = useAppStore((state) => state.refreshSessions);
  usePolling(refreshApprovals, queueRefreshMs, queueTopics);
  usePolling(refreshSessions, queueRefreshMs, sessionTopics);
  // An agent's request for a credential waits for a person like a card: it counts on the Approvals badge.
  const refreshCredentialRequests = useAppStore((state) => state.refreshCredentialRequests);
  usePolling(refreshCredentialRequests, queueRefreshMs, credentialRequestTopics);
  // The vault's state drives the Approvals hint and the Vault tab; it changes rarely (unlock, lock, idle).
  const refreshVault = useAppStore((state) => state.refreshVault);
  usePolling(refreshVault, vaultRefreshMs, vaultTopics);
}

function useTabBadges(): Record<TabId, number> {
  // The same tally as the Approvals panel's header (its "need you"), so the two never disagree; 0 while the broker is
  // stopped, since nothing can be decided then.
  const decisions = useAppStore(
    (state) =>
      approvalsTally(
        state.approvalsView.cards,
        state.credentialRequestsView.requests.filter((r) => r.status === 'pending').length,
        brokerStopped(state.approvalsView),
      ).needYou,
  );
  // A pending session counts only where approving it would change something (a route or host with approval: session).
  const pendingSessions = useAppStore((state) =>
    pendingSessionCount(state.sessionsView.sessions, sessionApprovalUse(state.configView.config)),
  );
  return {
    approvals: decisions,
    sessions: pendingSessions,
    status: 0,
    activity: 0,
    metrics: 0,
    vault: 0,
    credentials: 0,
    routes: 0,
    welcome: 0,
  };
}

function TabList({ tab, badges, setTab }: { tab: TabId; badges: Record<TabId, number>; setTab(id: TabId): void }) {
  // Arrows step, Home and End go to the first and the last tab (WAI-ARIA tabs); the page does not scroll for them.
  const onKeyDown = (event: KeyboardEvent<HTMLDivElement>) => {
    const target = tabKeyTarget(
      event.key,
      consoleTabs.findIndex((t) => t.id === tab),
      consoleTabs.length,
    );
    const next = target === null ? undefined : consoleTabs[target];
    if (next === undefined) return;
    event.preventDefault();
    setTab(next.id);
    document.getElementById(`tab-${next.id}`)?.focus();
  };
  return (
    <div className="tabs" role="tablist" aria-label="Views" onKeyDown={onKeyDown}>
      {consoleTabs.map((t) => (
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
  );
}

function TabView({ tab }: { tab: TabId }) {
  switch (tab) {
    case 'approvals':
      return (
        <>
          <VaultLockedHint />
          <ApprovalsView />
        </>
      );
    case 'sessions':
      return <SessionsView />;
    case 'status':
      return <StatusPanel />;
    case 'activity':
      return <ActivityView />;
    case 'metrics':
      return <MetricsView />;
    case 'vault':
      return <VaultView />;
    case 'credentials':
      return <CredentialsView />;
    case 'routes':
      return <RoutesView />;
    case 'welcome':
      return <FirstRunView />;
  }
}

function routeTab(route: HashRoute): TabId | null {
  const named = route.kind === 'tab' ? route.tab : route.kind === 'action' ? route.from?.tab : undefined;
  return tabIds.find((id) => id === named) ?? null;
}
