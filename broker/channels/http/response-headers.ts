import type { IncomingHttpHeaders } from 'node:http';

/**
 * Response headers kept in the result: an allow-list of non-secret ones. Set-Cookie,
 * WWW-Authenticate, Authentication-Info and anything unknown are dropped — a remote may put session
 * material in them and the agent must never receive credentials through the broker.
 */
export const keptResponseHeaderNames: ReadonlySet<string> = new Set([
  'content-type',
  'content-length',
  'content-encoding',
  'location',
  'retry-after',
  'etag',
  'last-modified',
  'date',
  'cache-control',
  'x-request-id',
  'request-id',
  'x-correlation-id',
  'idempotency-key',
  'idempotent-replayed',
  'operation-location',
  'proxy-status',
]);

export function keptResponseHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const kept: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    if (!keptResponseHeaderNames.has(lower) || value === undefined) continue;
    // Whole values (undici bounds the header block): the executor scrubs first and cuts after, never the other way round.
    kept[lower] = Array.isArray(value) ? value.join(', ') : value;
  }
  return kept;
}
