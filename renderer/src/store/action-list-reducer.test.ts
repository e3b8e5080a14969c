import { describe, expect, it } from 'vitest';
import type { ActionListRow, BrokerApi, Reply } from '../../../broker/contract/index.js';
import {
  actionListInput,
  actionListReducer,
  appendOlder,
  emptyActionListFilter,
  initialActionListView,
  needsOlderPage,
  type ActionListView,
} from './action-list-reducer.js';
import { rowOf } from './action-list-row.test-support.js';

type Page = Reply<BrokerApi['actions.list']['output']>;
/** `asOf`: the journal's newest position when read (as_of_seq); by default the newest row's. */
const page = (
  seqs: number[],
  nextBefore: number | null,
  searchedBefore: number | null = null,
  asOf = Math.max(0, ...seqs),
): Page => ({
  ok: true,
  value: {
    actions: seqs.map((s) => rowOf(s)),
    next_before: nextBefore,
    searched_before_seq: searchedBefore,
    as_of_seq: asOf,
  },
});
const seqsOf = (view: ActionListView): number[] => view.rows.map((r) => r.first_seq);
const range = (from: number, to: number): number[] => Array.from({ length: from - to + 1 }, (_, i) => from - i);

function loaded(
  seqs: number[],
  nextBefore: number | null,
  searchedBefore: number | null = null,
  asOf?: number,
): ActionListView {
  return actionListReducer(initialActionListView, {
    type: 'head_received',
    generation: 0,
    reply: page(seqs, nextBefore, searchedBefore, asOf),
  });
}

/** The next older page as the slice reads it: from the view's `nextBefore`. */
function older(view: ActionListView, reply: Page): ActionListView {
  return actionListReducer(view, { type: 'page_received', generation: 0, beforeSeq: view.nextBefore ?? 0, reply });
}

describe('the actions list', () => {
  describe('when older pages arrive', () => {
    it('appends them newest first, without showing a row twice when a page boundary moved', () => {
      let view = loaded([10, 9, 8], 8);
      view = actionListReducer(view, { type: 'page_requested' });
      expect(view.paging).toBe(true);
      // The page repeats 8 (an action that changed and was read again) and arrives unsorted.
      view = older(view, page([6, 8, 7], 6));
      expect(seqsOf(view)).toEqual([10, 9, 8, 7, 6]);
      expect(view).toMatchObject({ nextBefore: 6, more: true, paging: false, loaded: true });
      view = older(view, page([5, 4], null));
      expect(seqsOf(view)).toEqual([10, 9, 8, 7, 6, 5, 4]);
      expect(view).toMatchObject({ nextBefore: null, more: false });
    });

    it('drops a page answered for an older filter, and keeps the rows beside an error', () => {
      const view = actionListReducer(loaded([3, 2], 2), {
        type: 'filter_changed',
        filter: { ...emptyActionListFilter, lane: 'x' },
      });
      expect(
        actionListReducer(view, { type: 'page_received', generation: 0, beforeSeq: 2, reply: page([1], null) }),
      ).toBe(view);
      const before = loaded([3, 2], 2);
      const failed = older(before, { ok: false, error: { code: 'BROKER_UNREACHABLE', message: 'down' } });
      expect(seqsOf(failed)).toEqual([3, 2]);
      expect(failed.error?.code).toBe('BROKER_UNREACHABLE');
      expect(needsOlderPage(failed, 1)).toBe(false);
    });

    it('never lists the same action twice, whatever the pages repeat', () => {
      const rows = appendOlder([rowOf(5), rowOf(4)], [rowOf(4), rowOf(3), rowOf(3)]);
      expect(rows.map((r) => r.action_id)).toEqual([rowOf(5).action_id, rowOf(4).action_id, rowOf(3).action_id]);
    });
  });

  describe('when the newest page is read again', () => {
    it('adds new actions on top and updates changed ones in place, keeping older pages', () => {
      let view = loaded([10, 9], 9);
      view = older(view, page([8, 7], 7));
      const settled: ActionListRow = { ...rowOf(12), outcome: null, settled_at_ms: null };
      const head: Page = {
        ok: true,
        value: {
          actions: [settled, rowOf(11), { ...rowOf(10), code: 'REMOTE_ERROR_STATUS' }],
          next_before: 10,
          searched_before_seq: null,
          as_of_seq: 12,
        },
      };
      view = actionListReducer(view, { type: 'head_received', generation: 0, reply: head });
      expect(seqsOf(view)).toEqual([12, 11, 10, 9, 8, 7]);
      expect(view.rows[2]?.code).toBe('REMOTE_ERROR_STATUS');
      // Keyset paging goes on below the oldest row loaded, not below the head.
      expect(view.nextBefore).toBe(7);
    });

    it("drops a row inside the head's range that no longer matches (an open action that settled)", () => {
      const view = actionListReducer(loaded([10, 9, 8], 8), {
        type: 'head_received',
        generation: 0,
        reply: page([10, 8], 8),
      });
      expect(seqsOf(view)).toEqual([10, 8]);
    });

    it('restarts from the head when more actions arrived than one page holds (never a gap)', () => {
      const view = actionListReducer(loaded([10, 9], 9), {
        type: 'head_received',
        generation: 0,
        reply: page(range(300, 101), 101),
      });
      expect(view.rows).toHaveLength(200);
      expect(view.rows.at(-1)?.first_seq).toBe(101);
      expect(view).toMatchObject({ nextBefore: 101, more: true });
    });

    it('takes an empty or complete head as the whole list', () => {
      expect(
        actionListReducer(loaded([3, 2], 2), { type: 'head_received', generation: 0, reply: page([], null) }).rows,
      ).toEqual([]);
      expect(loaded([3, 2, 1], null)).toMatchObject({ more: false, nextBefore: null, loaded: true });
    });
  });

  describe("when a search stops at the broker's bound of rows examined per page", () => {
    it('shows what it found, waits for the person to search older, then goes on from where it stopped', () => {
      const view = loaded([], 9_000, 9_000);
      expect(view).toMatchObject({ rows: [], more: true, nextBefore: 9_000, searchedBefore: 9_000, loaded: true });
      // Scrolling does not read on: each older page may find nothing; the person asks.
      expect(needsOlderPage(view, 0)).toBe(false);
      expect(actionListInput({ ...emptyActionListFilter, text: 'needle' }, view.nextBefore)).toMatchObject({
        before_seq: 9_000,
        text: 'needle',
      });
      const found = older(actionListReducer(view, { type: 'page_requested' }), page([120], null));
      expect(found).toMatchObject({ more: false, nextBefore: null, searchedBefore: null, paging: false });
      expect(seqsOf(found)).toEqual([120]);
    });

    it('a head read again that stopped at the bound keeps the rows the person searched for below it', () => {
      // The first head examined the actions from position 19,000 (the journal's newest then) down to 9,000.
      let view = loaded([], 9_000, 9_000, 19_000);
      view = older(view, page([120], 100, 100));
      expect(view).toMatchObject({ searchedBefore: 100, nextBefore: 100 });
      // Fifty new positions: this head's stretch (19,050 down to 9,050) meets the one searched before.
      view = actionListReducer(view, { type: 'head_received', generation: 0, reply: page([], 9_050, 9_050, 19_050) });
      expect(seqsOf(view)).toEqual([120]);
      expect(view).toMatchObject({ searchedBefore: 100, nextBefore: 100, more: true });
      // A head that finds everything replaces the list.
      view = actionListReducer(view, { type: 'head_received', generation: 0, reply: page([9_100, 120], null) });
      expect(view).toMatchObject({ searchedBefore: null, more: false });
    });

    it('restarts from a head whose stretch does not meet the rows below it (more new actions than the bound)', () => {
      // The person searched older and found #120; then more actions came than one search examines.
      let view = loaded([], 9_000, 9_000, 19_000);
      view = older(view, page([120], 100, 100));
      view = actionListReducer(view, {
        type: 'head_received',
        generation: 0,
        reply: page([30_500], 20_000, 20_000, 30_600),
      });
      // Positions 19,001 to 19,999 were never searched: #120 would sit under that stretch, so the list is the head's,
      // stopped at its bound with "Search older" from there.
      expect(seqsOf(view)).toEqual([30_500]);
      expect(view).toMatchObject({ nextBefore: 20_000, searchedBefore: 20_000, more: true, asOfSeq: 30_600 });
      expect(actionListInput(view.filter, view.nextBefore)).toMatchObject({ before_seq: 20_000 });
      // A head that starts right above what was searched meets it: the rows below stay.
      let met = loaded([], 9_000, 9_000, 19_000);
      met = older(met, page([120], 100, 100));
      met = actionListReducer(met, { type: 'head_received', generation: 0, reply: page([], 19_001, 19_001, 29_001) });
      expect(seqsOf(met)).toEqual([120]);
      expect(met).toMatchObject({ nextBefore: 100, searchedBefore: 100, asOfSeq: 29_001 });
    });

    it('drops an older page that was out while the list restarted from a new head (it would join below a gap)', () => {
      let view = loaded([], 9_000, 9_000, 19_000);
      view = actionListReducer(view, { type: 'page_requested' });
      view = actionListReducer(view, { type: 'head_received', generation: 0, reply: page([], 20_000, 20_000, 30_000) });
      expect(view.nextBefore).toBe(20_000);
      // The page asked for before 9,000 answers now: below 20,000 down to 9,000 nobody searched.
      view = actionListReducer(view, {
        type: 'page_received',
        generation: 0,
        beforeSeq: 9_000,
        reply: page([120], 100, 100),
      });
      expect(seqsOf(view)).toEqual([]);
      expect(view).toMatchObject({ nextBefore: 20_000, searchedBefore: 20_000, paging: false, more: true });
    });

    it('a bounded head before the person searched deeper is the whole list, marked as stopped', () => {
      const view = actionListReducer(loaded([10, 9], 9), {
        type: 'head_received',
        generation: 0,
        reply: page([12], 5, 5),
      });
      expect(seqsOf(view)).toEqual([12]);
      expect(view).toMatchObject({ nextBefore: 5, searchedBefore: 5, more: true });
    });
  });

  describe('when the filter changes', () => {
    it('starts paging again from the newest action under the new filter', () => {
      const before = older(loaded([10, 9], 9), page([8], 8));
      const filter = { ...emptyActionListFilter, outcome: 'unknown' as const, open: true };
      const view = actionListReducer(before, { type: 'filter_changed', filter });
      expect(view).toMatchObject({
        filter,
        generation: 1,
        rows: [],
        nextBefore: null,
        more: true,
        paging: false,
        loaded: false,
      });
      expect(needsOlderPage(view, 0)).toBe(false);
    });

    it('sends only the fields a person filled in, trimmed, with the keyset cursor', () => {
      expect(actionListInput(emptyActionListFilter, null)).toEqual({ limit: 200 });
      const filter = {
        outcome: 'rejected' as const,
        target: ' docs ',
        lane: '',
        session: 'ses_1',
        text: '  ',
        open: true,
      };
      expect(actionListInput(filter, 42, 50)).toEqual({
        limit: 50,
        before_seq: 42,
        outcome: 'rejected',
        open: true,
        target: 'docs',
        session_id: 'ses_1',
      });
    });
  });

  it('asks for the next older page only near the end of the loaded rows, one at a time', () => {
    const view = loaded(range(200, 1), 1);
    expect(needsOlderPage(view, 100)).toBe(false);
    expect(needsOlderPage(view, 170)).toBe(true);
    expect(needsOlderPage(actionListReducer(view, { type: 'page_requested' }), 199)).toBe(false);
    expect(needsOlderPage(loaded([2, 1], null), 1)).toBe(false);
  });
});
