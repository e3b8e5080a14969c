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

/**
 * Headers that describe the body's bytes as the remote sent them — their length, a digest of them, a validator of
 * the representation — delivered only when the agent's body is exactly those bytes (delivered-response.ts). Else
 * they describe bytes the agent did not get: the length of what the scrubber redacted, or of a compressed body it
 * withheld (a compression oracle), or an express-style `W/"len-sha1(body)"` ETag an agent can test guesses of the
 * redacted part against (THREAT-MODEL 1: "not through a digest or length oracle"). Only content-length, etag and
 * last-modified are allow-listed today; the rest are named so that allowing one later keeps this rule.
 */
export const representationHeaderNames: ReadonlySet<string> = new Set([
  'content-length',
  'content-range',
  'etag',
  'last-modified',
  'content-md5',
  'digest',
  'content-digest',
  'repr-digest',
]);

/**
 * The kept headers, each as the lines the remote sent (undici gives a repeated header as an array): the executor
 * scrubs each line on its own and all of them together before joining them (delivered-response.ts), so a secret a
 * remote splits over two lines of one header is seen whole.
 */
export function keptResponseHeaderLines(headers: IncomingHttpHeaders): Record<string, readonly string[]> {
  const kept: Record<string, readonly string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    if (!keptResponseHeaderNames.has(lower) || value === undefined) continue;
    // Whole values (undici bounds the header block): the executor scrubs first and cuts after, never the other way round.
    kept[lower] = Array.isArray(value) ? value : [value];
  }
  return kept;
}

/** Repeated lines joined as RFC 9110 §5.3 combines them: what the channel reports and the agent receives. */
export function joinedHeaderLines(lines: Readonly<Record<string, readonly string[]>>): Record<string, string> {
  return Object.fromEntries(Object.entries(lines).map(([name, values]) => [name, values.join(', ')]));
}

export function keptResponseHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  return joinedHeaderLines(keptResponseHeaderLines(headers));
}
