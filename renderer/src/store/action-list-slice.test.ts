import { describe, expect, it } from 'vitest';
import type { BrokerApi, Reply } from '../../../broker/contract/index.js';
import { brokerApiMethods } from '../../../broker/contract/operator-methods.js';
import type { OperatorApi } from '../api/operator-api.js';
import { emptyActionListFilter } from './action-list-reducer.js';
import { rowOf } from './action-list-row.test-support.js';
import { createAppStore } from './app-store.js';

type ListInput = BrokerApi['actions.list']['input'];
type ListReply = Reply<BrokerApi['actions.list']['output']>;

/** An API whose actions.list calls wait for the test to answer them; other methods answer empty. */
function scriptedApi() {
  const lists: Array<{ input: ListInput; answer: (reply: ListReply) => void }> = [];
  const rest = Object.fromEntries(brokerApiMethods.map((m) => [m, () => Promise.resolve({ ok: true, value: {} })]));
  const api = {
    ...rest,
    'actions.list': (input: ListInput) => new Promise<ListReply>((resolve) => lists.push({ input, answer: resolve })),
  } as OperatorApi;
  return { api, lists };
}
const page = (seqs: number[], nextBefore: number | null): ListReply => ({
  ok: true,
  value: {
    actions: seqs.map((s) => rowOf(s)),
    next_before: nextBefore,
    searched_before_seq: null,
    as_of_seq: Math.max(0, ...seqs),
  },
});

describe('the action list slice', () => {
  it('reads the newest page once at a time, then older pages by before_seq, one at a time', async () => {
    const { api, lists } = scriptedApi();
    const store = createAppStore(api);
    const head = store.getState().refreshActionsHead();
    // Nothing is loaded yet, so there is no older page to ask for.
    await store.getState().loadOlderActions();
    expect(lists.map((l) => l.input)).toEqual([{ limit: 200 }]);
    lists[0]?.answer(page([300, 299], 299));
    await head;
    const older = store.getState().loadOlderActions();
    void store.getState().loadOlderActions();
    expect(lists.map((l) => l.input)).toEqual([{ limit: 200 }, { limit: 200, before_seq: 299 }]);
    lists[1]?.answer(page([298], null));
    await older;
    expect(store.getState().actionListView.rows.map((r) => r.first_seq)).toEqual([300, 299, 298]);
    await store.getState().loadOlderActions();
    expect(lists).toHaveLength(2);
  });

  it("reads the newest page of a new filter at once and drops what the old filter's reads answer", async () => {
    const { api, lists } = scriptedApi();
    const store = createAppStore(api);
    const stale = store.getState().refreshActionsHead();
    store.getState().setActionListFilter({ ...emptyActionListFilter, lane: 'doc-7', open: true });
    expect(lists.map((l) => l.input)).toEqual([{ limit: 200 }, { limit: 200, lane: 'doc-7', open: true }]);
    lists[0]?.answer(page([9, 8], null));
    await stale;
    expect(store.getState().actionListView).toMatchObject({ rows: [], loaded: false });
    const loaded = new Promise<void>((resolve) => {
      const stop = store.subscribe((state) => {
        if (!state.actionListView.loaded) return;
        stop();
        resolve();
      });
    });
    lists[1]?.answer(page([5], null));
    await loaded;
    expect(store.getState().actionListView.rows.map((r) => r.first_seq)).toEqual([5]);
  });

  it('folds pushed refreshes that come during a read into one more read after it, never two at once', async () => {
    const { api, lists } = scriptedApi();
    const store = createAppStore(api);
    const head = store.getState().refreshActionsHead();
    // Three notices while the first read is out: one more read, after it.
    for (let i = 0; i < 3; i += 1) void store.getState().refreshActionsHead();
    expect(lists).toHaveLength(1);
    lists[0]?.answer(page([300], null));
    await Promise.resolve();
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(lists).toHaveLength(2);
    lists[1]?.answer(page([301, 300], null));
    await head;
    expect(lists).toHaveLength(2);
    expect(store.getState().actionListView.rows.map((r) => r.first_seq)).toEqual([301, 300]);
    // Quiet again: the next ask is one read.
    const next = store.getState().refreshActionsHead();
    expect(lists).toHaveLength(3);
    lists[2]?.answer(page([301, 300], null));
    await next;
  });

  it("a read for an old filter does not free the slot of the new filter's read", async () => {
    const { api, lists } = scriptedApi();
    const store = createAppStore(api);
    const stale = store.getState().refreshActionsHead();
    store.getState().setActionListFilter({ ...emptyActionListFilter, lane: 'doc-7' });
    lists[0]?.answer(page([9], null));
    await stale;
    // The new filter's read is still out: another ask joins it instead of starting a third read at once.
    void store.getState().refreshActionsHead();
    expect(lists).toHaveLength(2);
    lists[1]?.answer(page([5], null));
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(lists).toHaveLength(3);
    lists[2]?.answer(page([5], null));
  });
});
