import { describe, expect, it } from 'vitest';
import { legacyOperatorSessionKey, operatorSignInMeta } from '../../../broker/contract/operator-sign-in.js';
import { signInWithCode, takeSignIn, type SignInWindow } from './page-session.js';

/** A window whose document may hold a session element and whose address a token; records what the sign-in did. */
function windowWith(meta: { content: string } | undefined, hash = '', address = { pathname: '/', search: '' }) {
  const done = { removed: false, replacedWith: [] as string[], storageRemoved: [] as string[], asked: [] as string[] };
  const element =
    meta === undefined
      ? null
      : {
          getAttribute: (name: string) => (name === 'content' ? meta.content : null),
          remove: () => (done.removed = true),
        };
  const win = {
    document: {
      querySelector: (selector: string) => {
        done.asked.push(selector);
        return selector === `meta[name="${operatorSignInMeta}"]` && !done.removed ? element : null;
      },
    },
    history: {
      replaceState: (_data: unknown, _unused: string, url?: string | URL | null) => done.replacedWith.push(String(url)),
    },
    location: { hash, ...address },
    sessionStorage: { removeItem: (key: string) => done.storageRemoved.push(key) },
  } as unknown as SignInWindow;
  return { win, done };
}

const token = 'T'.repeat(43);

describe('takeSignIn', () => {
  it('takes the printed token out of the address into memory, keeping the rest of the query and the #view', () => {
    const { win, done } = windowWith(undefined, '#/activity/events', {
      pathname: '/',
      search: `?view=x&token=${token}`,
    });
    const session = takeSignIn(win);
    expect(session.addressToken()).toBe(token);
    expect(session.secret()).toBeNull();
    expect(done.replacedWith).toEqual(['/?view=x#/activity/events']);
  });

  it('takes a token of the wrong shape out of the address too, and keeps none', () => {
    const { win, done } = windowWith(undefined, '', { pathname: '/', search: '?token=abc' });
    expect(takeSignIn(win).addressToken()).toBeNull();
    expect(done.replacedWith).toEqual(['/']);
  });

  it('holds the secret from a session element and removes the element', () => {
    const { win, done } = windowWith({ content: 'SECRET-CANARY' }, '#/activity/events');
    const session = takeSignIn(win);
    expect(session.secret()).toBe('SECRET-CANARY');
    expect(done.removed).toBe(true);
    expect(done.replacedWith).toEqual([]);
  });

  it('leaves a page without the element or a token signed out, its URL as it is', () => {
    const { win, done } = windowWith(undefined);
    const session = takeSignIn(win);
    expect(session.secret()).toBeNull();
    expect(session.addressToken()).toBeNull();
    expect(done.replacedWith).toEqual([]);
  });

  it('deletes a secret an earlier build left in sessionStorage, signed in or not', () => {
    for (const meta of [undefined, { content: 'S' }]) {
      const { win, done } = windowWith(meta);
      takeSignIn(win);
      expect(done.storageRemoved).toEqual([legacyOperatorSessionKey]);
    }
  });

  it('still signs in where storage refuses to be touched', () => {
    const { win } = windowWith({ content: 'S' });
    const refusing = {
      ...win,
      sessionStorage: {
        removeItem: () => {
          throw new Error('SecurityError: storage is disabled');
        },
      },
    };
    expect(takeSignIn(refusing).secret()).toBe('S');
  });
});

describe('the page session', () => {
  it('tells its listeners when it is signed in and when the host refuses its secret, and forgets only that secret', () => {
    const session = takeSignIn(windowWith({ content: 'FIRST' }).win);
    const heard: Array<string | null> = [];
    const stop = session.subscribe(() => heard.push(session.secret()));
    session.refused('SOMETHING-ELSE');
    expect(session.secret()).toBe('FIRST');
    session.refused('FIRST');
    session.signIn('SECOND');
    stop();
    session.signIn('THIRD');
    expect(heard).toEqual([null, 'SECOND']);
    expect(session.secret()).toBe('THIRD');
  });
});

describe('signing a tab in with the printed URL and its code', () => {
  const origin = 'http://127.0.0.1:4100';
  const code = '1234-5678';

  /** The host's answers, scripted; records each request. */
  function hostAnswering(answer: () => Response | Promise<Response>) {
    const requests: Array<{ url: string; body: unknown }> = [];
    const fetchFn = ((url: string, init?: RequestInit) => {
      requests.push({ url, body: JSON.parse(String(init?.body)) as unknown });
      return Promise.resolve().then(answer);
    }) as typeof fetch;
    return { fetchFn, requests };
  }
  const opened = () => takeSignIn(windowWith(undefined, '', { pathname: '/', search: `?token=${token}` }).win);
  const signedIn = () => Response.json({ ok: true, value: { session: 'S'.repeat(43) } });

  it.each([
    ['the token of the address the page was opened with', undefined],
    ['the printed URL, pasted', `${origin}/?token=${token}`],
    ['the printed URL with a #view and spaces around it', `  ${origin}/?token=${token}#/activity  `],
    ['the bare token', token],
  ])('sends %s with the typed code by POST and holds the secret it gets', async (_what, url) => {
    const { fetchFn, requests } = hostAnswering(signedIn);
    const session = url === undefined ? opened() : takeSignIn(windowWith(undefined).win);
    const input = url === undefined ? { code: ' 1234-5678 ' } : { url, code };
    expect(await signInWithCode(input, origin, fetchFn, session)).toEqual({ ok: true, value: null });
    expect(requests).toEqual([{ url: '/auth/session', body: { token, code: '12345678' } }]);
    expect(session.secret()).toBe('S'.repeat(43));
    expect(session.addressToken()).toBeNull();
  });

  it.each([
    ['text that is not a URL', 'hello'],
    ['a URL of another port', `http://127.0.0.1:4101/?token=${token}`],
    ['a URL without a token', `${origin}/`],
    ['a URL with a token of the wrong shape', `${origin}/?token=abc`],
  ])('refuses %s with SIGN_IN_URL_INVALID and sends nothing', async (_what, url) => {
    const { fetchFn, requests } = hostAnswering(signedIn);
    const session = takeSignIn(windowWith(undefined).win);
    expect(await signInWithCode({ url, code }, origin, fetchFn, session)).toMatchObject({
      ok: false,
      error: { code: 'SIGN_IN_URL_INVALID' },
    });
    expect(requests).toEqual([]);
    expect(session.secret()).toBeNull();
  });

  it('asks for a URL when the page was not opened with one, and sends nothing', async () => {
    const { fetchFn, requests } = hostAnswering(signedIn);
    expect(await signInWithCode({ code }, origin, fetchFn, takeSignIn(windowWith(undefined).win))).toMatchObject({
      ok: false,
      error: { code: 'SIGN_IN_URL_INVALID' },
    });
    expect(requests).toEqual([]);
  });

  it.each(['', '1234', '1234-567x', '123456789'])(
    'refuses the code %j with SIGN_IN_CODE_INVALID and sends nothing',
    async (typed) => {
      const { fetchFn, requests } = hostAnswering(signedIn);
      const session = opened();
      expect(await signInWithCode({ code: typed }, origin, fetchFn, session)).toMatchObject({
        ok: false,
        error: { code: 'SIGN_IN_CODE_INVALID' },
      });
      expect(requests).toEqual([]);
      expect(session.addressToken()).toBe(token);
    },
  );

  it.each<[string, () => Response | Promise<Response>, string, 'kept' | 'dropped']>([
    [
      'a wrong code',
      () => Response.json({ ok: false, error: { code: 'SIGN_IN_CODE_WRONG', message: 'wrong' } }, { status: 401 }),
      'SIGN_IN_CODE_WRONG',
      'kept',
    ],
    [
      'the last wrong code, which spends the URL',
      () => Response.json({ ok: false, error: { code: 'SIGN_IN_CODE_SPENT', message: 'spent' } }, { status: 401 }),
      'SIGN_IN_CODE_SPENT',
      'dropped',
    ],
    [
      'a used URL',
      () => Response.json({ ok: false, error: { code: 'SIGN_IN_USED', message: 'already used' } }, { status: 401 }),
      'SIGN_IN_USED',
      'dropped',
    ],
    [
      "another run's URL",
      () => Response.json({ ok: false, error: { code: 'UNAUTHENTICATED', message: 'no' } }, { status: 401 }),
      'UNAUTHENTICATED',
      'dropped',
    ],
    ['no answer', () => Promise.reject(new TypeError('Failed to fetch')), 'BROKER_UNREACHABLE', 'kept'],
    ['an answer that is not JSON', () => new Response('<html>', { status: 502 }), 'BAD_REPLY', 'kept'],
    ['an answer without a session', () => Response.json({ ok: true, value: {} }), 'BAD_REPLY', 'kept'],
  ])('answers %s with its code and stays signed out (the address token %s)', async (_what, answer, errorCode, kept) => {
    const { fetchFn } = hostAnswering(answer);
    const session = opened();
    expect(await signInWithCode({ code }, origin, fetchFn, session)).toMatchObject({
      ok: false,
      error: { code: errorCode },
    });
    expect(session.secret()).toBeNull();
    expect(session.addressToken()).toBe(kept === 'kept' ? token : null);
  });
});
