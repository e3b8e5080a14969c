import type { Classification, Envelope } from '../contract/index.js';

/**
 * The envelope's `error` for a classification that carries a code (none for a success): the same four facts and the
 * bounded message on every channel, the field a refusal names, and a remote's Retry-After when it gave one.
 */
export function envelopeError(
  c: Classification,
  message: string,
  field?: string,
): Pick<Envelope, 'error'> | Record<string, never> {
  if (c.code === null) return {};
  return {
    error: {
      code: c.code,
      phase: c.phase,
      outcome: c.outcome,
      retry: c.retry,
      message: message.slice(0, 1000),
      ...(field === undefined ? {} : { field }),
      ...(c.retry_after_ms === undefined ? {} : { retry_after_ms: c.retry_after_ms }),
    },
  };
}
