import type { ApprovalCard, Effect, QueuePosition, SessionState } from '../contract/index.js';

/** Who decided: the operator CLI, the desktop UI or the web UI (a person), named for the record. */
export interface OperatorActor {
  readonly kind: 'person';
  readonly id: string;
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
  attest(actionId: string, actor: OperatorActor, outcome: 'committed' | 'rejected', effect: Effect, basis: string): Promise<DecisionResult>;
  approveSession(sessionId: string, actor: OperatorActor): Promise<SessionState>;
  revokeSession(sessionId: string, actor: OperatorActor, reason: string): Promise<SessionState>;
  /** Where an action waits now, or null once it is dispatched/closed or unknown to the queue. */
  position(actionId: string): QueuePosition | null;
  /** Whether the session has a live connection now. */
  isConnected(sessionId: string): boolean;
}
