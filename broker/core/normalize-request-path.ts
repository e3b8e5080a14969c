/**
 * Normalizes the path an agent asked for, relative to its route's base, or says why it cannot be
 * sent. The agent names a route and a path; it must never be able to name another host or climb
 * out of the route's base path, so anything that a server or proxy might decode into a different
 * location is refused instead of "fixed": dot segments (plain or percent-encoded), encoded slashes
 * and backslashes, backslashes, empty segments, absolute URLs and `//host` forms; and encodings a
 * server or proxy may decode differently from us: double encoding (`%252e` becomes `%2e`, then `.`,
 * in a server that decodes twice) and percent-encoded bytes that are not shortest-form UTF-8
 * (overlong `%c0%ae` is `.` to a lenient decoder, invalid to a strict one).
 */
export type PathCheck = { readonly ok: true; readonly path: string } | { readonly ok: false; readonly why: string };

/** RFC 3986 pchar minus pct-encoded (checked separately): unreserved, sub-delims, ':' and '@'. */
const pchar = /^[A-Za-z0-9\-._~!$&'()*+,;=:@]$/;
const hex = /^[0-9A-Fa-f]{2}$/;
/** Encoded characters that change a path's meaning once a server decodes them. */
const forbiddenEncoded: ReadonlySet<string> = new Set(['2F', '5C', '00', '2E']);

export function normalizeRequestPath(path: string): PathCheck {
  if (path.length === 0 || !path.startsWith('/')) return { ok: false, why: 'the path must start with /' };
  if (path.startsWith('//')) return { ok: false, why: 'the path must not name a host (//host)' };
  if (path === '/') return { ok: true, path };
  const segments = path.slice(1).split('/');
  for (const [i, segment] of segments.entries()) {
    // A trailing slash is a real, distinct resource name; an empty segment inside is not.
    if (segment === '' && i !== segments.length - 1) return { ok: false, why: 'the path has an empty segment (//)' };
    if (segment === '.' || segment === '..') return { ok: false, why: 'the path has a dot segment' };
    for (let c = 0; c < segment.length; c += 1) {
      const ch = segment.charAt(c);
      if (ch === '%') {
        const code = segment.slice(c + 1, c + 3);
        if (!hex.test(code)) return { ok: false, why: 'the path has a malformed percent-encoding' };
        if (forbiddenEncoded.has(code.toUpperCase())) {
          return { ok: false, why: 'the path has an encoded dot, slash, backslash or NUL' };
        }
        if (code === '25' && hex.test(segment.slice(c + 3, c + 5))) {
          return { ok: false, why: 'the path has a double percent-encoding (%25 followed by two hex digits)' };
        }
        c += 2;
        continue;
      }
      if (ch === '\\') return { ok: false, why: 'the path has a backslash' };
      if (!pchar.test(ch)) return { ok: false, why: unencodedWhy(segment.codePointAt(c) ?? 0) };
    }
    if (!isShortestFormUtf8(segmentBytes(segment))) {
      return { ok: false, why: 'the path has percent-encoded bytes that are not valid shortest-form UTF-8' };
    }
  }
  return { ok: true, path };
}

/**
 * Names the character and its encoding, so the caller can fix the call without guessing: "?" starts a query, which
 * goes in the `query` field (the broker encodes it); "#" starts a fragment, which is never sent. Only visible ASCII is
 * shown as itself: anything else (a control character, a look-alike letter) as U+XXXX, never raw in a message.
 */
function unencodedWhy(codePoint: number): string {
  if (codePoint === 0x3f)
    return 'the path has "?": a query goes in the query field (e.g. {"delay": "30000"}), not in path; a literal "?" in a path segment is %3F';
  if (codePoint === 0x23) return 'the path has "#": a fragment is never sent; a literal "#" in a path segment is %23';
  const name = `U+${codePoint.toString(16).toUpperCase().padStart(4, '0')}`;
  const shown = codePoint > 0x20 && codePoint < 0x7f ? `"${String.fromCodePoint(codePoint)}" (${name})` : name;
  const isSurrogate = codePoint >= 0xd800 && codePoint <= 0xdfff;
  const encoded = isSurrogate ? '' : ` as ${encodeURIComponent(String.fromCodePoint(codePoint))}`;
  return `the path has ${shown}, which must be percent-encoded${encoded}`;
}

/** The bytes a server gets by percent-decoding `segment` (already checked: ASCII and well-formed %XX only). */
function segmentBytes(segment: string): number[] {
  const bytes: number[] = [];
  for (let c = 0; c < segment.length; c += 1) {
    if (segment.charAt(c) === '%') {
      bytes.push(Number.parseInt(segment.slice(c + 1, c + 3), 16));
      c += 2;
    } else {
      bytes.push(segment.charCodeAt(c));
    }
  }
  return bytes;
}

/**
 * RFC 3629 well-formed UTF-8 (its table 3-7): no overlong forms, no surrogates, nothing above
 * U+10FFFF, no stray continuation or truncated sequence. The second byte's range is what rules
 * out overlongs (E0 needs A0.., F0 needs 90..), surrogates (ED stops at 9F) and > U+10FFFF (F4 stops at 8F).
 */
export function isShortestFormUtf8(bytes: readonly number[]): boolean {
  for (let i = 0; i < bytes.length;) {
    const b = bytes[i] ?? 0;
    let length: number;
    let low = 0x80;
    let high = 0xbf;
    if (b < 0x80) length = 1;
    else if (b >= 0xc2 && b <= 0xdf) length = 2;
    else if (b >= 0xe0 && b <= 0xef) {
      length = 3;
      if (b === 0xe0) low = 0xa0;
      if (b === 0xed) high = 0x9f;
    } else if (b >= 0xf0 && b <= 0xf4) {
      length = 4;
      if (b === 0xf0) low = 0x90;
      if (b === 0xf4) high = 0x8f;
    } else return false;
    if (i + length > bytes.length) return false;
    for (let k = 1; k < length; k += 1) {
      const next = bytes[i + k] ?? 0;
      const [min, max] = k === 1 ? [low, high] : [0x80, 0xbf];
      if (next < min || next > max) return false;
    }
    i += length;
  }
  return true;
}

/** Joins a base path ('/v1' or '/') and a normalized request path without doubling the slash. */
export function joinBasePath(basePath: string, requestPath: string): string {
  const base = basePath.endsWith('/') ? basePath.slice(0, -1) : basePath;
  return `${base}${requestPath}`;
}
