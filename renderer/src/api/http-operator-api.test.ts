import { describe, expect, it } from 'vitest';
import { createHttpOperatorApi } from './http-operator-api.js';
import type { OperatorSession } from './page-session.js';

/** A fetch that answers with a real Response, recording what it was asked. */
function fetchAnswering(answer: () => Response | Promise<Response>) {
  const requests: Array<{ url: string; init: RequestInit | undefined }> = [];
  const fetchFn = ((url: string, init?: RequestInit) => {
    requests.push({ url, init });
    return Promise.resolve().then(answer);
  }) as typeof fetch;
  return { fetchFn, requests };
}

/** A page session holding a secret (or none yet), recording the secrets the host refused. */
function sessionHolding(
  secret: string | null,
): Pick<OperatorSession, 'secret' | 'refused'> & { set(value: string): void; refusedSecrets: string[] } {
  let held = secret;
  const refusedSecrets: string[] = [];
  return {
    secret: () => held,
    refused: (value) => refusedSecrets.push(value),
    set: (value) => (held = value),
    refusedSecrets,
  };
}

describe('the HTTP operator API', () => {
  it('POSTs the input to /api/status with the session secret as a bearer token, sends no cookie, and returns the Reply', async () => {
    const reply = { ok: true, value: { mode: 'headless' } };
    const { fetchFn, requests } = fetchAnswering(() => Response.json(reply));
    const store = sessionHolding('SESSION-CANARY');
    expect(await createHttpOperatorApi(fetchFn, store).status({})).toEqual(reply);
    expect(requests).toEqual([
      { url: '/api/status', init: expect.objectContaining({ method: 'POST', credentials: 'omit', body: '{}' }) },
    ]);
    expect(requests[0]?.init?.headers).toMatchObject({
      Authorization: 'Bearer SESSION-CANARY',
      'Content-Type': 'application/json',
    });
  });

  it('reads the secret on every call: none before sign-in, the held one after', async () => {
    const { fetchFn, requests } = fetchAnswering(() => Response.json({ ok: true, value: null }));
    const store = sessionHolding(null);
    const api = createHttpOperatorApi(fetchFn, store);
    await api.status({});
    store.set('LATER');
    await api.status({});
    expect(requests.map((r) => (r.init?.headers as Record<string, string>)['Authorization'])).toEqual([
      undefined,
      'Bearer LATER',
    ]);
  });

  it('sends no Authorization header where the page has no session at all', async () => {
    const { fetchFn, requests } = fetchAnswering(() => Response.json({ ok: true, value: null }));
    await createHttpOperatorApi(fetchFn, undefined).status({});
    expect(requests[0]?.init?.headers).not.toHaveProperty('Authorization');
  });

  it('passes a coded error Reply from the host through, whatever the HTTP status', async () => {
    const reply = { ok: false, error: { code: 'UNAUTHENTICATED', message: 'Not signed in' } };
    const { fetchFn } = fetchAnswering(() => Response.json(reply, { status: 401 }));
    expect(await createHttpOperatorApi(fetchFn, undefined).status({})).toEqual(reply);
  });

  it('tells the session when the host refuses the secret it sent, and only then', async () => {
    const refusal = { ok: false, error: { code: 'UNAUTHENTICATED', message: 'Not signed in' } };
    const other = { ok: false, error: { code: 'NOT_FOUND', message: 'No such action' } };
    const answers = [Response.json(other, { status: 404 }), Response.json(refusal, { status: 401 })];
    const { fetchFn } = fetchAnswering(() => answers.shift() ?? Response.json(refusal, { status: 401 }));
    const session = sessionHolding('OLD-RUN');
    const api = createHttpOperatorApi(fetchFn, session);
    await api.status({});
    expect(session.refusedSecrets).toEqual([]);
    await api.status({});
    expect(session.refusedSecrets).toEqual(['OLD-RUN']);
  });

  it.each<[string, () => Response | Promise<Response>, string]>([
    ['the network fails', () => Promise.reject(new TypeError('Failed to fetch')), 'BROKER_UNREACHABLE'],
    ['the body is not JSON', () => new Response('<html>', { status: 502 }), 'BAD_REPLY'],
    ['the JSON is not a Reply', () => Response.json({ hello: 'world' }), 'BAD_REPLY'],
    ['an error Reply has no message', () => Response.json({ ok: false, error: { code: 'X' } }), 'BAD_REPLY'],
  ])('when %s, it resolves to a coded error instead of throwing', async (_when, answer, code) => {
    const { fetchFn } = fetchAnswering(answer);
    expect(await createHttpOperatorApi(fetchFn, undefined).status({})).toMatchObject({ ok: false, error: { code } });
  });
});
