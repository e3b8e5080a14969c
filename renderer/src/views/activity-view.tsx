import { useVirtualizer } from '@tanstack/react-virtual';
import { useEffect, useRef } from 'react';
import type { ActivityEvent } from '../../../broker/contract/index.js';
import {
  activityBlockRows,
  activityRowAt,
  activityRowCount,
  emptyActivityFilter,
  filterActive,
  needsNextPage,
  type ActivityFilter,
  type ActivityRow,
} from '../store/activity-reducer.js';
import { useAppStore } from '../store/app-store.js';
import {
  actionHref,
  activityModeHref,
  activityModeOf,
  activityOrigin,
  type ActivityMode,
} from '../store/hash-route.js';
import { FilterForm, OutcomeSelect } from './filter-fields.js';
import { ActionListView } from './action-list-view.js';
import { TimelineView } from './timeline-view.js';
import { useHashRoute } from './use-hash-route.js';
import { usePolling } from './use-polling.js';
import { clockOnly, dateTime, zoneName } from '../../../broker/contract/time-words.js';
import { eventRowCells } from '../../../broker/contract/event-row-text.js';

/** Every row has one height, so the list's size is exact and a jump to any position is one step. */
export const activityRowPx = 30;
/** Rows rendered beyond the visible ones on each side (smooth scrolling without a DOM of 100,000). */
const overscanRows = 12;
/** How often the view re-reads the journal's last position, so new events join the end. */
export const activityHeadRefreshMs = 2_000;

const modeLabels: Record<ActivityMode, string> = { actions: 'Actions', timeline: 'Timeline', events: 'Events' };

/**
 * Activity in three modes, named by the address (`#/activity/<mode>`, so reload and back keep it):
 * the actions one row each (the default), the same actions as bars on a time axis, and the raw
 * journal events.
 */
export function ActivityView() {
  const mode = activityModeOf(useHashRoute());
  return (
    <section className="panel activity" aria-labelledby="activity-heading" data-testid="activity-view" data-mode={mode}>
      <header className="panel-header">
        <h2 id="activity-heading">Activity</h2>
        <nav className="activity-modes" aria-label="Activity modes">
          {(Object.keys(modeLabels) as ActivityMode[]).map((m) => (
            <a
              key={m}
              href={activityModeHref(m)}
              aria-current={m === mode ? 'page' : undefined}
              data-testid={`activity-mode-${m}`}
            >
              {modeLabels[m]}
            </a>
          ))}
        </nav>
      </header>
      {mode === 'actions' && <ActionListView />}
      {mode === 'timeline' && <TimelineView />}
      {mode === 'events' && <EventLogView />}
    </section>
  );
}

/**
 * The raw event log: the journal in append order, one row per event, virtualized (the DOM holds
 * about the visible rows whatever the log's length) and keyset-paged by seq. A filter narrows the
 * rows but never renumbers them: each keeps its journal position.
 */
function EventLogView() {
  const setFilter = useAppStore((state) => state.setActivityFilter);
  const { view, count, scroller, virtualizer, items } = useEventLogWindow();
  const filtered = filterActive(view.filter);
  return (
    <div className="activity-events">
      <p className="muted intro">
        <span className="activity-count" data-testid="activity-count" data-total={count}>
          {countText(view.lastSeq, filtered, view.matches.length, view.next !== null)}
        </span>{' '}
        · Every journal event in append order. Filtering keeps each event&apos;s original position (seq); wall time is
        shown, never used for order.
      </p>
      <EventFilterForm applied={view.filter} onApply={setFilter} />
      {view.error !== null && (
        <div className="error" role="alert" data-testid="activity-error">
          <strong>{view.error.code}</strong>
          <span>{view.error.message}</span>
        </div>
      )}
      <div className="activity-jump">
        <button type="button" onClick={() => virtualizer.scrollToIndex(0, { align: 'start' })} disabled={count === 0}>
          Oldest
        </button>
        <button
          type="button"
          onClick={() => virtualizer.scrollToIndex(count - 1, { align: 'end' })}
          disabled={count === 0}
          data-testid="activity-newest"
        >
          Newest
        </button>
      </div>
      <div className="activity-table" role="table" aria-label="Journal events" aria-rowcount={count + 1}>
        <div className="activity-row activity-head" role="row" aria-rowindex={1}>
          {columns.map((c) => (
            <span key={c} role="columnheader">
              {c === 'Time' ? `Time (${zoneName(Date.now())})` : c}
            </span>
          ))}
        </div>
        <div ref={scroller} className="activity-scroller" data-testid="activity-scroller" role="rowgroup">
          <div style={{ height: virtualizer.getTotalSize(), position: 'relative' }}>
            {items.map((item) => (
              <div
                key={item.key}
                className="activity-slot"
                style={{ transform: `translateY(${item.start}px)`, height: activityRowPx }}
              >
                <RowView row={activityRowAt(view, item.index)} index={item.index} />
              </div>
            ))}
          </div>
        </div>
      </div>
    </div>
  );
}

/** The log's rows as a scrolled window, and the reads that fill the rows it shows. */
function useEventLogWindow() {
  const view = useAppStore((state) => state.activityView);
  const refreshHead = useAppStore((state) => state.refreshActivityHead);
  const loadRows = useAppStore((state) => state.loadActivityRows);
  const loadPage = useAppStore((state) => state.loadActivityPage);
  // The first block is asked for first (before the first status), so the first rows wait for nothing else.
  useEffect(() => {
    void loadRows(0, activityBlockRows - 1);
  }, [loadRows]);
  usePolling(refreshHead, activityHeadRefreshMs);

  const scroller = useRef<HTMLDivElement>(null);
  const count = activityRowCount(view);
  const virtualizer = useVirtualizer({
    count,
    getScrollElement: () => scroller.current,
    estimateSize: () => activityRowPx,
    overscan: overscanRows,
  });
  const items = virtualizer.getVirtualItems();
  const first = items[0]?.index ?? 0;
  const last = items.at(-1)?.index ?? -1;

  // Fetch what the visible rows need: their blocks (unfiltered) or the next page of matches.
  useEffect(() => {
    // After a failed read, wait for the next head refresh (which clears the error) before trying again.
    if (last < 0 || view.error !== null) return;
    if (!filterActive(view.filter)) void loadRows(first, last);
    else if (needsNextPage(view, last)) void loadPage();
  }, [first, last, view, loadRows, loadPage]);
  return { view, count, scroller, virtualizer, items };
}

const columns = ['Seq', 'Time', 'Event', 'Action', 'Ticket', 'Lane', 'Session', 'Outcome', 'Code', 'Evidence'] as const;

function countText(lastSeq: number | null, filtered: boolean, matches: number, more: boolean): string {
  if (filtered)
    return `${matches.toLocaleString('en-US')} matching ${matches === 1 ? 'event' : 'events'}${more ? ' so far (reading on as you scroll)' : ''}`;
  if (lastSeq === null) return 'loading…';
  return `${lastSeq.toLocaleString('en-US')} ${lastSeq === 1 ? 'event' : 'events'}`;
}

function RowView({ row, index }: { row: ActivityRow; index: number }) {
  if (row.kind === 'event') return <EventRow event={row.event} index={index} />;
  const text =
    row.kind === 'more' ? 'reading more…' : row.kind === 'missing' ? 'no event at this position' : 'loading…';
  return (
    <div className="activity-row placeholder" role="row" aria-rowindex={index + 2} data-testid="activity-placeholder">
      <span role="cell">{row.kind === 'loading' || row.kind === 'missing' ? row.seq : ''}</span>
      <span role="cell" className="muted">
        {text}
      </span>
    </div>
  );
}

function EventRow({ event, index }: { event: ActivityEvent; index: number }) {
  const time = new Date(event.at_ms).toISOString();
  // The cells' text is what the Text filter matches (the page sends its zone with it): one function writes both.
  const cells = eventRowCells(event);
  return (
    <div
      className={`activity-row${event.outcome === null ? '' : ` outcome-${event.outcome}`}`}
      role="row"
      aria-rowindex={index + 2}
      data-testid="activity-row"
      data-seq={event.seq}
    >
      <span role="cell" className="seq" data-testid="activity-seq">
        {event.seq}
      </span>
      <span role="cell">
        <time dateTime={time} title={dateTime(event.at_ms)}>
          {clockOnly(event.at_ms, { ms: true })}
        </time>
      </span>
      <span role="cell" className="kind" title={cells.kind}>
        {cells.kind}
      </span>
      <span role="cell" className="ellipsis">
        {event.action_id.startsWith('act_') ? (
          <a href={actionHref(event.action_id, activityOrigin('events'))} title={`Open ${cells.action}`}>
            {cells.action}
          </a>
        ) : (
          cells.action
        )}
      </span>
      <span role="cell">{cells.ticket}</span>
      <span role="cell" className="ellipsis" title={cells.lane}>
        {cells.lane}
      </span>
      <span role="cell" className="ellipsis" title={cells.session}>
        {cells.session}
      </span>
      <span role="cell">
        {event.outcome === null ? '' : <span className={`badge outcome-${event.outcome}`}>{cells.outcome}</span>}
      </span>
      <span role="cell" className="ellipsis" title={cells.code}>
        {cells.code}
      </span>
      <span role="cell" className="ellipsis" title={cells.evidence} data-testid="activity-evidence">
        {cells.evidence}
      </span>
    </div>
  );
}

/** The event log's filter: session, lane, outcome, code and text. */
function EventFilterForm({ applied, onApply }: { applied: ActivityFilter; onApply: (filter: ActivityFilter) => void }) {
  return (
    <FilterForm
      label="Filter the activity"
      testId="activity-filter"
      applied={applied}
      empty={emptyActivityFilter}
      onApply={onApply}
    >
      {(form) => (
        <>
          {form.text('session', 'Session', 'ses_…')}
          {form.text('lane', 'Lane', 'lane name')}
          <OutcomeSelect
            value={form.draft.outcome}
            onChange={(outcome) => form.set({ outcome })}
            testId="activity-filter-outcome"
          />
          {form.text('code', 'Code', 'e.g. CONNECT_REFUSED')}
          {form.text('text', 'Text', 'kind, action, summary…')}
        </>
      )}
    </FilterForm>
  );
}
