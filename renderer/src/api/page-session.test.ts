import { describe, expect, it } from 'vitest';
import { legacyOperatorSessionKey, operatorSignInMeta } from '../../../broker/contract/operator-sign-in.js';
import { signInWithPasted, takeSignIn, type SignInWindow } from './page-session.js';

/** A window whose document may hold the host's sign-in element; records what the sign-in did to it. */
function windowWith(meta: { content: string; next?: string } | undefined, hash = '') {
  const done = { removed: false, replacedWith: [] as string[], storageRemoved: [] as string[], asked: [] as string[] };
  const element =
    meta === undefined
      ? null
      : {
          getAttribute: (name: string) =>
            name === 'content' ? meta.content : name === 'data-next' ? (meta.next ?? null) : null,
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
    location: { hash },
    sessionStorage: { removeItem: (key: string) => done.storageRemoved.push(key) },
  } as unknown as SignInWindow;
  return { win, done };
}

describe('takeSignIn', () => {
  it('holds the secret from the sign-in element, removes the element and puts the path asked for (with its #view) in place of the tokened URL', () => {
    const { win, done } = windowWith({ content: 'SECRET-CANARY', next: '/' }, '#/activity/events');
    const session = takeSignIn(win);
    expect(session.secret()).toBe('SECRET-CANARY');
    expect(done.removed).toBe(true);
    expect(done.replacedWith).toEqual(['/#/activity/events']);
  });

  it('leaves a page without the element signed out, its URL as it is', () => {
    const { win, done } = windowWith(undefined);
    expect(takeSignIn(win).secret()).toBeNull();
    expect(done.replacedWith).toEqual([]);
  });

  it('deletes a secret an earlier build left in sessionStorage, signed in or not', () => {
    for (const meta of [undefined, { content: 'S', next: '/' }]) {
      const { win, done } = windowWith(meta);
      takeSignIn(win);
      expect(done.storageRemoved).toEqual([legacyOperatorSessionKey]);
    }
  });

  it('still signs in where storage refuses to be touched', () => {
    const { win } = windowWith({ content: 'S', next: '/' });
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
    const session = takeSignIn(windowWith({ content: 'FIRST', next: '/' }).win);
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

describe('signing a tab in with a pasted URL', () => {
  const origin = 'http://127.0.0.1:4100';
  const token = 'T'.repeat(43);

  /** The host's answers, scripted; records each request. */
  function hostAnswering(answer: () => Response | Promise<Response>) {
    const requests: Array<{ url: string; body: unknown }> = [];
    const fetchFn = ((url: string, init?: RequestInit) => {
      requests.push({ url, body: JSON.parse(String(init?.body)) as unknown });
      return Promise.resolve().then(answer);
    }) as typeof fetch;
    return { fetchFn, requests };
  }

  it.each([
    ['the printed URL', `${origin}/?token=${token}`],
    ['the printed URL with a #view and spaces around it', `  ${origin}/?token=${token}#/activity  `],
    ['the bare token', token],
  ])('exchanges the token in %s by POST and holds the secret it gets', async (_what, pasted) => {
    const { fetchFn, requests } = hostAnswering(() => Response.json({ ok: true, value: { session: 'S'.repeat(43) } }));
    const session = takeSignIn(windowWith(undefined).win);
    expect(await signInWithPasted(pasted, origin, fetchFn, session)).toEqual({ ok: true, value: null });
    expect(requests).toEqual([{ url: '/auth/session', body: { token } }]);
    expect(session.secret()).toBe('S'.repeat(43));
  });

  it.each([
    ['text that is not a URL', 'hello'],
    ['a URL of another port', `http://127.0.0.1:4101/?token=${token}`],
    ['a URL without a token', `${origin}/`],
    ['a URL with a token of the wrong shape', `${origin}/?token=abc`],
  ])('refuses %s with SIGN_IN_URL_INVALID and sends nothing', async (_what, pasted) => {
    const { fetchFn, requests } = hostAnswering(() => Response.json({ ok: true, value: { session: 'S' } }));
    const session = takeSignIn(windowWith(undefined).win);
    expect(await signInWithPasted(pasted, origin, fetchFn, session)).toMatchObject({
      ok: false,
      error: { code: 'SIGN_IN_URL_INVALID' },
    });
    expect(requests).toEqual([]);
    expect(session.secret()).toBeNull();
  });

  it.each<[string, () => Response | Promise<Response>, string]>([
    [
      'a used URL',
      () => Response.json({ ok: false, error: { code: 'SIGN_IN_USED', message: 'already used' } }, { status: 401 }),
      'SIGN_IN_USED',
    ],
    ['no answer', () => Promise.reject(new TypeError('Failed to fetch')), 'BROKER_UNREACHABLE'],
    ['an answer that is not JSON', () => new Response('<html>', { status: 502 }), 'BAD_REPLY'],
    ['an answer without a session', () => Response.json({ ok: true, value: {} }), 'BAD_REPLY'],
  ])('answers %s with its code and stays signed out', async (_what, answer, code) => {
    const { fetchFn } = hostAnswering(answer);
    const session = takeSignIn(windowWith(undefined).win);
    expect(await signInWithPasted(token, origin, fetchFn, session)).toMatchObject({ ok: false, error: { code } });
    expect(session.secret()).toBeNull();
  });
});
