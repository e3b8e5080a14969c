import { useCallback, useEffect, useSyncExternalStore } from 'react';
import { changeHubOf, type ChangeTopic } from '../api/change-feed.js';

/** While the broker's pushes arrive, polling is only a safety net for a missed notice. */
export const livePollMs = 10_000;

/**
 * `?pollFloorMs=N` in the page's address slows every poll to at least N ms. It can only make
 * polling slower (a test proves a card came by push, not by a poll), never faster.
 */
export function pollFloorMs(search: string): number {
  const value = Number(new URLSearchParams(search).get('pollFloorMs'));
  return Number.isSafeInteger(value) && value > 0 ? value : 0;
}

const floorMs = typeof window === 'undefined' ? 0 : pollFloorMs(window.location.search);

/** The interval a view polls at: `everyMs` while the push channel is down, the slow fallback while it is up. */
export function pollIntervalMs(everyMs: number, live: boolean, floor: number): number {
  return Math.max(live ? Math.max(everyMs, livePollMs) : everyMs, floor);
}

/**
 * Calls `refresh` now, again on every pushed change notice naming one of `topics`, and every
 * `everyMs` as a fallback: every `everyMs` while the push channel is down (a daemon restarting, a
 * dropped stream reconnecting with backoff), only every livePollMs while it is up. Without topics
 * it polls as before. A slice folds a refresh that comes while its last one is in flight into one
 * more read after it, so a burst of notices never asks a slow broker twice at once.
 */
export function usePolling(refresh: () => Promise<void>, everyMs: number, topics: readonly ChangeTopic[] = []): void {
  const pushed = topics.length > 0;
  const hub = pushed ? changeHubOf(window) : undefined;
  const subscribeLive = useCallback((onChange: () => void) => hub?.onLive(onChange) ?? (() => undefined), [hub]);
  const liveNow = (): boolean => hub?.live() ?? false;
  // The same reading for a render outside a browser (react-dom/server: the views' render tests).
  const live = useSyncExternalStore(subscribeLive, liveNow, liveNow);
  const topicKey = topics.join(',');
  useEffect(() => {
    if (hub === undefined) return undefined;
    const wanted = new Set(topicKey.split(','));
    return hub.subscribe((notice) => {
      if (notice.topics.some((topic) => wanted.has(topic))) void refresh();
    });
  }, [hub, refresh, topicKey]);
  // Runs again when the channel comes up or goes down: the read at its start is the catch-up for
  // whatever changed while no notice could arrive.
  useEffect(() => {
    void refresh();
    const timer = window.setInterval(() => void refresh(), pollIntervalMs(everyMs, live, floorMs));
    return () => window.clearInterval(timer);
  }, [refresh, everyMs, live]);
}
