/**
 * The HTTP retry path: an agent's `retry_of` and a person's retry of a kept request, resent as further attempts of the
 * original action under the retry engine's lease (retry-engine.ts), through the shared attempt steps (http-steps.ts).
 */
import {
  CodedError,
  errorCodeMeanings,
  isCodedError,
  transitionRefusalOf,
  type ActionState,
  type Classification,
  type IdempotencyKeyBinding,
  type JournalEvent,
} from '../contract/index.js';
import type { OperatorActor } from '../ports/index.js';
import { project } from '../core/index.js';
import { buildHttpEnvelope } from './http-envelope.js';
import { dropWhenSettled, readKeptRequest } from './kept-request.js';
import { stateClassification } from './state-envelope.js';
import { normalizeHttpRequest, requestFingerprint, type InternalHttpRequest } from './http-action-request.js';
import { runRecorded } from './record-broker-error.js';
import type { BoundCredential } from './credential-binding.js';
import { retryWhileAllowed, type AttemptRun, type RetrySubject } from './retry-engine.js';
import {
  authorizeAndSendOnce,
  closedEnvelope,
  operationTimeoutMs,
  validate,
  type Bound,
  type HttpActionDeps,
  type HttpActionResult,
} from './http-steps.js';

/**
 * A person retries an unknown action with the same key (the "retry with the same key" way out of
 * a blocked lane): the kept request (kept-request.ts) is unsealed and resent through the same path as an agent's
 * retry_of — same fingerprint, same key, the next lease — with the person as `requested_by`. The
 * click is the fresh decision a retry of an indeterminate action needs. NOT_FOUND when nothing was
 * kept (no contract or retry policy on the route, the key's window passed, or already settled).
 */
export async function retryKeptRequest(
  deps: HttpActionDeps,
  actionId: string,
  actor: OperatorActor,
): Promise<HttpActionResult> {
  const input = readKeptRequest(deps, actionId);
  return retryHttpAction(deps, actionId, input, actor);
}

/**
 * The agent asks to retry an earlier action (`retry_of`), resending the same request — same route,
 * same fingerprint, same idempotency key. Retries keep the ticket's place (DESIGN §4): no new
 * ticket, no new card; the retry is an attempt of the original action under a lease, allowed only
 * where the route declares a retry policy (the standing decision) and planRetry says a resend is
 * safe (an idempotent repeat, the same key within its window, or a throttled idempotent request).
 * A request that does not match is refused with a coded error and nothing is recorded on the
 * original; such a refusal, or one of its turn (SHUTTING_DOWN), touches neither the record nor the queue's count of
 * the action's runs (runRecorded wraps only what follows the turn).
 */
export async function retryHttpAction(
  deps: HttpActionDeps,
  actionId: string,
  input: InternalHttpRequest,
  person?: OperatorActor,
): Promise<HttpActionResult> {
  const stored = actionId.startsWith('act_') ? deps.journal.getAction(actionId) : undefined;
  if (stored === undefined || stored.channel !== 'http' || !retryVisible(deps, stored))
    throw new CodedError('NOT_FOUND', `no HTTP action ${actionId}`, { field: 'retry_of' });
  const request = normalizeHttpRequest(input);
  const route = deps.config.routes.get(request.route);
  if (route === undefined || !stored.target.startsWith(`route:${route.name} `))
    throw new CodedError('INVALID_TARGET', `${actionId} was not sent on route ${request.route}`, { field: 'route' });
  // The route's policy is plaintext configuration: a route without one refuses for good before anything reads the
  // action's events (sealed while the vault is locked: that refusal would say backoff, and the unlock then never).
  if (route.retry === undefined) {
    throw new CodedError(
      'UNSUPPORTED_ACTION',
      `route ${route.name} declares no retry policy: ${actionId} leaves unknown by reconciliation or a person`,
      { field: 'retry_of' },
    );
  }
  // Read once everything queued before is committed, without holding the loop (Journal.readCurrent).
  const events = await deps.journal.readCurrent(() => deps.journal.subjectEvents(actionId));
  // Whose action it is and what it sent, as its own sealed events say: the checks above read the plaintext row (so a
  // route without a policy is refused before anything sealed is opened), which another process can edit.
  const state = project(events).get(actionId);
  if (state === undefined || state.channel !== 'http' || !retryVisible(deps, state) || state.target !== stored.target)
    throw new CodedError('NOT_FOUND', `no HTTP action ${actionId}`, { field: 'retry_of' });
  assertSameOrigin(events, actionId, route);
  const binding = preflightBinding(events);
  if ((binding?.key ?? undefined) !== input.idempotency_key) {
    throw new CodedError(
      'IDEMPOTENCY_MISMATCH',
      'a retry resends the same idempotency key as the original, never a new one',
      { field: 'idempotency_key' },
    );
  }
  const fingerprint = requestFingerprint(request);
  if (fingerprint !== state.request_fingerprint) {
    const code = binding === undefined ? 'FINGERPRINT_MISMATCH' : 'IDEMPOTENCY_MISMATCH';
    throw new CodedError(
      code,
      `the retried request differs from the one ${actionId} recorded; a different request is a new action`,
      { field: 'body' },
    );
  }
  const preflight = validate(deps, route, route.methods, request, input.idempotency_key);
  if (!preflight.ok)
    throw new CodedError(
      preflight.gate.kind === 'validation' ? preflight.gate.code : 'INVALID_ARGUMENT',
      preflight.message,
      { field: preflight.gate.kind === 'validation' ? (preflight.gate.field ?? '') : '' },
    );
  deps.onAdmitted?.(actionId);
  const bound: Bound = {
    actionId,
    route,
    request,
    fingerprint,
    idempotent: state.idempotent,
    path: preflight.path,
    binding,
    timeoutMs: operationTimeoutMs(route),
    credential: boundCredential(events),
  };
  // Its place back at the head of its lane: it waits for a later ticket in flight, and holds back the ones after it.
  // Refused (the broker stopping), nothing of it ran: no broker error to record, no run to settle.
  await deps.queue.retryTurn(actionId);
  // From its turn on this run is the executor's like any other: a broker bug is recorded, and its run settles (and
  // only its own: another run of the action, a retry under lease, still counts until it settles itself).
  return runRecorded(deps, actionId, async () => {
    const subject = retrySubject(deps, bound);
    const answer = subject.fromRecord(state);
    // Who asked is the calling session (after a restart, not the one that first sent it).
    const requestedBy = person ?? { kind: 'agent' as const, id: deps.sessionId ?? state.session_id ?? 'agent' };
    const result = await retryWhileAllowed(deps, subject, answer, requestedBy);
    // A request is kept only under a contract (a binding) and a retry policy, which this route has.
    return binding === undefined ? result : dropWhenSettled(deps, actionId, result);
  });
}

/**
 * Whose action a session may retry: its own, or one whose session has ended (the same agent after
 * a restart comes back as a new session). Never a live or revoked session's: another agent cannot
 * resend what it did not send, even byte for byte.
 */
function retryVisible(deps: HttpActionDeps, state: ActionState): boolean {
  if (deps.sessionId === undefined || state.session_id === null || state.session_id === deps.sessionId) return true;
  return deps.journal.getSession(state.session_id)?.status === 'ended';
}

/** The credential the original bound at admission (ACTION_ACCEPTED.credential): a retry sends under it or not at all. */
function boundCredential(events: readonly JournalEvent[]): BoundCredential | undefined {
  for (const e of events) if (e.kind === 'ACTION_ACCEPTED') return e.payload.credential;
  return undefined;
}

/**
 * A retry goes where the original went, or nowhere: a route re-pointed since admission (a configuration applied live,
 * or at a restart) would send the same key to another server. Actions admitted before origins were recorded pass.
 */
export function assertSameOrigin(
  events: readonly JournalEvent[],
  actionId: string,
  route: { name: string; base_url: string },
): void {
  for (const e of events) {
    if (e.kind !== 'ACTION_ACCEPTED') continue;
    const origin = e.payload.origin;
    if (origin !== undefined && origin !== route.base_url) {
      throw new CodedError(
        'INVALID_TARGET',
        `route ${route.name} now points at ${route.base_url}, not at ${origin} where ${actionId} was sent: a retry or lookup there would prove nothing about it; reconcile it by hand or attest its outcome`,
        { field: 'route' },
      );
    }
    return;
  }
}

/** The idempotency binding the original journaled with PREFLIGHT_VALIDATED (the key the remote saw). */
function preflightBinding(events: readonly JournalEvent[]): IdempotencyKeyBinding | undefined {
  for (const e of events) {
    if (e.kind === 'PREFLIGHT_VALIDATED') return e.payload.idempotency;
  }
  return undefined;
}

/** The action as the retry engine drives it: resend this bound request, answer from the record otherwise. */
export function retrySubject(deps: HttpActionDeps, b: Bound): RetrySubject<HttpActionResult> {
  const reconcile = deps.reconcile;
  const queue = deps.queue;
  return {
    actionId: b.actionId,
    policy: b.route.retry,
    idempotent: b.idempotent,
    fingerprint: b.fingerprint,
    ...(b.binding === undefined ? {} : { keyExpiresAtMs: b.binding.expires_at_ms }),
    send: (run) => authorizeAndSend(deps, b, run),
    fromRecord: (state) => recordedAnswer(state, b.fingerprint),
    // A locked vault, a broker that is stopping (the queue holds releases), or a caller that cancelled the action
    // (cancel_action, notifications/cancelled) or disconnected while it ran: no further attempt starts.
    ready: () =>
      deps.vault.state() === 'unlocked' &&
      deps.queue.releasesHeld?.() !== true &&
      deps.queue.stoppedByCaller?.(b.actionId) !== true,
    leaseHeld: (state) => leaseHeldAnswer(state, b.fingerprint),
    // The broker stopping, or the caller's recorded cancel or disconnect, ends a backoff wait at once: neither the
    // drain nor the caller waits out a timer that could only end unsent.
    onStopping: (wake) => {
      const unhold = queue.onHold?.(wake);
      const uncancel = queue.onStoppedByCaller?.(b.actionId, wake);
      return () => {
        unhold?.();
        uncancel?.();
      };
    },
    ...(reconcile === undefined ? {} : { reconcile: () => reconcile(b.actionId) }),
  };
}

async function authorizeAndSend(
  deps: HttpActionDeps,
  b: Bound,
  run: AttemptRun = { firstAttempt: 1 },
): Promise<HttpActionResult> {
  if (run.generation === undefined) return authorizeAndSendOnce(deps, b, run);
  // A retry run holds a lease on an action that already has a record. Stopped before its
  // DISPATCH_STARTED (a gate: the vault locked, the credential changed; the journal: the lease
  // lapsed or another worker's attempt won; a connection that failed in setup), it closes its own
  // lease by restating the record's outcome, and answers from the record. Once it crossed the
  // boundary, a failure is the caller's to record (runRecorded: unknown), never swallowed.
  try {
    return await authorizeAndSendOnce(deps, b, run);
  } catch (error) {
    // Any lost race stops a retry before its dispatch (lease_lost, attempt_taken, settled, closed…), as does a locked vault.
    if (transitionRefusalOf(error) === undefined && !(isCodedError(error) && error.code === 'VAULT_LOCKED'))
      throw error;
    const state = deps.journal.getAction(b.actionId);
    if (state === undefined) throw error;
    if (state.attempts.some((a) => a.n >= run.firstAttempt && a.state === 'dispatched')) throw error;
    const code = isCodedError(error) ? error.code : undefined;
    deps.logger?.info({ action_id: b.actionId, generation: run.generation, code }, 'retry stopped before dispatch');
    return recordedAnswer(await closeUndispatchedRetry(deps, state, run.generation), b.fingerprint);
  }
}

/**
 * A retry that never crossed DISPATCH_STARTED changes nothing about the remote: the record's
 * outcome is restated (basis retry_not_dispatched), which ends this worker's own lease at once
 * instead of at its expiry. Another worker's lease is left alone; a settled record (a throttled
 * answer) cannot be restated and its lease simply expires.
 */
async function closeUndispatchedRetry(
  deps: HttpActionDeps,
  state: ActionState,
  generation: number,
): Promise<ActionState> {
  const c = stateClassification(state);
  if (c === undefined || state.lease?.open !== true || state.lease.generation !== generation) return state;
  const attempt = state.attempts.at(-1)?.n;
  const restated = await deps.journal.tryAppend({
    kind: 'OUTCOME_RECORDED',
    action_id: state.action_id,
    payload: attempt === undefined ? {} : { attempt },
    classification: { ...c, outcome_basis: 'retry_not_dispatched' },
  });
  // settled (a throttled answer's record), or another worker's event won: the record as it is now.
  return restated.ok ? restated.appended.state : (deps.journal.getAction(state.action_id) ?? state);
}

/**
 * The answer the record gives now. While another worker's attempt is in flight nothing is
 * classified yet: the caller hears unknown / LEASE_LOST (not journaled: it is this caller's view,
 * not a fact about the action) and reads the outcome later with action_status.
 */
function recordedAnswer(state: ActionState, fingerprint: string): HttpActionResult {
  if (stateClassification(state) !== undefined && state.recorded)
    return { envelope: closedEnvelope(state, fingerprint) };
  return leaseHeldAnswer(state, fingerprint);
}

/** Another worker's attempt is in flight under its lease: this caller's view (never journaled). */
function leaseHeldAnswer(state: ActionState, fingerprint: string): HttpActionResult {
  return {
    envelope: buildHttpEnvelope({
      state,
      classification: leaseHeldClassification,
      message: errorCodeMeanings.LEASE_LOST,
      fingerprint,
    }),
  };
}

const leaseHeldClassification: Classification = {
  phase: 'remote_execution',
  outcome: 'unknown',
  retry: 'reconcile',
  code: 'LEASE_LOST',
  effect: 'unknown_effect',
  outcome_basis: 'another_worker_holds_the_retry_lease',
  source: 'transport_observed',
};
