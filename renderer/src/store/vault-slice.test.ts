import { describe, expect, it } from 'vitest';
import type { Reply } from '../../../broker/contract/index.js';
import { brokerApiMethods } from '../../../broker/contract/operator-methods.js';
import type { OperatorApi } from '../api/operator-api.js';
import { createAppStore } from './app-store.js';

const canary = 'CANARY-renderer-secret-51c2';

/** An api where only the given methods answer; any other call is a test bug. */
function apiWith(methods: Partial<Record<keyof OperatorApi, (input: unknown) => Promise<Reply<unknown>>>>): {
  api: OperatorApi;
  calls: Array<[string, unknown]>;
} {
  const calls: Array<[string, unknown]> = [];
  const api = Object.fromEntries(
    brokerApiMethods.map((m) => [
      m,
      (input: unknown) => {
        calls.push([m, input]);
        const answer = methods[m];
        return answer === undefined ? Promise.reject(new Error(`unexpected ${m}`)) : answer(input);
      },
    ]),
  ) as OperatorApi;
  return { api, calls };
}

describe('the vault and credentials slices', () => {
  it('an unlock sends the passphrase to the API only, then re-reads the state; the store never holds it', async () => {
    let state: 'locked' | 'unlocked' = 'locked';
    const { api, calls } = apiWith({
      'vault.unlock': () => {
        state = 'unlocked';
        return Promise.resolve({ ok: true, value: { state } });
      },
      'vault.status': () => Promise.resolve({ ok: true, value: { state, credentials: 0 } }),
    });
    const store = createAppStore(api);
    expect(await store.getState().unlockVault(canary)).toBe(true);
    expect(calls[0]).toEqual(['vault.unlock', { passphrase: canary }]);
    expect(store.getState().vaultView).toMatchObject({
      state: 'unlocked',
      busy: null,
      last: { call: 'unlock', ok: true },
    });
    expect(JSON.stringify(store.getState())).not.toContain(canary);
  });

  it('an add sends the secret to the API only, then re-lists; the store keeps the name and version, never the secret', async () => {
    const { api, calls } = apiWith({
      'credentials.add': () =>
        Promise.resolve({
          ok: true,
          value: { id: 'cred_1', name: 'docs', kind: 'bearer', version_tag: 'v1-00000001', bindings: ['docs'] },
        }),
      'credentials.list': () =>
        Promise.resolve({
          ok: true,
          value: {
            state: 'unlocked',
            credentials: [
              { id: 'cred_1', name: 'docs', kind: 'bearer', version_tag: 'v1-00000001', bindings: ['docs'] },
            ],
          },
        }),
    });
    const store = createAppStore(api);
    expect(
      await store.getState().addCredential({ name: 'docs', kind: 'bearer', secret: canary, bindings: ['docs'] }),
    ).toBe(true);
    expect(calls.map(([m]) => m)).toEqual(['credentials.add', 'credentials.list']);
    expect(store.getState().credentialsView).toMatchObject({
      adding: null,
      added: { ok: true, name: 'docs' },
      credentials: [{ name: 'docs' }],
    });
    expect(JSON.stringify(store.getState())).not.toContain(canary);
  });

  it('when the bridge fails during an add, the form shows BROKER_UNREACHABLE and the store still holds no secret', async () => {
    const { api } = apiWith({
      'credentials.add': () => Promise.reject(new Error(canary)),
      'credentials.list': () => Promise.resolve({ ok: true, value: { state: 'unlocked', credentials: [] } }),
    });
    const store = createAppStore(api);
    expect(await store.getState().addCredential({ name: 'docs', kind: 'bearer', secret: canary, bindings: [] })).toBe(
      false,
    );
    expect(store.getState().credentialsView.added).toMatchObject({ ok: false, error: { code: 'BROKER_UNREACHABLE' } });
    expect(JSON.stringify(store.getState())).not.toContain(canary);
  });

  it('"Verify now" runs audit.verify once even when clicked twice', async () => {
    let release: (reply: Reply<unknown>) => void = () => undefined;
    const { api, calls } = apiWith({ 'audit.verify': () => new Promise((resolve) => (release = resolve)) });
    const store = createAppStore(api);
    const first = store.getState().verifyIntegrity();
    await store.getState().verifyIntegrity();
    release({
      ok: true,
      value: {
        ok: true,
        checked_at_ms: 1,
        events: 0,
        root: '',
        checkpoints: 0,
        last_checkpoint_size: 0,
        unsigned_tail: 0,
      },
    });
    await first;
    expect(calls.map(([m]) => m)).toEqual(['audit.verify']);
    expect(store.getState().integrityView).toMatchObject({ loaded: true, verifying: false, last: { ok: true } });
  });
});
