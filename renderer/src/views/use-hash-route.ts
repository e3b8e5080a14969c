import { useEffect, useState } from 'react';
import { parseHashRoute, type HashRoute } from '../store/hash-route.js';

/** The route the address's hash names, kept current on every hashchange (links, back, forward). */
export function useHashRoute(): HashRoute {
  const [route, setRoute] = useState<HashRoute>(() => parseHashRoute(window.location.hash));
  useEffect(() => {
    const onChange = () => setRoute(parseHashRoute(window.location.hash));
    window.addEventListener('hashchange', onChange);
    return () => window.removeEventListener('hashchange', onChange);
  }, []);
  return route;
}
