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

const eventDeadlineMs = 2_000;

/** Resolves once `watch` calls done, or fails naming what never happened: a deadline, not a sleep. */
function untilDeadline(what: string, watch: (done: () => void) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const deadline = setTimeout(() => reject(new Error(`expected ${what}`)), eventDeadlineMs);
    watch(() => (clearTimeout(deadline), resolve()));
  });
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

  it('when a status read began before the unlock, the re-read after the unlock is a new read: the vault shows unlocked', async () => {
    let state: 'locked' | 'unlocked' = 'locked';
    // Each status read answers the state as it was when the read reached the broker, once the test lets it answer.
    const reads: Array<() => void> = [];
    const readStarted: Array<() => void> = [];
    const { api } = apiWith({
      'vault.unlock': () => {
        state = 'unlocked';
        return Promise.resolve({ ok: true, value: { state } });
      },
      'vault.status': () =>
        new Promise((resolve) => {
          const seen = state;
          reads.push(() => resolve({ ok: true, value: { state: seen, credentials: 0 } }));
          for (const started of readStarted.splice(0)) started();
        }),
    });
    const readBegun = (n: number) =>
      untilDeadline(`vault.status read ${n} to begin`, (done) => {
        if (reads.length >= n) done();
        else readStarted.push(() => reads.length >= n && done());
      });
    const store = createAppStore(api);
    const before = store.getState().refreshVault();
    const unlockAnswered = untilDeadline('the unlock to be answered', (done) => {
      const stop = store.subscribe((s) => s.vaultView.last?.call === 'unlock' && (stop(), done()));
    });
    const unlocked = store.getState().unlockVault(canary);
    // The unlock's own re-read is asked for in the same turn its answer lands: by now it has asked.
    await unlockAnswered;
    reads[0]?.();
    await readBegun(2);
    expect(reads).toHaveLength(2);
    reads[1]?.();
    expect(await unlocked).toBe(true);
    await before;
    expect(store.getState().vaultView).toMatchObject({ state: 'unlocked', busy: null, phase: 'ready' });
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
        key_source: 'vault',
      },
    });
    await first;
    expect(calls.map(([m]) => m)).toEqual(['audit.verify']);
    expect(store.getState().integrityView).toMatchObject({ loaded: true, verifying: false, last: { ok: true } });
  });
});
