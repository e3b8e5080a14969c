import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

const tokenBytes = 32;
/** Browser tabs signed in at once in one run; a further sign-in signs the oldest out. */
export const sessionsMax = 8;
const spentTokensKept = 16;

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
 * exchanged for never appears in a URL, a cookie or browser storage: the page keeps it in memory
 * (renderer/src/api/page-session.ts) and sends it as `Authorization: Bearer`, so no other port
 * ever receives it and no file holds it.
 */
export class OperatorSecrets {
  /** Sessions signed in this run, newest last; the oldest is signed out past sessionsMax. */
  private readonly sessions: string[] = [];
  /** Tokens already exchanged (the few most recent): presenting one again says "used", not "wrong". */
  private readonly spent: string[] = [];

  constructor(
    private signInToken: string,
    private readonly mint: () => string = mintAccessToken,
  ) {}

  /** The token the next sign-in must present (rotated by every exchange). */
  get currentToken(): string {
    return this.signInToken;
  }

  /**
   * One exchange per token: the token is spent and a fresh one takes its place (the host prints it on the
   * operator's own terminal), so a second tab or a new window signs in with the next printed URL and never
   * with a URL that a browser history file, readable by a same-user agent, already holds. A spent token
   * presented again is refused as used: the person whose URL was used first learns that someone did.
   */
  exchange(presented: string): SignInExchange {
    if (!tokensEqual(this.signInToken, presented)) {
      return { ok: false, reason: this.spent.some((t) => tokensEqual(t, presented)) ? 'used' : 'wrong' };
    }
    this.spent.push(this.signInToken);
    if (this.spent.length > spentTokensKept) this.spent.shift();
    this.signInToken = this.mint();
    const session = this.mint();
    this.sessions.push(session);
    if (this.sessions.length > sessionsMax) this.sessions.shift();
    return { ok: true, session };
  }

  /** True only for a session secret of this run: never for a sign-in token, before or after its exchange. */
  sessionValid(presented: string | undefined): boolean {
    if (presented === undefined) return false;
    // Every session is compared (constant time each), so timing says nothing about which one matched.
    let matched = false;
    for (const session of this.sessions) matched = tokensEqual(session, presented) || matched;
    return matched;
  }
}
