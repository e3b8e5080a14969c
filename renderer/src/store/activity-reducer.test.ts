import { describe, expect, it, vi } from 'vitest';
import type { ActivityEvent, BrokerApi, BrokerStatus, Reply } from '../../../broker/contract/index.js';
import {
  activityBlockRows,
  activityBlocksKeptMax,
  activityMatchesMax,
  activityReducer,
  activityRowAt,
  activityRowCount,
  blocksToLoad,
  emptyActivityFilter,
  filterInput,
  initialActivityView,
  needsNextPage,
  type ActivityView,
  type ActivityViewEvent,
} from './activity-reducer.js';

function eventAt(seq: number, overrides: Partial<ActivityEvent> = {}): ActivityEvent {
  return {
    seq,
    at_ms: 1_700_000_000_000 + seq,
    kind: 'REQUEST_SENT',
    action_id: `act_t${seq}`,
    session_id: 'ses_1',
    ticket: seq,
    lane: 'doc-7',
    outcome: null,
    code: null,
    summary: '',
    expires_at_ms: null,
    ...overrides,
  };
}
const head = (lastSeq: number): ActivityViewEvent => ({
  type: 'head',
  reply: { ok: true, value: { journal: { last_seq: lastSeq } } as BrokerStatus },
});
const listed = (events: ActivityEvent[], next: number | null): Reply<BrokerApi['activity.list']['output']> => ({
  ok: true,
  value: { events, next_seq: next },
});
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => eventAt(from + i));
const fold = (...events: ActivityViewEvent[]): ActivityView => events.reduce(activityReducer, initialActivityView);

describe('the activity reducer, unfiltered (one row per journal position)', () => {
  it('when the head says 100,000, the list has 100,000 rows and row i is position i+1, loading until its block arrives', () => {
    const view = fold(head(100_000));
    expect(activityRowCount(view)).toBe(100_000);
    expect(activityRowAt(view, 99_999)).toEqual({ kind: 'loading', seq: 100_000 });
    expect(blocksToLoad(view, 99_990, 99_999)).toEqual([999]);
  });

  it('when the last block arrives, its rows sit at their own positions; blocks in flight are not asked twice', () => {
    const asked = fold(head(100_000), { type: 'block_requested', block: 999 });
    expect(blocksToLoad(asked, 99_950, 99_999)).toEqual([]);
    const view = activityReducer(asked, {
      type: 'block_received',
      block: 999,
      reply: listed(range(99_901, 100_000), null),
    });
    expect(activityRowAt(view, 99_999)).toEqual({ kind: 'event', event: eventAt(100_000) });
    expect(activityRowAt(view, 99_900)).toMatchObject({ kind: 'event', event: { seq: 99_901 } });
    expect(view.blocks[999]?.complete).toBe(true);
    expect(view.loading).toEqual({});
  });

  it('when a block was read at the log end and the log grew, the next head drops it so it is read again', () => {
    const partial = fold(
      head(150),
      { type: 'block_requested', block: 1 },
      { type: 'block_received', block: 1, reply: listed(range(101, 150), null) },
    );
    expect(partial.blocks[1]?.complete).toBe(false);
    expect(
      fold(head(150), { type: 'block_received', block: 1, reply: listed(range(101, 150), null) }, head(150)).blocks[1],
    ).toBeDefined();
    const grown = activityReducer(partial, head(160));
    expect(grown.blocks[1]).toBeUndefined();
    expect(blocksToLoad(grown, 140, 159)).toEqual([1]);
  });

  it('keeps a gap in the positions visible instead of shifting later rows up', () => {
    const view = fold(head(activityBlockRows), {
      type: 'block_received',
      block: 0,
      reply: listed([...range(1, 4), ...range(6, activityBlockRows)], null),
    });
    expect(activityRowAt(view, 4)).toEqual({ kind: 'missing', seq: 5 });
    expect(activityRowAt(view, 5)).toMatchObject({ kind: 'event', event: { seq: 6 } });
  });

  it('bounds the blocks it keeps, dropping the farthest from the one just read', () => {
    let view = fold(head(1_000_000));
    for (let b = 0; b <= activityBlocksKeptMax; b += 1)
      view = activityReducer(view, {
        type: 'block_received',
        block: b,
        reply: listed(range(b * activityBlockRows + 1, (b + 1) * activityBlockRows), b * 100 + 101),
      });
    expect(Object.keys(view.blocks)).toHaveLength(activityBlocksKeptMax);
    expect(view.blocks[0]).toBeUndefined();
    expect(view.blocks[activityBlocksKeptMax]).toBeDefined();
  });

  it('when a block read fails, the error is kept and the block may be asked again', () => {
    const view = fold(
      head(500),
      { type: 'block_requested', block: 2 },
      { type: 'block_received', block: 2, reply: { ok: false, error: { code: 'BROKER_UNREACHABLE', message: 'x' } } },
    );
    expect(view.error?.code).toBe('BROKER_UNREACHABLE');
    expect(blocksToLoad(view, 200, 210)).toEqual([2]);
    expect(activityReducer(view, head(500)).error).toBeNull();
  });
});

describe('the activity reducer, filtered (matches keep their original positions)', () => {
  const lane = { ...emptyActivityFilter, lane: 'doc-7', outcome: 'unknown' as const };

  it('asks only for the fields a person filled in, trimmed', () => {
    expect(filterInput({ ...emptyActivityFilter, text: '  lost ', code: '' }, 1, 200, 'UTC')).toEqual({
      from_seq: 1,
      limit: 200,
      text: 'lost',
      zone: 'UTC',
    });
    expect(filterInput(lane, 77, 10)).toEqual({ from_seq: 77, limit: 10, lane: 'doc-7', outcome: 'unknown' });
  });

  it("sends a text with the page's own zone, so the broker matches the rows as this page writes them", () => {
    // A fixed zone, the viewer's (Node reads TZ again when it is set): the test means the same in any zone it runs in.
    vi.stubEnv('TZ', 'Europe/Berlin');
    try {
      expect(filterInput({ ...emptyActivityFilter, text: '18:28' }, 1)).toEqual({
        from_seq: 1,
        limit: 200,
        text: '18:28',
        zone: 'Europe/Berlin',
      });
    } finally {
      vi.unstubAllEnvs();
    }
  });

  it('when a filter is applied, the list shows a "more" row until the first page, then the matches at their seq', () => {
    const started = fold(head(100_000), { type: 'filter_changed', filter: lane });
    expect(activityRowCount(started)).toBe(1);
    expect(activityRowAt(started, 0)).toEqual({ kind: 'more' });
    expect(needsNextPage(started, 0)).toBe(true);
    const paged = activityReducer(activityReducer(started, { type: 'page_requested' }), {
      type: 'page_received',
      generation: started.generation,
      reply: listed([eventAt(17), eventAt(90_001)], 90_002),
    });
    expect(activityRowCount(paged)).toBe(3);
    expect(activityRowAt(paged, 1)).toMatchObject({ kind: 'event', event: { seq: 90_001 } });
    expect(paged.next).toBe(90_002);
    const ended = activityReducer(paged, {
      type: 'page_received',
      generation: paged.generation,
      reply: listed([eventAt(99_999)], null),
    });
    expect(ended.matches.map((e) => e.seq)).toEqual([17, 90_001, 99_999]);
    expect(activityRowCount(ended)).toBe(3);
    expect(needsNextPage(ended, 2)).toBe(false);
  });

  it('drops a late page that answers an older filter', () => {
    const first = fold({ type: 'filter_changed', filter: lane }, { type: 'page_requested' });
    const changed = activityReducer(first, { type: 'filter_changed', filter: { ...lane, lane: 'doc-8' } });
    const late = activityReducer(changed, {
      type: 'page_received',
      generation: first.generation,
      reply: listed([eventAt(3)], null),
    });
    expect(late.matches).toEqual([]);
    expect(late.next).toBe(1);
  });

  it('does not ask for the next page while one is in flight or while the view is far above the last match', () => {
    const view = fold(
      { type: 'filter_changed', filter: lane },
      { type: 'page_received', generation: 1, reply: listed(range(1, 200), 201) },
    );
    expect(needsNextPage(view, 10)).toBe(false);
    expect(needsNextPage(view, 180)).toBe(true);
    expect(needsNextPage(activityReducer(view, { type: 'page_requested' }), 199)).toBe(false);
  });

  it('when the filter is cleared, the unfiltered positions show again from the blocks already read', () => {
    const view = fold(
      head(300),
      { type: 'block_received', block: 0, reply: listed(range(1, 100), 101) },
      { type: 'filter_changed', filter: lane },
      { type: 'filter_changed', filter: emptyActivityFilter },
    );
    expect(activityRowCount(view)).toBe(300);
    expect(activityRowAt(view, 41)).toMatchObject({ kind: 'event', event: { seq: 42 } });
  });
});

describe('the activity reducer, filtered, when the log grows after the scan reached its end', () => {
  const lane = { ...emptyActivityFilter, lane: 'doc-7' };
  const page = (view: ActivityView, events: ActivityEvent[], next: number | null): ActivityView =>
    activityReducer(activityReducer(view, { type: 'page_requested' }), {
      type: 'page_received',
      generation: view.generation,
      reply: listed(events, next),
    });

  it('reads on from where it searched: a match appended since joins the end instead of never being shown', () => {
    const ended = page(fold(head(500), { type: 'filter_changed', filter: lane }), [eventAt(17), eventAt(300)], null);
    expect(ended.next).toBeNull();
    expect(activityRowCount(ended)).toBe(2);
    // A quiet head changes nothing: no read, no "more" row.
    expect(activityReducer(ended, head(500))).toMatchObject({ next: null, scannedThrough: 500 });
    const grown = activityReducer(ended, head(520));
    // The list says there is more (a "reading more" row) and reads it as the person reaches the end.
    expect(grown.next).toBe(501);
    expect(activityRowCount(grown)).toBe(3);
    expect(activityRowAt(grown, 2)).toEqual({ kind: 'more' });
    expect(needsNextPage(grown, 1)).toBe(true);
    const read = page(grown, [eventAt(510)], null);
    expect(read.matches.map((e) => e.seq)).toEqual([17, 300, 510]);
    expect(read).toMatchObject({ next: null, scannedThrough: 520 });
  });

  it('searches again only what the last page may not have seen, and never shows a match twice', () => {
    // Asked when status said 500; the page ran on to 505, which matched, before status said so.
    const ended = page(fold(head(500), { type: 'filter_changed', filter: lane }), [eventAt(17), eventAt(505)], null);
    expect(ended.scannedThrough).toBe(505);
    const grown = activityReducer(ended, head(530));
    expect(grown.next).toBe(506);
    const read = page(grown, [eventAt(505), eventAt(529)], null);
    expect(read.matches.map((e) => e.seq)).toEqual([17, 505, 529]);
  });

  it('before status answered, reads on from the last match (nothing after it is taken as searched)', () => {
    const ended = page(fold({ type: 'filter_changed', filter: lane }), [eventAt(40)], null);
    expect(ended.scannedThrough).toBe(40);
    expect(activityReducer(ended, head(60)).next).toBe(41);
  });

  it('a head while a page is in flight leaves the page to say where the scan goes on', () => {
    const asked = activityReducer(fold(head(500), { type: 'filter_changed', filter: lane }), {
      type: 'page_requested',
    });
    const moved = activityReducer(asked, head(900));
    expect(moved.next).toBe(1);
    const answered = activityReducer(moved, {
      type: 'page_received',
      generation: asked.generation,
      reply: listed([eventAt(5)], 201),
    });
    expect(answered.next).toBe(201);
    expect(answered.scannedThrough).toBeNull();
  });

  it('at the matches bound it stops for good, however the log grows', () => {
    const full = page(
      fold(head(activityMatchesMax), { type: 'filter_changed', filter: lane }),
      range(1, activityMatchesMax),
      null,
    );
    expect(full.next).toBeNull();
    expect(activityReducer(full, head(activityMatchesMax * 2)).next).toBeNull();
  });

  it('a page of a replaced filter is dropped, and the new filter searches from position 1', () => {
    const ended = page(fold(head(500), { type: 'filter_changed', filter: lane }), [eventAt(300)], null);
    const asked = activityReducer(activityReducer(ended, head(600)), { type: 'page_requested' });
    const replaced = activityReducer(asked, { type: 'filter_changed', filter: { ...lane, lane: 'doc-8' } });
    const late = activityReducer(replaced, {
      type: 'page_received',
      generation: asked.generation,
      reply: listed([eventAt(550)], null),
    });
    expect(late).toMatchObject({ matches: [], next: 1, scannedThrough: null });
  });
});

describe('the activity reducer, unfiltered, when the log grows between reads', () => {
  it('a block read at the end before a head, answered after it, is read again at once (never left short)', () => {
    // Block 1 was read when the log ended at 148; status said 150 before that answer came.
    const late = fold(head(140), { type: 'block_requested', block: 1 }, head(150), {
      type: 'block_received',
      block: 1,
      reply: listed(range(101, 148), null),
    });
    // Positions 149 and 150 say loading (not missing, not shifted), the rows it has show, and it is read again now.
    expect(activityRowAt(late, 148)).toEqual({ kind: 'loading', seq: 149 });
    expect(activityRowAt(late, 147)).toMatchObject({ kind: 'event', event: { seq: 148 } });
    expect(late.blocks[1]?.behind).toBe(true);
    expect(blocksToLoad(late, 140, 149)).toEqual([1]);
    expect(blocksToLoad(activityReducer(late, { type: 'block_requested', block: 1 }), 140, 149)).toEqual([]);
    const next = activityReducer(late, head(150));
    expect(next.blocks[1]).toBeUndefined();
    expect(blocksToLoad(next, 140, 149)).toEqual([1]);
  });

  it('a block short of the head it was asked after is not behind: it waits for the next head, never read in a loop', () => {
    const short = fold(
      head(150),
      { type: 'block_requested', block: 1 },
      {
        type: 'block_received',
        block: 1,
        reply: listed(range(101, 148), null),
      },
    );
    expect(short.blocks[1]?.behind).toBe(false);
    expect(blocksToLoad(short, 140, 149)).toEqual([]);
    // An answer at the log's end that the newer head does not outrun is not behind either.
    const caughtUp = fold(head(140), { type: 'block_requested', block: 1 }, head(150), {
      type: 'block_received',
      block: 1,
      reply: listed(range(101, 150), null),
    });
    expect(caughtUp.blocks[1]?.behind).toBe(false);
  });

  it('new events make the list longer at once, and each new position is loading until its block is read', () => {
    const read = fold(head(100), { type: 'block_received', block: 0, reply: listed(range(1, 100), 101) });
    expect(read.blocks[0]?.complete).toBe(true);
    const grown = activityReducer(read, head(450));
    expect(activityRowCount(grown)).toBe(450);
    expect(activityRowAt(grown, 99)).toMatchObject({ kind: 'event', event: { seq: 100 } });
    expect(activityRowAt(grown, 449)).toEqual({ kind: 'loading', seq: 450 });
    expect(blocksToLoad(grown, 90, 449)).toEqual([1, 2, 3, 4]);
  });
});

describe('the activity reducer, first paint', () => {
  it('when the first block answers before status, its rows show at once and status then sets the length', () => {
    expect(blocksToLoad(initialActivityView, 0, activityBlockRows - 1)).toEqual([0]);
    const early = fold(
      { type: 'block_requested', block: 0 },
      { type: 'block_received', block: 0, reply: listed(range(1, 100), 101) },
    );
    expect(early.lastSeq).toBeNull();
    expect(activityRowCount(early)).toBe(100);
    expect(activityRowAt(early, 0)).toMatchObject({ kind: 'event', event: { seq: 1 } });
    expect(activityRowCount(activityReducer(early, head(100_000)))).toBe(100_000);
  });

  it('an empty journal shows no rows and asks for nothing more once status says so', () => {
    const empty = fold(head(0));
    expect(activityRowCount(empty)).toBe(0);
    expect(blocksToLoad(empty, 0, 99)).toEqual([]);
  });
});
