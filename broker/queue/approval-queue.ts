import type { Logger } from 'pino';
import { mcpCredentialRefs, type PosternConfig } from '../config/index.js';
import {
  CodedError,
  TransitionRefused,
  type ActionState,
  type Actor,
  type ApprovalCard,
  type Effect,
  type NewEvent,
  type QueuePosition,
  sessionRecordWords,
  type SessionState,
} from '../contract/index.js';
import {
  attestClassification,
  scheduleLane,
  ticketStanding,
  type AttestedOutcome,
  type TicketWait,
} from '../core/index.js';
import type { Appended, Journal } from '../journal/index.js';
import type { Clock, DecisionResult, OperatorActor, OperatorQueue } from '../ports/index.js';
import { buildCard } from './build-card.js';
import type { CardPreview, HttpRequestView } from './card-preview.js';
import { brokerActor, callerClassification, gateClassification, sessionPolicyActor } from './decision-events.js';
import { conflictMessage, sessionConflictMessage } from './decision-conflict.js';
import { systemQueueTimers, type QueueTimer, type QueueTimers } from './queue-timers.js';

/** What the dispatcher tells a waiting executor: send now, or the ticket was closed (recorded). */
export type Turn = { readonly kind: 'go' } | { readonly kind: 'closed'; readonly state: ActionState };

/** What an executor needs of the queue: wait for its turn, then say when its outcome is recorded. */
export interface DispatchQueue {
  awaitTurn(actionId: string, preview: CardPreview): Promise<Turn>;
  /** A retry of an action its record already settled: its place back at the head of its lane (see ApprovalQueue). */
  retryTurn(actionId: string): Promise<void>;
  settled(actionId: string): void;
  /** The broker is stopping (holdReleases): nothing further may start, an automatic retry round neither. */
  releasesHeld?(): boolean;
  /**
   * The caller cancelled this action or went away (CALLER_CANCELLED / CALLER_DISCONNECTED, true from the moment
   * callerStopped is called, before that event's commit) while its executor was still running: no further automatic
   * retry round starts for it (the retry engine's ready()).
   */
  stoppedByCaller?(actionId: string): boolean;
  /**
   * Calls `listener` once the caller cancels this action or disconnects while its executor runs (stoppedByCaller turns
   * true; at once if it already has): a retry's backoff wait ends there, so the call answers now. Returns the
   * unsubscribe.
   */
  onStoppedByCaller?(actionId: string, listener: () => void): () => void;
  /**
   * Calls `listener` once the broker stops (holdReleases; at once if it already has): a retry's backoff wait ends
   * there, and no further round starts. Returns the unsubscribe.
   */
  onHold?(listener: () => void): () => void;
}

export interface ApprovalQueueOptions {
  readonly journal: Journal;
  readonly clock: Clock;
  /** Approval clocks and session mode (config.agents), credential names for cards after a restart. */
  readonly config: PosternConfig;
  readonly timers?: QueueTimers;
  readonly logger?: Logger;
  /**
   * The process allowlist's answer for a session-mode call of a pending session (a scoped entry covering the call's
   * route or host): the policy actor that approves it instead of the session card. Absent: no allowlist.
   */
  readonly allowlistApproval?: (state: ActionState) => Actor | undefined;
  /**
   * Whether an approved session's process is still the one approved (the process allowlist's processUnchanged: alive,
   * running the executable its session recorded). false: the call gets a card instead. Absent: not checked.
   */
  readonly sessionProcessUnchanged?: (session: SessionState) => boolean;
}

/** A retry refused because the broker is stopping: nothing was recorded on the action, it may be asked for again. */
function shuttingDown(actionId: string): CodedError {
  return new CodedError(
    'SHUTTING_DOWN',
    `the broker is stopping; the retry of ${actionId} was not started and nothing was recorded (ask again once it runs)`,
    { field: 'retry_of' },
  );
}

/** One bounded page when the queue reads the journal (the journal caps pages at 1000 too). */
const pageMax = 1_000;

interface Waiter {
  readonly resolve: (turn: Turn) => void;
}

/**
 * The approval queue and dispatcher (DESIGN §4). The journal is the truth: every decision is an
 * event the projection accepts or refuses (the compare-and-swap), and every scheduling decision
 * re-reads the lane's states from the journal and asks broker/core scheduleLane. In memory only
 * small lane state: each lane's lowest possibly-unresolved ticket, the executors waiting for their
 * turn, expiry timers and card previews. No lock is held across a remote wait: the released head is
 * simply "dispatching" until its executor records an outcome and calls settled().
 */
export class ApprovalQueue implements OperatorQueue, DispatchQueue {
  private readonly journal: Journal;
  /** Sessions whose unconfirmed approval was logged (once each). */
  private readonly unconfirmedTold = new Set<string>();
  private readonly clock: Clock;
  private readonly config: PosternConfig;
  private readonly timers: QueueTimers;
  private readonly logger: Logger | undefined;
  private readonly allowlistApproval: ((state: ActionState) => Actor | undefined) | undefined;
  private readonly sessionProcessUnchanged: ((session: SessionState) => boolean) | undefined;
  /** lane → lowest ticket that may still be unresolved. */
  private readonly floors = new Map<string, number>();
  /** Lanes that may hold unresolved tickets. */
  private readonly activeLanes = new Set<string>();
  /** Registered actions with lane null (reads that bypass lanes): each is its own lane. */
  private readonly bypass = new Set<string>();
  private readonly waiters = new Map<string, Waiter>();
  /**
   * Released tickets whose executor has not called settled() yet, by lane (null: bypasses lanes). Such a ticket holds
   * its lane even once its record reads resolved: the retry engine waits out a backoff between attempts of the same
   * action, and the next ticket must not go out in between (scheduleLane's `running`).
   */
  private readonly executing = new Map<string, string | null>();
  /**
   * How many runs of each executing action have not settled yet: its released run, and each retry that took its turn
   * (retryTurn) — two can overlap (a retry_of while an automatic retry waits out its backoff). The action leaves
   * `executing` when its last run settles; a run that never took a turn (a retry refused first) never counts.
   */
  private readonly runs = new Map<string, number>();
  /**
   * Executing actions whose caller cancelled them or disconnected meanwhile (callerStopped): no further automatic retry
   * round.
   */
  private readonly callerStoppedRuns = new Set<string>();
  /** Told once when the caller of an executing action stops: its retry waiting out a backoff (onStoppedByCaller). */
  private readonly callerStopListeners = new Map<string, Set<() => void>>();
  /** Set by holdReleases (the broker is stopping): no waiter hears `go` any more. */
  private holding = false;
  /** Told once by holdReleases: retries waiting out a backoff (onHold). */
  private readonly holdListeners = new Set<() => void>();
  private readonly previews = new Map<string, CardPreview>();
  /** Request views read back from sealed ACTION_ACCEPTED events (journaledView), while their card is shown. */
  private readonly journaledViews = new Map<string, HttpRequestView | 'sealed_for_good' | 'not_recorded'>();
  private readonly expiries = new Map<string, { readonly atMs: number; readonly timer: QueueTimer }>();
  /** Sessions with at least one open agent connection (see sessionConnected). */
  private readonly connected = new Set<string>();
  private readonly listeners = new Set<() => void>();
  /** Tickets above every ticket seen at open: a lane first seen later starts here. */
  private floorStart = 1;

  private constructor(options: ApprovalQueueOptions) {
    this.journal = options.journal;
    this.clock = options.clock;
    this.config = options.config;
    this.timers = options.timers ?? systemQueueTimers;
    this.logger = options.logger;
    this.allowlistApproval = options.allowlistApproval;
    this.sessionProcessUnchanged = options.sessionProcessUnchanged;
  }

  /**
   * Rebuilds lane state from the journal. Recovery already closed pre-dispatch tickets of an
   * earlier run (not_attempted, BROKER_RESTARTED) and marked dispatched ones unknown (in a
   * quarantined journal the pre-dispatch ones too): those unknown heads are unresolved, so their
   * lanes stay blocked after a restart.
   */
  static open(options: ApprovalQueueOptions): ApprovalQueue {
    const queue = new ApprovalQueue(options);
    const { heads, lastTicket } = queue.journal.laneHeads();
    queue.floorStart = lastTicket + 1;
    for (const [lane, head] of heads) {
      queue.floors.set(lane, head);
      queue.activeLanes.add(lane);
    }
    return queue;
  }

  // ── the executor side ──────────────────────────────────────────────────────────────────────

  /**
   * Called by an executor after admission (ACTION_ACCEPTED + PREFLIGHT_VALIDATED durable). Shows a
   * card where one is needed (CARD_SHOWN + expiry timer), applies session policy, then resolves
   * `go` when the dispatcher releases this ticket, or `closed` once a closure is recorded.
   */
  async awaitTurn(actionId: string, preview: CardPreview): Promise<Turn> {
    const state = this.requireAction(actionId);
    this.previews.set(actionId, preview);
    this.track(state);
    const turn = new Promise<Turn>((resolve) => this.waiters.set(actionId, { resolve }));
    try {
      await this.gate(state);
    } catch (error) {
      this.forget(actionId);
      throw error;
    }
    this.pumpFor(state);
    return turn;
  }

  /**
   * A retry of an action whose record already settled (an agent's retry_of, a person's retry): the action takes its
   * place back at the head of its lane — no later ticket is released from now on — and goes once no other ticket of
   * the lane is in flight or blocked, so it never runs beside a later write of the lane (DESIGN §4: retries keep the
   * ticket's place). The executor calls settled() when the retry is done, as for any run. While the broker stops
   * (holdReleases) no retry goes, like no ticket: one asked for then, or still waiting for its turn when the hold
   * comes, is refused SHUTTING_DOWN before anything is recorded on the action.
   */
  async retryTurn(actionId: string): Promise<void> {
    if (this.holding) throw shuttingDown(actionId);
    const lane = this.journal.getAction(actionId)?.lane ?? null;
    this.startRun(actionId, lane);
    if (lane === null) return;
    const busy = (): boolean =>
      this.readLane(lane).open.some((s) => {
        if (s.action_id === actionId) return false;
        const standing = ticketStanding(s);
        return standing === 'in_flight' || standing === 'blocked' || this.executing.has(s.action_id);
      });
    if (!busy()) return;
    await new Promise<void>((resolve, reject) => {
      const stop = this.onChange(() => {
        if (this.holding) {
          stop();
          // Only this retry's run ends (refused: it settles nothing); another run of the action still counts.
          this.endRun(actionId);
          reject(shuttingDown(actionId));
          return;
        }
        if (busy()) return;
        stop();
        resolve();
      });
    });
  }

  /**
   * The executor recorded this action's outcome (or gave up): the lane may move on — once no other run of it (a
   * concurrent retry) is still executing. Called only by a run that was released or took its retry turn.
   */
  settled(actionId: string): void {
    const state = this.journal.getAction(actionId);
    if (this.endRun(actionId)) this.forget(actionId);
    if (state !== undefined) this.pumpFor(state);
  }

  /**
   * The caller stopped waiting (cancelled, disconnected, or cancel_action). Before dispatch the
   * caller event and CANCELLED land in one commit, so nothing will be sent; if DISPATCH_STARTED won
   * the race the CANCELLED is refused and only the caller event is recorded (the effect is what
   * the record says).
   */
  async callerStopped(actionId: string, stop: 'cancelled' | 'disconnected'): Promise<ActionState | undefined> {
    const state = this.journal.getAction(actionId);
    if (state === undefined) return undefined;
    const kind = stop === 'disconnected' ? 'CALLER_DISCONNECTED' : 'CALLER_CANCELLED';
    const callerEvent = (stage: string): NewEvent => ({ kind, action_id: actionId, payload: { stage } });
    // No automatic round starts from here on, before the caller event is even committed: its append yields (the group
    // commit's setImmediate, a checkpoint or another connection's lock), and a retry's backoff timer firing meanwhile
    // must find ready() false, or a DISPATCH_STARTED would follow the recorded stop. The caller asked; fewer rounds is
    // always safe. A round waiting out its backoff is woken once the event is recorded (stopRounds, below).
    if (this.executing.has(actionId)) this.callerStoppedRuns.add(actionId);
    let after: ActionState;
    if (state.dispatch_seq === null && state.outcome === null) {
      const cancelled: NewEvent = {
        kind: 'CANCELLED',
        action_id: actionId,
        payload: {
          actor: { kind: 'agent', id: state.session_id ?? 'agent' },
          reason: stop === 'disconnected' ? 'caller disconnected' : 'caller cancelled',
        },
        classification: callerClassification(stop),
      };
      const both = await this.journal.tryAppendBatch([callerEvent('before_dispatch'), cancelled]);
      if (both.ok) {
        after = both.appended.at(-1)?.state ?? state;
      } else {
        // Another event won (DISPATCH_STARTED, or a person's decision): only the caller event.
        const now = this.journal.getAction(actionId) ?? state;
        after = (
          await this.journal.append(callerEvent(now.dispatch_seq === null ? 'before_dispatch' : 'remote_execution'))
        ).state;
      }
    } else {
      after = (
        await this.journal.append(callerEvent(state.dispatch_seq === null ? 'before_dispatch' : 'remote_execution'))
      ).state;
    }
    // Its executor still runs (an automatic retry waiting out its backoff): the recorded cancel or disconnect ends its
    // wait (no further round started meanwhile: see above). An automatic round acts for the caller that sent the action; one that left asked for nothing more,
    // and a disconnect before a round's dispatch is, like one before the first, a cancel (nothing more is sent).
    if (this.executing.has(actionId)) this.stopRounds(actionId);
    this.clearExpiry(actionId);
    this.pumpFor(after);
    return after;
  }

  /**
   * Actions the journal held at open (their rows refuted by the log) and has now recovered from their own sealed events
   * (Journal.onHeldRecovered): their lanes are read again, so a ticket behind one the log had settled is released.
   */
  heldRecovered(actionIds: readonly string[]): void {
    for (const id of actionIds) {
      const state = this.journal.getAction(id);
      if (state !== undefined) this.pumpFor(state);
    }
  }

  /**
   * Whether this action's executor is still running: released (or a retry's turn taken) and not settled yet. Its record
   * may already read settled (an automatic retry waits out its backoff between attempts), yet it is not closed.
   */
  isExecuting(actionId: string): boolean {
    return this.executing.has(actionId);
  }

  stoppedByCaller(actionId: string): boolean {
    return this.callerStoppedRuns.has(actionId);
  }

  onStoppedByCaller(actionId: string, listener: () => void): () => void {
    if (this.callerStoppedRuns.has(actionId)) {
      listener();
      return () => undefined;
    }
    const listeners = this.callerStopListeners.get(actionId) ?? new Set<() => void>();
    this.callerStopListeners.set(actionId, listeners);
    listeners.add(listener);
    return () => {
      listeners.delete(listener);
      if (listeners.size === 0 && this.callerStopListeners.get(actionId) === listeners)
        this.callerStopListeners.delete(actionId);
    };
  }

  /**
   * The recorded cancel or disconnect stops the action's further automatic rounds (stoppedByCaller), and a round
   * waiting out its backoff stops waiting: the executor answers the last attempt's record now, not at the backoff's end.
   */
  private stopRounds(actionId: string): void {
    this.callerStoppedRuns.add(actionId);
    const listeners = [...(this.callerStopListeners.get(actionId) ?? [])];
    this.callerStopListeners.delete(actionId);
    for (const listener of listeners) listener();
  }

  // ── the operator side (OperatorQueue) ─────────────────────────────────────────────────────

  cards(): ApprovalCard[] {
    const cards: ApprovalCard[] = [];
    const byLane = [...this.activeLanes].sort();
    for (const lane of byLane) {
      const tickets = this.readLane(lane).open;
      for (const wait of scheduleLane(tickets, this.awaitsSession, this.running).open)
        this.pushCard(cards, tickets, wait);
    }
    const reads = [...this.bypass]
      .map((id) => this.journal.getAction(id))
      .filter((s): s is ActionState => s !== undefined);
    for (const state of reads.sort((a, b) => (a.ticket ?? 0) - (b.ticket ?? 0))) {
      for (const wait of scheduleLane([state], this.awaitsSession, this.running).open)
        this.pushCard(cards, [state], wait);
    }
    const shown = new Set(cards.map((c) => c.action_id));
    for (const id of this.journaledViews.keys()) if (!shown.has(id)) this.journaledViews.delete(id);
    return cards;
  }

  async approve(ticket: number, actor: OperatorActor): Promise<DecisionResult> {
    const state = this.requireTicket(ticket);
    if (state.approval === 'none')
      throw new CodedError('DECISION_CONFLICT', `ticket #${ticket} needs no approval`, { field: 'ticket' });
    const appended = await this.decide(state, 'approve', {
      kind: 'APPROVED',
      action_id: state.action_id,
      payload: { actor, request_fingerprint: state.request_fingerprint },
    });
    return this.decided(appended, 'approved');
  }

  async reject(ticket: number, actor: OperatorActor, reason: string): Promise<DecisionResult> {
    const state = this.requireTicket(ticket);
    const appended = await this.decide(state, 'reject', {
      kind: 'REJECTED',
      action_id: state.action_id,
      payload: { actor, reason: reason.slice(0, 2000) },
      classification: gateClassification('approval_denied'),
    });
    return this.decided(appended, 'rejected');
  }

  async cancel(ticket: number, actor: OperatorActor, reason: string): Promise<DecisionResult> {
    const state = this.requireTicket(ticket);
    const appended = await this.decide(state, 'cancel', {
      kind: 'CANCELLED',
      action_id: state.action_id,
      payload: { actor, reason: (reason.trim() === '' ? 'cancelled by operator' : reason).slice(0, 2000) },
      classification: gateClassification('operator_cancelled'),
    });
    return this.decided(appended, 'cancelled');
  }

  async abandon(ticket: number, actor: OperatorActor, reason: string): Promise<DecisionResult> {
    const state = this.requireTicket(ticket);
    const appended = await this.decide(state, 'abandon', {
      kind: 'ABANDONED',
      action_id: state.action_id,
      payload: { actor, reason: reason.slice(0, 2000) },
    });
    return this.decided(appended, 'abandoned');
  }

  /**
   * A person settles an action whose recorded outcome is unknown, with a written basis
   * (OPERATOR_ATTESTED, source operator_attested; never not_attempted): a dispatched one, or one a
   * quarantined journal's recovery recorded unknown before dispatch. Its lane then moves on: a
   * settled head no longer blocks. Anything else (in flight, already settled, closed before
   * dispatch) is DECISION_CONFLICT naming the state.
   */
  async attest(
    actionId: string,
    actor: OperatorActor,
    outcome: AttestedOutcome,
    effect: Effect,
    basis: string,
  ): Promise<DecisionResult> {
    const state = this.journal.getAction(actionId);
    if (state === undefined || !actionId.startsWith('act_'))
      throw new CodedError('NOT_FOUND', `no action ${actionId}`, { field: 'action_id' });
    const classification = attestClassification(outcome, effect);
    // A recorded unknown: dispatched, or recorded unknown before dispatch by a quarantined journal's recovery.
    if (!state.recorded || state.outcome !== 'unknown') {
      throw new CodedError('DECISION_CONFLICT', conflictMessage(state, 'attest'), { field: 'action_id' });
    }
    const appended = await this.decide(state, 'attest', {
      kind: 'OPERATOR_ATTESTED',
      action_id: actionId,
      payload: { actor, basis: basis.slice(0, 4000) },
      classification,
    });
    return this.decided(appended, `attested ${outcome}`);
  }

  /**
   * Appends a reconciliation lookup's observation on the original action (RECONCILIATION_RESULT,
   * built by reconcile-action.ts) like a person's decision: the projection is the compare-and-swap
   * (refused if the action settled meanwhile — DECISION_CONFLICT naming its state), and a settling
   * result wakes the lane, since a settled head no longer blocks.
   */
  async recordReconciliation(event: Extract<NewEvent, { kind: 'RECONCILIATION_RESULT' }>): Promise<Appended> {
    const state = this.journal.getAction(event.action_id);
    if (state === undefined) throw new CodedError('NOT_FOUND', `no action ${event.action_id}`, { field: 'action_id' });
    return this.decide(state, 'reconcile', event);
  }

  async approveSession(sessionId: string, actor: OperatorActor): Promise<SessionState> {
    const session = this.requireSession(sessionId);
    this.requireApprovableRecord(sessionId);
    const appended = await this.decideSession(session, {
      kind: 'SESSION_APPROVED',
      action_id: sessionId,
      payload: { actor },
    });
    await this.approveWaitingSessionTickets(sessionId);
    return appended;
  }

  /**
   * A policy's approval of a pending session (the process allowlist, for a session it first sees after a restart),
   * then its waiting session-mode tickets. False when it lost a race: a person's decision or the process's end stands.
   */
  async approveSessionByPolicy(sessionId: string, actor: Actor): Promise<boolean> {
    const approved = await this.journal.tryAppendSession({
      kind: 'SESSION_APPROVED',
      action_id: sessionId,
      payload: { actor },
    });
    if (approved.ok) await this.approveWaitingSessionTickets(sessionId);
    return approved.ok;
  }

  async revokeSession(sessionId: string, actor: OperatorActor, reason: string): Promise<SessionState> {
    const session = this.requireSession(sessionId);
    const appended = await this.decideSession(session, {
      kind: 'SESSION_REVOKED',
      action_id: sessionId,
      payload: { actor, reason: reason.slice(0, 2000) },
    });
    await this.cancelSessionTickets(sessionId, actor, 'session revoked', 'session_revoked');
    return appended;
  }

  position(actionId: string): QueuePosition | null {
    const state = this.journal.getAction(actionId);
    if (state === undefined || state.ticket === null || state.dispatch_seq !== null || state.outcome !== null)
      return null;
    const tickets = state.lane === null ? [state] : this.readLane(state.lane).open;
    const scheduled = scheduleLane(tickets, this.awaitsSession, this.running).open.find(
      (w) => w.action_id === actionId,
    );
    if (scheduled === undefined) return null;
    const wait = this.told(scheduled);
    const waiting = wait.waiting === 'blocked_head' ? 'lane_blocked' : wait.waiting;
    return {
      ticket: wait.ticket,
      lane: state.lane,
      waiting,
      waiting_for_ticket: wait.waiting_for_ticket,
      text: wait.text.slice(0, 200),
    };
  }

  isConnected(sessionId: string): boolean {
    return this.connected.has(sessionId);
  }

  // ── sessions (called by the agent backend) ────────────────────────────────────────────────

  /**
   * A connection of this session opened. A flag, not a count, because the two calls are not
   * symmetric: the socket layer opens the session once PER CONNECTION (each MCP initialize), but
   * reports the disconnect once, when the LAST connection of the session closes (broker/agent
   * SessionRegistry counts the connections). Counting here would never return to zero.
   */
  sessionConnected(sessionId: string): void {
    this.connected.add(sessionId);
  }

  /** The session's last connection closed (the process may still live). */
  sessionDisconnected(sessionId: string): void {
    this.connected.delete(sessionId);
  }

  /**
   * The session's process is gone: SESSION_ENDED, then CANCELLED ("session ended") for each of its
   * undispatched tickets. An already ended session changes nothing.
   */
  async endSession(sessionId: string, reason: 'process_exited' | 'broker_found_gone'): Promise<void> {
    const ended = await this.journal.tryAppendSession({
      kind: 'SESSION_ENDED',
      action_id: sessionId,
      payload: { reason },
    });
    // session_ended: its end is already recorded (the sweeper and the socket both saw the process go).
    if (!ended.ok) return;
    this.connected.delete(sessionId);
    await this.cancelSessionTickets(sessionId, brokerActor('session-sweeper'), 'session ended', 'session_ended');
  }

  /**
   * Called after anything that may change the cards or a position (a card shown, a decision, a
   * ticket released or settled): the UI can refresh, tests can wait for an event instead of sleeping.
   */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * The broker is stopping (BrokerRuntime.stopIntake): no ticket is released from now on, whatever it waits for (a
   * person, its turn); its executor keeps waiting and the next start's recovery closes it (not_attempted). Those
   * already released run on, but start no further attempt: no retry goes (retryTurn refuses SHUTTING_DOWN, the retry
   * engine takes no lease once releasesHeld()), and one waiting out a backoff stops waiting (onHold), so the drain
   * never waits for a timer that could only end in no send. Not undone: the queue closes next.
   */
  holdReleases(): void {
    this.holding = true;
    // A retry waiting out its backoff (the retry engine's wait) stops waiting and answers from its record.
    const listeners = [...this.holdListeners];
    this.holdListeners.clear();
    for (const listener of listeners) listener();
    // A retry waiting for its turn (retryTurn) hears the hold and is refused.
    this.notify();
  }

  releasesHeld(): boolean {
    return this.holding;
  }

  onHold(listener: () => void): () => void {
    if (this.holding) {
      listener();
      return () => undefined;
    }
    this.holdListeners.add(listener);
    return () => this.holdListeners.delete(listener);
  }

  /** Tickets released to their executors that have not settled yet (what a stopping broker drains). */
  releasedCount(): number {
    return this.executing.size;
  }

  /** Stops every expiry timer (shutdown). Waiting executors keep waiting; recovery closes them. */
  close(): void {
    for (const { timer } of this.expiries.values()) timer.cancel();
    this.expiries.clear();
  }

  // ── internals ─────────────────────────────────────────────────────────────────────────────

  /**
   * Card and session policy at registration; every append here is a CAS like any other. A ticket
   * of a revoked or ended session is cancelled whatever its mode (a call admitted in a race with
   * the revocation must not run, approval none included).
   */
  private async gate(state: ActionState): Promise<void> {
    if (state.decision !== null || state.outcome !== null) return;
    const session = state.session_id === null ? undefined : this.journal.getSession(state.session_id);
    if (session !== undefined && (session.status === 'revoked' || session.status === 'ended')) {
      await this.tryAppend({
        kind: 'CANCELLED',
        action_id: state.action_id,
        payload: { actor: brokerActor('session'), reason: `session ${session.status}` },
        classification: gateClassification(session.status === 'ended' ? 'session_ended' : 'session_revoked'),
      });
      return;
    }
    if (state.approval === 'none') return;
    if (
      state.approval === 'session' &&
      session?.status === 'approved' &&
      this.approvalConfirmed(session, state) &&
      this.grantValid(session) &&
      this.sameProcess(session, state)
    ) {
      await this.tryAppend({
        kind: 'APPROVED',
        action_id: state.action_id,
        payload: { actor: sessionPolicyActor(session.session_id), request_fingerprint: state.request_fingerprint },
      });
      return;
    }
    // A scoped allowlist entry stands in for the session card on its routes/hosts only; per_call keeps its card.
    const allowed =
      state.approval === 'session' && session?.status === 'pending' ? this.allowlistApproval?.(state) : undefined;
    if (allowed !== undefined) {
      await this.tryAppend({
        kind: 'APPROVED',
        action_id: state.action_id,
        payload: { actor: allowed, request_fingerprint: state.request_fingerprint },
      });
      return;
    }
    // per_call, a session-mode call of a pending session, or one whose grant ran out: a card.
    await this.showCard(state);
  }

  /** Whether an undecided session-mode ticket still waits for its session (pending, or unknown). */
  private readonly awaitsSession = (s: ActionState): boolean => {
    if (s.session_id === null) return false;
    const session = this.journal.getSession(s.session_id);
    return session === undefined || session.status === 'pending';
  };

  /**
   * A session's approval is for the process that was approved: one that exec'd another program on its connection (or
   * a connection another process kept after it exited) gets a card for each call instead (ApprovalQueueOptions
   * sessionProcessUnchanged).
   */
  private sameProcess(session: SessionState, state: ActionState): boolean {
    if (this.sessionProcessUnchanged?.(session) !== false) return true;
    this.logger?.warn(
      { action_id: state.action_id, session_id: session.session_id },
      "the session's process no longer runs the program that was approved: the call gets a card",
    );
    return false;
  }

  /**
   * A session's approval is acted on only where the journal's own record says it: a session an earlier run wrote is
   * read from its table row at open, which another process may have edited while no broker ran (THREAT-MODEL 3), until
   * its sealed events confirm it, which needs the vault unlocked (Journal.sessionConfirmed). Until then each call
   * gets a card.
   */
  private approvalConfirmed(session: SessionState, state: ActionState): boolean {
    if (this.journal.sessionApprovalUsable(session.session_id)) return true;
    if (this.unconfirmedTold.has(session.session_id)) return false;
    this.unconfirmedTold.add(session.session_id);
    this.logger?.warn(
      { action_id: state.action_id, session_id: session.session_id },
      "the session's approval is an earlier run's and its events do not confirm it (the vault locked, or its row refuted): its calls get cards",
    );
    return false;
  }

  /** Observe mode approves by policy every time; otherwise the grant lasts session_grant_ttl_seconds. */
  private grantValid(session: SessionState): boolean {
    const agents = this.config.agents;
    if (agents.session_approval === 'observe' || agents.session_grant_ttl_seconds === undefined) return true;
    // From its SESSION_APPROVED: a reconnection (each MCP initialize is one) does not renew it.
    const grantedAtMs = session.approved_at_ms ?? session.updated_at_ms;
    return this.clock.nowMs() < grantedAtMs + agents.session_grant_ttl_seconds * 1000;
  }

  private async showCard(state: ActionState): Promise<void> {
    const ttlMs = this.config.agents.approval_ttl_seconds * 1000;
    const atMs = this.clock.nowMs() + ttlMs;
    const shown = await this.tryAppend({
      kind: 'CARD_SHOWN',
      action_id: state.action_id,
      payload: { expires_at_ms: atMs },
    });
    if (!shown) return;
    const timer = this.timers.set(() => void this.expire(state.action_id), ttlMs);
    this.expiries.set(state.action_id, { atMs, timer });
    this.notify();
  }

  private notify(): void {
    for (const listener of this.listeners) {
      try {
        listener();
      } catch (error) {
        this.logger?.error({ err: error }, 'a queue listener threw');
      }
    }
  }

  /** The approval window closed: EXPIRED unless another decision won (then nothing changes). */
  private async expire(actionId: string): Promise<void> {
    this.expiries.delete(actionId);
    try {
      await this.tryAppend({
        kind: 'EXPIRED',
        action_id: actionId,
        payload: {},
        classification: gateClassification('approval_expired'),
      });
    } catch (error) {
      this.logger?.error({ err: error, action_id: actionId }, 'recording an expiry failed');
      return;
    }
    const state = this.journal.getAction(actionId);
    if (state !== undefined) this.pumpFor(state);
  }

  private async approveWaitingSessionTickets(sessionId: string): Promise<void> {
    for (const s of this.openSessionTickets(sessionId)) {
      if (s.approval !== 'session' || s.decision !== null) continue;
      if (
        await this.tryAppend({
          kind: 'APPROVED',
          action_id: s.action_id,
          payload: { actor: sessionPolicyActor(sessionId), request_fingerprint: s.request_fingerprint },
        })
      )
        this.clearExpiry(s.action_id);
      this.pumpFor(s);
    }
  }

  /** `gate`: a person revoked the session (SESSION_REVOKED), or its process is gone (SESSION_ENDED: withdrawn). */
  private async cancelSessionTickets(
    sessionId: string,
    actor: Actor,
    reason: string,
    gate: 'session_revoked' | 'session_ended',
  ): Promise<void> {
    for (const s of this.openSessionTickets(sessionId)) {
      await this.tryAppend({
        kind: 'CANCELLED',
        action_id: s.action_id,
        payload: { actor, reason },
        classification: gateClassification(gate),
      });
      this.clearExpiry(s.action_id);
      this.pumpFor(s);
    }
  }

  /**
   * The session's undispatched, unclosed tickets. The journal lists a session's first page only
   * (its oldest actions), so the waiting executors of this run are added from memory: a long-lived
   * session's newest tickets are cancelled on revocation too. (After a restart recovery has closed
   * every undispatched ticket of the earlier run.)
   */
  private openSessionTickets(sessionId: string): ActionState[] {
    const byId = new Map<string, ActionState>();
    for (const s of this.journal.listSessionActions(sessionId)) byId.set(s.action_id, s);
    for (const actionId of this.waiters.keys()) {
      if (byId.has(actionId)) continue;
      const s = this.journal.getAction(actionId);
      if (s?.session_id === sessionId) byId.set(actionId, s);
    }
    // A held action (its row refuted by the log: Journal.isHeld) is not open whatever its row reads: it was dispatched,
    // and no decision folds over it until its own events decide.
    return [...byId.values()]
      .filter((s) => s.dispatch_seq === null && s.outcome === null && !this.journal.isHeld(s.action_id))
      .sort((a, b) => (a.ticket ?? 0) - (b.ticket ?? 0));
  }

  /** The dispatcher: re-read the lane, ask core, wake whom it names. Synchronous: no lock, no await. */
  private pumpFor(state: ActionState): void {
    // The caller may hold the state from before its own closure (a cancelled ticket of a revoked session): the
    // journal's current one says whether its waiter hears `closed`, since a lane lists unresolved tickets only.
    const current = this.journal.getAction(state.action_id);
    if (current === undefined) return;
    this.closeWaiter(current);
    if (current.lane === null) {
      this.wake([current]);
      this.notify();
      return;
    }
    this.track(current);
    const lane = this.readLane(current.lane);
    const schedule = this.wake(lane.open);
    this.floors.set(
      current.lane,
      schedule.headTicket ?? (lane.last === null ? (this.floors.get(current.lane) ?? this.floorStart) : lane.last + 1),
    );
    if (schedule.headTicket === null) this.activeLanes.delete(current.lane);
    this.notify();
  }

  private wake(tickets: readonly ActionState[]): ReturnType<typeof scheduleLane> {
    const schedule = scheduleLane(tickets, this.awaitsSession, this.running);
    for (const s of tickets) {
      this.closeWaiter(s);
      const waiter = this.waiters.get(s.action_id);
      if (waiter === undefined || schedule.release?.action_id !== s.action_id || this.holding) continue;
      this.waiters.delete(s.action_id);
      this.clearExpiry(s.action_id);
      this.startRun(s.action_id, s.lane);
      waiter.resolve({ kind: 'go' });
    }
    return schedule;
  }

  /** A ticket closed before dispatch whose executor still waits: it hears `closed` with the record. */
  private closeWaiter(s: ActionState): void {
    if (s.dispatch_seq !== null || s.outcome === null) return;
    const waiter = this.waiters.get(s.action_id);
    if (waiter === undefined) return;
    this.waiters.delete(s.action_id);
    this.clearExpiry(s.action_id);
    waiter.resolve({ kind: 'closed', state: s });
  }

  /**
   * The lane's unresolved tickets from its floor (its head) to its end, page by page (the journal's reads are
   * bounded): a waiter or a head beyond the first page must still be seen. They are bounded by the agent backend's
   * open-actions bound per session, and by the unknown heads a person has not settled yet.
   */
  private readLane(lane: string): { open: ActionState[]; last: number | null } {
    const open: ActionState[] = [];
    let from = this.floors.get(lane) ?? this.floorStart;
    for (;;) {
      const page = this.journal.listLane(lane, { fromTicket: from, limit: pageMax });
      open.push(...page);
      const tail = page.at(-1)?.ticket ?? null;
      if (page.length < pageMax || tail === null) break;
      from = tail + 1;
    }
    // The journal lists unresolved tickets only: a released one still executing (a retry's backoff) is added back.
    const listed = new Set(open.map((s) => s.action_id));
    let added = false;
    for (const [actionId, executingLane] of this.executing) {
      if (executingLane !== lane || listed.has(actionId)) continue;
      const state = this.journal.getAction(actionId);
      if (state === undefined || state.ticket === null) continue;
      open.push(state);
      added = true;
    }
    if (added) open.sort((a, b) => (a.ticket ?? 0) - (b.ticket ?? 0));
    return { open, last: open.at(-1)?.ticket ?? null };
  }

  private readonly running = (s: ActionState): boolean => this.executing.has(s.action_id);

  private track(state: ActionState): void {
    if (state.lane === null) {
      this.bypass.add(state.action_id);
      return;
    }
    if (!this.floors.has(state.lane))
      this.floors.set(state.lane, Math.min(this.floorStart, state.ticket ?? this.floorStart));
    this.activeLanes.add(state.lane);
  }

  private startRun(actionId: string, lane: string | null): void {
    this.executing.set(actionId, lane);
    this.runs.set(actionId, (this.runs.get(actionId) ?? 0) + 1);
  }

  /** One run of the action ended; true when it was the last (the action no longer executes). */
  private endRun(actionId: string): boolean {
    const left = (this.runs.get(actionId) ?? 0) - 1;
    if (left > 0) {
      this.runs.set(actionId, left);
      return false;
    }
    this.runs.delete(actionId);
    this.executing.delete(actionId);
    return true;
  }

  private forget(actionId: string): void {
    this.waiters.delete(actionId);
    this.executing.delete(actionId);
    this.runs.delete(actionId);
    this.callerStoppedRuns.delete(actionId);
    this.callerStopListeners.delete(actionId);
    this.previews.delete(actionId);
    this.bypass.delete(actionId);
    this.clearExpiry(actionId);
  }

  private clearExpiry(actionId: string): void {
    this.expiries.get(actionId)?.timer.cancel();
    this.expiries.delete(actionId);
  }

  /**
   * A held action (its row refuted by the log at this start: Journal.isHeld) is said to be held, not what its row reads
   * (which would say "next to dispatch" of a request that was sent). One whose restart record waits for the unlock
   * (Journal.isDeferred) says so: nothing runs it, and a person's attestation waits for that record.
   */
  private told(wait: TicketWait): TicketWait {
    if (this.journal.isDeferred(wait.action_id))
      return {
        ...wait,
        text: `#${wait.ticket} was in flight when the broker stopped: its restart record (unknown, and which retry is safe) is written from its own events once the vault unlocks`,
      };
    if (!this.journal.isHeld(wait.action_id)) return wait;
    // Shown as on its way: nothing to decide while held, whatever stage the row reads (its log may hold a dispatch).
    return {
      ...wait,
      waiting: 'dispatching',
      allowed: true,
      text: `#${wait.ticket} held: its record was found rewritten at this start; its own events decide once the vault unlocks`,
    };
  }

  private pushCard(cards: ApprovalCard[], tickets: readonly ActionState[], scheduled: TicketWait): void {
    const wait = this.told(scheduled);
    const state = tickets.find((s) => s.action_id === wait.action_id);
    if (state === undefined) return;
    const expiry = this.expiries.get(state.action_id);
    // A ticket that needs a decision is shown only once its CARD_SHOWN is durable. A blocked head is always shown, with
    // its ways out: also one recorded unknown before any decision (a quarantined journal's recovery).
    const undecided = !wait.allowed && state.dispatch_seq === null && wait.waiting !== 'blocked_head';
    if (undecided && expiry === undefined && state.stage !== 'card_shown') return;
    const session = state.session_id === null ? undefined : this.journal.getSession(state.session_id);
    const preview = this.previews.get(state.action_id);
    cards.push(
      buildCard({
        state,
        wait,
        preview,
        ...(preview === undefined ? { journaled: this.journaledView(state) } : {}),
        session,
        sessionRecord: session === undefined ? 'confirmed' : this.journal.sessionRecordCheck(session.session_id),
        expiresAtMs: wait.allowed ? null : (expiry?.atMs ?? null),
        credentialOf: (target) => this.credentialOf(target),
      }),
    );
  }

  /**
   * What the card of an HTTP route's action shows of its request once no preview is in memory (its executor returned,
   * or a restart): the `request_view` its ACTION_ACCEPTED sealed, read back while the event opens (this run's key, or
   * an earlier run's with the unlocked vault). `sealed` while it cannot (read again on the next look, so an unlock
   * shows it), `sealed_for_good` when a run that never had a key sealed it (no unlock ever opens it: kept, not read
   * again); `not_recorded` for an action a broker before request_view admitted. Undefined: not an HTTP route.
   */
  private journaledView(
    state: ActionState,
  ): HttpRequestView | 'sealed' | 'sealed_for_good' | 'not_recorded' | undefined {
    if (state.channel !== 'http' || !state.target.startsWith('route:')) return undefined;
    const known = this.journaledViews.get(state.action_id);
    if (known !== undefined) return known;
    const [event] = this.journal.eventsPage(state.first_seq, 1, { action_id: state.action_id });
    if (event === undefined || event.seq !== state.first_seq) return 'not_recorded';
    if ('sealed' in event) {
      if (!this.journal.subjectSealedForGood(state.action_id, 1)) return 'sealed';
      this.journaledViews.set(state.action_id, 'sealed_for_good');
      return 'sealed_for_good';
    }
    const view = (event.kind === 'ACTION_ACCEPTED' ? event.payload.request_view : undefined) ?? 'not_recorded';
    this.journaledViews.set(state.action_id, view);
    return view;
  }

  private credentialOf(target: string): string {
    if (target.startsWith('route:')) return this.config.routes.get(target.slice(6))?.credential ?? '(unknown)';
    if (target.startsWith('host:')) return this.config.sshHosts.get(target.slice(5))?.credential ?? '(unknown)';
    if (target.startsWith('mcp:')) {
      const server = this.config.mcpServers.get(target.slice(4));
      if (server === undefined) return '(unknown)';
      const names = mcpCredentialRefs(server);
      return names.length === 0 ? '(none)' : names.join(', ');
    }
    return '(unknown)';
  }

  private async decide(
    state: ActionState,
    verb: 'approve' | 'reject' | 'cancel' | 'abandon' | 'attest' | 'reconcile',
    event: NewEvent,
  ): Promise<Appended> {
    const result = await this.journal.tryAppend(event);
    if (!result.ok) {
      // Whatever won (a decision, a dispatch, a settlement, a lease), the person decided on a record that moved on.
      const field = verb === 'attest' || verb === 'reconcile' ? 'action_id' : 'ticket';
      const cause = new TransitionRefused(result.refusal);
      throw new CodedError(
        'DECISION_CONFLICT',
        conflictMessage(this.journal.getAction(state.action_id) ?? state, verb),
        { field, cause },
      );
    }
    this.clearExpiry(state.action_id);
    this.pumpFor(result.appended.state);
    return result.appended;
  }

  private decided(appended: Appended, decision: string): DecisionResult {
    this.logger?.info(
      { action_id: appended.state.action_id, ticket: appended.state.ticket, decision },
      'ticket decision recorded',
    );
    return {
      ticket: appended.state.ticket ?? 0,
      action_id: appended.state.action_id,
      decision,
      journal_seq: appended.event.seq,
    };
  }

  private async decideSession(session: SessionState, event: NewEvent): Promise<SessionState> {
    const result = await this.journal.tryAppendSession(event);
    if (result.ok) return result.appended.session;
    // session_not_pending, session_closed: another decision (or the process's end) landed first.
    const cause = new TransitionRefused(result.refusal);
    const message = sessionConflictMessage(
      this.journal.getSession(session.session_id) ?? session,
      this.journal.sessionRecordCheck(session.session_id),
    );
    throw new CodedError('DECISION_CONFLICT', message, { field: 'session_id', cause });
  }

  /** Appends; false when it lost a race (another decision, a dispatch or a closure won), throws anything else. */
  private async tryAppend(event: NewEvent): Promise<boolean> {
    return (await this.journal.tryAppend(event)).ok;
  }

  private requireAction(actionId: string): ActionState {
    const state = this.journal.getAction(actionId);
    // A programmer error: executors register only admitted actions.
    if (state === undefined) throw new Error(`awaitTurn: ${actionId} was never admitted`);
    return state;
  }

  private requireTicket(ticket: number): ActionState {
    const state = this.journal.listActions({ fromTicket: ticket, limit: 1 })[0];
    if (state === undefined || state.ticket !== ticket)
      throw new CodedError('NOT_FOUND', `no ticket #${ticket}`, { field: 'ticket' });
    return state;
  }

  /**
   * A person approves the session the journal has a record of: an earlier run's row its sealed events have not
   * confirmed is the file's word (its status may be forged), and one whose approval this run does not act on would be
   * approved for nothing. Revoking needs no such record: it only takes away.
   */
  private requireApprovableRecord(sessionId: string): void {
    const record = this.journal.sessionRecordCheck(sessionId);
    if (record === 'unconfirmed')
      throw new CodedError(
        'VAULT_LOCKED',
        `session ${sessionId} is an earlier run's, and its record is the journal file's word until its sealed events are read, which needs the vault unlocked: unlock, then decide (a record its events still do not confirm then cannot be approved in this run)`,
        { field: 'session_id' },
      );
    if (record === 'unverifiable' || record === 'approval_withheld')
      throw new CodedError(
        'DECISION_CONFLICT',
        `session ${sessionId}: ${sessionRecordWords[record] ?? record}, so no approval of it is acted on in this run; the agent started again is a new session`,
        { field: 'session_id' },
      );
  }

  private requireSession(sessionId: string): SessionState {
    const session = this.journal.getSession(sessionId);
    if (session === undefined) throw new CodedError('NOT_FOUND', 'no such session', { field: 'session_id' });
    return session;
  }
}
