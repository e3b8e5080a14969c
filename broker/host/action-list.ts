import { basename } from 'node:path';
import type {
  ActionListRow,
  ActionState,
  ActionWait,
  BrokerApi,
  JournalEvent,
  OperatorInput,
} from '../contract/index.js';
import { admissionPolicyDecider, deciderOf, laneWaits, splitActionTarget, type LaneWaitTicket } from '../core/index.js';
import type { ActionListDbRow, Journal } from '../journal/index.js';

/** A page of the action list is this many rows unless asked otherwise; the contract caps a request at 500. */
export const actionListLimitDefault = 100;
/** Earlier tickets of a lane read for one action's waits (newest first). */
export const laneWaitTicketsMax = 1_000;
const nameCharsMax = 200;
const decidedByCharsMax = 400;

/**
 * `actions.list`: one row per action, newest first by first_seq, keyset paged by `before_seq`, read
 * from the journal's projection (migration 010) in one indexed query; a search (text, or more than one
 * filter) examines a bounded number of rows per page and says where it stopped (`searched_before_seq`,
 * then also `next_before`), so the caller continues from there; the agent's name and pid come
 * from its session row. Durations are between wall times the events recorded, never this reader's clock.
 */
export function listActions(
  journal: Journal,
  input: OperatorInput<'actions.list'>,
  options: { scanRowsMax?: number } = {},
): BrokerApi['actions.list']['output'] {
  const limit = input.limit ?? actionListLimitDefault;
  const { rows, searchedBeforeSeq } = journal.actionListPage(
    {
      limit,
      ...(input.before_seq === undefined ? {} : { beforeSeq: input.before_seq }),
      ...(input.session_id === undefined ? {} : { sessionId: input.session_id }),
      ...(input.lane === undefined ? {} : { lane: input.lane }),
      ...(input.target === undefined ? {} : { targetName: input.target.replace(/^(route|host|mcp):/, '') }),
      ...(input.outcome === undefined ? {} : { outcome: input.outcome }),
      ...(input.code === undefined ? {} : { code: input.code }),
      ...(input.open === true ? { open: true } : {}),
      ...(input.text === undefined ? {} : { text: input.text.toLowerCase() }),
    },
    options.scanRowsMax,
  );
  // Read after the page, in the same snapshot (the operator reads run inside Journal.readCurrent's read transaction; a
  // synchronous caller reads on one turn, after requireCurrent committed what was queued): every row is at or below it,
  // and every action up to it was there to examine. Not stats().last_seq: that moves at the writer thread's acks, and
  // may be behind the rows a snapshot already holds.
  const asOfSeq = journal.committedSeq();
  const page = rows.slice(0, limit);
  const more = rows.length > limit;
  return {
    actions: page.map((row) => listRow(row, journal)),
    next_before: searchedBeforeSeq ?? (more ? (page.at(-1)?.first_seq ?? null) : null),
    searched_before_seq: searchedBeforeSeq,
    as_of_seq: asOfSeq,
  };
}

function listRow(row: ActionListDbRow, journal: Journal): ActionListRow {
  const parts = splitActionTarget(row.target);
  // Open (settled_at_ms null) has no outcome yet: a dispatched action's row holds unknown (and unknown_effect) from its
  // DISPATCH_STARTED on, provisionally — while it runs it is in flight, as status counts it, not an unknown outcome;
  // and --outcome finds settled actions only (021), so the row says what the filter means.
  const open = row.settled_at_ms === null;
  return {
    action_id: row.action_id,
    ticket: row.ticket,
    accepted_at_ms: row.accepted_at_ms,
    session_id: row.session_id,
    agent: row.session_id === null ? null : { name: agentName(row), pid: row.agent_pid },
    channel: row.channel as ActionListRow['channel'],
    target: cut(row.target_name ?? parts.name, nameCharsMax),
    method: parts.method,
    request: parts.request,
    lane: row.lane === null ? null : cut(row.lane, nameCharsMax),
    stage: row.stage as ActionListRow['stage'],
    decision: row.decision as ActionListRow['decision'],
    decided_by: decidedBy(row, journal),
    outcome: open ? null : (row.outcome as ActionListRow['outcome']),
    code: row.code === null ? null : cut(row.code, 80),
    effect: open ? null : (row.effect as ActionListRow['effect']),
    decided_at_ms: row.decided_at_ms,
    dispatched_at_ms: row.dispatched_at_ms,
    settled_at_ms: row.settled_at_ms,
    duration_ms: row.settled_at_ms === null ? null : Math.max(0, row.settled_at_ms - row.accepted_at_ms),
    first_seq: row.first_seq,
    last_seq: row.last_seq,
  };
}

/** The MCP client's name, else the executable's file name: a label, never identity (that is the pid's). */
function agentName(row: ActionListDbRow): string | null {
  const name = row.agent_name ?? (row.agent_exe === null ? null : basename(row.agent_exe));
  return name === null ? null : cut(name, nameCharsMax);
}

/**
 * An action admitted under `approval: none` was allowed by policy at admission (no decision event):
 * said so from its journaled approval and rule. Stored since migration 010; a decision from before it is worded from its event when this run (or
 * the unlocked vault) can open it, else left null: a sealed body is never guessed at.
 */
function decidedBy(row: ActionListDbRow, journal: Journal): string | null {
  if (row.decided_by !== null) return cut(row.decided_by, decidedByCharsMax);
  if (row.decided_seq === null)
    return row.approval === 'none' ? cut(admissionPolicyDecider(row.approval_rule), decidedByCharsMax) : null;
  const [event] = journal.eventsPage(row.decided_seq, 1);
  if (event === undefined || 'sealed' in event || event.seq !== row.decided_seq) return null;
  const label = deciderOf(event);
  return label === null ? null : cut(label, decidedByCharsMax);
}

/**
 * What the action waited for in its lane (the action detail's "#5 waited 41 s for #4"). Ready is
 * its APPROVED event's wall time, or its acceptance when it needed no approval; earlier tickets and
 * their resolution times come from the lane's rows (bounded), "now" is the journal's newest event.
 */
export function waitedFor(journal: Journal, state: ActionState, events: readonly JournalEvent[]): ActionWait[] {
  if (state.lane === null || state.ticket === null) return [];
  const approvedAt = events.find((e) => e.kind === 'APPROVED')?.at_ms ?? null;
  const readyAt = state.approval === 'none' ? state.accepted_at_ms : approvedAt;
  const own = journal.getActionTimeline(state.action_id);
  const stored = journal.laneTicketsBefore(state.lane, state.ticket, laneWaitTicketsMax);
  const earlier: LaneWaitTicket[] = stored.map((r) => ({
    ticket: r.ticket,
    action_id: r.action_id,
    resolved_at_ms: r.resolved_at_ms,
  }));
  return laneWaits(
    {
      ticket: state.ticket,
      ready_at_ms: readyAt,
      dispatched_at_ms: own?.dispatched_at_ms ?? null,
      resolved_at_ms: own?.resolved_at_ms ?? null,
    },
    earlier,
    journal.lastEventAtMs() ?? state.updated_at_ms,
  );
}

function cut(text: string, charsMax: number): string {
  return text.length <= charsMax ? text : `${text.slice(0, charsMax - 1)}…`;
}
