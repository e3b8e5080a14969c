import { createHash, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';

const tokenBytes = 32;
/**
 * Wrong codes one printed URL takes before it is spent. With 10^8 codes a process that read the URL (a browser's
 * command line is readable by every process of the user) signs in with odds of 3 in 10^8 per URL the person opens.
 */
export const signInCodeAttemptsMax = 3;
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

/**
 * The code printed beside each sign-in URL and never inside it: 8 random digits, shown as `1234-5678`. The person
 * types it into the page, so it reaches the broker through the keyboard and the terminal only, the two channels a
 * same-user agent cannot read (THREAT-MODEL: it reads argv, files and the clipboard).
 */
export function mintSignInCode(): string {
  const digits = String(randomInt(0, 100_000_000)).padStart(8, '0');
  return `${digits.slice(0, 4)}-${digits.slice(4)}`;
}

/** A typed code as compared: its digits only (the person may leave out the dash or add spaces). */
export function signInCodeDigits(typed: string): string {
  return typed.replace(/[\s-]/g, '');
}

/** The bearer token from an Authorization header, if that is what it carries. */
export function bearerToken(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1];
}

/** What presenting the printed sign-in token and code gave: the session secret, or why not. */
export type SignInExchange =
  | { ok: true; session: string }
  | { ok: false; reason: 'wrong' | 'used' }
  /** The token was the current one but the code was not: `attemptsLeft` 0 means the URL is spent now. */
  | { ok: false; reason: 'code_wrong'; attemptsLeft: number };

/** What a printed token is, without spending it: the current one, a spent one, or none of this run's. */
export type SignInTokenState = 'current' | 'used' | 'wrong';

/**
 * The operator's secrets for one run of the host. The sign-in token is printed (in the operator URL) and is good for
 * exactly one exchange; it ends up in the browser's history file and on the command line of `xdg-open` and the browser,
 * where every process of the user reads it, so it is not enough alone: the exchange also takes the sign-in code printed
 * beside the URL (never in it), which the person types. Once exchanged (or guessed at signInCodeAttemptsMax times) the
 * token is dead. The session secret they are
 * exchanged for never appears in a URL, a cookie or browser storage: the page keeps it in memory
 * (renderer/src/api/page-session.ts) and sends it as `Authorization: Bearer`, so no other port
 * ever receives it and no file holds it.
 */
export class OperatorSecrets {
  /**
   * Sessions signed in this run, newest last; the oldest is signed out past sessionsMax. `proven`: the session presented
   * the vault passphrase in this run (web-proof.ts), which the sign-in code alone never proves: whoever started the
   * daemon read the code.
   */
  private readonly sessions: { secret: string; proven: boolean }[] = [];
  /** Tokens already exchanged (the few most recent): presenting one again says "used", not "wrong". */
  private readonly spent: string[] = [];

  /** Wrong codes presented with the current token. */
  private codeMisses = 0;

  constructor(
    private signInToken: string,
    private signInCode: string = mintSignInCode(),
    private readonly mint: () => string = mintAccessToken,
    private readonly mintCode: () => string = mintSignInCode,
  ) {}

  /** The token the next sign-in must present (rotated by every exchange). */
  get currentToken(): string {
    return this.signInToken;
  }

  /** The code printed beside the current token (rotated with it). */
  get currentCode(): string {
    return this.signInCode;
  }

  /** Whether a token is this run's current one, a spent one, or neither; nothing is spent by asking. */
  tokenState(presented: string): SignInTokenState {
    if (tokensEqual(this.signInToken, presented)) return 'current';
    return this.spent.some((t) => tokensEqual(t, presented)) ? 'used' : 'wrong';
  }

  /**
   * One exchange per token: the token is spent and a fresh one takes its place (the host prints it on the
   * operator's own terminal), so a second tab or a new window signs in with the next printed URL and never
   * with a URL that a browser history file, readable by a same-user agent, already holds. A spent token
   * presented again is refused as used: the person whose URL was used first learns that someone did. The current
   * token with a wrong code counts a miss; the signInCodeAttemptsMax-th spends the token, so a process that read the
   * URL gets that many guesses at the code and no more.
   */
  exchange(presented: string, typedCode: string): SignInExchange {
    const state = this.tokenState(presented);
    if (state !== 'current') return { ok: false, reason: state };
    if (!tokensEqual(signInCodeDigits(this.signInCode), signInCodeDigits(typedCode))) {
      this.codeMisses += 1;
      const attemptsLeft = signInCodeAttemptsMax - this.codeMisses;
      if (attemptsLeft <= 0) this.spendToken();
      return { ok: false, reason: 'code_wrong', attemptsLeft: Math.max(0, attemptsLeft) };
    }
    this.spendToken();
    const session = this.mint();
    this.sessions.push({ secret: session, proven: false });
    if (this.sessions.length > sessionsMax) this.sessions.shift();
    return { ok: true, session };
  }

  private spendToken(): void {
    this.spent.push(this.signInToken);
    if (this.spent.length > spentTokensKept) this.spent.shift();
    this.signInToken = this.mint();
    this.signInCode = this.mintCode();
    this.codeMisses = 0;
  }

  /** True only for a session secret of this run: never for a sign-in token, before or after its exchange. */
  sessionValid(presented: string | undefined): boolean {
    return this.sessionOf(presented) !== undefined;
  }

  /** Whether a valid session presented the vault passphrase in this run (false for anything else). */
  sessionProven(presented: string | undefined): boolean {
    return this.sessionOf(presented)?.proven === true;
  }

  /** The session presented the vault passphrase and it opened the vault: its decisions are a person's from now on. */
  markProven(presented: string | undefined): void {
    const session = this.sessionOf(presented);
    if (session !== undefined) session.proven = true;
  }

  private sessionOf(presented: string | undefined): { secret: string; proven: boolean } | undefined {
    if (presented === undefined) return undefined;
    // Every session is compared (constant time each), so timing says nothing about which one matched.
    let matched: { secret: string; proven: boolean } | undefined;
    for (const session of this.sessions) if (tokensEqual(session.secret, presented)) matched = session;
    return matched;
  }
}
