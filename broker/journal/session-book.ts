import type { SessionState } from '../contract/index.js';

/**
 * How many sessions that ended with their process (status `ended`) the book keeps, newest by first event: the most a
 * session list shows (listSessions, sessions.list), so every one it shows is here. Older ones are let go.
 */
export const endedSessionsKept = 1_000;

export interface SessionBookOptions {
  /** Ended sessions kept; endedSessionsKept by default (tests pass fewer). */
  readonly endedKept?: number;
  /**
   * A session the book does not hold (let go once it ended, or one it never read at open): the fold of its own sealed
   * events (Journal), never its row; undefined while they cannot be opened.
   */
  readonly fromLog?: (sessionId: string) => SessionState | undefined;
}

/**
 * The sessions this journal knows: read from the `sessions` table once, when the journal opens, then moved only
 * by this journal's own commits. The running broker decides from it — who a reconnecting process is, whether a session
 * is approved, which sessions the sweeper ends — and never from a later read of that table. The table is plaintext and
 * any process of the user can write it while the broker runs (THREAT-MODEL 3): a row inserted for the agent's own child
 * process with `status: approved`, or an update of its own pending session to approved, would otherwise be an approval
 * no person gave.
 *
 * Bounded (THREAT-MODEL 4): every process that connects opens a session, and an agent that starts processes by the
 * thousand, each connecting and exiting, would otherwise grow the book (about a kilobyte a session: a process's ids and
 * paths) and every session list's sort for as long as the broker runs. It holds every session not ended, every revoked
 * one (a person revoked each), and the newest `endedKept` of those that ended with their process (`ended`); an older
 * one is let go. Letting one go changes no decision: its process is gone (a session ends only when the sweeper finds its
 * pid and start time gone, and the kernel never gives a new process both again), so no call is ever made on it, and
 * what is still asked of it (a retry of its action by another session, a card or request naming it, a person's
 * decision on it) is answered from the fold of its own sealed events, never its row (a row another process edited, to
 * `ended` for a live session pushed out of the newest, is not read at all); while they cannot be opened (the vault
 * locked) such a session is unknown, as one never recorded is.
 */
export class SessionBook {
  private readonly byId = new Map<string, SessionState>();
  /** pid and kernel start time → the newest session of that process (as findSessionByProcess always answered). */
  private readonly byProcess = new Map<string, SessionState>();
  /** The sessions not ended (pending, approved, revoked): what the sweeper and the agent guard go through, all of them. */
  private readonly unended = new Map<string, SessionState>();
  /** Sessions ended with their process (status `ended`): the ones the book lets go, oldest first, past `endedKept`. */
  private readonly endedWithProcess = new Map<string, SessionState>();
  /**
   * Sessions read from the table at open whose state no fold of their sealed events has confirmed yet in this run
   * (Journal.getSession confirms one when its events can be opened). A row edited while no broker ran is read as it is
   * at open; until confirmed, an approval it says is not acted on (ApprovalQueue: the call gets a card).
   */
  private readonly unconfirmed = new Set<string>();
  private readonly endedKept: number;
  private readonly fromLog: (sessionId: string) => SessionState | undefined;

  constructor(loaded: Iterable<SessionState>, options: SessionBookOptions = {}) {
    this.endedKept = options.endedKept ?? endedSessionsKept;
    this.fromLog = options.fromLog ?? (() => undefined);
    const rows = Array.from(loaded, (s) => [s.session_id, s] as const);
    for (const [id] of rows) this.unconfirmed.add(id);
    this.committed(rows);
  }

  /** Whether this session was read from the table at open and its sealed events have not confirmed it yet. */
  isUnconfirmed(sessionId: string): boolean {
    return this.unconfirmed.has(sessionId);
  }

  /** The sessions read at open that no fold of their events has confirmed yet, in the order the table gave them. */
  unconfirmedIds(): string[] {
    return [...this.unconfirmed];
  }

  /** A session written over its unconfirmed row (a commit planned before the row was confirmed): unconfirmed again. */
  unconfirm(sessionId: string): void {
    if (this.byId.has(sessionId)) this.unconfirmed.add(sessionId);
  }

  /**
   * The fold of an unconfirmed session's sealed events: it replaces the row read at open, whatever that said; none
   * (no event of it in the log: a row another process inserted) forgets the session.
   */
  confirmed(sessionId: string, folded: SessionState | undefined): void {
    this.unconfirmed.delete(sessionId);
    const held = this.byId.get(sessionId);
    if (held !== undefined) this.forget(held);
    if (folded !== undefined) this.committed([[sessionId, folded]]);
  }

  /** A session this journal wrote, as it holds it; one it let go (or never wrote) is undefined. */
  held(sessionId: string): SessionState | undefined {
    return this.byId.get(sessionId);
  }

  /** A session as `held`, or one it does not hold as its events fold (class comment). */
  get(sessionId: string): SessionState | undefined {
    const held = this.byId.get(sessionId);
    if (held !== undefined) return held;
    try {
      return this.fromLog(sessionId);
    } catch {
      return undefined;
    }
  }

  findByProcess(pid: number, startTime: string): SessionState | undefined {
    return this.byProcess.get(processKey(pid, startTime));
  }

  /**
   * The newest `limit` sessions by their first event (with a status among `statuses`, when given), oldest first, as
   * the table's listSessions answered. Every one of them is held while `limit` is at most `endedKept`.
   */
  list(limit: number, statuses?: readonly SessionState['status'][]): SessionState[] {
    const matching = [...this.byId.values()].filter((s) => statuses === undefined || statuses.includes(s.status));
    matching.sort((a, b) => a.first_seq - b.first_seq);
    return matching.slice(Math.max(0, matching.length - limit));
  }

  /** After COMMIT only: the session states that commit wrote. */
  committed(written: Iterable<readonly [string, SessionState]>): void {
    for (const [id, session] of written) {
      this.byId.set(id, session);
      // A revoked session that then ends keeps status revoked (project-session): ended_at_ms says it ended.
      if (session.status === 'ended' || session.ended_at_ms !== null) this.unended.delete(id);
      else this.unended.set(id, session);
      if (session.status === 'ended') this.endedWithProcess.set(id, session);
      const key = processKey(session.pid, session.start_time);
      const newest = this.byProcess.get(key);
      if (newest === undefined || newest.first_seq <= session.first_seq) this.byProcess.set(key, session);
    }
    // Let go in batches of a quarter of those kept: one sort per batch, not one per session that ends.
    if (this.endedWithProcess.size > this.endedKept + Math.ceil(this.endedKept / 4)) this.letGoOldestEnded();
  }

  /**
   * Every session not ended, however many (in the order each was first written). The newest-first `list` is the
   * Sessions view's page; a sweep or a guard that read it would never see an older live session behind 1,000 newer ones.
   */
  unendedSessions(): SessionState[] {
    return [...this.unended.values()];
  }

  /** Sessions held in memory: at most the unended, the revoked and 1.25 × `endedKept` of those ended (the class). */
  size(): number {
    return this.byId.size;
  }

  /** Keeps the newest `endedKept` sessions ended with their process, by first event; lets the older ones go. */
  private letGoOldestEnded(): void {
    const oldestFirst = [...this.endedWithProcess.values()].sort((a, b) => a.first_seq - b.first_seq);
    for (const session of oldestFirst.slice(0, oldestFirst.length - this.endedKept)) {
      this.forget(session);
      this.unconfirmed.delete(session.session_id);
    }
  }

  private forget(session: SessionState): void {
    const id = session.session_id;
    this.byId.delete(id);
    this.unended.delete(id);
    this.endedWithProcess.delete(id);
    const key = processKey(session.pid, session.start_time);
    if (this.byProcess.get(key)?.session_id === id) this.byProcess.delete(key);
  }
}

function processKey(pid: number, startTime: string): string {
  return `${pid}\u0000${startTime}`;
}
