import { useEffect, useMemo, useState } from 'react';
import { spanText } from '../store/action-wait.js';
import { useAppStore } from '../store/app-store.js';
import {
  actionHref,
  activityOrigin,
  timelineGroupingOf,
  timelineGroupings,
  timelineHref,
} from '../store/hash-route.js';
import {
  axisTicks,
  segmentLabel,
  timelineOf,
  type SegmentKind,
  type Timeline,
  type TimelineBar,
  type TimelineGrouping,
} from '../store/timeline-layout.js';
import { actionListHeadRefreshMs, activityTopics } from './action-list-view.js';
import { useHashRoute } from './use-hash-route.js';
import { useNow } from './use-now.js';
import { usePolling } from './use-polling.js';
import { clockOnly, dateTime } from '../../../broker/contract/time-words.js';

/** The newest loaded actions drawn; the picture of a whole day of actions would be bars a pixel wide. */
export const timelineBarsMax = 300;
/** One stacked track of a group. */
const trackPx = 18;

/**
 * Timeline: the actions the Actions list has loaded (its filter applies), as bars on one time axis,
 * grouped by session or by lane. Each bar is split into what the action waited on (a decision, its
 * lane, the remote); open actions run to now; a blocked lane says why. Plain divs, no chart library.
 */
export function TimelineView() {
  const rows = useAppStore((state) => state.actionListView.rows);
  const loaded = useAppStore((state) => state.actionListView.loaded);
  const refreshHead = useAppStore((state) => state.refreshActionsHead);
  usePolling(refreshHead, actionListHeadRefreshMs, activityTopics);
  const now = useNow(1_000);
  // The grouping is in the address (`?by=session`), so reload and a detail's back link keep it;
  // replace, not push: back leaves the timeline rather than stepping through its groupings.
  // Held here too, so the choice shows in the same event as the click (the hashchange comes a task later).
  const named = timelineGroupingOf(useHashRoute());
  const [by, setShown] = useState<TimelineGrouping>(named);
  useEffect(() => setShown(named), [named]);
  const setBy = (g: TimelineGrouping) => {
    setShown(g);
    window.location.replace(timelineHref(g));
  };
  const [focused, setFocused] = useState<string | null>(null);
  const shown = useMemo(() => rows.slice(0, timelineBarsMax), [rows]);
  const timeline = useMemo(() => timelineOf(shown, by, now), [shown, by, now]);

  return (
    <div className="timeline" data-testid="timeline" data-grouping={by}>
      <p className="muted intro">
        The newest {shown.length.toLocaleString('en-US')} loaded {shown.length === 1 ? 'action' : 'actions'} (the
        Actions filter applies), as bars on one time axis. Hover or focus a bar to read it; open it for the detail.
      </p>
      <div className="timeline-controls">
        <fieldset className="timeline-grouping">
          <legend>Group by</legend>
          {timelineGroupings.map((g) => (
            <label key={g}>
              <input
                type="radio"
                name="timeline-grouping"
                value={g}
                checked={by === g}
                onChange={() => setBy(g)}
                data-testid={`timeline-by-${g}`}
              />
              {g}
            </label>
          ))}
        </fieldset>
        <Legend />
      </div>
      <p className="timeline-readout" aria-live="polite" data-testid="timeline-readout">
        {focused ?? '\u00a0'}
      </p>
      {!loaded && <p className="muted">loading…</p>}
      {loaded && timeline.groups.length === 0 && <p className="muted">No action to draw.</p>}
      {timeline.groups.length > 0 && <TimelinePicture timeline={timeline} by={by} onFocusBar={setFocused} />}
    </div>
  );
}

function Legend() {
  return (
    <ul className="timeline-legend" aria-label="Legend">
      {(Object.keys(segmentLabel) as SegmentKind[]).map((k) => (
        <li key={k}>
          <span className={`tl-seg tl-${k}`} aria-hidden="true" /> {segmentLabel[k]}
        </li>
      ))}
      <li>
        border: <span className="tl-swatch tone-succeeded" aria-hidden="true" /> succeeded{' '}
        <span className="tl-swatch tone-failed" aria-hidden="true" /> failed or refused{' '}
        <span className="tl-swatch tone-uncertain" aria-hidden="true" /> effect unknown
      </li>
    </ul>
  );
}

function TimelinePicture({
  timeline,
  by,
  onFocusBar,
}: {
  timeline: Timeline;
  by: TimelineGrouping;
  onFocusBar: (text: string | null) => void;
}) {
  const span = timeline.endMs - timeline.startMs;
  const at = (ms: number) => `${(((ms - timeline.startMs) / span) * 100).toFixed(3)}%`;
  const ticks = axisTicks(timeline.startMs, timeline.endMs);
  return (
    <div className="timeline-picture" role="list" aria-label="Actions on a time axis">
      <div className="timeline-axis" aria-hidden="true">
        <span />
        <div className="timeline-ticks">
          {ticks.map((t, i) => (
            <span key={t} style={{ left: at(t) }} className={i === ticks.length - 1 ? 'last' : i === 0 ? 'first' : ''}>
              {clockOnly(t)}
            </span>
          ))}
        </div>
      </div>
      {timeline.groups.map((group) => (
        <div
          key={group.key}
          className={`timeline-group${group.blocked === null ? '' : ' blocked'}`}
          role="listitem"
          data-testid="timeline-group"
          data-key={group.key}
        >
          <div className="timeline-label" title={group.label}>
            <span>{group.label}</span>
            {group.blocked !== null && (
              <span className="badge attention" data-testid="timeline-blocked">
                {group.blocked}
              </span>
            )}
          </div>
          <div className="timeline-tracks" style={{ height: group.tracks * trackPx }}>
            {group.bars.map((bar) => (
              <BarView
                key={bar.actionId}
                bar={bar}
                href={actionHref(bar.actionId, activityOrigin('timeline', by))}
                left={at(bar.startMs)}
                width={((bar.endMs - bar.startMs) / span) * 100}
                onFocusBar={onFocusBar}
              />
            ))}
          </div>
        </div>
      ))}
      <p className="muted timeline-span">
        {spanText(span)} from {dateTime(timeline.startMs)}
      </p>
    </div>
  );
}

function BarView({
  bar,
  href,
  left,
  width,
  onFocusBar,
}: {
  bar: TimelineBar;
  href: string;
  left: string;
  width: number;
  onFocusBar: (text: string | null) => void;
}) {
  const length = bar.endMs - bar.startMs;
  const show = () => onFocusBar(bar.title);
  const hide = () => onFocusBar(null);
  return (
    <a
      href={href}
      className={`tl-bar tone-${bar.tone}${bar.open ? ' open' : ''}`}
      style={{ left, width: `${width.toFixed(3)}%`, top: bar.track * trackPx }}
      title={bar.title}
      aria-label={bar.title}
      data-testid="timeline-bar"
      data-action-id={bar.actionId}
      data-tone={bar.tone}
      onMouseEnter={show}
      onMouseLeave={hide}
      onFocus={show}
      onBlur={hide}
    >
      {bar.segments.map((s) => (
        <span
          key={s.kind}
          className={`tl-seg tl-${s.kind}`}
          style={{
            left: `${length === 0 ? 0 : ((s.startMs - bar.startMs) / length) * 100}%`,
            width: `${length === 0 ? 100 : ((s.endMs - s.startMs) / length) * 100}%`,
          }}
        />
      ))}
    </a>
  );
}
