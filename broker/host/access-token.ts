import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

const tokenBytes = 32;

/**
 * A per-run secret: 32 random bytes, base64url. It is printed once, in the operator URL on the
 * daemon's own stdout, and never logged anywhere else.
 */
export function mintAccessToken(): string {
  return randomBytes(tokenBytes).toString('base64url');
}

/**
 * Constant-time comparison. Both sides are hashed first so the comparison has a fixed length and
 * does not even leak the length of a wrong guess.
 */
export function tokensEqual(expected: string, presented: string): boolean {
  const a = createHash('sha256').update(expected, 'utf8').digest();
  const b = createHash('sha256').update(presented, 'utf8').digest();
  return timingSafeEqual(a, b);
}

/** Parses a Cookie header into name → value, keeping the first occurrence of each name. */
export function parseCookies(header: string | undefined): Map<string, string> {
  const cookies = new Map<string, string>();
  if (header === undefined) return cookies;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    const name = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (name !== '' && !cookies.has(name)) cookies.set(name, value);
  }
  return cookies;
}

/** The bearer token from an Authorization header, if that is what it carries. */
export function bearerToken(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1];
}
