import type { ActivityEvent, BrokerApi, BrokerStatus, Outcome, Reply } from '../../../broker/contract/index.js';
import type { ReplyError } from '../api/operator-api.js';

/**
 * The Activity timeline: every journal event in append order (seq), never renumbered.
 *
 * Unfiltered, the list has one row per journal position 1..last_seq (from `status`), and a row's
 * index IS its position minus one, so the view can jump anywhere (the end of 100,000 events) and
 * fetch only the block of positions it shows: each block is one keyset page (`from_seq` = its first
 * position). Filtered, the count is not known in advance: matches are read forward page by page
 * (`next_seq`), as far as the person scrolls.
 */

/** Positions per unfiltered block (one activity.list page; the API allows up to 500). */
export const activityBlockRows = 100;
/** Blocks kept in memory; the farthest from the last one received are dropped first. */
export const activityBlocksKeptMax = 40;
/** Matches per filtered page. */
export const activityPageRows = 200;
/** Filtered rows kept in memory (the scan stops offering "more" beyond it; narrow the filter). */
export const activityMatchesMax = 50_000;
/** How close to the last loaded match the view may get before the next page is read. */
export const activityPrefetchRows = 50;

export interface ActivityFilter {
  session: string;
  lane: string;
  outcome: Outcome | '';
  code: string;
  text: string;
}

export const emptyActivityFilter: ActivityFilter = { session: '', lane: '', outcome: '', code: '', text: '' };

export interface ActivityBlock {
  rows: ActivityEvent[];
  /** False when the block was read at the log's end: positions after it did not exist yet. */
  complete: boolean;
  /**
   * True when the answer came late: a status that arrived while it was in flight says the log holds positions of
   * this block the answer lacks (it was read before they were appended). Its rows show, and it is asked again at
   * once rather than at the next status.
   */
  behind: boolean;
}

export interface ActivityView {
  filter: ActivityFilter;
  /** Bumped at every filter change, so a late reply for an older filter is dropped. */
  generation: number;
  /** The journal's last position as `status` last said; null until known. */
  lastSeq: number | null;
  /** The highest position a block returned (the list shows at least that many rows, even before status answers). */
  seenSeq: number;
  blocks: Record<number, ActivityBlock>;
  /** Blocks with a request in flight, each with the log's length `status` had said when it was asked (0 before). */
  loading: Record<number, number>;
  /** Filtered: matches so far, in seq order. */
  matches: ActivityEvent[];
  /** Filtered: where the next page starts; null once the scan reached the log's end (or the matches' bound). */
  next: number | null;
  /**
   * Filtered, once the scan reached the log's end: every position up to this one was searched (the log's length as
   * `status` said before the last page was asked for, or the last match if later). When the log grows past it, the
   * scan reads on from the next position, so events appended since are searched too rather than never shown.
   */
  scannedThrough: number | null;
  /** Filtered: the log's length as known when the page in flight was asked for (a floor of what it will search). */
  scanAsOf: number | null;
  scanning: boolean;
  error: ReplyError | null;
}

export const initialActivityView: ActivityView = {
  filter: emptyActivityFilter,
  generation: 0,
  lastSeq: null,
  seenSeq: 0,
  blocks: {},
  loading: {},
  matches: [],
  next: 1,
  scannedThrough: null,
  scanAsOf: null,
  scanning: false,
  error: null,
};

type ListReply = Reply<BrokerApi['activity.list']['output']>;

export type ActivityViewEvent =
  | { type: 'head'; reply: Reply<BrokerStatus> }
  | { type: 'block_requested'; block: number }
  | { type: 'block_received'; block: number; reply: ListReply }
  | { type: 'filter_changed'; filter: ActivityFilter }
  | { type: 'page_requested' }
  | { type: 'page_received'; generation: number; reply: ListReply };

/** Pure: the next view from the current one and one event. */
export function activityReducer(view: ActivityView, event: ActivityViewEvent): ActivityView {
  switch (event.type) {
    case 'head': {
      if (!event.reply.ok) return { ...view, error: event.reply.error };
      const lastSeq = event.reply.value.journal.last_seq;
      // A block read at the log's end is stale once the log holds positions it lacks: read it again.
      const current = ([key, b]: [string, ActivityBlock]) =>
        b.complete ||
        (b.rows.at(-1)?.seq ?? 0) >= Math.min(lastSeq, blockFirstSeq(Number(key)) + activityBlockRows - 1);
      const entries = Object.entries(view.blocks);
      const kept = entries.filter(current);
      return {
        ...view,
        ...readOnPastEnd(view, lastSeq),
        lastSeq,
        blocks: kept.length === entries.length ? view.blocks : Object.fromEntries(kept),
        error: null,
      };
    }
    case 'block_requested':
      return { ...view, loading: { ...view.loading, [event.block]: view.lastSeq ?? 0 } };
    case 'block_received': {
      const askedAt = view.loading[event.block];
      const loading = { ...view.loading };
      delete loading[event.block];
      if (!event.reply.ok) return { ...view, loading, error: event.reply.error };
      const first = blockFirstSeq(event.block);
      const last = first + activityBlockRows - 1;
      const rows = event.reply.value.events.filter((e) => e.seq >= first && e.seq <= last);
      const complete =
        rows.at(-1)?.seq === last || (event.reply.value.next_seq !== null && event.reply.value.next_seq > last);
      // The log is at least as long as the rows it returned: the first block need not wait for status.
      const seenSeq = Math.max(view.seenSeq, rows.at(-1)?.seq ?? 0);
      // Short of what a status newer than the request says: read before those positions were appended, so read it
      // again now. Only a status that moved on since the request counts, so a log that really ends short of what
      // status says is read again at each status, never in a loop.
      const lastSeq = view.lastSeq ?? 0;
      const behind =
        !complete &&
        askedAt !== undefined &&
        lastSeq > askedAt &&
        (rows.at(-1)?.seq ?? first - 1) < Math.min(lastSeq, last);
      return {
        ...view,
        seenSeq,
        loading,
        blocks: keepNear({ ...view.blocks, [event.block]: { rows, complete, behind } }, event.block),
        error: null,
      };
    }
    case 'filter_changed':
      return {
        ...view,
        filter: event.filter,
        generation: view.generation + 1,
        matches: [],
        next: 1,
        scannedThrough: null,
        scanAsOf: null,
        scanning: false,
        error: null,
      };
    case 'page_requested':
      return { ...view, scanning: true, scanAsOf: view.lastSeq };
    case 'page_received': {
      if (event.generation !== view.generation) return view;
      if (!event.reply.ok) return { ...view, scanning: false, error: event.reply.error };
      const after = view.matches.at(-1)?.seq ?? 0;
      const fresh = event.reply.value.events.filter((e) => e.seq > after);
      const matches = [...view.matches, ...fresh].slice(0, activityMatchesMax);
      const full = matches.length >= activityMatchesMax;
      const next = full ? null : event.reply.value.next_seq;
      // At the log's end the page searched at least what status had said before it was asked for.
      const scannedThrough =
        full || next !== null ? null : Math.max(view.scanAsOf ?? 0, matches.at(-1)?.seq ?? 0, after);
      return { ...view, matches, next, scannedThrough, scanning: false, error: null };
    }
  }
}

/**
 * Filtered, at the log's end: when the log has grown past what the scan searched, the scan reads on from there (the
 * list says "so far" and reads the rest as the person scrolls to it), so new matches join the end in seq order.
 */
function readOnPastEnd(view: ActivityView, lastSeq: number): Partial<ActivityView> {
  const through = view.scannedThrough;
  if (!filterActive(view.filter) || view.next !== null || through === null || lastSeq <= through) return {};
  return { next: through + 1, scannedThrough: null };
}

function keepNear(blocks: Record<number, ActivityBlock>, around: number): Record<number, ActivityBlock> {
  const keys = Object.keys(blocks).map(Number);
  if (keys.length <= activityBlocksKeptMax) return blocks;
  const kept = keys.sort((a, b) => Math.abs(a - around) - Math.abs(b - around)).slice(0, activityBlocksKeptMax);
  return Object.fromEntries(kept.map((k) => [k, blocks[k] as ActivityBlock]));
}

export function filterActive(filter: ActivityFilter): boolean {
  return (
    filter.session.trim() !== '' ||
    filter.lane.trim() !== '' ||
    filter.outcome !== '' ||
    filter.code.trim() !== '' ||
    filter.text.trim() !== ''
  );
}

/** The zone this page writes times in (the browser's own), which the Text filter is matched in. */
export function viewerZone(): string {
  return new Intl.DateTimeFormat().resolvedOptions().timeZone;
}

/**
 * The activity.list input for one filtered page (only the fields a person filled in). A text is sent with the page's
 * zone, so the broker matches each row as this page writes it (eventRowCells: a card's expiry in this zone), never
 * the terminal's ISO the page does not show.
 */
export function filterInput(
  filter: ActivityFilter,
  fromSeq: number,
  limit = activityPageRows,
  zone = viewerZone(),
): BrokerApi['activity.list']['input'] {
  const input: BrokerApi['activity.list']['input'] = { from_seq: fromSeq, limit };
  if (filter.session.trim() !== '') input.session_id = filter.session.trim();
  if (filter.lane.trim() !== '') input.lane = filter.lane.trim();
  if (filter.outcome !== '') input.outcome = filter.outcome;
  if (filter.code.trim() !== '') input.code = filter.code.trim();
  if (filter.text.trim() !== '') {
    input.text = filter.text.trim();
    input.zone = zone;
  }
  return input;
}

export const blockOf = (index: number): number => Math.floor(index / activityBlockRows);
export const blockFirstSeq = (block: number): number => block * activityBlockRows + 1;

/** How many rows the list has: every position, or the matches so far plus one "reading more" row. */
export function activityRowCount(view: ActivityView): number {
  if (filterActive(view.filter)) return view.matches.length + (view.next === null ? 0 : 1);
  return Math.max(view.lastSeq ?? 0, view.seenSeq);
}

export type ActivityRow =
  | { kind: 'event'; event: ActivityEvent }
  | { kind: 'loading'; seq: number | null }
  | { kind: 'missing'; seq: number }
  | { kind: 'more' };

/** What the list shows at `index` (pure; the view renders it, whatever it is). */
export function activityRowAt(view: ActivityView, index: number): ActivityRow {
  if (filterActive(view.filter)) {
    const event = view.matches[index];
    return event === undefined ? { kind: 'more' } : { kind: 'event', event };
  }
  const seq = index + 1;
  const block = view.blocks[blockOf(index)];
  if (block === undefined) return { kind: 'loading', seq };
  // Positions are contiguous in the journal, so the row is usually at its offset; search otherwise.
  const guess = block.rows[index % activityBlockRows];
  const event = guess?.seq === seq ? guess : block.rows.find((e) => e.seq === seq);
  if (event !== undefined) return { kind: 'event', event };
  return block.complete ? { kind: 'missing', seq } : { kind: 'loading', seq };
}

/**
 * Unfiltered: the blocks the rows firstIndex..lastIndex need that are neither loaded (or loaded behind) nor in flight.
 * Before the log's length is known, the asked range is taken as is (the first paint reads block 0
 * alongside `status` instead of after it).
 */
export function blocksToLoad(view: ActivityView, firstIndex: number, lastIndex: number): number[] {
  if (filterActive(view.filter) || lastIndex < firstIndex || view.lastSeq === 0) return [];
  const wanted: number[] = [];
  const lastBlock = blockOf(view.lastSeq === null ? lastIndex : Math.min(lastIndex, view.lastSeq - 1));
  for (let b = blockOf(Math.max(0, firstIndex)); b <= lastBlock; b += 1) {
    if ((view.blocks[b]?.behind ?? true) && view.loading[b] === undefined) wanted.push(b);
  }
  return wanted;
}

/** Filtered: whether the view, showing up to `lastVisibleIndex`, needs the next page now. */
export function needsNextPage(view: ActivityView, lastVisibleIndex: number): boolean {
  return (
    filterActive(view.filter) &&
    view.next !== null &&
    !view.scanning &&
    lastVisibleIndex >= view.matches.length - activityPrefetchRows
  );
}
