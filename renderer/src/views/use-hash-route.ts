import { useEffect, useMemo, useState } from 'react';
import { parseHashRoute, type HashRoute } from '../store/hash-route.js';

/** What of the window the hash route reads and listens to. */
export interface HashWindow {
  readonly location: Pick<Location, 'hash'>;
  addEventListener(type: 'hashchange', listener: () => void): void;
  removeEventListener(type: 'hashchange', listener: () => void): void;
}

/**
 * Calls `onHash` with the address's hash on every hashchange, and once at once: the first render read the hash before
 * this listener existed, and a navigation in between (a link followed, or a script's, while the page was mounting)
 * fired its only event to nobody. Answers the unsubscribe.
 */
export function watchHash(win: HashWindow, onHash: (hash: string) => void): () => void {
  const onChange = () => onHash(win.location.hash);
  win.addEventListener('hashchange', onChange);
  onChange();
  return () => win.removeEventListener('hashchange', onChange);
}

/** The route the address's hash names, kept current on every hashchange (links, back, forward). */
export function useHashRoute(): HashRoute {
  const [hash, setHash] = useState(() => window.location.hash);
  // The same hash sets the same string: React keeps the render, and the route object, as they were.
  useEffect(() => watchHash(window, setHash), []);
  return useMemo(() => parseHashRoute(hash), [hash]);
}
