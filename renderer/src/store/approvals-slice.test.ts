import { describe, expect, it } from 'vitest';
import type { ApprovalCard, BrokerApi, Reply } from '../../../broker/contract/index.js';
import { brokerApiMethods } from '../../../broker/contract/operator-methods.js';
import type { OperatorApi } from '../api/operator-api.js';
import { createAppStore } from './app-store.js';
import { cardOf, shownAction } from './test-cards.js';

type ListReply = Reply<BrokerApi['approvals.list']['output']>;

/** An API whose approvals.list replies the test releases by hand; calls to other methods are recorded. */
function scriptedApi(overrides: Partial<OperatorApi> = {}) {
  const lists: Array<(reply: ListReply) => void> = [];
  const calls: string[] = [];
  const rest = Object.fromEntries(
    brokerApiMethods.map((m) => [
      m,
      (input: unknown) => {
        calls.push(`${m} ${JSON.stringify(input)}`);
        return Promise.resolve({ ok: true, value: {} });
      },
    ]),
  );
  const api = {
    ...rest,
    'approvals.list': () => new Promise<ListReply>((resolve) => lists.push(resolve)),
    ...overrides,
  } as OperatorApi;
  return { api, lists, calls };
}
const cards = (...list: ApprovalCard[]): ListReply => ({ ok: true, value: { cards: list } });
const flush = () => new Promise((resolve) => setTimeout(resolve, 0));

/** One refresh of the store, its approvals.list (the next one asked of `lists`) answered with `reply`, awaited. */
async function refreshWith(
  store: ReturnType<typeof createAppStore>,
  lists: Array<(reply: ListReply) => void>,
  reply: ListReply,
): Promise<void> {
  const next = lists.length;
  const refreshed = store.getState().refreshApprovals();
  lists[next]?.(reply);
  await refreshed;
}

describe('the approvals slice', () => {
  it('when a refresh is asked for while one is in flight, it lists once more right after, never twice at once', async () => {
    const { api, lists } = scriptedApi();
    const store = createAppStore(api);
    const first = store.getState().refreshApprovals();
    void store.getState().refreshApprovals();
    void store.getState().refreshApprovals();
    expect(lists).toHaveLength(1);
    lists[0]?.(cards(cardOf(1)));
    await flush();
    expect(lists).toHaveLength(2);
    lists[1]?.(cards(cardOf(1), cardOf(2)));
    await first;
    expect(store.getState().approvalsView.cards.map((c) => c.ticket)).toEqual([1, 2]);
    expect(lists).toHaveLength(2);
  });

  it("when a card leaves the list, it reads the reason from the action's events", async () => {
    const shown = shownAction({}, [
      {
        seq: 5,
        at_ms: 0,
        kind: 'CANCELLED',
        action_id: cardOf(1).action_id,
        session_id: 'ses_1',
        ticket: 1,
        lane: 'doc-7',
        outcome: null,
        code: null,
        summary: 'by agent:ses_1: caller cancelled',
        expires_at_ms: null,
      },
    ]);
    const asked: string[] = [];
    const { api, lists } = scriptedApi({
      'actions.show': (input) => {
        asked.push(input.action_id);
        return Promise.resolve({ ok: true, value: shown });
      },
    });
    const store = createAppStore(api);
    await refreshWith(store, lists, cards(cardOf(1)));
    await refreshWith(store, lists, cards());
    await flush();
    expect(asked).toEqual([cardOf(1).action_id]);
    expect(store.getState().approvalsView.closed[0]?.reason).toMatchObject({ headline: 'cancelled by the agent' });
  });

  it("when a closed card's events are sealed (vault locked), it reads what the plaintext row records, once", async () => {
    const sealed = {
      code: 'AUDIT_KEY_UNAVAILABLE',
      message: 'The key that encrypted these journal events is not available now.',
    };
    const listed: unknown[] = [];
    const row = { action_id: cardOf(1).action_id, outcome: 'not_attempted', code: 'BROKER_RESTARTED', stage: 'closed' };
    const { api, lists } = scriptedApi({
      'actions.show': () => Promise.resolve({ ok: false, error: sealed }),
      'actions.list': (input) => {
        listed.push(input);
        return Promise.resolve({ ok: true, value: { actions: [{ ...row, action_id: 'act_other' }, row] } } as never);
      },
    });
    const store = createAppStore(api);
    await refreshWith(store, lists, cards(cardOf(1)));
    await refreshWith(store, lists, cards());
    await flush();
    await flush();
    await refreshWith(store, lists, cards());
    await flush();
    await flush();
    const [entry] = store.getState().approvalsView.closed;
    expect(entry).toMatchObject({ reason: null, lookupError: sealed, plain: row });
    expect(listed).toEqual([{ text: cardOf(1).action_id, limit: 5 }]);
  });

  it('when a decision is accepted, it records the result on the card and lists again', async () => {
    const { api, lists, calls } = scriptedApi({
      'approvals.approve': () =>
        Promise.resolve({ ok: true, value: { ticket: 3, action_id: 'a', decision: 'approved', journal_seq: 9 } }),
    });
    const store = createAppStore(api);
    const decided = store.getState().approve(3);
    await flush();
    lists[0]?.(cards());
    expect(await decided).toBe(true);
    expect(store.getState().approvalsView.calls.last[3]).toEqual({ call: 'approve', ok: true, message: '#3 approved' });
    expect(calls).toEqual([]);
  });

  it("when a reconciliation stays unknown, the card's message carries the record's note", async () => {
    const note =
      "no record under the key, asked 3 s after the original's last attempt ended; reconcile again from then";
    const { api, lists } = scriptedApi({
      'actions.reconcile': () =>
        Promise.resolve({
          ok: true,
          value: {
            action_id: 'a',
            ticket: 3,
            lookup_action_id: 'l',
            correlation: 'idempotency_token',
            note,
            outcome: 'unknown',
            effect: 'unknown_effect',
            outcome_basis: 'remote_query_inconclusive',
            journal_seq: 9,
          },
        }),
    });
    const store = createAppStore(api);
    const decided = store.getState().reconcile(3, 'a');
    await flush();
    lists[0]?.(cards());
    expect(await decided).toBe(true);
    expect(store.getState().approvalsView.calls.last[3]).toEqual({
      call: 'reconcile',
      ok: true,
      message: `#3 reconciled: unknown (remote_query_inconclusive). ${note}`,
    });
  });

  it('when the broker refuses a decision, it resolves false and shows the coded error on the card', async () => {
    const conflict = { code: 'DECISION_CONFLICT', message: 'ticket #3 already expired' };
    const { api, lists } = scriptedApi({ 'approvals.reject': () => Promise.resolve({ ok: false, error: conflict }) });
    const store = createAppStore(api);
    const decided = store.getState().reject(3, 'no');
    await flush();
    lists[0]?.(cards());
    expect(await decided).toBe(false);
    expect(store.getState().approvalsView.calls.last[3]).toEqual({ call: 'reject', ok: false, error: conflict });
  });

  it('when the bridge rejects, the decision shows BROKER_UNREACHABLE', async () => {
    const { api, lists } = scriptedApi({ 'approvals.abandon': () => Promise.reject(new Error('ipc gone')) });
    const store = createAppStore(api);
    const decided = store.getState().abandon(3, 'checked');
    await flush();
    lists[0]?.(cards());
    expect(await decided).toBe(false);
    expect(store.getState().approvalsView.calls.last[3]).toMatchObject({
      ok: false,
      error: { code: 'BROKER_UNREACHABLE' },
    });
  });
});
