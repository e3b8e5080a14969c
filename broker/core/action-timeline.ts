import { actorLabel, type ActionState, type Actor, type JournalEvent } from '../contract/index.js';
import { ticketStanding } from './lane-schedule.js';

/**
 * The moments of one action that the action list and the lane waits show, folded from its events'
 * own wall times (at_ms), never from a reader's clock. Kept beside the projected ActionState (the
 * journal's `actions` columns), so a list page is one indexed query and never opens a sealed event.
 */
export interface ActionTimeline {
  /** Who made the latest decision (APPROVED / REJECTED / EXPIRED / CANCELLED), worded by actorLabel. */
  readonly decided_by: string | null;
  readonly decided_at_ms: number | null;
  /** The append position of that decision, so a reader can word it later if it was not stored. */
  readonly decided_seq: number | null;
  /** The first DISPATCH_STARTED. */
  readonly dispatched_at_ms: number | null;
  /** When the action last stopped being open (an outcome recorded after the latest dispatch or closure). */
  readonly settled_at_ms: number | null;
  /** When its lane last stopped waiting on it (ticketStanding `resolved`): a recorded unknown still blocks. */
  readonly resolved_at_ms: number | null;
}

export const emptyActionTimeline: ActionTimeline = {
  decided_by: null,
  decided_at_ms: null,
  decided_seq: null,
  dispatched_at_ms: null,
  settled_at_ms: null,
  resolved_at_ms: null,
};

/** The words for a decision nobody made: the approval window closed. */
export const expiredDecider = 'nobody (expired)';

const decisionKinds: ReadonlySet<string> = new Set(['APPROVED', 'REJECTED', 'EXPIRED', 'CANCELLED']);

/** Open: nothing classified it yet, or it was dispatched again after the last classification. */
export function isActionOpen(state: ActionState): boolean {
  return state.outcome === null || !state.recorded;
}

/**
 * What `actions list --open` keeps: an open action, or a ticket whose recorded unknown outcome its lane still waits on
 * (not attested, reconciled or abandoned) — it needs a person as much as a pending card does. The SQL form is the
 * journal's openActionsCondition over settled_at_ms and resolved_at_ms, which this timeline sets from the same two
 * predicates.
 */
export function isListedOpen(state: ActionState): boolean {
  return isActionOpen(state) || (state.ticket !== null && ticketStanding(state) === 'blocked');
}

/** The timeline after `event`, given the action's state right after it. Pure. */
export function advanceActionTimeline(before: ActionTimeline, event: JournalEvent, after: ActionState): ActionTimeline {
  let next = before;
  if (decisionKinds.has(event.kind)) {
    next = { ...next, decided_by: deciderOf(event), decided_at_ms: event.at_ms, decided_seq: event.seq };
  }
  if (event.kind === 'DISPATCH_STARTED' && next.dispatched_at_ms === null)
    next = { ...next, dispatched_at_ms: event.at_ms };
  const settled = isActionOpen(after) ? null : (next.settled_at_ms ?? event.at_ms);
  const resolved =
    after.ticket === null || ticketStanding(after) !== 'resolved' ? null : (next.resolved_at_ms ?? event.at_ms);
  if (settled !== next.settled_at_ms || resolved !== next.resolved_at_ms)
    next = { ...next, settled_at_ms: settled, resolved_at_ms: resolved };
  return next;
}

/**
 * Who allowed an action admitted under `approval: none`: the route's policy (or the rule ACTION_ACCEPTED names as
 * `approval_rule`) decided at admission, and no decision event follows — so a list never calls it undecided.
 */
export function admissionPolicyDecider(approvalRule: string | null): string {
  return approvalRule === null ? 'policy (approval: none)' : `policy (approval: none; ${approvalRule})`;
}

/** actorLabel of the decision event's actor; EXPIRED has none. */
export function deciderOf(event: { readonly kind: string; readonly payload: unknown }): string | null {
  if (event.kind === 'EXPIRED') return expiredDecider;
  const actor = (event.payload as { actor?: Actor } | null)?.actor;
  return actor === undefined ? null : actorLabel(actor);
}

/** Bound for the request text in a list row: longer text is cut and marked with "…". */
export const actionRequestCharsMax = 400;

export interface ActionTargetParts {
  /** The route, host or MCP server name (the `route:` / `host:` / `mcp:` prefix dropped). */
  readonly name: string;
  readonly method: string | null;
  /** HTTP: the path; SSH: `exec <command digest>` (the command itself is never journaled). */
  readonly request: string;
}

/**
 * Splits the sanitized target ACTION_ACCEPTED recorded ("route:<name> <METHOD> <path>" or
 * "host:<name> exec <digest>") into what a list row shows. The SSH command is held in memory for
 * its card only, so the journal can name it by digest and nothing more.
 */
export function splitActionTarget(target: string): ActionTargetParts {
  const space = target.indexOf(' ');
  const head = space < 0 ? target : target.slice(0, space);
  const rest = space < 0 ? '' : target.slice(space + 1);
  const name = head.replace(/^(route|host|mcp):/, '');
  if (head.startsWith('route:')) {
    const verbEnd = rest.indexOf(' ');
    const method = verbEnd < 0 ? (rest === '' ? null : rest) : rest.slice(0, verbEnd);
    return {
      name,
      method: method === null ? null : method.slice(0, 16),
      request: boundText(verbEnd < 0 ? '' : rest.slice(verbEnd + 1)),
    };
  }
  return { name, method: null, request: boundText(rest) };
}

export function boundText(text: string, charsMax = actionRequestCharsMax): string {
  return text.length <= charsMax ? text : `${text.slice(0, charsMax)}…`;
}
