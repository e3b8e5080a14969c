import { describe, expect, it } from 'vitest';
import { initialVaultView, vaultBlocksCredentials, vaultReducer, type VaultView } from './vault-reducer.js';

const ready: VaultView = { ...initialVaultView, phase: 'ready', state: 'locked', credentials: 2, replies: 1 };

describe('the vault reducer', () => {
  it('when a status arrives, it holds the state and count; a failed refresh keeps them beside the error', () => {
    const loaded = vaultReducer(vaultReducer(initialVaultView, { type: 'requested' }), {
      type: 'received',
      reply: { ok: true, value: { state: 'locked', credentials: 2 } },
    });
    expect(loaded).toMatchObject({ phase: 'ready', state: 'locked', credentials: 2, replies: 1, error: null });
    const failed = vaultReducer(loaded, {
      type: 'received',
      reply: { ok: false, error: { code: 'BROKER_UNREACHABLE', message: 'gone' } },
    });
    expect(failed).toMatchObject({
      phase: 'error',
      state: 'locked',
      credentials: 2,
      error: { code: 'BROKER_UNREACHABLE' },
    });
  });

  it('when an unlock starts, it is busy and the previous result is cleared; when it succeeds, the state is the answer', () => {
    const started = vaultReducer(
      { ...ready, last: { call: 'lock', ok: true } },
      { type: 'call_started', call: 'unlock' },
    );
    expect(started).toMatchObject({ busy: 'unlock', last: null });
    expect(
      vaultReducer(started, {
        type: 'call_finished',
        call: 'unlock',
        reply: { ok: true, value: { state: 'unlocked' } },
      }),
    ).toMatchObject({
      busy: null,
      state: 'unlocked',
      last: { call: 'unlock', ok: true },
    });
  });

  it('when an unlock is refused, the state stays and the refusal is shown', () => {
    const refused = vaultReducer(vaultReducer(ready, { type: 'call_started', call: 'unlock' }), {
      type: 'call_finished',
      call: 'unlock',
      reply: {
        ok: false,
        error: {
          code: 'VAULT_PASSPHRASE_INVALID',
          message: 'the passphrase does not open this vault',
          field: 'passphrase',
        },
      },
    });
    expect(refused).toMatchObject({
      busy: null,
      state: 'locked',
      last: { call: 'unlock', ok: false, error: { code: 'VAULT_PASSPHRASE_INVALID' } },
    });
  });

  it.each([
    ['locked', true],
    ['uninitialized', true],
    ['unlocked', false],
    [null, false],
  ] as const)('a %s vault blocks credentials: %s', (state, blocks) => {
    expect(vaultBlocksCredentials(state)).toBe(blocks);
  });
});
