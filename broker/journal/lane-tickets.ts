import type { ActionState } from '../contract/index.js';
import { ticketStanding } from '../core/index.js';

/** One unresolved ticket of a lane, with its state as the last COMMIT wrote it. */
export interface LaneTicket {
  readonly ticket: number;
  readonly action_id: string;
  readonly last_seq: number;
  readonly state: ActionState;
}

/**
 * The unresolved tickets of every lane (broker/core ticketStanding: open before dispatch, in flight, or a recorded
 * unknown that blocks its lane), in ticket order, as the last COMMIT left them: the dispatcher's view of a lane
 * without a query. Loaded once from the actions table, then moved by every state a commit writes (`moved`), so an
 * entry is what `SELECT … WHERE lane = ? AND ticket >= ?` filtered by ticketStanding would answer.
 *
 * Each entry holds the state itself, so a lane is read from memory only: the `actions` table is plaintext and any
 * process of the user can write it while the broker runs, and a head's row edited to read `abandoned` (or settled)
 * would otherwise release the next ticket while the head's outcome is unknown (THREAT-MODEL). Like the session book,
 * the rows are trusted as they are when loaded, at the first lane read after open.
 *
 * Bounded by what is unresolved, not by the journal's size: a resolved ticket leaves its lane, an empty lane leaves
 * the map. What can stay unresolved is the agents' open actions (bounded per session) and unknown heads until a person
 * or a reconciliation settles them.
 */
export class LaneTickets {
  private readonly lanes = new Map<string, LaneTicket[]>();
  private readonly byAction = new Map<string, ActionState>();

  /** From the stored states of every ticket that may be unresolved (a superset: resolved ones are left out). */
  static load(states: Iterable<ActionState>): LaneTickets {
    const tickets = new LaneTickets();
    for (const state of states) tickets.moved(state);
    return tickets;
  }

  /** After COMMIT: the action's state as written. Adds, moves or drops its ticket in its lane. */
  moved(state: ActionState): void {
    const { lane, ticket } = state;
    if (lane === null || ticket === null) return;
    const entries = this.lanes.get(lane);
    const at = entries === undefined ? -1 : indexOf(entries, ticket);
    if (ticketStanding(state) === 'resolved') {
      this.byAction.delete(state.action_id);
      if (entries === undefined || at < 0) return;
      entries.splice(at, 1);
      if (entries.length === 0) this.lanes.delete(lane);
      return;
    }
    this.byAction.set(state.action_id, state);
    const entry: LaneTicket = { ticket, action_id: state.action_id, last_seq: state.last_seq, state };
    if (entries === undefined) this.lanes.set(lane, [entry]);
    else if (at >= 0) entries[at] = entry;
    else entries.splice(insertionPoint(entries, ticket), 0, entry);
  }

  /** Drops an action's ticket wherever it is listed (a held row's entry, before its fold is moved in). */
  drop(actionId: string): void {
    const state = this.byAction.get(actionId);
    if (state === undefined || state.lane === null || state.ticket === null) return;
    this.byAction.delete(actionId);
    const entries = this.lanes.get(state.lane);
    const at = entries === undefined ? -1 : indexOf(entries, state.ticket);
    if (entries === undefined || at < 0) return;
    entries.splice(at, 1);
    if (entries.length === 0) this.lanes.delete(state.lane);
  }

  /** The lane's unresolved tickets from `fromTicket` on, in ticket order, at most `limit`. */
  list(lane: string, fromTicket: number, limit: number): LaneTicket[] {
    const entries = this.lanes.get(lane);
    if (entries === undefined) return [];
    const start = insertionPoint(entries, fromTicket);
    return entries.slice(start, start + limit);
  }

  /** An unresolved laned action's state as the last COMMIT wrote it (undefined once resolved, or never laned). */
  stateOf(actionId: string): ActionState | undefined {
    return this.byAction.get(actionId);
  }

  /** Every unresolved laned action's state, as the last COMMIT (or the load) left it. */
  states(): ActionState[] {
    return [...this.byAction.values()];
  }

  /** Every lane that holds an unresolved ticket, with its lowest one (the lane's head). */
  heads(): Map<string, number> {
    const heads = new Map<string, number>();
    for (const [lane, entries] of this.lanes) {
      const head = entries[0];
      if (head !== undefined) heads.set(lane, head.ticket);
    }
    return heads;
  }

  /** Unresolved tickets held, over all lanes. */
  size(): number {
    let n = 0;
    for (const entries of this.lanes.values()) n += entries.length;
    return n;
  }
}

/** The index of the first entry whose ticket is >= `ticket` (entries.length when none is). */
function insertionPoint(entries: readonly LaneTicket[], ticket: number): number {
  let low = 0;
  let high = entries.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if ((entries[mid] as LaneTicket).ticket < ticket) low = mid + 1;
    else high = mid;
  }
  return low;
}

function indexOf(entries: readonly LaneTicket[], ticket: number): number {
  const at = insertionPoint(entries, ticket);
  return entries[at]?.ticket === ticket ? at : -1;
}
