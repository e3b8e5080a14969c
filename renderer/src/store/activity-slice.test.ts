import { afterEach, describe, expect, it, vi } from 'vitest';
import type { BrokerApi, Reply } from '../../../broker/contract/index.js';
import { brokerApiMethods } from '../../../broker/contract/operator-methods.js';
import type { OperatorApi } from '../api/operator-api.js';
import { activityRowAt, emptyActivityFilter } from './activity-reducer.js';
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
  expires_at_ms: null,
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

  describe('when a block answer comes late', () => {
    afterEach(() => {
      vi.useRealTimers();
    });
    const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => row(from + i));
    // Lets the answered promises run on, without moving the (fake) clock: no poll, no retry timer fires.
    const settle = async () => {
      for (let i = 0; i < 20; i += 1) await Promise.resolve();
    };

    it('after a newer status, its rows show at once and the block is asked again at once, not at the next status', async () => {
      vi.useFakeTimers();
      const { api, lists, journal } = scriptedApi();
      const store = createAppStore(api);
      journal.last_seq = 140;
      await store.getState().refreshActivityHead();
      const rows = store.getState().loadActivityRows(100, 149);
      expect(lists.map((l) => l.input)).toEqual([{ from_seq: 101, limit: 100 }]);
      // While block 1 is in flight, status says the log reached 150; the answer was read when it ended at 148.
      journal.last_seq = 150;
      await store.getState().refreshActivityHead();
      lists[0]?.answer({ ok: true, value: { events: range(101, 148), next_seq: null } });
      await settle();
      const late = store.getState().activityView;
      expect(activityRowAt(late, 147)).toMatchObject({ kind: 'event', event: { seq: 148 } });
      expect(activityRowAt(late, 149)).toEqual({ kind: 'loading', seq: 150 });
      expect(lists.map((l) => l.input)).toEqual([
        { from_seq: 101, limit: 100 },
        { from_seq: 101, limit: 100 },
      ]);
      lists[1]?.answer({ ok: true, value: { events: range(101, 150), next_seq: null } });
      await rows;
      const view = store.getState().activityView;
      expect(activityRowAt(view, 148)).toMatchObject({ kind: 'event', event: { seq: 149 } });
      expect(activityRowAt(view, 149)).toMatchObject({ kind: 'event', event: { seq: 150 } });
      expect(view.loading).toEqual({});
      expect(vi.getTimerCount()).toBe(0);
    });

    it('a block short of a status it was asked after is not asked again in a loop (the next status decides)', async () => {
      vi.useFakeTimers();
      const { api, lists, journal } = scriptedApi();
      const store = createAppStore(api);
      journal.last_seq = 150;
      await store.getState().refreshActivityHead();
      void store.getState().loadActivityRows(100, 149);
      lists[0]?.answer({ ok: true, value: { events: range(101, 148), next_seq: null } });
      await settle();
      expect(lists).toHaveLength(1);
      expect(store.getState().activityView.loading).toEqual({});
      expect(activityRowAt(store.getState().activityView, 149)).toEqual({ kind: 'loading', seq: 150 });
    });

    it('a failed late answer is not asked again at once (the error waits for the next status)', async () => {
      const { api, lists, journal } = scriptedApi();
      const store = createAppStore(api);
      journal.last_seq = 140;
      await store.getState().refreshActivityHead();
      void store.getState().loadActivityRows(100, 149);
      journal.last_seq = 150;
      await store.getState().refreshActivityHead();
      lists[0]?.answer({ ok: false, error: { code: 'BROKER_UNREACHABLE', message: 'x' } });
      await settle();
      expect(lists).toHaveLength(1);
      expect(store.getState().activityView.loading).toEqual({});
      expect(store.getState().activityView.error?.code).toBe('BROKER_UNREACHABLE');
    });
  });
});
