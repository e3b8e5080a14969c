import type { Reply } from '../../../broker/contract/index.js';
import { legacyOperatorSessionKey, operatorSignInMeta } from '../../../broker/contract/operator-sign-in.js';
import { postJson, proveTab } from './http-operator-api.js';
import { clientError } from './operator-api.js';
import { createPagePassphrasePrompt, type PagePassphrasePrompt } from './person-proof.js';

/**
 * The operator session secret this page holds, in memory only, or null when the tab is not signed in. It changes
 * when the person signs the tab in (a printed URL and the code printed beside it), and when the host refuses it
 * (another run of the daemon).
 */
export interface OperatorSession {
  secret(): string | null;
  /**
   * The sign-in token the page was opened with (the printed URL's `?token=`), taken out of the address, until a sign-in
   * uses it or the host says it is spent; null when the page was not opened with one.
   */
  addressToken(): string | null;
  signIn(secret: string): void;
  /** The address's token is spent or not this run's: the person signs in with a newer printed URL. */
  dropAddressToken(): void;
  /** The host refused this secret: the tab is signed out until the person signs it in again. */
  refused(secret: string): void;
  subscribe(listener: () => void): () => void;
}

/** A sign-in token as the host mints them: 32 random bytes, base64url. */
const tokenShape = /^[A-Za-z0-9_-]{43}$/;

/** What of the window the sign-in reads and changes. */
export interface SignInWindow {
  readonly document: Pick<Document, 'querySelector'>;
  readonly history: Pick<History, 'replaceState'>;
  readonly location: Pick<Location, 'hash' | 'pathname' | 'search'>;
  readonly sessionStorage?: Pick<Storage, 'removeItem'>;
}

/**
 * Takes the printed URL's sign-in token out of the tab's address (and so its history) into this closure's memory,
 * for the sign-in view to send with the code the person types (signInWithCode); the rest of the address, the view's
 * fragment included, stays. A session handed to the page in its document (broker/contract/operator-sign-in.ts) is taken
 * the same way and its element removed. The secret lives nowhere else: not in sessionStorage or localStorage, which
 * Chromium writes into the profile on disk where a same-user agent reads them, not in a cookie (sent to every port of
 * 127.0.0.1). A reload or a new tab therefore starts signed out, and the page offers to sign in with the newest URL
 * the daemon printed, keeping the view it shows.
 */
export function takeSignIn(win: SignInWindow): OperatorSession {
  const meta = win.document.querySelector(`meta[name="${operatorSignInMeta}"]`);
  let secret: string | null = null;
  if (meta !== null) {
    secret = meta.getAttribute('content');
    meta.remove();
  }
  let addressToken: string | null = null;
  const query = new URLSearchParams(win.location.search);
  const inAddress = query.get('token');
  if (inAddress !== null) {
    if (tokenShape.test(inAddress)) addressToken = inAddress;
    query.delete('token');
    const rest = query.toString();
    win.history.replaceState(null, '', win.location.pathname + (rest === '' ? '' : `?${rest}`) + win.location.hash);
  }
  try {
    // A tab signed in by an earlier build left its secret in sessionStorage (and so on disk): it goes.
    win.sessionStorage?.removeItem(legacyOperatorSessionKey);
  } catch {
    // Storage disabled for this origin: there is nothing to remove.
  }
  const listeners = new Set<() => void>();
  const set = (value: string | null): void => {
    if (value === secret) return;
    secret = value;
    for (const listener of listeners) listener();
  };
  return {
    secret: () => secret,
    addressToken: () => addressToken,
    signIn: (value) => {
      addressToken = null;
      set(value);
    },
    dropAddressToken: () => {
      if (addressToken === null) return;
      addressToken = null;
      for (const listener of listeners) listener();
    },
    // Only the secret that was refused: a sign-in that happened meanwhile stays.
    refused: (value) => {
      if (value === secret) set(null);
    },
    subscribe: (listener) => {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}

let pageSession: OperatorSession | undefined;
let pagePrompt: PagePassphrasePrompt | undefined;

/** The page's one passphrase prompt: the API client asks it, the console's dialog answers it. */
export function pagePassphrasePrompt(): PagePassphrasePrompt {
  pagePrompt ??= createPagePassphrasePrompt();
  return pagePrompt;
}

/** The page's one session, taken at the first call (the API, the change feed and the sign-in panel share it). */
export function pageSessionOf(win: Window): OperatorSession {
  pageSession ??= takeSignIn(win);
  return pageSession;
}

/** What the person gives the sign-in view: the code they type and, unless the page was opened with it, a printed URL. */
export interface SignInInput {
  /** A pasted sign-in URL (or the token in it); omitted, the token the page's own address carried is used. */
  url?: string;
  code: string;
  /**
   * The vault passphrase, if the person gave it: the tab presents it right after signing in, so its decisions are a
   * person's (broker/host/web-proof.ts). Without it the tab reads, and asks for it at its first decision.
   */
  passphrase?: string;
}

/**
 * Signs the tab in with the printed token and the code printed beside it (POST /auth/session,
 * broker/host/http-host.ts), so the page stays where it is; the secret goes into `session` only. The token alone
 * signs nothing in: opening the URL put it on a browser's command line, which every process of the user reads, so
 * the host also takes the code, which reaches the page only through the person's keyboard. Resolves to the host's
 * refusal (SIGN_IN_CODE_WRONG, SIGN_IN_CODE_SPENT, SIGN_IN_USED, UNAUTHENTICATED) or this page's own (SIGN_IN_URL_INVALID,
 * SIGN_IN_CODE_INVALID, BROKER_UNREACHABLE, BAD_REPLY).
 */
export async function signInWithCode(
  input: SignInInput,
  origin: string,
  fetchFn: typeof fetch,
  session: OperatorSession,
  /** Told a passphrase the host refused at sign-in, so the first "Confirm it is you" shows why it asks. */
  prompt?: Pick<PagePassphrasePrompt, 'remember'>,
): Promise<Reply<null>> {
  const pasted = input.url?.trim() ?? '';
  const fromAddress = pasted === '';
  const token = fromAddress ? (session.addressToken() ?? missingUrl()) : tokenIn(pasted, origin);
  if (typeof token !== 'string') return token;
  const code = input.code.replace(/[\s-]/g, '');
  if (!/^\d{8}$/.test(code))
    return clientError(
      'SIGN_IN_CODE_INVALID',
      'Type the 8-digit sign-in code the daemon printed beside the URL (`Sign-in code: 1234-5678`).',
    );
  const headers = { Accept: 'application/json', 'Content-Type': 'application/json' };
  const answer = await postJson(fetchFn, '/auth/session', headers, { token, code });
  if ('error' in answer) return answer;
  const reply = answer.body as {
    ok?: unknown;
    value?: { session?: unknown };
    error?: { code?: unknown; message?: unknown };
  };
  if (reply.ok === true && typeof reply.value?.session === 'string') {
    const passphrase = input.passphrase ?? '';
    // Proven before the console shows: a wrong passphrase leaves a tab that reads, and asks again at its first decision.
    if (passphrase !== '') {
      const proven = await proveTab(fetchFn, reply.value.session, passphrase);
      if (!proven.ok) prompt?.remember({ code: proven.error.code, message: proven.error.message });
    }
    session.signIn(reply.value.session);
    return { ok: true, value: null };
  }
  if (reply.ok === false && typeof reply.error?.code === 'string' && typeof reply.error.message === 'string') {
    // A spent or foreign token will not work again: the view asks for a newer printed URL.
    if (fromAddress && tokenDeadCodes.has(reply.error.code)) session.dropAddressToken();
    return { ok: false, error: { code: reply.error.code, message: reply.error.message } };
  }
  return clientError('BAD_REPLY', `The broker answered HTTP ${answer.status} with an unexpected body.`);
}

/** The host's refusals after which the token the page was opened with can never sign in. */
const tokenDeadCodes = new Set(['SIGN_IN_USED', 'SIGN_IN_CODE_SPENT', 'UNAUTHENTICATED']);

function missingUrl(): ReturnType<typeof clientError> {
  return clientError(
    'SIGN_IN_URL_INVALID',
    'Paste the newest sign-in URL the daemon printed (http://127.0.0.1:…/?token=…), with the code printed beside it.',
  );
}

function tokenIn(pasted: string, origin: string): string | ReturnType<typeof clientError> {
  if (tokenShape.test(pasted)) return pasted;
  let url: URL;
  try {
    url = new URL(pasted);
  } catch {
    return clientError(
      'SIGN_IN_URL_INVALID',
      'Paste the whole sign-in URL the daemon printed (http://127.0.0.1:…/?token=…).',
    );
  }
  if (url.origin !== origin)
    return clientError(
      'SIGN_IN_URL_INVALID',
      `That URL is for ${url.origin}; this page is ${origin}. Paste a URL printed by the daemon that serves this page.`,
    );
  const token = url.searchParams.get('token') ?? '';
  if (!tokenShape.test(token))
    return clientError('SIGN_IN_URL_INVALID', 'That URL carries no sign-in token: paste the whole URL as printed.');
  return token;
}
