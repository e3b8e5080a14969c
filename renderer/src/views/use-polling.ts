import { useEffect } from 'react';

/**
 * Calls `refresh` now and then every `everyMs` while mounted. The operator API has no push event
 * yet (the queue's onChange is not carried over HTTP or IPC), so the views poll; a slice folds a
 * poll that comes while its last one is in flight into one more read after it, so a slow broker is
 * never asked twice at once.
 */
export function usePolling(refresh: () => Promise<void>, everyMs: number): void {
  useEffect(() => {
    void refresh();
    const timer = window.setInterval(() => void refresh(), everyMs);
    return () => window.clearInterval(timer);
  }, [refresh, everyMs]);
}
