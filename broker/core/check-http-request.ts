import type { ErrorCode } from '../contract/index.js';
import { isFieldValue, isHttpToken } from './check-wire-request.js';
import { normalizeRequestPath } from './normalize-request-path.js';

/** The facts preflight validation needs, gathered by the caller without touching a secret or DNS. */
export interface HttpRequestFacts {
  readonly method: string;
  readonly path: string;
  readonly query: ReadonlyArray<readonly [string, string]>;
  readonly headers: ReadonlyArray<readonly [string, string]>;
  readonly bodyBytes: number;
  readonly idempotencyKey: string | undefined;
}

/** What the route allows and which header names the broker owns for it. */
export interface HttpRouteFacts {
  readonly methods: readonly string[];
  /** Lower-case header names the broker sets for this route (the injected one, the idempotency one). */
  readonly ownedHeaders: readonly string[];
  /** The query parameter the credential is injected into (kind query). */
  readonly ownedQueryParam: string | undefined;
  readonly hasIdempotencyContract: boolean;
}

export interface HttpRequestLimits {
  readonly bodyBytesMax: number;
  /** Path plus query, as sent. */
  readonly urlBytesMax: number;
  /** All agent header names and values together. */
  readonly headerBytesMax: number;
  readonly headersCountMax: number;
  readonly idempotencyKeyCharsMax: number;
}

export type HttpRequestCheck =
  | { readonly ok: true; readonly path: string }
  | { readonly ok: false; readonly code: ErrorCode; readonly field: string; readonly message: string };

/** Header names an agent may never set: credentials, routing and framing belong to the broker. */
const brokerHeaders: ReadonlySet<string> = new Set([
  'authorization',
  'proxy-authorization',
  'host',
  'cookie',
  'connection',
  'keep-alive',
  'transfer-encoding',
  'content-length',
  'te',
  'trailer',
  'upgrade',
  'expect',
]);
/**
 * Headers that would let the agent steer how the remote encodes or slices its answer. The broker
 * decides content coding (it sends `accept-encoding: identity` and scrubs what it can read), and a
 * reflected secret must never come back in pieces the scrubber cannot recognise: a gzip stream, or
 * 8 bytes per Range request assembled over many calls. Every route carries a credential, so these
 * are refused on every route.
 */
const steeringHeaders: ReadonlyMap<string, string> = new Map([
  [
    'accept-encoding',
    'the broker decides the content coding on credentialed routes (a compressed echo hides a secret from the scrubber)',
  ],
  ['range', 'ranges are refused: a reflected secret could be assembled from slices'],
  ['if-range', 'ranges are refused: a reflected secret could be assembled from slices'],
]);
/** A lone UTF-16 surrogate cannot be percent-encoded (encodeURIComponent throws) nor sent. */
const loneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Preflight validation of an HTTP action (DESIGN §3 validation rules). Pure: the caller supplies
 * facts, this decides. The first failure wins, with the field path the caller can fix; the message
 * never repeats a header value or a credential reference.
 */
export function checkHttpRequest(
  req: HttpRequestFacts,
  route: HttpRouteFacts,
  limits: HttpRequestLimits,
): HttpRequestCheck {
  const fail = (code: ErrorCode, field: string, message: string): HttpRequestCheck => ({
    ok: false,
    code,
    field,
    message,
  });
  if (!route.methods.includes(req.method))
    return fail('UNSUPPORTED_ACTION', 'method', `method ${safeToken(req.method)} is not allowed on this route`);
  const path = normalizeRequestPath(req.path);
  if (!path.ok) return fail('INVALID_TARGET', 'path', path.why);

  let urlBytes = utf8Bytes(path.path);
  const owned = route.ownedQueryParam === undefined ? undefined : queryNameKey(route.ownedQueryParam);
  for (const [i, [name, value]] of req.query.entries()) {
    if (name.length === 0) return fail('INVALID_ARGUMENT', `query[${i}]`, 'a query parameter needs a name');
    if (loneSurrogate.test(name) || loneSurrogate.test(value)) {
      return fail(
        'INVALID_ARGUMENT',
        `query.${safeToken(name)}`,
        'a query parameter is not well-formed Unicode (a lone surrogate)',
      );
    }
    if (owned !== undefined && queryNameKey(name) === owned) {
      const why =
        'this query parameter carries the credential and is set by the broker (names are compared ignoring case and encoding)';
      return fail('FORBIDDEN_HEADER', `query.${safeToken(name)}`, why);
    }
    // Encoded form is what goes on the wire; a percent-encoded byte is three.
    urlBytes += 2 + encodedBytes(name) + encodedBytes(value);
  }
  if (urlBytes > limits.urlBytesMax)
    return fail('PAYLOAD_LIMIT', 'path', `the URL exceeds ${limits.urlBytesMax} bytes`);

  if (req.headers.length > limits.headersCountMax)
    return fail('PAYLOAD_LIMIT', 'headers', `at most ${limits.headersCountMax} headers`);
  let headerBytes = 0;
  const seen = new Set<string>();
  for (const [name, value] of req.headers) {
    const lower = name.toLowerCase();
    if (!isHttpToken(name)) return fail('INVALID_ARGUMENT', 'headers', 'a header name is not a valid token');
    const field = `headers.${lower}`;
    if (brokerHeaders.has(lower) || lower.startsWith('proxy-') || route.ownedHeaders.includes(lower)) {
      return fail('FORBIDDEN_HEADER', field, 'this header is set by the broker, never by the agent');
    }
    const steering = steeringHeaders.get(lower);
    if (steering !== undefined) return fail('FORBIDDEN_HEADER', field, steering);
    if (seen.has(lower)) return fail('INVALID_ARGUMENT', field, 'a header is given twice');
    seen.add(lower);
    if (!isFieldValue(value)) {
      const why = 'a header value may hold only visible ASCII, space and tab, with no leading or trailing whitespace';
      return fail('INVALID_ARGUMENT', field, why);
    }
    headerBytes += utf8Bytes(name) + utf8Bytes(value) + 4;
  }
  if (headerBytes > limits.headerBytesMax)
    return fail('PAYLOAD_LIMIT', 'headers', `headers exceed ${limits.headerBytesMax} bytes`);

  if (req.bodyBytes > limits.bodyBytesMax)
    return fail('PAYLOAD_LIMIT', 'body', `the body exceeds ${limits.bodyBytesMax} bytes`);
  if (req.bodyBytes > 0 && (req.method === 'GET' || req.method === 'HEAD')) {
    return fail('INVALID_ARGUMENT', 'body', `${req.method} carries no body`);
  }

  if (req.idempotencyKey !== undefined) {
    if (!route.hasIdempotencyContract) {
      // Without a declared remote contract a key means nothing and is never added silently.
      return fail('INVALID_ARGUMENT', 'idempotency_key', 'this route declares no idempotency contract');
    }
    if (!/^[\x21-\x7e]+$/.test(req.idempotencyKey) || req.idempotencyKey.length > limits.idempotencyKeyCharsMax) {
      return fail(
        'INVALID_ARGUMENT',
        'idempotency_key',
        `an idempotency key is 1..${limits.idempotencyKeyCharsMax} visible ASCII characters`,
      );
    }
  }
  return { ok: true, path: path.path };
}

function safeToken(value: string): string {
  return isHttpToken(value) && value.length <= 32 ? value : '(invalid)';
}

/**
 * A query name as a lenient remote may read it: percent-decoded (until stable, bounded), case
 * folded, and with PHP's mangling (leading spaces dropped; space, '.' and '[' read as '_'). Two
 * names with the same key may reach the remote as the same parameter.
 */
function queryNameKey(name: string): string {
  let key = name;
  for (let round = 0; round < 3; round += 1) {
    const decoded = percentDecoded(key);
    if (decoded === key) break;
    key = decoded;
  }
  return key.toLowerCase().replace(/^ +/, '').replace(/[ .[]/g, '_');
}

function percentDecoded(value: string): string {
  try {
    return decodeURIComponent(value.replace(/\+/g, ' '));
  } catch {
    return value;
  }
}

function utf8Bytes(value: string): number {
  let bytes = 0;
  for (const ch of value) {
    const cp = ch.codePointAt(0) ?? 0;
    bytes += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
  }
  return bytes;
}

function encodedBytes(value: string): number {
  let bytes = 0;
  for (const ch of value) bytes += /[A-Za-z0-9\-._~]/.test(ch) ? 1 : 3 * utf8Bytes(ch);
  return bytes;
}
