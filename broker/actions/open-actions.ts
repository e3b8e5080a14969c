/**
 * How many actions of one session may be open at once: admitted (or being admitted), not yet
 * dispatched and not closed. A caller's timeout frees its socket's in-flight slot while the action
 * keeps its ticket, so without this bound an agent looping short timeouts behind a blocked lane
 * would grow the broker's memory (waiting executors, previews) without limit.
 */
export const openActionsPerSessionMax = 256;

/**
 * How many actions of one session may run at once, dispatched or not: every executor from its call's start until it
 * returns, which for a dispatched action is once its outcome is recorded (the route's timeout bounds that). A
 * dispatched action is no longer open, and a caller whose wait ended no longer holds an in-flight slot, so without
 * this bound an agent looping short-timeout calls against a remote that holds its requests (each on a lane of its
 * own) would hold a connection — a file descriptor, and what is kept of its answer — per call without limit
 * (THREAT-MODEL 4). The open ones count too, so at most 64 beyond a full open bound are dispatched at once.
 */
export const runningActionsPerSessionMax = openActionsPerSessionMax + 64;

/** One running executor: its action id once the executor minted one. */
export interface RunningAction {
  actionId: string | undefined;
}

/** Why tryBegin refused, with the bound that was reached. */
export interface OpenActionsRefusal {
  readonly bound: 'open' | 'running';
  readonly max: number;
}

/**
 * The running executors per session, kept from the call's start until its executor returns (which
 * outlives a caller that stopped waiting). `isOpen` reads the record: a running executor whose
 * action was dispatched or closed no longer counts as open, though it still runs. Check and
 * registration are one synchronous step, so concurrent calls cannot both slip under a bound.
 */
export class OpenActions {
  private readonly bySession = new Map<string, Set<RunningAction>>();

  constructor(
    private readonly max: number,
    private readonly isOpen: (actionId: string) => boolean,
    private readonly runningMax: number = Math.max(max, runningActionsPerSessionMax),
  ) {}

  /** Registers a new running action, or says which bound the session is at. */
  tryBegin(sessionId: string): RunningAction | OpenActionsRefusal {
    const running = this.bySession.get(sessionId) ?? new Set<RunningAction>();
    if (running.size >= this.runningMax) return { bound: 'running', max: this.runningMax };
    // Reading the record only when the bound could be reached keeps the common call O(1).
    if (running.size >= this.max && this.openCount(running) >= this.max) return { bound: 'open', max: this.max };
    const action: RunningAction = { actionId: undefined };
    running.add(action);
    this.bySession.set(sessionId, running);
    return action;
  }

  end(sessionId: string, action: RunningAction): void {
    const running = this.bySession.get(sessionId);
    if (running === undefined) return;
    running.delete(action);
    if (running.size === 0) this.bySession.delete(sessionId);
  }

  private openCount(running: ReadonlySet<RunningAction>): number {
    let open = 0;
    // Not admitted yet counts as open: it is about to be.
    for (const a of running) if (a.actionId === undefined || this.isOpen(a.actionId)) open += 1;
    return open;
  }
}
