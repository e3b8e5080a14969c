/**
 * How many actions of one session may be open at once: admitted (or being admitted), not yet
 * dispatched and not closed. A caller's timeout frees its socket's in-flight slot while the action
 * keeps its ticket, so without this bound an agent looping short timeouts behind a blocked lane
 * would grow the broker's memory (waiting executors, previews) without limit.
 */
export const openActionsPerSessionMax = 256;

/** One running executor: its action id once the executor minted one. */
export interface RunningAction {
  actionId: string | undefined;
}

/**
 * The running executors per session, kept from the call's start until its executor returns (which
 * outlives a caller that stopped waiting). `isOpen` reads the record: a running executor whose
 * action was dispatched or closed no longer counts. Check and registration are one synchronous step,
 * so concurrent calls cannot both slip under the bound.
 */
export class OpenActions {
  private readonly bySession = new Map<string, Set<RunningAction>>();

  constructor(
    private readonly max: number,
    private readonly isOpen: (actionId: string) => boolean,
  ) {}

  /** Registers a new running action, or returns undefined when the session is at the bound. */
  tryBegin(sessionId: string): RunningAction | undefined {
    const running = this.bySession.get(sessionId) ?? new Set<RunningAction>();
    // Reading the record only when the bound could be reached keeps the common call O(1).
    if (running.size >= this.max && this.openCount(running) >= this.max) return undefined;
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
