import type { ActionListRow, Outcome } from '../../../broker/contract/index.js';
import { decisionText } from '../../../broker/contract/operator-actor.js';
import { spanText, waitLine, waitPhrase, type LaneWait } from './action-wait.js';
import { outcomePill, type OutcomeTone } from './outcome-pill.js';

/**
 * The timeline picture, computed purely from the loaded rows of the Actions list and one "now": one
 * bar per action on a shared time axis, split into what the action was waiting on at each moment,
 * grouped by session or by lane. Overlapping bars of a group stack on rows of their own, so two
 * actions in flight at once are seen as two.
 */

export type TimelineGrouping = 'session' | 'lane';

export type SegmentKind = 'decision' | 'lane' | 'flight';

export const segmentLabel: Record<SegmentKind, string> = {
  decision: 'waiting for a decision',
  lane: 'waiting in its lane',
  flight: 'in flight',
};

export interface TimelineSegment {
  kind: SegmentKind;
  startMs: number;
  endMs: number;
}

export interface TimelineBar {
  actionId: string;
  ticket: number | null;
  /** The settled outcome; null while open (a running action's provisional unknown is not one). */
  outcome: Outcome | null;
  /** Its colour, by effect as the Actions list's pill (outcome-pill.ts): a committed HTTP 500 is not green. */
  tone: OutcomeTone;
  /** Not settled or closed: the bar runs to now. */
  open: boolean;
  startMs: number;
  endMs: number;
  segments: TimelineSegment[];
  /** What a person reads on hover or focus. */
  title: string;
  /** Which stacked row of its group the bar sits on (0 = first). */
  track: number;
}

export interface TimelineGroup {
  key: string;
  label: string;
  bars: TimelineBar[];
  tracks: number;
  /** Why the group's lane is blocked now, or null (by lane only). */
  blocked: string | null;
}

export interface Timeline {
  startMs: number;
  endMs: number;
  groups: TimelineGroup[];
}

/** Pure: the segments of one action's bar; open phases run to `nowMs`. Empty phases are left out. */
export function segmentsOf(row: ActionListRow, nowMs: number): TimelineSegment[] {
  const end = row.settled_at_ms ?? nowMs;
  const decided = row.decided_at_ms ?? row.dispatched_at_ms ?? end;
  const segments: TimelineSegment[] = [{ kind: 'decision', startMs: row.accepted_at_ms, endMs: decided }];
  if (row.decision === 'approved' || row.dispatched_at_ms !== null) {
    const dispatched = row.dispatched_at_ms ?? end;
    segments.push({ kind: 'lane', startMs: decided, endMs: dispatched });
    if (row.dispatched_at_ms !== null) segments.push({ kind: 'flight', startMs: dispatched, endMs: end });
  }
  return segments.filter((s) => s.endMs > s.startMs);
}

/**
 * Pure: the earlier ticket of the same lane this action waited on after its approval — the last one
 * accepted before it that was still unresolved when this one was approved — with how long.
 */
export function laneWaitOf(row: ActionListRow, laneRows: readonly ActionListRow[], nowMs: number): LaneWait | null {
  if (row.decision !== 'approved' || row.decided_at_ms === null || row.lane === null) return null;
  const decided = row.decided_at_ms;
  const ongoing = row.dispatched_at_ms === null && row.settled_at_ms === null;
  const until = row.dispatched_at_ms ?? row.settled_at_ms ?? nowMs;
  const blocker = laneRows
    .filter(
      (r) =>
        r.first_seq < row.first_seq && r.ticket !== null && (r.settled_at_ms === null || r.settled_at_ms > decided),
    )
    .sort((a, b) => b.first_seq - a.first_seq)[0];
  if (blocker?.ticket == null || until <= decided) return null;
  return { ticket: blocker.ticket, waited_ms: until - decided, ongoing };
}

/** "#5 approved by person:alice, waited 41 s for #4 · docs GET /x · in flight 2 s · committed (OK)". */
export function barTitle(row: ActionListRow, segments: readonly TimelineSegment[], wait: LaneWait | null): string {
  const name = row.ticket === null ? row.action_id : `#${row.ticket}`;
  // As the Actions list and `postern actions list` say it: a call policy allowed at admission has no decision but a decider.
  const decided = decisionText(row) ?? 'not decided yet';
  const request = row.method === null ? row.request : `${row.method} ${row.request}`;
  const parts = [`${name} ${decided}${wait === null ? '' : `, ${waitPhrase(wait)}`}`, `${row.target} ${request}`];
  for (const s of segments)
    if (s.kind !== 'lane' || wait === null) parts.push(`${segmentLabel[s.kind]} ${spanText(s.endMs - s.startMs)}`);
  parts.push(
    row.settled_at_ms === null ? 'open' : `${outcomePill(row).text}${row.code === null ? '' : ` (${row.code})`}`,
  );
  return parts.join(' · ');
}

/** Pure: each bar on the first track of its group whose previous bar ended before it starts. */
function packTracks(bars: TimelineBar[]): number {
  const trackEnds: number[] = [];
  for (const bar of bars.sort((a, b) => a.startMs - b.startMs || a.actionId.localeCompare(b.actionId))) {
    const free = trackEnds.findIndex((end) => end <= bar.startMs);
    bar.track = free === -1 ? trackEnds.length : free;
    trackEnds[bar.track] = bar.endMs;
  }
  return Math.max(1, trackEnds.length);
}

/**
 * Pure: why a lane is blocked now — a dispatched action still running or an unknown outcome nothing passed since, or an
 * approved action waiting in it. A dispatched action that has not settled is running (its stage, as the Actions list
 * shows it; its row has no outcome yet), not an unknown outcome.
 */
export function laneBlockedBy(laneRows: readonly ActionListRow[], nowMs: number): string | null {
  const unknown = laneRows
    .filter((r) => r.outcome === 'unknown' || (r.dispatched_at_ms !== null && r.settled_at_ms === null))
    .find(
      (u) =>
        !laneRows.some(
          (r) =>
            r.dispatched_at_ms !== null &&
            r.first_seq > u.first_seq &&
            r.dispatched_at_ms >= (u.settled_at_ms ?? u.accepted_at_ms),
        ),
    );
  if (unknown !== undefined) {
    const name = unknown.ticket === null ? unknown.action_id : `#${unknown.ticket}`;
    return unknown.settled_at_ms === null
      ? `blocked: ${name} is running (${unknown.stage.replaceAll('_', ' ')})`
      : `blocked: ${name}'s outcome is unknown`;
  }
  const waiting = laneRows
    .map((r) => ({ r, wait: laneWaitOf(r, laneRows, nowMs) }))
    .find(({ wait }) => wait?.ongoing === true);
  return waiting?.wait == null ? null : `blocked: ${waitLine(waiting.r.ticket, waiting.wait)}`;
}

function groupKey(row: ActionListRow, by: TimelineGrouping): { key: string; label: string } {
  if (by === 'lane')
    return row.lane === null ? { key: '', label: '(no lane)' } : { key: row.lane, label: `lane ${row.lane}` };
  if (row.session_id === null) return { key: '', label: '(broker)' };
  const { name = null, pid = null } = row.agent ?? {};
  const agent = name === null && pid === null ? '' : ` — ${name ?? 'agent'}${pid === null ? '' : ` (pid ${pid})`}`;
  return { key: row.session_id, label: `${row.session_id}${agent}` };
}

/** Pure: the whole picture. Groups come in the order of their newest action; bars by start. */
export function timelineOf(rows: readonly ActionListRow[], by: TimelineGrouping, nowMs: number): Timeline {
  const groups = new Map<string, { label: string; rows: ActionListRow[] }>();
  for (const row of [...rows].sort((a, b) => b.first_seq - a.first_seq)) {
    const { key, label } = groupKey(row, by);
    const group = groups.get(key) ?? { label, rows: [] };
    group.rows.push(row);
    groups.set(key, group);
  }
  const byLane = new Map<string, ActionListRow[]>();
  for (const row of rows) if (row.lane !== null) byLane.set(row.lane, [...(byLane.get(row.lane) ?? []), row]);
  let startMs = Number.POSITIVE_INFINITY;
  let endMs = Number.NEGATIVE_INFINITY;
  const out: TimelineGroup[] = [];
  for (const [key, group] of groups) {
    const bars = group.rows.map((row): TimelineBar => {
      const segments = segmentsOf(row, nowMs);
      const end = Math.max(row.accepted_at_ms, row.settled_at_ms ?? nowMs);
      startMs = Math.min(startMs, row.accepted_at_ms);
      endMs = Math.max(endMs, end);
      const wait = laneWaitOf(row, row.lane === null ? [] : (byLane.get(row.lane) ?? []), nowMs);
      const open = row.settled_at_ms === null;
      return {
        actionId: row.action_id,
        ticket: row.ticket,
        // Running: no outcome yet (its row's unknown is provisional until it settles).
        outcome: open ? null : row.outcome,
        tone: outcomePill(row).tone,
        open,
        startMs: row.accepted_at_ms,
        endMs: end,
        segments,
        title: barTitle(row, segments, wait),
        track: 0,
      };
    });
    const tracks = packTracks(bars);
    out.push({
      key,
      label: group.label,
      bars,
      tracks,
      blocked: by === 'lane' ? laneBlockedBy(group.rows, nowMs) : null,
    });
  }
  if (out.length === 0) return { startMs: nowMs, endMs: nowMs, groups: [] };
  return { startMs, endMs: Math.max(endMs, startMs + 1), groups: out };
}

/** Pure: `count` evenly spaced tick times across the axis, first and last included. */
export function axisTicks(startMs: number, endMs: number, count = 5): number[] {
  if (count < 2 || endMs <= startMs) return [startMs];
  return Array.from({ length: count }, (_, i) => Math.round(startMs + ((endMs - startMs) * i) / (count - 1)));
}
