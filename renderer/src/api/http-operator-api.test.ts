import { describe, expect, it } from 'vitest';
import { createHttpOperatorApi } from './http-operator-api.js';
import type { OperatorSession } from './page-session.js';
import { createPagePassphrasePrompt, type PassphrasePrompt, type ProofRequest } from './person-proof.js';

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

describe('a decision from a tab that has not shown the vault passphrase (broker/host/web-proof.ts)', () => {
  const needsProof = {
    ok: false,
    error: { code: 'OPERATOR_PROOF_REQUIRED', message: 'vault.lock is a decision…', field: 'passphrase' },
  };
  const wrong = {
    ok: false,
    error: { code: 'VAULT_PASSPHRASE_INVALID', message: 'does not open', field: 'passphrase' },
  };

  /** A prompt answering from a script (null: the person cancels), recording what each ask showed. */
  function scriptedPrompt(answers: Array<string | null>) {
    const asked: ProofRequest[] = [];
    const prompt: PassphrasePrompt = {
      ask: (request) => {
        asked.push(request);
        return Promise.resolve(answers.shift() ?? null);
      },
    };
    return { prompt, asked };
  }

  it('asks the person, proves the tab with what they typed, shows a wrong one on the next ask, and sends the decision again', async () => {
    const answers = [
      Response.json(needsProof, { status: 409 }),
      Response.json(wrong, { status: 409 }),
      Response.json({ ok: true, value: { proven: true } }),
      Response.json({ ok: true, value: { state: 'locked' } }),
    ];
    const { fetchFn, requests } = fetchAnswering(() => answers.shift() ?? Response.json(needsProof));
    const { prompt, asked } = scriptedPrompt(['typo', 'PASSPHRASE-CANARY']);
    const reply = await createHttpOperatorApi(fetchFn, sessionHolding('S'), prompt)['vault.lock']({});
    expect(reply).toEqual({ ok: true, value: { state: 'locked' } });
    expect(requests.map((r) => [r.url, r.init?.body])).toEqual([
      ['/api/vault.lock', '{}'],
      ['/auth/prove', JSON.stringify({ passphrase: 'typo' })],
      ['/auth/prove', JSON.stringify({ passphrase: 'PASSPHRASE-CANARY' })],
      ['/api/vault.lock', '{}'],
    ]);
    expect(requests[1]?.init?.headers).toMatchObject({ Authorization: 'Bearer S' });
    expect(asked).toEqual([
      { why: needsProof.error.message, error: null },
      { why: needsProof.error.message, error: { code: 'VAULT_PASSPHRASE_INVALID', message: 'does not open' } },
    ]);
  });

  it('answers the refusal when the person cancels, and sends nothing more', async () => {
    const { fetchFn, requests } = fetchAnswering(() => Response.json(needsProof, { status: 409 }));
    const { prompt } = scriptedPrompt([null]);
    expect(await createHttpOperatorApi(fetchFn, sessionHolding('S'), prompt)['vault.lock']({})).toEqual(needsProof);
    expect(requests).toHaveLength(1);
  });

  it('never asks for a refusal no passphrase lifts (read from a file), nor for a read', async () => {
    const fromFile = {
      ok: false,
      error: { ...needsProof.error, field: 'proof', proof_refusal: 'passphrase_from_file' },
    };
    const { fetchFn, requests } = fetchAnswering(() => Response.json(fromFile, { status: 409 }));
    const { prompt, asked } = scriptedPrompt(['never typed']);
    const api = createHttpOperatorApi(fetchFn, sessionHolding('S'), prompt);
    expect(await api['vault.lock']({})).toEqual(fromFile);
    expect(asked).toEqual([]);
    expect(requests).toHaveLength(1);
  });
});

describe('decisions refused together, or a tab that signs out while asked', () => {
  const needsProof = {
    ok: false,
    error: { code: 'OPERATOR_PROOF_REQUIRED', message: 'a decision…', field: 'passphrase' },
  };

  it('asks once for two decisions refused together, and sends both again once the tab is proven', async () => {
    let proven = false;
    const { fetchFn, requests } = fetchAnswering(() => {
      const last = requests.at(-1)?.url ?? '';
      if (last === '/auth/prove') {
        proven = true;
        return Response.json({ ok: true, value: { proven: true } });
      }
      return proven ? Response.json({ ok: true, value: { done: last } }) : Response.json(needsProof, { status: 409 });
    });
    let asks = 0;
    const prompt: PassphrasePrompt = {
      ask: () => {
        asks += 1;
        return Promise.resolve('PASSPHRASE');
      },
    };
    const api = createHttpOperatorApi(fetchFn, sessionHolding('S'), prompt);
    const [a, b] = await Promise.all([api['vault.lock']({}), api['approvals.approve']({ ticket: 1 })]);
    expect(a).toEqual({ ok: true, value: { done: '/api/vault.lock' } });
    expect(b).toEqual({ ok: true, value: { done: '/api/approvals.approve' } });
    expect(asks).toBe(1);
    expect(requests.filter((r) => r.url === '/auth/prove')).toHaveLength(1);
  });

  it('never sends a decision again in another session: signed out and in while the passphrase was asked', async () => {
    const { fetchFn, requests } = fetchAnswering(() => Response.json(needsProof, { status: 409 }));
    const session = sessionHolding('FIRST');
    const prompt: PassphrasePrompt = {
      ask: () => {
        session.set('SECOND');
        return Promise.resolve('PASSPHRASE');
      },
    };
    expect(await createHttpOperatorApi(fetchFn, session, prompt)['vault.lock']({})).toEqual(needsProof);
    expect(requests.map((r) => r.url)).toEqual(['/api/vault.lock']);
  });
});

describe('the page passphrase prompt', () => {
  it('shows one request at a time, resolves each with the answer, and empties once answered', async () => {
    const prompt = createPagePassphrasePrompt();
    const seen: Array<ProofRequest | null> = [];
    prompt.subscribe(() => seen.push(prompt.current()));
    const first = prompt.ask({ why: 'one', error: null });
    const second = prompt.ask({ why: 'two', error: null });
    await Promise.resolve();
    expect(prompt.current()).toEqual({ why: 'one', error: null });
    prompt.answer('A');
    expect(await first).toBe('A');
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(prompt.current()).toEqual({ why: 'two', error: null });
    prompt.answer(null);
    expect(await second).toBeNull();
    expect(prompt.current()).toBeNull();
    expect(seen.map((s) => s?.why ?? null)).toEqual(['one', null, 'two', null]);
  });

  it('shows a passphrase refused at sign-in on its next ask, once', async () => {
    const prompt = createPagePassphrasePrompt();
    prompt.remember({ code: 'VAULT_PASSPHRASE_INVALID', message: 'does not open' });
    const first = prompt.ask({ why: 'one', error: null });
    await Promise.resolve();
    expect(prompt.current()?.error).toEqual({ code: 'VAULT_PASSPHRASE_INVALID', message: 'does not open' });
    prompt.answer(null);
    await first;
    const second = prompt.ask({ why: 'two', error: null });
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(prompt.current()?.error).toBeNull();
    prompt.answer(null);
    await second;
  });
});
