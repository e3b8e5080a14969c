import type {
  ApprovalCard,
  Effect,
  OperatorAuth,
  OperatorSurface,
  Outcome,
  QueuePosition,
  SessionState,
} from '../contract/index.js';

/**
 * Who decided, named for the record: a person on a surface that proved one (desktop window, web
 * session, passphrase on the CLI's terminal), or under the unattended opt-out the process that
 * called (`<exe> pid <pid>`), never a person. The operator handlers build it per call.
 */
export interface OperatorActor {
  readonly kind: 'person' | 'process';
  readonly id: string;
  readonly surface?: OperatorSurface;
  readonly auth?: OperatorAuth;
}

export interface DecisionResult {
  readonly ticket: number;
  readonly action_id: string;
  /** The decision now recorded (approved, rejected, cancelled, abandoned). */
  readonly decision: string;
  readonly journal_seq: number;
}

/**
 * The approval queue as the operator surfaces see it (implemented in broker/queue). Every decision
 * is a compare-and-swap in the journal: a late click after an expiry (or any other terminal
 * decision) changes nothing and throws CodedError DECISION_CONFLICT, e.g. "ticket #7 already expired".
 * Unknown tickets or sessions throw NOT_FOUND.
 */
export interface OperatorQueue {
  /** Every open card, grouped by lane then ticket order (the lane of null last). */
  cards(): ApprovalCard[];
  approve(ticket: number, actor: OperatorActor): Promise<DecisionResult>;
  reject(ticket: number, actor: OperatorActor, reason: string): Promise<DecisionResult>;
  cancel(ticket: number, actor: OperatorActor, reason: string): Promise<DecisionResult>;
  /** Releases the lane behind a blocked (unknown) head; the outcome stays unknown. */
  abandon(ticket: number, actor: OperatorActor, reason: string): Promise<DecisionResult>;
  /** A person settles a dispatched, recorded-unknown action with a written basis (source operator_attested). */
  attest(
    actionId: string,
    actor: OperatorActor,
    outcome: 'committed' | 'rejected',
    effect: Effect,
    basis: string,
  ): Promise<DecisionResult>;
  approveSession(sessionId: string, actor: OperatorActor): Promise<SessionState>;
  revokeSession(sessionId: string, actor: OperatorActor, reason: string): Promise<SessionState>;
  /** Where an action waits now, or null once it is dispatched/closed or unknown to the queue. */
  position(actionId: string): QueuePosition | null;
  /** Whether the session has a live connection now. */
  isConnected(sessionId: string): boolean;
}

/** What a reconciliation recorded on the original action (see OperatorReconciler). */
export interface ReconcileResult {
  readonly action_id: string;
  readonly ticket: number;
  /** The lookup's own recorded action (its ACTION_ACCEPTED names action_id in `reconciles`). */
  readonly lookup_action_id: string;
  /** What the lookup named the original by, strongest first; `bounded_read_back` when it had no id. */
  readonly correlation: 'idempotency_token' | 'operation_id' | 'provider_request_id' | 'bounded_read_back';
  /** A bounded read-back: why it is enough or why ambiguity remains, and how many candidates matched of how many read. */
  readonly note?: string;
  readonly read_back?: { readonly matched: number; readonly examined: number };
  /** The original's outcome after the RECONCILIATION_RESULT: unknown when the lookup was inconclusive. */
  readonly outcome: Outcome;
  readonly effect: Effect;
  readonly outcome_basis: string;
  readonly journal_seq: number;
}

/**
 * Reconciliation a person asks for (implemented in broker/queue): runs the route's configured
 * lookup as its own recorded action and appends what it learned to the unknown action
 * (RECONCILIATION_RESULT, source remote_query). Refusals: NOT_FOUND, DECISION_CONFLICT (not a
 * recorded-unknown action), UNSUPPORTED_ACTION field `lookup` (no lookup or no correlation).
 */
export interface OperatorReconciler {
  reconcile(actionId: string, actor: OperatorActor): Promise<ReconcileResult>;
}
