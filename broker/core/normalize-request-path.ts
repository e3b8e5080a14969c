/**
 * Normalizes the path an agent asked for, relative to its route's base, or says why it cannot be
 * sent. The agent names a route and a path; it must never be able to name another host or climb
 * out of the route's base path, so anything that a server or proxy might decode into a different
 * location is refused instead of "fixed": dot segments (plain or percent-encoded), encoded slashes
 * and backslashes, backslashes, empty segments, absolute URLs and `//host` forms.
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
        c += 2;
        continue;
      }
      if (ch === '\\') return { ok: false, why: 'the path has a backslash' };
      if (!pchar.test(ch)) return { ok: false, why: 'the path has a character that must be percent-encoded' };
    }
  }
  return { ok: true, path };
}

/** Joins a base path ('/v1' or '/') and a normalized request path without doubling the slash. */
export function joinBasePath(basePath: string, requestPath: string): string {
  const base = basePath.endsWith('/') ? basePath.slice(0, -1) : basePath;
  return `${base}${requestPath}`;
}
