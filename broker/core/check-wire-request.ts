/**
 * The last look at a request before DISPATCH_STARTED, credential already injected: would the HTTP
 * client refuse it? undici validates method, path and headers only inside `dispatch()`, i.e. after
 * the durable boundary, where a refusal can no longer be told from a send (the action would be
 * recorded unknown and block its lane). So every rule undici applies is applied here first, and
 * stricter: RFC 9110 tokens and field-values, a path of visible ASCII only. The answer names the
 * part that failed and never repeats a value (it may hold the secret).
 */
export type WireRequestCheck =
  { readonly ok: true } | { readonly ok: false; readonly field: string; readonly why: string };

/** RFC 9110 token (tchar+), bounded. Header names and methods. */
const token = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,256}$/;
/**
 * RFC 9110 field-value without obs-text: empty, or visible ASCII at both ends with visible ASCII,
 * SP and HTAB between. obs-text (0x80-0xFF) is legal but undici sends strings as latin1 and a
 * remote may read them as anything, so it is refused; any char above 0xFF cannot be sent at all.
 */
const fieldValue = /^(?:[\x21-\x7e](?:[\t\x20-\x7e]*[\x21-\x7e])?)?$/;
/** A path as sent: origin-form, visible ASCII only (undici accepts 0x21-0xFF; latin1 is not a URL). */
const wirePath = /^\/[\x21-\x7e]*$/;
/**
 * Headers undici itself interprets or refuses (request.js processHeader): framing and connection
 * control belong to the client; an agent never sets them (checkHttpRequest) and a route must not either.
 */
const clientHeaders: ReadonlySet<string> = new Set([
  'host',
  'content-length',
  'transfer-encoding',
  'keep-alive',
  'upgrade',
  'connection',
  'expect',
  'te',
]);

export function isHttpToken(value: string): boolean {
  return token.test(value);
}

/** True when `value` may be sent as a header value unchanged (see fieldValue). */
export function isFieldValue(value: string): boolean {
  return fieldValue.test(value);
}

export function checkWireRequest(
  method: string,
  path: string,
  headers: ReadonlyArray<readonly [string, string]>,
): WireRequestCheck {
  if (!token.test(method)) return { ok: false, field: 'method', why: 'the method is not an HTTP token' };
  if (path.startsWith('//') || !wirePath.test(path) || path.includes('#')) {
    return { ok: false, field: 'path', why: 'the path is not an origin-form path of visible ASCII characters' };
  }
  for (const [name, value] of headers) {
    if (!token.test(name)) return { ok: false, field: 'headers', why: 'a header name is not an HTTP token' };
    const lower = name.toLowerCase();
    const field = `headers.${lower}`;
    if (clientHeaders.has(lower)) return { ok: false, field, why: 'this header is reserved to the HTTP client' };
    if (!fieldValue.test(value)) {
      const why =
        'the header value has a character outside visible ASCII, space and tab, or leading or trailing whitespace';
      return { ok: false, field, why };
    }
  }
  return { ok: true };
}
