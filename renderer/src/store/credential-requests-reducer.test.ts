import { describe, expect, it } from 'vitest';
import type { BrokerApi, CredentialRequestCard, Reply } from '../../../broker/contract/index.js';
import { brokerApiMethods } from '../../../broker/contract/operator-methods.js';
import type { OperatorApi } from '../api/operator-api.js';
import { createAppStore } from './app-store.js';
import {
  boundedText,
  credentialRequestsReducer,
  docsHref,
  initialCredentialRequestsView,
  provisionDraftOf,
  provisionInput,
  requestStatusLine,
  requestTarget,
} from './credential-requests-reducer.js';

const request = (overrides: Partial<CredentialRequestCard> = {}): CredentialRequestCard => ({
  request_id: 'crq_1',
  status: 'pending',
  session_id: 'ses_1',
  session: { status: 'active', pid: 42, exe: '/usr/bin/node', client_name: 'agent', record: 'confirmed' },
  requested_at_ms: 1_000,
  expires_at_ms: 901_000,
  decided_at_ms: null,
  sealed: false,
  purpose: 'Open issues',
  for: { route: 'docs' },
  kind: 'bearer',
  header: null,
  format: null,
  docs_url: 'https://example.com/tokens',
  scopes: [],
  suggested: { name: 'docs-token', kind: 'bearer', header: null, bindings: ['docs', '127.0.0.1'] },
  credential: null,
  how: null,
  decided_by: null,
  reason: null,
  ...overrides,
});

describe('the credential requests reducer', () => {
  it('when the list arrives it is kept as listed; a refusal keeps the last list beside the error', () => {
    const listed = credentialRequestsReducer(initialCredentialRequestsView, {
      type: 'received',
      reply: { ok: true, value: { requests: [request()] } },
    });
    expect(listed).toMatchObject({ phase: 'ready', replies: 1, error: null });
    expect(listed.requests.map((r) => r.request_id)).toEqual(['crq_1']);
    const refused = credentialRequestsReducer(listed, {
      type: 'received',
      reply: { ok: false, error: { code: 'BROKER_UNREACHABLE', message: 'gone' } },
    });
    expect(refused).toMatchObject({ phase: 'error', replies: 2, error: { code: 'BROKER_UNREACHABLE' } });
    expect(refused.requests).toHaveLength(1);
  });

  it('a call is busy on its request until answered, then its result (or refusal code) is on that request only', () => {
    const started = credentialRequestsReducer(initialCredentialRequestsView, {
      type: 'call_started',
      requestId: 'crq_1',
      call: 'provision',
    });
    expect(started.calls.busy).toEqual({ crq_1: 'provision' });
    const refused = credentialRequestsReducer(started, {
      type: 'call_finished',
      requestId: 'crq_1',
      call: 'provision',
      reply: { ok: false, error: { code: 'CREDENTIAL_EXISTS', message: 'exists' } },
      message: '',
    });
    expect(refused.calls).toEqual({
      busy: {},
      last: { crq_1: { call: 'provision', ok: false, error: { code: 'CREDENTIAL_EXISTS', message: 'exists' } } },
    });
  });
});

describe('what a card shows', () => {
  it.each([
    ['short text is kept', 'abc', 5, 'abc'],
    ['text at the bound is kept', 'abcde', 5, 'abcde'],
    ['longer text ends in an ellipsis within the bound', 'abcdefgh', 5, 'abcd…'],
    ['an astral character is never cut in half', '😀😀😀😀😀😀', 3, '😀😀…'],
  ])('%s', (_name, text, max, shown) => {
    expect(boundedText(text, max)).toBe(shown);
    expect(Array.from(boundedText(text, max)).length).toBeLessThanOrEqual(max);
  });

  it.each([
    ['an https URL may become a link', 'https://example.com/x', 'https://example.com/x'],
    ['javascript: never does', 'javascript:alert(1)', null],
    ['http: never does', 'http://example.com', null],
    ['data: never does', 'data:text/html,hi', null],
    ['a non-URL never does', 'not a url', null],
    ['none', null, null],
  ])('%s', (_name, url, href) => {
    expect(docsHref(url)).toBe(href);
  });

  it.each([
    [request(), 'Waiting for a person'],
    [
      request({ status: 'provisioned', credential: 'docs-token', how: 'added', decided_by: 'alice' }),
      'Provisioned: docs-token (added) by alice',
    ],
    [
      request({ status: 'provisioned', credential: 'old', how: 'bound_existing' }),
      'Provisioned: old (an existing credential)',
    ],
    [request({ status: 'declined', decided_by: 'bob', reason: 'no' }), 'Declined by bob: no'],
    [request({ status: 'expired' }), 'Expired: nobody answered in time'],
  ])('a %j request says %j', (card, line) => {
    expect(requestStatusLine(card)).toBe(line);
  });

  it('names the target, or says it is sealed', () => {
    expect(requestTarget(request())).toBe('route docs');
    expect(requestTarget(request({ for: { host: '*.example.com' } }))).toBe('host *.example.com');
    expect(requestTarget(request({ sealed: true, for: null }))).toContain('sealed');
  });
});

describe('the provision form', () => {
  it('is prefilled from the suggestion, and a kind the form cannot add falls back to bearer', () => {
    expect(provisionDraftOf(request())).toEqual({
      name: 'docs-token',
      kind: 'bearer',
      header: '',
      template: '',
      param: '',
      bindings: 'docs, 127.0.0.1',
      accessKeyId: '',
    });
    const ssh = request({ kind: 'ssh_key', suggested: { name: null, kind: null, header: null, bindings: [] } });
    expect(provisionDraftOf(ssh)).toMatchObject({ name: '', kind: 'bearer', bindings: '' });
  });

  it('sends only the options the chosen kind takes', () => {
    const draft = {
      name: ' tok ',
      kind: 'header' as const,
      header: 'X-Key',
      template: '',
      param: 'ignored',
      bindings: 'a, b',
      accessKeyId: '',
    };
    expect(provisionInput('crq_1', draft, 's3cret')).toEqual({
      request_id: 'crq_1',
      credential: { name: 'tok', kind: 'header', secret: 's3cret', bindings: ['a', 'b'], header: 'X-Key' },
    });
    expect(provisionInput('crq_1', { ...draft, kind: 'bearer' }, 's').credential).not.toHaveProperty('header');
  });
});

describe('the credential requests slice', () => {
  type ProvisionReply = Reply<BrokerApi['credential_requests.provision']['output']>;
  function recordingApi(provisionReply: ProvisionReply) {
    const calls: Array<{ method: string; input: unknown }> = [];
    const entries = brokerApiMethods.map((method) => [
      method,
      (input: unknown) => {
        calls.push({ method, input });
        if (method === 'credential_requests.provision') return Promise.resolve(provisionReply);
        if (method === 'credential_requests.list') return Promise.resolve({ ok: true, value: { requests: [] } });
        return Promise.resolve({ ok: true, value: {} });
      },
    ]);
    return { api: Object.fromEntries(entries) as OperatorApi, calls };
  }

  it.each([
    [
      'accepted',
      {
        ok: true,
        value: {
          request_id: 'crq_1',
          status: 'provisioned',
          how: 'added',
          journal_seq: 9,
          credential: { id: 'cred_1', name: 'tok', kind: 'bearer', version_tag: 'v1-1', bindings: [] },
        },
      } as ProvisionReply,
    ],
    ['refused', { ok: false, error: { code: 'CREDENTIAL_EXISTS', message: 'exists' } } as ProvisionReply],
  ])('when a provision is %s, the secret reached the API and nothing the store holds', async (_name, reply) => {
    const secret = 'CANARY-unit-secret-7f3a';
    const { api, calls } = recordingApi(reply);
    const store = createAppStore(api);
    const draft = provisionDraftOf(request());
    expect(await store.getState().provisionCredentialRequest(provisionInput('crq_1', draft, secret))).toBe(reply.ok);
    expect(calls.find((c) => c.method === 'credential_requests.provision')?.input).toMatchObject({
      credential: { secret },
    });
    expect(calls.at(-1)?.method).toBe('credential_requests.list');
    expect(JSON.stringify(store.getState().credentialRequestsView)).not.toContain(secret);
    expect(store.getState().credentialRequestsView.calls.last['crq_1']).toMatchObject({ ok: reply.ok });
  });

  it('declines with a reason, or without one (no empty reason is sent)', async () => {
    const { api, calls } = recordingApi({ ok: false, error: { code: 'X', message: 'x' } });
    const store = createAppStore(api);
    await store.getState().declineCredentialRequest('crq_1', 'not now');
    await store.getState().declineCredentialRequest('crq_2');
    expect(calls.filter((c) => c.method === 'credential_requests.decline').map((c) => c.input)).toEqual([
      { request_id: 'crq_1', reason: 'not now' },
      { request_id: 'crq_2' },
    ]);
  });
});
