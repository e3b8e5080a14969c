import type { Logger } from 'pino';
import { TransitionRefused, type Actor, type ActionState } from '../contract/index.js';
import { exhaustedClassification, planRetry, type RetryContext } from '../core/index.js';
import type { Journal } from '../journal/index.js';
import type { Clock } from '../ports/index.js';
import { systemQueueTimers, type QueueTimers } from '../queue/queue-timers.js';
import { stateClassification } from './state-envelope.js';

/** Which run of an action this is: the first (attempt 1, no lease) or a retry under a lease. */
export interface AttemptRun {
  /** The number of this run's first attempt: the record's attempt count + 1. */
  readonly firstAttempt: number;
  /** The RETRY_LEASED generation this run holds; absent on the first run. */
  readonly generation?: number;
}

export interface RetryEngineDeps {
  readonly journal: Journal;
  readonly clock: Clock;
  readonly logger?: Logger;
  /** Backoff waits (tests: broker/testing/manual-timers.ts on a FakeClock). */
  readonly retryTimers?: QueueTimers;
  /** This worker's id on its leases (the record names who held each generation). */
  readonly workerId?: string;
  /**
   * Called right after this worker's lease is durable and before it sends: the seam the fencing
   * test uses to pause a worker past its lease's expiry (broker/testing). Production leaves it unset.
   */
  readonly onLeased?: (actionId: string, generation: number) => Promise<void> | void;
}

/** The route's retry policy as configured (config-schema `retry`). */
export interface RetryPolicy {
  readonly automatic: boolean;
  readonly lease_seconds: number;
  readonly backoff_ms: number;
}

/** One action as the engine drives it; `R` is the channel's answer type. */
export interface RetrySubject<R> {
  readonly actionId: string;
  readonly policy: RetryPolicy | undefined;
  readonly idempotent: boolean;
  /** The fingerprint the retry would send (automatic retries resend the recorded request). */
  readonly fingerprint: string;
  readonly keyExpiresAtMs?: number;
  /** Sends one run (authorization, the channel's attempts, the record) under the given lease. */
  send(run: AttemptRun): Promise<R>;
  /** The answer the record gives now (budget spent, a reconciliation, a record that moved on). */
  fromRecord(state: ActionState): R;
  /** The answer while another worker holds the live lease (LEASE_LOST: this caller's view, not journaled). */
  leaseHeld(state: ActionState): R;
  /** The route's lookup, if any: asked once the key's window has passed (never a resend then). */
  reconcile?: () => Promise<void>;
  /**
   * Whether a send could run now (the vault unlocked, the broker not stopping): no lease is taken for a retry that
   * cannot. Asked again after a backoff, just before the lease.
   */
  ready(): boolean;
  /**
   * Calls `wake` once no further round can start (the broker stopping: the queue's onHold; the caller cancelled or
   * disconnected: its onStoppedByCaller): a backoff wait ends there, and ready() then answers. Returns the unsubscribe.
   * Absent: the wait runs its full delay.
   */
  onStopping?(wake: () => void): () => void;
}

const automation: Actor = { kind: 'broker', id: 'retry-engine' };

/**
 * The retry engine (DESIGN §3, article 000): decideRetry, via planRetry over the recorded state,
 * decides; the engine only waits, takes the lease and sends. One active attempt per invocation:
 * RETRY_LEASED is the journal's compare-and-swap (next generation only, within the recorded
 * budget, no live lease), and the channel's DISPATCH_STARTED names the generation, which the
 * journal refuses once that lease expired or another took over — so a worker that paused past its
 * lease is stopped before its first byte. `requestedBy` is who asked for the first retry (the
 * agent's retry_of, or automation after a first run); later rounds are automation's and run only
 * when the route's policy says `automatic`.
 */
export async function retryWhileAllowed<R>(
  deps: RetryEngineDeps,
  subject: RetrySubject<R>,
  last: R,
  requestedBy: Actor = automation,
): Promise<R> {
  let result = last;
  let requester = requestedBy;
  const policy = subject.policy;
  if (policy === undefined) return result;
  for (;;) {
    if (requester.kind === 'broker' && !policy.automatic) return result;
    const state = deps.journal.getAction(subject.actionId);
    if (state === undefined) return result;
    const context: RetryContext = {
      idempotent: subject.idempotent,
      fingerprint: subject.fingerprint,
      backoffMs: policy.backoff_ms,
      nowMs: deps.clock.nowMs(),
      ...(subject.keyExpiresAtMs === undefined ? {} : { keyExpiresAtMs: subject.keyExpiresAtMs }),
    };
    const plan = planRetry(state, context);
    if (plan.kind === 'held') return subject.leaseHeld(state);
    if (plan.kind === 'stop') return result;
    if (plan.kind === 'exhausted') return exhausted(deps, subject, state, result);
    if (plan.kind === 'reconcile') {
      if (plan.why !== 'key_retention_passed' || subject.reconcile === undefined) return result;
      await subject.reconcile();
      const after = deps.journal.getAction(subject.actionId);
      return after === undefined ? result : subject.fromRecord(after);
    }
    if (!subject.ready()) return result;
    if (plan.delayMs > 0) {
      await wait(deps, plan.delayMs, subject);
      // The record (and the key's window) may have moved while waiting: plan again from it.
      const now = deps.journal.getAction(subject.actionId);
      const again = now === undefined ? undefined : planRetry(now, { ...context, nowMs: deps.clock.nowMs() });
      if (
        again?.kind !== 'retry' ||
        again.generation !== plan.generation ||
        again.decision !== plan.decision ||
        now?.attempts.length !== state.attempts.length
      )
        continue;
      // The vault may have locked, or the broker begun to stop, while waiting.
      if (!subject.ready()) return result;
    }
    const refused = await takeLease(deps, subject.actionId, plan.generation, plan.decision, policy, requester);
    if (refused !== undefined)
      return refused.held ? subject.leaseHeld(refused.state) : subject.fromRecord(refused.state);
    await deps.onLeased?.(subject.actionId, plan.generation);
    deps.logger?.info(
      { action_id: subject.actionId, generation: plan.generation, decision: plan.decision },
      'retry leased',
    );
    result = await subject.send({ firstAttempt: state.attempts.length + 1, generation: plan.generation });
    requester = automation;
    // Fenced or stopped before dispatch (this round sent nothing), or another worker's generation
    // is now the record's: this worker is done; whoever holds the record goes on.
    const after = deps.journal.getAction(subject.actionId);
    if (after === undefined || after.retry_generation !== plan.generation || after.lease?.open === true) return result;
    if (!after.attempts.some((a) => a.n > state.attempts.length && a.state === 'dispatched')) return result;
  }
}

/**
 * Appends RETRY_LEASED; refused, returns the record and whether another worker has the lease
 * (lease_held, lease_lost: it answers) or the record no longer allows a retry (answer from it).
 */
async function takeLease(
  deps: RetryEngineDeps,
  actionId: string,
  generation: number,
  decision: 'RETRY_NEW_ATTEMPT' | 'RETRY_SAME_KEY' | 'RETRY_WHEN_ALLOWED',
  policy: RetryPolicy,
  requester: Actor,
): Promise<{ state: ActionState; held: boolean } | undefined> {
  const leased = await deps.journal.tryAppend({
    kind: 'RETRY_LEASED',
    action_id: actionId,
    payload: {
      generation,
      holder: deps.workerId ?? `worker-${process.pid}`,
      expires_at_ms: deps.clock.nowMs() + policy.lease_seconds * 1000,
      decision,
      requested_by: requester,
    },
  });
  if (leased.ok) return undefined;
  const { refusal } = leased;
  deps.logger?.info({ action_id: actionId, generation, code: refusal.code }, 'retry lease not taken');
  const state = deps.journal.getAction(actionId);
  if (state === undefined) throw new TransitionRefused(refusal);
  switch (refusal.kind) {
    case 'lease_held':
    case 'lease_lost':
      return { state, held: true };
    default:
      // not_retriable (settled, abandoned, budget or key window spent meanwhile), or any other event that won.
      return { state, held: false };
  }
}

/** The budget is spent: an unknown outcome is re-recorded as RETRY_BUDGET_EXHAUSTED (last evidence kept). */
async function exhausted<R>(
  deps: RetryEngineDeps,
  subject: RetrySubject<R>,
  state: ActionState,
  result: R,
): Promise<R> {
  const last = stateClassification(state);
  const classification = last === undefined ? undefined : exhaustedClassification(last);
  if (classification === undefined || state.code === 'RETRY_BUDGET_EXHAUSTED') return result;
  const attempt = state.attempts.at(-1)?.n;
  const appended = await deps.journal.append({
    kind: 'OUTCOME_RECORDED',
    action_id: subject.actionId,
    payload: attempt === undefined ? {} : { attempt },
    classification,
  });
  deps.logger?.info({ action_id: subject.actionId, budget: state.retry_budget }, 'retry budget exhausted');
  return subject.fromRecord(appended.state);
}

/** The backoff: its full delay, or less once the subject says no round can start any more (onStopping). */
function wait(
  deps: RetryEngineDeps,
  delayMs: number,
  subject: Pick<RetrySubject<unknown>, 'onStopping'>,
): Promise<void> {
  if (delayMs <= 0) return Promise.resolve();
  const timers = deps.retryTimers ?? systemQueueTimers;
  return new Promise((resolve) => {
    let over = false;
    let unsubscribe = (): void => undefined;
    // Whichever ends the wait (its timer, the hold, the caller's stop), no other source keeps a timer or a listener.
    const end = (): void => {
      if (over) return;
      over = true;
      timer.cancel();
      unsubscribe();
      resolve();
    };
    const timer = timers.set(end, delayMs);
    unsubscribe = subject.onStopping?.(end) ?? unsubscribe;
    if (over) unsubscribe();
  });
}
