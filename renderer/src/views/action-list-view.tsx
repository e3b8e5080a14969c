import { useVirtualizer } from '@tanstack/react-virtual';
import { useEffect, useRef } from 'react';
import type { ActionListRow } from '../../../broker/contract/index.js';
import { decisionText } from '../../../broker/contract/operator-actor.js';
import {
  actionFilterActive,
  emptyActionListFilter,
  needsOlderPage,
  type ActionListFilter,
  type ActionListView as ActionListViewState,
} from '../store/action-list-reducer.js';
import { spanText } from '../store/action-wait.js';
import { outcomePill } from '../store/outcome-pill.js';
import { useAppStore } from '../store/app-store.js';
import { actionHref, activityOrigin } from '../store/hash-route.js';
import { FilterForm, OutcomeSelect } from './filter-fields.js';
import { usePolling } from './use-polling.js';
import { clockOnly, dateTime, zoneName } from '../../../broker/contract/time-words.js';

/** A row's height before it is measured (two lines); rows that wrap are measured and grow. */
const estimatedRowPx = 58;
/** Rows rendered beyond the visible ones on each side. */
const overscanRows = 8;
/**
 * How often the newest page is read again while the broker's change stream is down; while it is up
 * the page is read on each pushed `activity` notice (and a slow fallback poll, use-polling.ts).
 */
export const actionListHeadRefreshMs = 2_000;
export const activityTopics = ['activity'] as const;

/**
 * Actions: one row per action, newest first, keyset-paged (older pages are read as the person
 * scrolls down) and virtualized (the DOM holds about the visible rows, however many are loaded).
 * Every cell wraps rather than cutting off; a long path is clamped with the whole of it as a tooltip.
 */
export function ActionListView() {
  const view = useAppStore((state) => state.actionListView);
  const refreshHead = useAppStore((state) => state.refreshActionsHead);
  const loadOlder = useAppStore((state) => state.loadOlderActions);
  const setFilter = useAppStore((state) => state.setActionListFilter);
  usePolling(refreshHead, actionListHeadRefreshMs, activityTopics);

  const scroller = useRef<HTMLDivElement>(null);
  const stopped = view.searchedBefore !== null;
  const count = view.rows.length + (view.more && view.loaded && !stopped ? 1 : 0);
  const virtualizer = useVirtualizer({
    count,
    getScrollElement: () => scroller.current,
    estimateSize: () => estimatedRowPx,
    overscan: overscanRows,
  });
  const items = virtualizer.getVirtualItems();
  const last = items.at(-1)?.index ?? -1;
  useEffect(() => {
    if (needsOlderPage(view, last)) void loadOlder();
  }, [last, view, loadOlder]);

  return (
    <div className="action-list" data-testid="action-list">
      <p className="muted intro">
        <span data-testid="action-list-count" data-loaded={view.rows.length} data-more={view.more}>
          {countText(view.rows.length, view.loaded, view.more && !stopped, actionFilterActive(view.filter))}
        </span>{' '}
        · One row per action, newest first. Open a row for its detail and chronology.
      </p>
      <ActionFilterForm applied={view.filter} onApply={setFilter} />
      {view.error !== null && (
        <div className="error" role="alert" data-testid="action-list-error">
          <strong>{view.error.code}</strong>
          <span>{view.error.message}</span>
        </div>
      )}
      <div className="action-list-head" aria-hidden="true">
        <span data-testid="action-list-time-heading">Time ({zoneName(Date.now())}) · ticket</span>
        <span>Target and request · agent · lane · decided by</span>
        <span>Outcome · duration</span>
      </div>
      <div
        ref={scroller}
        className="action-list-scroller"
        data-testid="action-list-scroller"
        role="list"
        aria-label="Actions, newest first"
      >
        <div style={{ height: virtualizer.getTotalSize(), position: 'relative' }}>
          {items.map((item) => {
            const row = view.rows[item.index];
            return (
              <div
                key={item.key}
                ref={virtualizer.measureElement}
                data-index={item.index}
                className="action-slot"
                style={{ transform: `translateY(${item.start}px)` }}
                role="listitem"
              >
                {row === undefined ? (
                  <p className="muted action-more">
                    {view.paging ? 'reading older actions…' : 'older actions follow…'}
                  </p>
                ) : (
                  <ActionRowView row={row} />
                )}
              </div>
            );
          })}
        </div>
      </div>
      {view.loaded && <ListFoot view={view} onSearchOlder={loadOlder} />}
    </div>
  );
}

const listOrigin = activityOrigin('actions');

/**
 * Below the list: that nothing matches, or — when a search stopped at the broker's bound of rows examined
 * per page — how far back it looked and the person's way on (older pages of a search are read on request,
 * not as they scroll, since each may find nothing).
 */
function ListFoot({ view, onSearchOlder }: { view: ActionListViewState; onSearchOlder: () => Promise<void> }) {
  if (view.searchedBefore === null)
    return view.rows.length === 0 ? (
      <p className="muted" data-testid="action-list-empty">
        No action matches.
      </p>
    ) : null;
  return (
    <p className="muted action-searched" data-testid="action-list-searched" data-searched-before={view.searchedBefore}>
      {view.rows.length === 0 ? 'No match yet: searched' : 'Searched'} the newest actions back to journal position{' '}
      {view.searchedBefore.toLocaleString('en-US')} —{' '}
      <button
        type="button"
        onClick={() => void onSearchOlder()}
        disabled={view.paging}
        data-testid="action-list-search-older"
      >
        {view.paging ? 'Searching…' : 'Search older'}
      </button>
    </p>
  );
}

function countText(loaded: number, ready: boolean, more: boolean, filtered: boolean): string {
  if (!ready) return 'loading…';
  const noun = `${filtered ? 'matching ' : ''}${loaded === 1 ? 'action' : 'actions'}`;
  return more
    ? `newest ${loaded.toLocaleString('en-US')} ${noun} (older ones load as you scroll)`
    : `${loaded.toLocaleString('en-US')} ${noun}`;
}

function ActionRowView({ row }: { row: ActionListRow }) {
  const time = new Date(row.accepted_at_ms).toISOString();
  const shown = dateTime(row.accepted_at_ms);
  const request = row.method === null ? row.request : `${row.method} ${row.request}`;
  const agent = agentText(row);
  const pill = outcomePill(row);
  const decided = decisionText(row);
  return (
    <a
      href={actionHref(row.action_id, listOrigin)}
      className={`action-row tone-${pill.tone}`}
      data-testid="action-row"
      data-action-id={row.action_id}
      data-first-seq={row.first_seq}
    >
      <span className="action-when">
        <time dateTime={time} title={shown}>
          {clockOnly(row.accepted_at_ms)}
        </time>
        <span className="action-ticket">{row.ticket === null ? '' : `#${row.ticket}`}</span>
      </span>
      <span className="action-what">
        <span className="action-request" title={`${row.target} ${request}`}>
          <strong>{row.target}</strong> <code>{request}</code>
        </span>
        <span className="action-meta muted">
          <span title={row.session_id ?? ''}>{agent}</span>
          {row.lane !== null && <span>lane {row.lane}</span>}
          {decided !== null && <span title={row.decided_by ?? decided}>{decided}</span>}
        </span>
      </span>
      <span className="action-result">
        <span className={`badge tone-${pill.tone}`} data-testid="action-row-outcome" data-tone={pill.tone}>
          {pill.text}
        </span>
        {row.code !== null && <code className="action-code">{row.code}</code>}
        <span className="muted">{row.duration_ms === null ? '' : spanText(row.duration_ms)}</span>
      </span>
    </a>
  );
}

/** The agent by name and pid when the session knew them, else its session id; the broker's own lookups say so. */
function agentText(row: ActionListRow): string {
  const name = row.agent?.name ?? row.session_id ?? 'broker';
  const pid = row.agent?.pid ?? null;
  return pid === null ? name : `${name} (pid ${pid})`;
}

/** The action list's filter: outcome, target, lane, session, text and open only. */
function ActionFilterForm({
  applied,
  onApply,
}: {
  applied: ActionListFilter;
  onApply: (filter: ActionListFilter) => void;
}) {
  return (
    <FilterForm
      label="Filter the actions"
      testId="actions-filter"
      applied={applied}
      empty={emptyActionListFilter}
      onApply={onApply}
    >
      {(form) => (
        <>
          <OutcomeSelect
            value={form.draft.outcome}
            onChange={(outcome) => form.set({ outcome })}
            testId="actions-filter-outcome"
          />
          {form.text('target', 'Target', 'route or host')}
          {form.text('lane', 'Lane', 'lane name')}
          {form.text('session', 'Session', 'ses_…')}
          {form.text('text', 'Text', 'path, command, code, #ticket…')}
          <label className="inline-check">
            <input
              type="checkbox"
              checked={form.draft.open}
              onChange={(e) => form.set({ open: e.target.checked })}
              data-testid="actions-filter-open"
            />
            Open only
          </label>
        </>
      )}
    </FilterForm>
  );
}
