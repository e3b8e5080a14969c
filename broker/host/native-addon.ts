import { createRequire } from 'node:module';

/**
 * The project's own N-API addon (native/peercred): kernel facts Node does not expose (peer credentials,
 * non-dumpable, flock, listening TCP sockets by sock_diag). Loaded by each caller as loosely typed as a missing or older build may be; an error is
 * returned, not thrown, so each caller decides whether its absence fails closed (the lock) or warns (hardening).
 */
export function loadNativeAddon(): Record<string, unknown> | Error {
  try {
    return createRequire(import.meta.url)('postern-peercred') as Record<string, unknown>;
  } catch (error) {
    return error instanceof Error ? error : new Error(String(error));
  }
}
