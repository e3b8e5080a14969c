import { describe, expect, it } from 'vitest';
import { brokerApiMethods } from '../../../broker/contract/operator-methods.js';
import type { OperatorApi } from '../api/operator-api.js';
import { createAppStore } from './app-store.js';

const sealed = { code: 'AUDIT_KEY_UNAVAILABLE', message: 'The key that encrypted these events is not available now.' };
const row = { action_id: 'act_b', outcome: 'not_attempted', code: 'BROKER_RESTARTED', stage: 'closed' };

/** An API whose actions.show is sealed (the vault locked) and whose actions.list finds the action's plaintext row. */
function sealedApi(listed: unknown[]): OperatorApi {
  const rest = Object.fromEntries(brokerApiMethods.map((m) => [m, () => Promise.resolve({ ok: true, value: {} })]));
  return {
    ...rest,
    'actions.show': () => Promise.resolve({ ok: false, error: sealed }),
    'actions.list': (input: unknown) => {
      listed.push(input);
      return Promise.resolve({ ok: true, value: { actions: [{ ...row, action_id: 'act_bb' }, row] } });
    },
  } as unknown as OperatorApi;
}

describe('the action detail slice', () => {
  it("when the action's events are sealed, it keeps the refusal and reads the plaintext row once", async () => {
    const listed: unknown[] = [];
    const store = createAppStore(sealedApi(listed));
    await store.getState().openActionDetail('act_b');
    await store.getState().refreshActionDetail();
    expect(store.getState().actionDetailView).toMatchObject({ error: sealed, plain: row, detail: null });
    expect(listed).toEqual([{ text: 'act_b', limit: 5 }]);
  });
});
