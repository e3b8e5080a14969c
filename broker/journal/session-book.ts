import type { SessionState } from '../contract/index.js';

/**
 * Every session as this journal knows it: read from the `sessions` table once, when the journal opens, then moved only
 * by this journal's own commits. The running broker decides from it — who a reconnecting process is, whether a session
 * is approved, which sessions the sweeper ends — and never from a later read of that table. The table is plaintext and
 * any process of the user can write it while the broker runs (THREAT-MODEL 3): a row inserted for the agent's own child
 * process with `status: approved`, or an update of its own pending session to approved, would otherwise be an approval
 * no person gave. A session lives here until the journal closes; one is about a kilobyte (a process's ids and paths).
 */
export class SessionBook {
  private readonly byId = new Map<string, SessionState>();
  /** pid and kernel start time → the newest session of that process (as findSessionByProcess always answered). */
  private readonly byProcess = new Map<string, SessionState>();
  /** The sessions not ended (pending, approved, revoked): what the sweeper and the agent guard go through, all of them. */
  private readonly unended = new Map<string, SessionState>();

  constructor(loaded: Iterable<SessionState>) {
    this.committed(Array.from(loaded, (s) => [s.session_id, s] as const));
  }

  get(sessionId: string): SessionState | undefined {
    return this.byId.get(sessionId);
  }

  findByProcess(pid: number, startTime: string): SessionState | undefined {
    return this.byProcess.get(processKey(pid, startTime));
  }

  /**
   * The newest `limit` sessions by their first event (with a status among `statuses`, when given), oldest first, as
   * the table's listSessions answered.
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
      const key = processKey(session.pid, session.start_time);
      const newest = this.byProcess.get(key);
      if (newest === undefined || newest.first_seq <= session.first_seq) this.byProcess.set(key, session);
    }
  }

  /**
   * Every session not ended, however many (in the order each was first written). The newest-first `list` is the
   * Sessions view's page; a sweep or a guard that read it would never see an older live session behind 1,000 newer ones.
   */
  unendedSessions(): SessionState[] {
    return [...this.unended.values()];
  }

  size(): number {
    return this.byId.size;
  }
}

function processKey(pid: number, startTime: string): string {
  return `${pid}\u0000${startTime}`;
}
