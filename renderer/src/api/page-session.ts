import type { Reply } from '../../../broker/contract/index.js';
import { legacyOperatorSessionKey, operatorSignInMeta } from '../../../broker/contract/operator-sign-in.js';
import { postJson } from './http-operator-api.js';
import { clientError } from './operator-api.js';

/**
 * The operator session secret this page holds, in memory only, or null when the tab is not signed in. It changes
 * when the person signs the tab in by pasting a printed URL, and when the host refuses it (another run of the daemon).
 */
export interface OperatorSession {
  secret(): string | null;
  signIn(secret: string): void;
  /** The host refused this secret: the tab is signed out until the person signs it in again. */
  refused(secret: string): void;
  subscribe(listener: () => void): () => void;
}

/** What of the window the sign-in reads and changes. */
export interface SignInWindow {
  readonly document: Pick<Document, 'querySelector'>;
  readonly history: Pick<History, 'replaceState'>;
  readonly location: Pick<Location, 'hash'>;
  readonly sessionStorage?: Pick<Storage, 'removeItem'>;
}

/**
 * Takes the session secret the host's sign-in answer put in the page (broker/host/sign-in-page.ts) into this
 * closure's memory, removes the element, and replaces the tokened URL in the tab's history with the path the
 * operator asked for (the fragment never reached the host, so it is kept). The secret lives nowhere else: not in
 * sessionStorage or localStorage, which Chromium writes into the profile on disk where a same-user agent reads them,
 * not in a cookie (sent to every port of 127.0.0.1). A reload or a new tab therefore starts signed out, and the page
 * offers to sign in with the newest URL the daemon printed (signInWithPasted), keeping the view it shows.
 */
export function takeSignIn(win: SignInWindow): OperatorSession {
  const meta = win.document.querySelector(`meta[name="${operatorSignInMeta}"]`);
  let secret: string | null = null;
  if (meta !== null) {
    secret = meta.getAttribute('content');
    const next = meta.getAttribute('data-next') ?? '/';
    meta.remove();
    win.history.replaceState(null, '', next + win.location.hash);
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
    signIn: (value) => set(value),
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

/** The page's one session, taken at the first call (the API, the change feed and the sign-in panel share it). */
export function pageSessionOf(win: Window): OperatorSession {
  pageSession ??= takeSignIn(win);
  return pageSession;
}

/** A sign-in token as the host mints them: 32 random bytes, base64url. */
const tokenShape = /^[A-Za-z0-9_-]{43}$/;

/**
 * Signs the tab in with what the person pasted: a sign-in URL the daemon printed (for this origin) or the token in
 * it. The token is exchanged by POST (broker/host/http-host.ts exchangeForProgram), so the page stays where it is;
 * the secret goes into `session` only. Resolves to the host's refusal (SIGN_IN_USED, UNAUTHENTICATED) or this
 * page's own (SIGN_IN_URL_INVALID, BROKER_UNREACHABLE, BAD_REPLY).
 */
export async function signInWithPasted(
  pasted: string,
  origin: string,
  fetchFn: typeof fetch,
  session: OperatorSession,
): Promise<Reply<null>> {
  const token = tokenIn(pasted.trim(), origin);
  if (typeof token !== 'string') return token;
  const headers = { Accept: 'application/json', 'Content-Type': 'application/json' };
  const answer = await postJson(fetchFn, '/auth/session', headers, { token });
  if ('error' in answer) return answer;
  const reply = answer.body as {
    ok?: unknown;
    value?: { session?: unknown };
    error?: { code?: unknown; message?: unknown };
  };
  if (reply.ok === true && typeof reply.value?.session === 'string') {
    session.signIn(reply.value.session);
    return { ok: true, value: null };
  }
  if (reply.ok === false && typeof reply.error?.code === 'string' && typeof reply.error.message === 'string')
    return { ok: false, error: { code: reply.error.code, message: reply.error.message } };
  return clientError('BAD_REPLY', `The broker answered HTTP ${answer.status} with an unexpected body.`);
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
