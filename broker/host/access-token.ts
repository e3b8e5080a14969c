import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

const tokenBytes = 32;

/** A fresh secret: 32 random bytes, base64url (43 characters). */
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

/** The bearer token from an Authorization header, if that is what it carries. */
export function bearerToken(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1];
}

/** What presenting the printed sign-in token gave: the session secret, or why not. */
export type SignInExchange = { ok: true; session: string } | { ok: false; reason: 'wrong' | 'used' };

/**
 * The operator's two secrets for one run of the host. The sign-in token is printed (in the
 * operator URL) and is good for exactly one exchange; it ends up in the browser's history file,
 * which a same-user agent can read, so it must be dead by then. The session secret it is
 * exchanged for never appears in a URL or a cookie: the browser keeps it in its origin's
 * sessionStorage and sends it as `Authorization: Bearer`, so no other port ever receives it.
 */
export class OperatorSecrets {
  private session: string | undefined;

  constructor(private readonly signInToken: string) {}

  /**
   * A second exchange is refused even with the right token: the person who opened the URL first
   * holds the only session, and one who comes second learns that someone else did.
   */
  exchange(presented: string): SignInExchange {
    if (!tokensEqual(this.signInToken, presented)) return { ok: false, reason: 'wrong' };
    if (this.session !== undefined) return { ok: false, reason: 'used' };
    this.session = mintAccessToken();
    return { ok: true, session: this.session };
  }

  /** True only for the session secret: never for the sign-in token, before or after its exchange. */
  sessionValid(presented: string | undefined): boolean {
    if (presented === undefined) return false;
    // Compared even before any exchange, against a throwaway, so timing says nothing about state.
    const matched = tokensEqual(this.session ?? this.signInToken + '\0unused', presented);
    return matched && this.session !== undefined;
  }
}
