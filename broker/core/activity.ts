import { CodedError, type JournalEvent } from '../contract/index.js';

/**
 * The Activity and Sessions views as pure folds of the log in append order. A filtered view is a
 * subsequence: every event keeps its original `seq`, so a gap in a filtered list is visible as a
 * gap, and a position quoted from a view can be found in the log and in `audit verify` output.
 */
export interface ActivityAction {
  readonly action_id: string;
  readonly session_id: string | null;
  readonly ticket: number | null;
  readonly lane: string | null;
  readonly first_seq: number;
  readonly last_seq: number;
  /** This action's events, in append order, with their original positions. */
  readonly events: readonly JournalEvent[];
}

export interface SessionSummary {
  /** The agent process (events' session_id; null: actions no session claimed). */
  readonly session_id: string | null;
  readonly first_seq: number;
  readonly last_seq: number;
  readonly first_at_ms: number;
  readonly last_at_ms: number;
  readonly events: number;
  /** Action ids in the order the session first touched them. */
  readonly action_ids: readonly string[];
}

export interface ActivityFilter {
  readonly action_id?: string;
  readonly session_id?: string | null;
  readonly lane?: string;
  readonly kinds?: ReadonlySet<string>;
  readonly fromSeq?: number;
  readonly toSeq?: number;
}

/** Actions in order of their first event, each with its events; refuses a log out of order. */
export function foldActivity(events: Iterable<JournalEvent>): ActivityAction[] {
  const byId = new Map<string, { head: JournalEvent; events: JournalEvent[] }>();
  for (const event of inAppendOrder(events)) {
    const entry = byId.get(event.action_id);
    if (entry === undefined) byId.set(event.action_id, { head: event, events: [event] });
    else entry.events.push(event);
  }
  return [...byId.values()].map(({ head, events: list }) => {
    const last = list.at(-1) ?? head;
    return {
      action_id: head.action_id,
      session_id: head.session_id,
      ticket: head.ticket,
      lane: head.lane,
      first_seq: head.seq,
      last_seq: last.seq,
      events: list,
    };
  });
}

/** One summary per agent session, in order of each session's first event. */
export function foldSessions(events: Iterable<JournalEvent>): SessionSummary[] {
  const byId = new Map<
    string | null,
    { first: JournalEvent; last: JournalEvent; count: number; actions: Set<string> }
  >();
  for (const event of inAppendOrder(events)) {
    const entry = byId.get(event.session_id);
    if (entry === undefined) {
      byId.set(event.session_id, { first: event, last: event, count: 1, actions: new Set([event.action_id]) });
    } else {
      entry.last = event;
      entry.count += 1;
      entry.actions.add(event.action_id);
    }
  }
  return [...byId.entries()].map(([session_id, e]) => ({
    session_id,
    first_seq: e.first.seq,
    last_seq: e.last.seq,
    first_at_ms: e.first.at_ms,
    last_at_ms: e.last.at_ms,
    events: e.count,
    action_ids: [...e.actions],
  }));
}

/** The events that match, in append order, with their original positions (never renumbered). */
export function filterActivity(events: Iterable<JournalEvent>, filter: ActivityFilter): JournalEvent[] {
  const out: JournalEvent[] = [];
  for (const event of inAppendOrder(events)) {
    if (filter.action_id !== undefined && event.action_id !== filter.action_id) continue;
    if (filter.session_id !== undefined && event.session_id !== filter.session_id) continue;
    if (filter.lane !== undefined && event.lane !== filter.lane) continue;
    if (filter.kinds !== undefined && !filter.kinds.has(event.kind)) continue;
    if (filter.fromSeq !== undefined && event.seq < filter.fromSeq) continue;
    if (filter.toSeq !== undefined && event.seq > filter.toSeq) continue;
    out.push(event);
  }
  return out;
}

/** The timeline is the append position: a view built from anything else would reorder history. */
function* inAppendOrder(events: Iterable<JournalEvent>): Generator<JournalEvent> {
  let last = 0;
  for (const event of events) {
    if (event.seq <= last) {
      throw new CodedError(
        'INVALID_ARGUMENT',
        `event ${event.seq} comes after ${last}: views fold the log in append order`,
        { field: 'seq' },
      );
    }
    last = event.seq;
    yield event;
  }
}
