import type { ActionState } from '../contract/index.js';

/**
 * What one ticket of a lane waits for now (DESIGN §4):
 * - `session_approval`: a session-mode call whose agent process is not approved yet;
 * - `approval`: a per-call decision by a person;
 * - `lane`: allowed, but an older ticket of the lane is unresolved ("approved, waiting for #42");
 * - `lane_blocked`: an older ticket's recorded outcome is unknown and nobody resolved it;
 * - `dispatching`: the head, allowed, on its way or in flight (outcome not recorded yet);
 * - `blocked_head`: the head itself, with a recorded unknown outcome (dispatched, or recorded unknown before dispatch
 *   by a quarantined journal's recovery).
 */
export type TicketWaiting = 'session_approval' | 'approval' | 'lane' | 'lane_blocked' | 'dispatching' | 'blocked_head';

export interface TicketWait {
  readonly action_id: string;
  readonly ticket: number;
  readonly waiting: TicketWaiting;
  /** The ticket holds an allow decision (approval none, or decision approved). */
  readonly allowed: boolean;
  /** The older ticket this one waits behind, or the unknown head that blocks the lane. */
  readonly waiting_for_ticket: number | null;
  /** One line for people and agents, e.g. "approved, waiting for #42". */
  readonly text: string;
}

export interface LaneSchedule {
  /** The ticket the dispatcher may send now: the head, allowed, not dispatched. Else null. */
  readonly release: { readonly action_id: string; readonly ticket: number } | null;
  /** Every unresolved ticket of the lane, in ticket order. */
  readonly open: readonly TicketWait[];
  /** The lowest unresolved ticket (the head), or null when every ticket is resolved. */
  readonly headTicket: number | null;
}

/** How a ticket stands, from its recorded state alone. */
export type TicketStanding = 'resolved' | 'open_before_dispatch' | 'in_flight' | 'blocked';

/**
 * Resolved: closed before dispatch (rejected, expired, cancelled, refused — a recorded
 * not_attempted), settled (committed / rejected recorded), or an unknown head a person abandoned.
 * A dispatched action without a recorded outcome is in flight; a recorded unknown blocks — also one
 * with no DISPATCH_STARTED (recovery in a quarantined journal records it: the journal may lack the
 * dispatch), since the next ticket is never released as if an unknown one had failed.
 */
export function ticketStanding(s: ActionState): TicketStanding {
  if (s.dispatch_seq === null) {
    if (s.outcome === null) return 'open_before_dispatch';
    if (s.outcome !== 'unknown' || !s.recorded) return 'resolved';
    return s.abandoned ? 'resolved' : 'blocked';
  }
  if (!s.recorded) return 'in_flight';
  if (s.outcome === 'committed' || s.outcome === 'rejected') return 'resolved';
  return s.abandoned ? 'resolved' : 'blocked';
}

/** Approval `none`, or a recorded approval that nothing closed since. */
export function holdsAllowDecision(s: ActionState): boolean {
  return s.approval === 'none' ? s.decision === null : s.decision === 'approved';
}

/**
 * The dispatcher's rule for one lane, pure: only the OLDEST unresolved ticket may be sent, and only
 * when it holds an allow decision. A dispatched head keeps the lane busy until its outcome is
 * recorded; a recorded unknown head blocks the lane until later evidence settles it or a person
 * abandons it — the next ticket is never released as if the unknown one had failed. A later
 * ticket's approval only changes what it waits for, never the order.
 *
 * `tickets` are the lane's actions in ticket order (resolved ones may be included; they are
 * skipped). A lane of null (a read that bypasses lanes) is scheduled as a lane of its own.
 * `awaitsSession` says whether an undecided session-mode ticket still waits for its session's
 * approval (default: yes); a session whose grant ran out makes it a per-call `approval` instead.
 * `running` says whether a released ticket's executor is still at work (the queue knows; default: no): such a
 * ticket whose record reads resolved — a rejected or not-attempted attempt whose route retries it after a backoff —
 * keeps its place in front of the lane until its executor is done (DESIGN §4: retries keep the ticket's place).
 */
export function scheduleLane(
  tickets: readonly ActionState[],
  awaitsSession: (s: ActionState) => boolean = () => true,
  running: (s: ActionState) => boolean = () => false,
): LaneSchedule {
  const open: TicketWait[] = [];
  let head: ActionState | undefined;
  let blockedBy: number | null = null;
  let previous: number | null = null;
  let release: LaneSchedule['release'] = null;
  let lastTicket = 0;
  for (const s of tickets) {
    const ticket = s.ticket ?? 0;
    if (ticket <= lastTicket)
      throw new RangeError(`scheduleLane: tickets must be in increasing order (${ticket} after ${lastTicket})`);
    lastTicket = ticket;
    const recorded = ticketStanding(s);
    // Released and its executor not done (a retry waiting out its backoff): it keeps its place whatever its record says.
    const retrying = recorded === 'resolved' && running(s);
    const standing: TicketStanding = retrying ? 'in_flight' : recorded;
    if (standing === 'resolved') continue;
    const allowed = holdsAllowDecision(s);
    if (head === undefined) {
      head = s;
      open.push(headWait(s, ticket, standing, allowed, waitsForSession(s, awaitsSession), retrying));
      if (standing === 'blocked') blockedBy = ticket;
      if (standing === 'open_before_dispatch' && allowed) release = { action_id: s.action_id, ticket };
    } else {
      open.push(laterWait(s, ticket, allowed, previous ?? ticket, blockedBy, waitsForSession(s, awaitsSession)));
    }
    previous = ticket;
  }
  return { release, open, headTicket: head?.ticket ?? null };
}

function waitsForSession(s: ActionState, awaitsSession: (s: ActionState) => boolean): boolean {
  return s.approval === 'session' && s.decision === null && awaitsSession(s);
}

function headWait(
  s: ActionState,
  ticket: number,
  standing: TicketStanding,
  allowed: boolean,
  session: boolean,
  retrying: boolean,
): TicketWait {
  const wait = (waiting: TicketWaiting, text: string): TicketWait => ({
    action_id: s.action_id,
    ticket,
    waiting,
    allowed,
    waiting_for_ticket: null,
    text,
  });
  if (standing === 'blocked')
    return wait('blocked_head', `#${ticket} outcome unknown: the lane is blocked until it is settled or abandoned`);
  if (retrying) return wait('dispatching', `#${ticket} retrying: its last attempt asked for a backoff`);
  if (standing === 'in_flight') return wait('dispatching', `#${ticket} dispatched, waiting for its outcome`);
  if (allowed)
    return wait(
      'dispatching',
      s.approval === 'none' ? `#${ticket} next to dispatch` : `#${ticket} approved, dispatching`,
    );
  return session ? wait('session_approval', 'waiting for session approval') : wait('approval', 'waiting for approval');
}

function laterWait(
  s: ActionState,
  ticket: number,
  allowed: boolean,
  previous: number,
  blockedBy: number | null,
  session: boolean,
): TicketWait {
  const base = { action_id: s.action_id, ticket, allowed };
  if (blockedBy !== null) {
    const blocked = `blocked by #${blockedBy} (outcome unknown)`;
    const text = allowed
      ? `${s.approval === 'none' ? '' : 'approved, '}${blocked}`
      : `waiting for ${session ? 'session ' : ''}approval; ${blocked}`;
    return { ...base, waiting: 'lane_blocked', waiting_for_ticket: blockedBy, text };
  }
  if (allowed) {
    return {
      ...base,
      waiting: 'lane',
      waiting_for_ticket: previous,
      text: `${s.approval === 'none' ? '' : 'approved, '}waiting for #${previous}`,
    };
  }
  const waiting: TicketWaiting = session ? 'session_approval' : 'approval';
  return {
    ...base,
    waiting,
    waiting_for_ticket: previous,
    text: `waiting for ${waiting === 'session_approval' ? 'session ' : ''}approval (behind #${previous})`,
  };
}
