import { describe, expect, it } from 'vitest';
import type { BrokerApi, Reply } from '../../../broker/contract/index.js';
import { brokerApiMethods } from '../../../broker/contract/operator-methods.js';
import type { OperatorApi } from '../api/operator-api.js';
import { emptyActivityFilter } from './activity-reducer.js';
import { createAppStore } from './app-store.js';

type ListInput = BrokerApi['activity.list']['input'];
type ListReply = Reply<BrokerApi['activity.list']['output']>;

/**
 * An API whose activity.list calls wait for the test to answer them; status answers the journal's last position the
 * test sets; other methods answer empty.
 */
function scriptedApi() {
  const lists: Array<{ input: ListInput; answer: (reply: ListReply) => void }> = [];
  const journal = { last_seq: 0 };
  const rest = Object.fromEntries(brokerApiMethods.map((m) => [m, () => Promise.resolve({ ok: true, value: {} })]));
  const api = {
    ...rest,
    status: () => Promise.resolve({ ok: true, value: { journal: { ...journal } } }),
    'activity.list': (input: ListInput) => new Promise<ListReply>((resolve) => lists.push({ input, answer: resolve })),
  } as unknown as OperatorApi;
  return { api, lists, journal };
}
const row = (seq: number) => ({
  seq,
  at_ms: 0,
  kind: 'REQUEST_SENT' as const,
  action_id: `act_${seq}`,
  session_id: null,
  ticket: null,
  lane: null,
  outcome: null,
  code: null,
  summary: '',
});

describe('the activity slice', () => {
  it('reads each block once as a keyset page (from_seq = its first position), however often the view asks', async () => {
    const { api, lists } = scriptedApi();
    const store = createAppStore(api);
    const first = store.getState().loadActivityRows(0, 30);
    void store.getState().loadActivityRows(5, 40);
    expect(lists.map((l) => l.input)).toEqual([{ from_seq: 1, limit: 100 }]);
    lists[0]?.answer({ ok: true, value: { events: [row(1), row(2)], next_seq: null } });
    await first;
    expect(store.getState().activityView.blocks[0]?.rows.map((r) => r.seq)).toEqual([1, 2]);
    await store.getState().loadActivityRows(0, 30);
    expect(lists).toHaveLength(1);
  });

  it('pages a filter on by next_seq, and drops the answer of a filter that was replaced meanwhile', async () => {
    const { api, lists } = scriptedApi();
    const store = createAppStore(api);
    store.getState().setActivityFilter({ ...emptyActivityFilter, lane: 'doc-7' });
    const firstPage = store.getState().loadActivityPage();
    void store.getState().loadActivityPage();
    expect(lists.map((l) => l.input)).toEqual([{ from_seq: 1, limit: 200, lane: 'doc-7' }]);
    lists[0]?.answer({ ok: true, value: { events: [row(40)], next_seq: 20_001 } });
    await firstPage;
    const second = store.getState().loadActivityPage();
    expect(lists[1]?.input).toEqual({ from_seq: 20_001, limit: 200, lane: 'doc-7' });
    store.getState().setActivityFilter({ ...emptyActivityFilter, text: 'lost' });
    lists[1]?.answer({ ok: true, value: { events: [row(20_500)], next_seq: null } });
    await second;
    expect(store.getState().activityView.matches).toEqual([]);
    expect(store.getState().activityView.next).toBe(1);
  });

  it('when a filtered scan reached the end and the log grew, the next page reads on from where it searched', async () => {
    const { api, lists, journal } = scriptedApi();
    const store = createAppStore(api);
    journal.last_seq = 500;
    await store.getState().refreshActivityHead();
    store.getState().setActivityFilter({ ...emptyActivityFilter, lane: 'doc-7' });
    const firstPage = store.getState().loadActivityPage();
    lists[0]?.answer({ ok: true, value: { events: [row(40)], next_seq: null } });
    await firstPage;
    await store.getState().loadActivityPage();
    expect(lists).toHaveLength(1);
    journal.last_seq = 530;
    await store.getState().refreshActivityHead();
    const more = store.getState().loadActivityPage();
    expect(lists[1]?.input).toEqual({ from_seq: 501, limit: 200, lane: 'doc-7' });
    lists[1]?.answer({ ok: true, value: { events: [row(512)], next_seq: null } });
    await more;
    expect(store.getState().activityView.matches.map((m) => m.seq)).toEqual([40, 512]);
  });
});
