import { describe, expect, it } from 'vitest';
import { createHttpOperatorApi } from './http-operator-api.js';

/** A fetch that answers with a real Response, recording what it was asked. */
function fetchAnswering(answer: () => Response | Promise<Response>) {
  const requests: Array<{ url: string; init: RequestInit | undefined }> = [];
  const fetchFn = ((url: string, init?: RequestInit) => {
    requests.push({ url, init });
    return Promise.resolve().then(answer);
  }) as typeof fetch;
  return { fetchFn, requests };
}

describe('the HTTP operator API', () => {
  it('POSTs the input to /api/status with the session cookie and returns the Reply', async () => {
    const reply = { ok: true, value: { mode: 'headless' } };
    const { fetchFn, requests } = fetchAnswering(() => Response.json(reply));
    expect(await createHttpOperatorApi(fetchFn).status({})).toEqual(reply);
    expect(requests).toEqual([{ url: '/api/status', init: expect.objectContaining({ method: 'POST', credentials: 'same-origin', body: '{}' }) }]);
  });

  it('passes a coded error Reply from the host through, whatever the HTTP status', async () => {
    const reply = { ok: false, error: { code: 'UNAUTHENTICATED', message: 'Not signed in' } };
    const { fetchFn } = fetchAnswering(() => Response.json(reply, { status: 401 }));
    expect(await createHttpOperatorApi(fetchFn).status({})).toEqual(reply);
  });

  it.each<[string, () => Response | Promise<Response>, string]>([
    ['the network fails', () => Promise.reject(new TypeError('Failed to fetch')), 'BROKER_UNREACHABLE'],
    ['the body is not JSON', () => new Response('<html>', { status: 502 }), 'BAD_REPLY'],
    ['the JSON is not a Reply', () => Response.json({ hello: 'world' }), 'BAD_REPLY'],
    ['an error Reply has no message', () => Response.json({ ok: false, error: { code: 'X' } }), 'BAD_REPLY'],
  ])('when %s, it resolves to a coded error instead of throwing', async (_when, answer, code) => {
    const { fetchFn } = fetchAnswering(answer);
    expect(await createHttpOperatorApi(fetchFn).status({})).toMatchObject({ ok: false, error: { code } });
  });
});
