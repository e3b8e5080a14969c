import type { ActionListRow, BrokerApi, Outcome, Reply } from '../../../broker/contract/index.js';
import type { ReplyError } from '../api/operator-api.js';

/**
 * The Actions list: one row per action, newest first (actions.list), keyset-paged backwards by the
 * first journal position of each action (`before_seq`). The newest page is read again while the
 * list is shown, so new actions join the top and open ones change in place; older pages are read
 * as the person scrolls down.
 */

/** Rows per page (actions.list allows up to 500). */
export const actionListPageRows = 200;
/** Rows kept in memory; the list stops offering older ones beyond it (narrow the filter). */
export const actionListRowsMax = 20_000;
/** How close to the last loaded row the view may get before the next older page is read. */
export const actionListPrefetchRows = 40;

export type ActionListInput = BrokerApi['actions.list']['input'];
type ListReply = Reply<BrokerApi['actions.list']['output']>;

export interface ActionListFilter {
  outcome: Outcome | '';
  target: string;
  lane: string;
  session: string;
  text: string;
  /** Only actions not settled or closed yet. */
  open: boolean;
}

export const emptyActionListFilter: ActionListFilter = {
  outcome: '',
  target: '',
  lane: '',
  session: '',
  text: '',
  open: false,
};

export interface ActionListView {
  filter: ActionListFilter;
  /** Bumped at every filter change, so a late reply for an older filter is dropped. */
  generation: number;
  /** Newest first (first_seq descending), each action once. */
  rows: ActionListRow[];
  /** Where the next older page starts (before_seq); null once the oldest was read. */
  nextBefore: number | null;
  /** Whether an older page may exist: true until a page said there is none. */
  more: boolean;
  /**
   * Set when the last page read was a search that stopped at the broker's bound of rows examined per
   * page (`searched_before_seq`): every action down to this journal position was searched. Older pages
   * are then read when the person asks ("Search older"), not as they scroll, since each may find nothing.
   */
  searchedBefore: number | null;
  /**
   * The journal's newest position when the newest page was last read (`as_of_seq`): the rows hold every match from
   * there down to where the list has read. A newest page read again that stopped at the search bound above it would
   * leave the stretch between unsearched, so the list then restarts from that page rather than keep the rows below.
   */
  asOfSeq: number | null;
  /** An older page is in flight. */
  paging: boolean;
  /** The first page has answered for this filter. */
  loaded: boolean;
  error: ReplyError | null;
}

export const initialActionListView: ActionListView = {
  filter: emptyActionListFilter,
  generation: 0,
  rows: [],
  nextBefore: null,
  more: true,
  searchedBefore: null,
  asOfSeq: null,
  paging: false,
  loaded: false,
  error: null,
};

export type ActionListEvent =
  | { type: 'filter_changed'; filter: ActionListFilter }
  | { type: 'page_requested' }
  /** `beforeSeq`: the `before_seq` the page was read with (the view's `nextBefore` when it was asked for). */
  | { type: 'page_received'; generation: number; beforeSeq: number; reply: ListReply }
  | { type: 'head_received'; generation: number; reply: ListReply };

/** Pure: the next view from the current one and one event. */
export function actionListReducer(view: ActionListView, event: ActionListEvent): ActionListView {
  switch (event.type) {
    case 'filter_changed':
      return { ...initialActionListView, filter: event.filter, generation: view.generation + 1 };
    case 'page_requested':
      return { ...view, paging: true };
    case 'page_received': {
      if (event.generation !== view.generation) return view;
      // The list restarted from a newest page while this one was out: it would join below a stretch nobody searched.
      if (event.beforeSeq !== view.nextBefore) return { ...view, paging: false };
      if (!event.reply.ok) return { ...view, paging: false, error: event.reply.error };
      const { actions, next_before, searched_before_seq } = event.reply.value;
      const rows = appendOlder(view.rows, actions);
      const full = rows.length >= actionListRowsMax;
      return {
        ...view,
        rows,
        nextBefore: full ? null : next_before,
        more: !full && next_before !== null,
        searchedBefore: full ? null : searched_before_seq,
        paging: false,
        loaded: true,
        error: null,
      };
    }
    case 'head_received': {
      if (event.generation !== view.generation) return view;
      if (!event.reply.ok) return { ...view, error: event.reply.error };
      const { actions, next_before, searched_before_seq, as_of_seq } = event.reply.value;
      return {
        ...mergeHead(view, actions, next_before, searched_before_seq),
        asOfSeq: as_of_seq,
        loaded: true,
        error: null,
      };
    }
  }
}

/** Older rows join the end; a row already shown (a page boundary that moved) is not shown twice. */
export function appendOlder(rows: readonly ActionListRow[], older: readonly ActionListRow[]): ActionListRow[] {
  const oldest = rows.at(-1)?.first_seq ?? Number.POSITIVE_INFINITY;
  const seen = new Set(rows.map((r) => r.action_id));
  const fresh = older.filter((r) => {
    if (r.first_seq >= oldest || seen.has(r.action_id)) return false;
    seen.add(r.action_id);
    return true;
  });
  return [...rows, ...sortNewestFirst(fresh)].slice(0, actionListRowsMax);
}

/**
 * The newest page read again replaces every row in the range it covers (new actions appear, changed
 * ones change, ones that no longer match the filter leave) and keeps the older rows below it. When
 * the newest page does not reach the rows already shown (more new actions than a page), the list
 * restarts from it, so it never shows a gap.
 */
export function mergeHead(
  view: ActionListView,
  head: readonly ActionListRow[],
  headNextBefore: number | null,
  headSearchedBefore: number | null = null,
): ActionListView {
  const fresh = sortNewestFirst(head);
  if (headSearchedBefore !== null) return mergeSearchedHead(view, fresh, headSearchedBefore);
  const headOldest = fresh.at(-1)?.first_seq;
  // The head covers everything that exists for this filter.
  if (headNextBefore === null || headOldest === undefined)
    return { ...view, rows: fresh, nextBefore: null, more: false, searchedBefore: null };
  const newestShown = view.rows[0]?.first_seq;
  if (newestShown === undefined || newestShown < headOldest)
    return { ...view, rows: fresh, nextBefore: headNextBefore, more: true, searchedBefore: null };
  const below = view.rows.filter((r) => r.first_seq < headOldest);
  if (below.length === 0) return { ...view, rows: fresh, nextBefore: headNextBefore, more: true, searchedBefore: null };
  return { ...view, rows: [...fresh, ...below].slice(0, actionListRowsMax) };
}

/**
 * A head that stopped at the search bound covers the actions down to `searchedBefore`. When the person has already
 * searched deeper and the head meets what the list had searched (`searchedBefore` at most one above the previous
 * head's `asOfSeq`), the rows found below it stay, and so does where the search goes on. Else the list is the head's,
 * stopped at its bound with "Search older" from there: when more new actions than the bound came between two head
 * reads, keeping the older rows would show them under a stretch nobody searched.
 */
function mergeSearchedHead(view: ActionListView, fresh: ActionListRow[], searchedBefore: number): ActionListView {
  const deeper = !view.more || (view.nextBefore !== null && view.nextBefore < searchedBefore);
  const meets = view.asOfSeq !== null && searchedBefore <= view.asOfSeq + 1;
  if (!deeper || !meets) return { ...view, rows: fresh, nextBefore: searchedBefore, more: true, searchedBefore };
  const below = view.rows.filter((r) => r.first_seq < searchedBefore);
  return { ...view, rows: [...fresh, ...below].slice(0, actionListRowsMax) };
}

function sortNewestFirst(rows: readonly ActionListRow[]): ActionListRow[] {
  return [...rows].sort((a, b) => b.first_seq - a.first_seq);
}

export function actionFilterActive(filter: ActionListFilter): boolean {
  return (
    filter.outcome !== '' ||
    filter.open ||
    [filter.target, filter.lane, filter.session, filter.text].some((f) => f.trim() !== '')
  );
}

/** The actions.list input for one page (only the fields a person filled in). */
export function actionListInput(
  filter: ActionListFilter,
  beforeSeq: number | null,
  limit = actionListPageRows,
): ActionListInput {
  const input: ActionListInput = { limit };
  if (beforeSeq !== null) input.before_seq = beforeSeq;
  if (filter.outcome !== '') input.outcome = filter.outcome;
  if (filter.open) input.open = true;
  if (filter.target.trim() !== '') input.target = filter.target.trim();
  if (filter.lane.trim() !== '') input.lane = filter.lane.trim();
  if (filter.session.trim() !== '') input.session_id = filter.session.trim();
  if (filter.text.trim() !== '') input.text = filter.text.trim();
  return input;
}

/** Whether the view, showing up to `lastVisibleIndex`, needs the next older page now. */
export function needsOlderPage(view: ActionListView, lastVisibleIndex: number): boolean {
  return (
    view.loaded &&
    view.more &&
    view.searchedBefore === null &&
    !view.paging &&
    view.error === null &&
    lastVisibleIndex >= view.rows.length - actionListPrefetchRows
  );
}
