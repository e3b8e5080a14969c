import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { HttpChannel, HttpChannelReport } from '../channels/http/index.js';
import type { PosternConfig, Route } from '../config/index.js';
import {
  CodedError,
  errorCodeMeanings,
  isCodedError,
  transitionRefusalOf,
  type ActionState,
  type ApprovalMode,
  type Classification,
  type Envelope,
  type IdempotencyKeyBinding,
  type NewEvent,
} from '../contract/index.js';
import {
  checkHttpRequest,
  classifyOutcome,
  httpReportEvidence,
  joinBasePath,
  refusedRequestField,
  resolveRoutePolicy,
  type LocalGate,
} from '../core/index.js';
import type { Journal, RequestStore, ResultStore } from '../journal/index.js';
import type {
  Clock,
  CredentialInfo,
  CredentialVault,
  IdSource,
  OperatorActor,
  SecretMaterial,
} from '../ports/index.js';
import type { DispatchQueue } from '../queue/approval-queue.js';
import { httpCardPreview } from '../queue/card-preview.js';
import { buildHttpEnvelope, type EnvelopeFacts } from './http-envelope.js';
import { dropWhenSettled, keepRequest, readKeptRequest } from './kept-request.js';
import {
  authorizationRefusal,
  closedBeforeDispatch,
  dispatchJournalFailure,
  journalFailedFacts,
} from './journal-failure.js';
import { stateClassification } from './state-envelope.js';
import {
  httpActionRequestSchema,
  internalRequestOf,
  issueField,
  issueMessage,
  normalizeHttpRequest,
  requestFingerprint,
  unparsedFingerprint,
  type InternalHttpRequest,
  type NormalizedHttpRequest,
} from './http-action-request.js';
import { operationTimeoutMsDefault } from '../config/config-schema.js';
import { correlationValues } from './correlation-values.js';
import { runRecorded } from './record-broker-error.js';
import { startAuthorization } from './authorize-credential.js';
import { retryWhileAllowed, type AttemptRun, type RetryEngineDeps, type RetrySubject } from './retry-engine.js';
import {
  acceptedEvent,
  appendState,
  logRecorded,
  recordAccepted,
  recordRefusal,
  vaultRefusal,
} from './record-refusal.js';
import { secretParts, secretScrubber, type SecretScrubber } from './secret-scrubber.js';
import { deliveredResponse, diagnosticBody, type HttpActionResponse } from './delivered-response.js';
import { classifyBatch, type BatchVerdict } from '../core/index.js';

export interface HttpActionDeps extends Omit<RetryEngineDeps, 'journal' | 'clock' | 'logger'> {
  readonly ids: IdSource;
  readonly clock: Clock;
  readonly journal: Journal;
  readonly results: ResultStore;
  readonly vault: CredentialVault;
  readonly config: PosternConfig;
  readonly channel: HttpChannel;
  readonly logger?: Logger;
  readonly sessionId?: string;
  /** Lanes and approvals: every admitted action waits here for its turn (approval none included). */
  readonly queue: DispatchQueue;
  /** Called once ACTION_ACCEPTED is durable (the agent backend needs the id to stop waiting). */
  readonly onAdmitted?: (actionId: string) => void;
  /**
   * The route's lookup for an action whose key window passed (automation, no person): the retry
   * engine asks it instead of resending. Wired by the runtime to the reconciler; absent in tests
   * that do not reconcile.
   */
  readonly reconcile?: (actionId: string) => Promise<void>;
  /**
   * Where the agent's request is kept, sealed by the vault, for a person's same-key retry (routes
   * with an idempotency contract and a retry policy only). Absent: nothing is kept.
   */
  readonly requests?: RequestStore;
}

/**
 * Narrow executor options, each a named exception rather than a general bypass.
 * `reconciles`: this request is the configured lookup a person asked for to settle that unknown
 * action. It is still a recorded action with its own ticket, events and credential injection, but
 * it is admitted with approval `none` (the person's request is the approval) and lane null (it must
 * not wait behind the very head it settles), and its ACTION_ACCEPTED names the action it
 * reconciles. Its method (GET/HEAD) comes from configuration, so the route's agent method list does
 * not apply to it.
 */
export interface HttpActionOptions {
  readonly reconciles?: string;
}

export type { HttpActionResponse } from './delivered-response.js';

export interface HttpActionResult {
  readonly envelope: Envelope;
  /** A complete, settled response (also stored under envelope.evidence.result_id). */
  readonly response?: HttpActionResponse;
  /** An incomplete response's first bytes: a marked diagnostic, never a result. */
  readonly diagnostic?: {
    readonly kind: 'incomplete_response_partial_body';
    readonly status: number;
    readonly body: Buffer;
  };
}

/**
 * Drives one HTTP action from admission to a recorded outcome (DESIGN §2): ACTION_ACCEPTED →
 * PREFLIGHT_VALIDATED | PREFLIGHT_FAILED → its turn in the queue (card, decision, lane order; a
 * closure ends it here) → CREDENTIAL_AUTHORIZED → the channel's
 * attempts (SETUP_ATTEMPT_FAILED… / DISPATCH_STARTED, REQUEST_SENT, REMOTE_RESPONSE_*) → the result
 * rows, then RESULT_COMMITTED; or OUTCOME_RECORDED. Every classification comes from broker/core
 * classifyOutcome. Returns only after the record is durable (article 000's order).
 */
export async function executeHttpAction(deps: HttpActionDeps, input: unknown): Promise<HttpActionResult> {
  const retryOf = retryOfField(input);
  const parsed = httpActionRequestSchema.safeParse(input);
  if (retryOf !== undefined) {
    return runRecorded(deps, retryOf, () => {
      if (parsed.success) return retryHttpAction(deps, retryOf, internalRequestOf(parsed.data));
      const issue = parsed.error.issues[0];
      throw new CodedError('INVALID_ARGUMENT', `the retried request is malformed: ${issueMessage(issue)}`, {
        field: issueField(issue),
      });
    });
  }
  const actionId = deps.ids.newActionId();
  if (!parsed.success)
    return runRecorded(deps, actionId, () => refuseMalformed(deps, actionId, input, parsed.error.issues[0]));
  return runRecorded(deps, actionId, () => admitAndRun(deps, actionId, internalRequestOf(parsed.data), {}));
}

/**
 * An in-process request (a reconciliation's lookup or read-back): typed, never an agent's input, run as its own
 * recorded action under the `reconciles` exception (HttpActionOptions).
 */
export async function executeHttpLookup(
  deps: HttpActionDeps,
  request: InternalHttpRequest,
  reconciles: string,
): Promise<HttpActionResult> {
  const actionId = deps.ids.newActionId();
  return runRecorded(deps, actionId, () => admitAndRun(deps, actionId, request, { reconciles }));
}

/** Input that is not the tool's schema: admitted and refused (INVALID_ARGUMENT naming the field), nothing sent. */
async function refuseMalformed(
  deps: HttpActionDeps,
  actionId: string,
  input: unknown,
  issue: Parameters<typeof issueField>[0],
): Promise<HttpActionResult> {
  await accept(deps, actionId, {
    target: 'route:(invalid)',
    fingerprint: unparsedFingerprint(input),
    lane: null,
    approval: 'none',
    idempotent: false,
  });
  return refuse(
    deps,
    actionId,
    unparsedFingerprint(input),
    { kind: 'validation', code: 'INVALID_ARGUMENT', field: issueField(issue) },
    `the request is malformed: ${issueMessage(issue)}`,
  );
}

/**
 * The steps of ARCHITECTURE.md's "Life of one action", in order: admit (ACTION_ACCEPTED with PREFLIGHT_VALIDATED, or
 * a refusal), wait for turn (the queue), then authorize → dispatch → record → answer (sendOnce), and the retry
 * engine's further attempts where the route allows them (retry-engine.ts).
 */
async function admitAndRun(
  deps: HttpActionDeps,
  actionId: string,
  input: InternalHttpRequest,
  options: HttpActionOptions,
): Promise<HttpActionResult> {
  const admitted = await admit(deps, actionId, input, options);
  if (admitted.kind === 'refused') return admitted.result;
  const { bound, kept } = admitted;
  const run = async (): Promise<HttpActionResult> => {
    const closed = await waitForTurn(deps, bound);
    if (closed !== undefined) return closed;
    const first = await authorizeAndSend(deps, bound);
    // A lookup is never retried by the engine: it is asked again by whoever asked for it.
    if (options.reconciles !== undefined) return first;
    return retryWhileAllowed(deps, retrySubject(deps, bound), first);
  };
  // Only an action whose request was kept reads its record again at the end (not the hot path).
  return kept ? dropWhenSettled(deps, actionId, await run()) : run();
}

type Admitted = { kind: 'refused'; result: HttpActionResult } | { kind: 'admitted'; bound: Bound; kept: boolean };

/**
 * Admission: ACTION_ACCEPTED and PREFLIGHT_VALIDATED in one commit, or ACTION_ACCEPTED and the refusal (an unknown
 * route, a request validation refuses, a key bound to another request). Keeps the request for a person's retry
 * where the route allows one (kept-request.ts).
 */
async function admit(
  deps: HttpActionDeps,
  actionId: string,
  input: InternalHttpRequest,
  options: HttpActionOptions,
): Promise<Admitted> {
  const request = normalizeHttpRequest(input);
  const fingerprint = requestFingerprint(request);
  const route = deps.config.routes.get(request.route);
  if (route === undefined) {
    await accept(deps, actionId, {
      target: 'route:(unknown)',
      fingerprint,
      lane: null,
      approval: 'none',
      idempotent: false,
    });
    const gate = { kind: 'validation', code: 'INVALID_TARGET', field: 'route' } as const;
    return { kind: 'refused', result: await refuse(deps, actionId, fingerprint, gate, 'no such route') };
  }
  const admission = admissionOf(route, request, fingerprint, options);
  // Validation is pure and touches no secret, so it runs before admission is written: a passing
  // request's ACTION_ACCEPTED and PREFLIGHT_VALIDATED then share one commit (one fsync).
  // A lookup's method comes from the route's `lookup` (a bounded read-back's is GET), not the agent's method list (only those).
  const reconcileMethods = [
    ...(route.lookup === undefined ? [] : [route.lookup.method]),
    ...(route.correlation?.read_back === undefined ? [] : (['GET'] as const)),
  ];
  const methods = options.reconciles === undefined ? route.methods : [...route.methods, ...reconcileMethods];
  const preflight = validate(deps, route, methods, request, input.idempotency_key);
  if (!preflight.ok) {
    await accept(deps, actionId, admission);
    return { kind: 'refused', result: await refuse(deps, actionId, fingerprint, preflight.gate, preflight.message) };
  }
  const binding = idempotencyBinding(deps, route, request, input.idempotency_key);
  try {
    const correlation = correlationValues(route, request.body);
    const validated = {
      ...(binding === undefined ? {} : { idempotency: binding }),
      ...(correlation === undefined ? {} : { correlation_values: correlation }),
    };
    await deps.journal.appendBatch([
      httpAccepted(deps, actionId, admission),
      { kind: 'PREFLIGHT_VALIDATED', action_id: actionId, payload: validated },
    ]);
  } catch (error) {
    // The journal refused the key's binding (the whole unit, so nothing of it was written).
    if (binding === undefined || !isCodedError(error) || error.code !== 'IDEMPOTENCY_MISMATCH') throw error;
    await accept(deps, actionId, admission);
    return {
      kind: 'refused',
      result: await refuseKeyReuse(deps, actionId, fingerprint, binding, route.idempotency?.fingerprint ?? []),
    };
  }
  deps.onAdmitted?.(actionId);
  const kept =
    binding !== undefined &&
    route.retry !== undefined &&
    keepRequest(deps, actionId, route, input, binding.expires_at_ms);
  const bound: Bound = {
    actionId,
    route,
    request,
    fingerprint,
    idempotent: admission.idempotent,
    path: preflight.path,
    binding,
    timeoutMs: operationTimeoutMs(route),
  };
  return { kind: 'admitted', bound, kept };
}

/** What ACTION_ACCEPTED records of a known route: its lane, approval and retry budget as resolved now. */
function admissionOf(
  route: Route,
  request: NormalizedHttpRequest,
  fingerprint: string,
  options: HttpActionOptions,
): Admission {
  // A reconciliation lookup is the person's own request: no rule applies to it (HttpActionOptions).
  const policy = resolveRoutePolicy(route, request.method, request.path);
  const lane = policy.lane;
  return {
    target: `route:${route.name} ${request.method} ${truncate(request.path, 1900)}`,
    fingerprint,
    lane: lane.kind === 'lane' && options.reconciles === undefined ? lane.lane : null,
    approval: options.reconciles === undefined ? policy.approval : 'none',
    idempotent: route.idempotent_methods.includes(request.method as never),
    origin: route.base_url,
    ...(options.reconciles === undefined && policy.rule !== null ? { approvalRule: policy.rule.text } : {}),
    ...(options.reconciles === undefined ? {} : { reconciles: options.reconciles }),
    // The budget is bound now: a later configuration change neither widens nor resets it.
    ...(options.reconciles === undefined && route.retry !== undefined ? { retryBudget: route.retry.attempts_max } : {}),
  };
}

/** Waits for the action's turn in the queue (card, decision, lane order): the closure's answer if it was closed. */
async function waitForTurn(deps: HttpActionDeps, b: Bound): Promise<HttpActionResult | undefined> {
  // The card preview is the agent's own request, taken before any injection.
  const turn = await deps.queue.awaitTurn(b.actionId, httpCardPreview(b.route, b.request));
  return turn.kind === 'closed' ? { envelope: closedEnvelope(turn.state, b.fingerprint) } : undefined;
}

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
  return runRecorded(deps, actionId, () => retryHttpAction(deps, actionId, input, actor));
}

/** The action id an agent's `retry_of` names, read before parsing (the retry path parses the rest itself). */
function retryOfField(input: unknown): string | undefined {
  if (typeof input !== 'object' || input === null || !('retry_of' in input)) return undefined;
  const value = (input as { retry_of?: unknown }).retry_of;
  return typeof value === 'string' ? value : undefined;
}

/**
 * The agent asks to retry an earlier action (`retry_of`), resending the same request — same route,
 * same fingerprint, same idempotency key. Retries keep the ticket's place (DESIGN §4): no new
 * ticket, no new card; the retry is an attempt of the original action under a lease, allowed only
 * where the route declares a retry policy (the standing decision) and planRetry says a resend is
 * safe (an idempotent repeat, the same key within its window, or a throttled idempotent request).
 * A request that does not match is refused with a coded error and nothing is recorded on the
 * original.
 */
async function retryHttpAction(
  deps: HttpActionDeps,
  actionId: string,
  input: InternalHttpRequest,
  person?: OperatorActor,
): Promise<HttpActionResult> {
  const state = actionId.startsWith('act_') ? deps.journal.getAction(actionId) : undefined;
  if (state === undefined || state.channel !== 'http' || !retryVisible(deps, state))
    throw new CodedError('NOT_FOUND', `no HTTP action ${actionId}`, { field: 'retry_of' });
  const request = normalizeHttpRequest(input);
  const route = deps.config.routes.get(request.route);
  if (route === undefined || !state.target.startsWith(`route:${route.name} `))
    throw new CodedError('INVALID_TARGET', `${actionId} was not sent on route ${request.route}`, { field: 'route' });
  assertSameOrigin(deps.journal, actionId, route);
  if (route.retry === undefined) {
    throw new CodedError(
      'UNSUPPORTED_ACTION',
      `route ${route.name} declares no retry policy: ${actionId} leaves unknown by reconciliation or a person`,
      { field: 'retry_of' },
    );
  }
  const binding = preflightBinding(deps.journal, actionId);
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
  };
  const subject = retrySubject(deps, bound);
  const answer = subject.fromRecord(state);
  // Who asked is the calling session (after a restart, not the one that first sent it).
  const requestedBy = person ?? { kind: 'agent' as const, id: deps.sessionId ?? state.session_id ?? 'agent' };
  const result = await retryWhileAllowed(deps, subject, answer, requestedBy);
  // A request is kept only under a contract (a binding) and a retry policy, which this route has.
  return binding === undefined ? result : dropWhenSettled(deps, actionId, result);
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

/** The idempotency binding the original journaled with PREFLIGHT_VALIDATED (the key the remote saw). */
/**
 * A retry goes where the original went, or nowhere: a route re-pointed since admission (a configuration applied live,
 * or at a restart) would send the same key to another server. Actions admitted before origins were recorded pass.
 */
export function assertSameOrigin(journal: Journal, actionId: string, route: { name: string; base_url: string }): void {
  for (const e of journal.subjectEvents(actionId)) {
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

function preflightBinding(journal: Journal, actionId: string): IdempotencyKeyBinding | undefined {
  for (const e of journal.subjectEvents(actionId)) {
    if (e.kind === 'PREFLIGHT_VALIDATED') return e.payload.idempotency;
  }
  return undefined;
}

/** The action as the retry engine drives it: resend this bound request, answer from the record otherwise. */
function retrySubject(deps: HttpActionDeps, b: Bound): RetrySubject<HttpActionResult> {
  const reconcile = deps.reconcile;
  return {
    actionId: b.actionId,
    policy: b.route.retry,
    idempotent: b.idempotent,
    fingerprint: b.fingerprint,
    ...(b.binding === undefined ? {} : { keyExpiresAtMs: b.binding.expires_at_ms }),
    send: (run) => authorizeAndSend(deps, b, run),
    fromRecord: (state) => recordedAnswer(state, b.fingerprint),
    ready: () => deps.vault.state() === 'unlocked',
    leaseHeld: (state) => leaseHeldAnswer(state, b.fingerprint),
    ...(reconcile === undefined ? {} : { reconcile: () => reconcile(b.actionId) }),
  };
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

interface Admission {
  target: string;
  fingerprint: string;
  lane: string | null;
  approval: ApprovalMode;
  idempotent: boolean;
  reconciles?: string;
  retryBudget?: number;
  approvalRule?: string;
  /** The route's base URL at admission (ACTION_ACCEPTED origin). */
  origin?: string;
}

async function accept(deps: HttpActionDeps, actionId: string, a: Admission): Promise<void> {
  await recordAccepted(deps, httpAccepted(deps, actionId, a));
}

function httpAccepted(deps: HttpActionDeps, actionId: string, a: Admission): NewEvent {
  return acceptedEvent(deps, actionId, a.lane, {
    channel: 'http',
    target: a.target,
    request_fingerprint: a.fingerprint,
    approval: a.approval,
    idempotent: a.idempotent,
    ...(a.reconciles === undefined ? {} : { reconciles: a.reconciles }),
    ...(a.retryBudget === undefined ? {} : { retry_budget: a.retryBudget }),
    ...(a.approvalRule === undefined ? {} : { approval_rule: a.approvalRule }),
    ...(a.origin === undefined ? {} : { origin: a.origin }),
  });
}

/**
 * The key, its fingerprint (sha256 over the parts the route's contract names), scope and earliest
 * safe expiry, journaled with PREFLIGHT_VALIDATED — before any card, secret or byte (DESIGN §3,
 * article 000: the four facts stored before dispatch). Undefined without a key (a key on a route
 * without a contract never gets here: validation refused it).
 *
 * Why the check is the journal's and not a look-up here: reading the key table and then appending
 * would let two concurrent calls with one key and different bodies both read "free" and both
 * pass. The binding event is folded under the journal's write lock against the table and the
 * bindings planned earlier in the same transaction (plan-unit.ts), so exactly one of them binds
 * and the other's unit is refused with IDEMPOTENCY_MISMATCH: the projection is the compare-and-swap.
 *
 * The expiry is counted from now, before admission: the remote's own window starts only when it
 * first sees the key (at dispatch, later), so this is never later than the remote's.
 */
function idempotencyBinding(
  deps: HttpActionDeps,
  route: Route,
  request: NormalizedHttpRequest,
  key: string | undefined,
): IdempotencyKeyBinding | undefined {
  const contract = route.idempotency;
  if (contract === undefined || key === undefined) return undefined;
  return {
    route: route.name,
    scope: contract.scope,
    key,
    fingerprint: requestFingerprint(request, contract.fingerprint),
    expires_at_ms: deps.clock.nowMs() + contract.retention_seconds * 1000,
  };
}

/** IDEMPOTENCY_MISMATCH: validation refused it, so PREFLIGHT_FAILED; no card, no secret, no byte. */
async function refuseKeyReuse(
  deps: HttpActionDeps,
  actionId: string,
  fingerprint: string,
  binding: IdempotencyKeyBinding,
  parts: readonly string[],
): Promise<HttpActionResult> {
  const classification = classifyOutcome({
    channel: 'http',
    gate: { kind: 'idempotency_mismatch' },
    dispatchStarted: false,
    handedToTransport: false,
    requestComplete: false,
    idempotent: false,
  });
  const field = 'idempotency_key';
  const state = await appendState(deps.journal, {
    kind: 'PREFLIGHT_FAILED',
    action_id: actionId,
    payload: { field },
    classification,
  });
  log(deps, actionId, binding.route, classification);
  return {
    envelope: buildHttpEnvelope({
      state,
      classification,
      message: `the idempotency key is already bound to a different request on this route and scope (compared: ${parts.join(', ')}); a new request needs a new key`,
      field,
      fingerprint,
      idempotency: {
        key: binding.key,
        scope: binding.scope,
        fingerprint: binding.fingerprint,
        remote_contract: 'configured',
      },
    }),
  };
}

type Preflight = { ok: true; path: string } | { ok: false; gate: LocalGate; message: string };

/** The route's operation deadline (postern.yaml timeout_ms): how long the remote may take, never the caller's wait. */
function operationTimeoutMs(route: Route): number {
  return route.timeout_ms ?? operationTimeoutMsDefault;
}

/** Validation before any secret is touched or any host resolved (the vault is only described). */
function validate(
  deps: HttpActionDeps,
  route: Route,
  methods: readonly string[],
  request: NormalizedHttpRequest,
  key: string | undefined,
): Preflight {
  const limits = deps.channel.limits;
  const info = deps.vault.state() === 'uninitialized' ? undefined : deps.vault.describe(route.credential);
  if (deps.vault.state() !== 'uninitialized' && info === undefined) {
    // The credential name comes from configuration and may itself be sensitive: never echoed.
    return {
      ok: false,
      gate: { kind: 'validation', code: 'UNKNOWN_CREDENTIAL', field: 'route' },
      message: 'the route names a credential the vault does not hold',
    };
  }
  const owned = [
    info?.kind === 'header' && info.header !== undefined ? info.header.toLowerCase() : undefined,
    route.idempotency?.header.toLowerCase(),
  ].filter((h): h is string => h !== undefined);
  const check = checkHttpRequest(
    {
      method: request.method,
      path: request.path,
      query: request.query,
      headers: request.headers,
      bodyBytes: request.body.length,
      idempotencyKey: key,
    },
    {
      methods,
      ownedHeaders: owned,
      ownedQueryParam: info?.kind === 'query' ? info.param : undefined,
      hasIdempotencyContract: route.idempotency !== undefined,
    },
    limits,
  );
  if (!check.ok)
    return { ok: false, gate: { kind: 'validation', code: check.code, field: check.field }, message: check.message };
  return { ok: true, path: joinBasePath(route.base_path, check.path) };
}

interface Bound {
  actionId: string;
  route: Route;
  request: NormalizedHttpRequest;
  fingerprint: string;
  idempotent: boolean;
  /** base path + normalized request path. */
  path: string;
  /** The idempotency key as journaled before dispatch (a declared contract and a key only). */
  binding: IdempotencyKeyBinding | undefined;
  /** The operation deadline the channel enforces (the route's timeout_ms). */
  timeoutMs: number;
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

/** One attempt's steps, inside the secret's scope: authorize (a refusal ends it here), dispatch, record, answer. */
async function authorizeAndSendOnce(deps: HttpActionDeps, b: Bound, run: AttemptRun): Promise<HttpActionResult> {
  const retry = run.generation !== undefined;
  if (deps.vault.state() !== 'unlocked') {
    if (retry) throw new CodedError('VAULT_LOCKED', 'the vault is locked');
    return refuse(deps, b.actionId, b.fingerprint, { kind: 'vault_locked' }, 'the vault is locked');
  }
  const locked = new AbortController();
  const unsubscribe = deps.vault.onLock(() => locked.abort());
  try {
    return await deps.vault.withSecret(b.route.credential, async (secret, info) => {
      const stop = authorize(deps, b, info, secret, retry);
      if (stop?.kind === 'refuse') return refuse(deps, b.actionId, b.fingerprint, stop.gate, stop.message);
      if (stop?.kind === 'closed') return { envelope: closedEnvelope(stop.state, b.fingerprint) };
      return dispatch(deps, b, run, { secret, info, beforeDispatch: locked.signal });
    });
  } catch (error) {
    const refusal = vaultRefusal(error, 'route');
    if (refusal !== undefined) return refuse(deps, b.actionId, b.fingerprint, refusal.gate, refusal.message);
    throw error;
  } finally {
    unsubscribe();
  }
}

/** Why authorization stops an attempt before anything is set up: a gate to record, or a closure already recorded. */
type AuthorizeStop = { kind: 'refuse'; gate: LocalGate; message: string } | { kind: 'closed'; state: ActionState };

/**
 * Authorize: the credential fits the route, the request is still the one bound, and no person closed the ticket
 * since its release. Synchronous on purpose: nothing may land between this last look at the record and
 * dispatch's CREDENTIAL_AUTHORIZED. A retry's refusal is thrown (authorizeAndSend answers it from the record).
 */
function authorize(
  deps: HttpActionDeps,
  b: Bound,
  info: CredentialInfo,
  secret: SecretMaterial,
  retry: boolean,
): AuthorizeStop | undefined {
  const unusable = credentialProblem(b.route, info, secret);
  if (unusable !== undefined && retry)
    throw new CodedError('VAULT_LOCKED', 'the credential is no longer usable on this route');
  if (unusable !== undefined) return { kind: 'refuse', gate: { kind: 'credential_missing' }, message: unusable };
  // The bound fingerprint is recomputed from what will be sent, right before the write.
  if (requestFingerprint(b.request) !== b.fingerprint)
    return { kind: 'refuse', gate: { kind: 'fingerprint_mismatch' }, message: 'the request changed' };
  // A person may have cancelled between the queue's release and here: nothing is even set up.
  // (A retry's record is already closed by its first run's outcome; its lease is its licence.)
  const closed = retry ? undefined : closedBeforeDispatch(deps.journal, b.actionId);
  return closed === undefined ? undefined : { kind: 'closed', state: closed };
}

interface Secret {
  readonly secret: SecretMaterial;
  readonly info: CredentialInfo;
  /** Aborted when the vault locks: the channel stops before dispatch. */
  readonly beforeDispatch: AbortSignal;
}

/**
 * Dispatch: CREDENTIAL_AUTHORIZED, then the channel's attempt (setup, DISPATCH_STARTED, the request, the response),
 * then record and answer (settle). CREDENTIAL_AUTHORIZED is awaited only after the channel ran (startAuthorization).
 */
async function dispatch(deps: HttpActionDeps, b: Bound, run: AttemptRun, s: Secret): Promise<HttpActionResult> {
  const retry = run.generation !== undefined;
  const authorized = startAuthorization(deps.journal, b.actionId, {
    credential_id: s.info.id,
    version_tag: s.info.version_tag,
    injection_mode: b.route.injection,
    request_fingerprint: b.fingerprint,
  });
  const scrubber = secretScrubber(secretParts(s.secret));
  const report = await deps.channel.perform(wireRequest(b, run, s, scrubber.lookaheadBytes));
  // A retry whose DISPATCH_STARTED was refused (LEASE_LOST: its lease lapsed or another worker
  // took over) sent nothing: the caller above answers from the record.
  if (retry && report.journalFailed !== undefined && isCodedError(report.journalFailed)) throw report.journalFailed;
  // A retry whose final request the client would refuse (a credential changed to an unsendable value) sent
  // nothing either: like a credential no longer usable, it closes its lease from the record.
  if (retry && report.stoppedBeforeDispatch === 'request_refused')
    throw new CodedError('VAULT_LOCKED', 'the credential is no longer usable on this route');
  if (retry) await authorized;
  // A refused authorization (a closure that landed first) made DISPATCH_STARTED impossible too:
  // nothing was sent, and the answer is the recorded closure.
  const refusedAs = await authorizationRefusal(deps.journal, b.actionId, authorized);
  if (refusedAs !== undefined) return { envelope: closedEnvelope(refusedAs, b.fingerprint) };
  return settle(deps, b, report, scrubber);
}

/** The request as the channel sends it: the credential injected, the key header added under a contract. */
function wireRequest(
  b: Bound,
  run: AttemptRun,
  s: Secret,
  scrubLookaheadBytes: number,
): Parameters<HttpChannel['perform']>[0] {
  return {
    actionId: b.actionId,
    target: {
      protocol: b.route.protocol,
      hostname: b.route.hostname,
      port: b.route.port,
      caPem: b.route.ca_pem,
      pins: b.route.tls?.pins,
      origin: b.route.origin,
      poolKey: poolKey(b.route),
    },
    method: b.request.method,
    path: wirePath(b, s.secret),
    headers: wireHeaders(b, s.secret),
    body:
      b.request.body.length === 0 && !['POST', 'PUT', 'PATCH'].includes(b.request.method) ? undefined : b.request.body,
    timeoutMs: b.timeoutMs,
    beforeDispatch: s.beforeDispatch,
    firstAttempt: run.firstAttempt,
    scrubLookaheadBytes,
    ...(run.generation === undefined ? {} : { generation: run.generation }),
    ...(b.route.correlation?.provider_request_id_header === undefined
      ? {}
      : { providerRequestIdHeader: b.route.correlation.provider_request_id_header }),
  };
}

/** Why this credential cannot be used on this route (kind, binding), or undefined. Never names it. */
function credentialProblem(route: Route, info: CredentialInfo, secret: SecretMaterial): string | undefined {
  if (info.kind !== route.injection || secret.kind !== route.injection)
    return `the route injects ${route.injection} but the credential is of another kind`;
  const host = route.hostname.toLowerCase();
  const bound = info.bindings.some((binding) => {
    const b = binding.toLowerCase();
    if (b === route.name || b === host || b === `${host}:${route.port}` || b === `[${host}]:${route.port}`) return true;
    return b.startsWith('*.') && host.endsWith(b.slice(1)) && host.length > b.length - 1;
  });
  return bound ? undefined : "the route's credential is not bound to this route or its host";
}

function wirePath(b: Bound, secret: SecretMaterial): string {
  const pairs = b.request.query.map(([n, v]) => `${encodeURIComponent(n)}=${encodeURIComponent(v)}`);
  if (secret.kind === 'query') pairs.push(`${encodeURIComponent(secret.param)}=${encodeURIComponent(secret.value)}`);
  return pairs.length === 0 ? b.path : `${b.path}?${pairs.join('&')}`;
}

function wireHeaders(b: Bound, secret: SecretMaterial): Array<[string, string]> {
  const headers: Array<[string, string]> = b.request.headers.map(([n, v]) => [n, v]);
  // The broker decides content coding (the agent may not set it): plain bytes are what the scrubber can read.
  headers.push(['accept-encoding', 'identity']);
  // Only under a declared contract (a binding exists only then): never added silently.
  if (b.binding !== undefined && b.route.idempotency !== undefined)
    headers.push([b.route.idempotency.header, b.binding.key]);
  switch (secret.kind) {
    case 'bearer':
      headers.push(['authorization', `Bearer ${secret.token}`]);
      break;
    case 'basic':
      headers.push(['authorization', `Basic ${Buffer.from(`${secret.user}:${secret.password}`).toString('base64')}`]);
      break;
    case 'header':
      headers.push([secret.header, secret.value]);
      break;
    default:
      break;
  }
  return headers;
}

/** Classifies what the channel observed, makes the result durable, then answers. */
async function settle(
  deps: HttpActionDeps,
  b: Bound,
  report: HttpChannelReport,
  scrubber: SecretScrubber,
): Promise<HttpActionResult> {
  if (report.journalFailed !== undefined) {
    const failure = dispatchJournalFailure(deps.journal, b.actionId, report.journalFailed);
    return {
      envelope:
        failure.kind === 'closed'
          ? closedEnvelope(failure.state, b.fingerprint)
          : buildHttpEnvelope({ ...failure, report, fingerprint: b.fingerprint }),
    };
  }
  try {
    return answer(deps, b, report, scrubber, await record(deps, b, report, scrubber));
  } catch (error) {
    // After DISPATCH_STARTED a failed record is never not_attempted: the agent hears unknown.
    if (!report.dispatchStarted || !isCodedError(error) || error.code !== 'JOURNAL_UNAVAILABLE') throw error;
    return {
      envelope: buildHttpEnvelope({
        ...journalFailedFacts(deps.journal, b.actionId),
        report,
        fingerprint: b.fingerprint,
      }),
    };
  }
}

/** What record made durable, for answer. */
interface Recorded {
  readonly state: ActionState;
  readonly classification: Classification;
  /** A complete response the classification settled (committed or rejected): delivered as the result. */
  readonly settled: boolean;
  readonly result?: HttpActionResponse;
  readonly resultId?: string;
  readonly batch?: BatchVerdict['batch'];
}

/** Record: what the channel observed, classified (broker/core) and made durable. */
async function record(
  deps: HttpActionDeps,
  b: Bound,
  report: HttpChannelReport,
  scrubber: SecretScrubber,
): Promise<Recorded> {
  const nowMs = deps.clock.nowMs();
  // The expiry the journal holds for this key (PREFLIGHT_VALIDATED), not a recomputed one.
  const expiryMs = b.binding?.expires_at_ms;
  const response = report.response;
  const location = response?.headers.location;
  const crossOrigin = location === undefined ? false : otherOrigin(location, b.route);
  const evidence = httpReportEvidence(report, {
    locationElsewhere: crossOrigin,
    idempotent: b.idempotent,
    ...(expiryMs === undefined ? {} : { keyExpiresAtMs: expiryMs }),
    nowMs,
    retryAfterMsMax: deps.channel.limits.retryAfterMsMax,
  });
  const classification = classifyOutcome(evidence);
  const lastAttempt = report.attempts.at(-1)?.n;
  const settled =
    response !== undefined &&
    response.framingComplete &&
    (classification.outcome === 'committed' || classification.outcome === 'rejected');
  if (!settled || lastAttempt === undefined) {
    const state = await appendState(deps.journal, {
      kind: 'OUTCOME_RECORDED',
      action_id: b.actionId,
      payload: lastAttempt === undefined ? {} : { attempt: lastAttempt },
      classification,
    });
    log(deps, b.actionId, b.route.name, classification);
    return { state, classification, settled };
  }
  const committed = await commitResult(deps, b, scrubber, {
    response,
    attempt: lastAttempt,
    classification,
    summary: (result) => resultSummary(result, crossOrigin, report.peerFingerprint),
    nowMs,
  });
  log(deps, b.actionId, b.route.name, committed.classification);
  return { ...committed, settled };
}

/**
 * A settled response: the retrievable result is durable first, then RESULT_COMMITTED names it (article 000's order),
 * then a 202's OPERATION_SUBMITTED. A declared batch's member outcomes may change the classification recorded.
 */
async function commitResult(
  deps: HttpActionDeps,
  b: Bound,
  scrubber: SecretScrubber,
  settled: {
    response: NonNullable<HttpChannelReport['response']>;
    attempt: number;
    classification: Classification;
    summary: (result: HttpActionResponse) => Record<string, unknown>;
    nowMs: number;
  },
): Promise<Omit<Recorded, 'settled'>> {
  const { attempt, nowMs } = settled;
  const expiryMs = b.binding?.expires_at_ms;
  let classification = settled.classification;
  let batch: BatchVerdict['batch'] | undefined;
  const result = deliveredResponse(settled.response, scrubber, deps.channel.limits);
  const resultId = `res_${b.actionId.slice(4)}_${attempt}`;
  deps.results.commit({
    result_id: resultId,
    action_id: b.actionId,
    attempt,
    summary: settled.summary(result),
    body: result.body,
    total_bytes: result.total_bytes,
    truncated: result.truncated,
    digest: result.digest,
    created_at_ms: nowMs,
  });
  if (b.route.batch !== undefined) {
    // A declared batch: the parent transport result plus one outcome per member (article 000).
    const sameKeyRetryAllowed =
      b.binding !== undefined && b.route.idempotency !== undefined && expiryMs !== undefined && nowMs < expiryMs;
    ({ batch, classification } = batchVerdict(
      b.route.batch,
      b.request.body,
      result,
      classification,
      sameKeyRetryAllowed,
      scrubber,
    ));
  }
  let state = await appendState(deps.journal, {
    kind: 'RESULT_COMMITTED',
    action_id: b.actionId,
    // The digest of the result as stored and delivered (scrubbed); the wire digest is REMOTE_RESPONSE_COMPLETE's.
    payload: { attempt, result_id: resultId, result_digest: result.digest, ...(batch === undefined ? {} : { batch }) },
    classification,
  });
  if (result.status === 202) {
    // A 202 settles the submission only; the job it created is tracked as its own operation.
    const ids = submissionIds(result);
    const statusLocation = ids.operation_location ?? ids.location;
    if (ids.job_id !== undefined || statusLocation !== undefined) {
      state = await appendState(deps.journal, {
        kind: 'OPERATION_SUBMITTED',
        action_id: b.actionId,
        payload: {
          attempt,
          result_id: resultId,
          ...(ids.job_id === undefined ? {} : { job_id: ids.job_id }),
          ...(statusLocation === undefined ? {} : { status_location: statusLocation.slice(0, 2048) }),
        },
      });
    }
  }
  return { state, classification, result, resultId, ...(batch === undefined ? {} : { batch }) };
}

/** Answer: the envelope of what was recorded, the delivered result, or an incomplete response's marked diagnostic. */
function answer(
  deps: HttpActionDeps,
  b: Bound,
  report: HttpChannelReport,
  scrubber: SecretScrubber,
  r: Recorded,
): HttpActionResult {
  const { state, classification, result, resultId, batch } = r;
  const response = report.response;
  const facts: EnvelopeFacts = {
    state,
    classification,
    message:
      report.requestRefused !== undefined
        ? `the request as it would be sent (credential injected) is not valid HTTP, so nothing was sent: ${report.requestRefused.why}`
        : classification.code === null
          ? ''
          : errorCodeMeanings[classification.code],
    report,
    ...(report.stoppedBeforeDispatch === 'request_refused' ? { field: refusedRequestField(report) } : {}),
    ...(resultId === undefined || result === undefined ? {} : { resultId, resultDigest: result.digest }),
    ...(batch === undefined ? {} : { batch }),
    ...(b.binding === undefined
      ? {}
      : {
          idempotency: {
            key: b.binding.key,
            scope: b.binding.scope,
            fingerprint: b.binding.fingerprint,
            remote_contract: 'configured' as const,
            earliest_safe_expiry_ms: b.binding.expires_at_ms,
          },
        }),
  };
  const envelope = buildHttpEnvelope(facts);
  const diagnostic =
    response !== undefined && !r.settled
      ? {
          kind: 'incomplete_response_partial_body' as const,
          status: response.status,
          body: diagnosticBody(response, scrubber, deps.channel.limits.diagnosticBytesMax),
        }
      : undefined;
  return {
    envelope,
    ...(result === undefined ? {} : { response: result }),
    ...(diagnostic === undefined ? {} : { diagnostic }),
  };
}

function resultSummary(r: HttpActionResponse, crossOrigin: boolean, peer: string | undefined): Record<string, unknown> {
  const summary: Record<string, unknown> = {
    status: r.status,
    headers: r.headers,
    body_bytes: r.total_bytes,
    stored_bytes: r.body.length,
    truncated: r.truncated,
    digest: r.digest,
    redacted: r.redacted,
  };
  if (r.body_withheld !== undefined) summary.body_withheld = r.body_withheld;
  if (r.content_decoded !== undefined) summary.content_decoded = r.content_decoded;
  if (peer !== undefined) summary.peer_identity = peer;
  if (r.status === 202) summary.submission = submissionIds(r);
  if (r.status >= 300 && r.status < 400 && r.headers.location !== undefined) {
    summary.redirect = { location: r.headers.location, cross_origin: crossOrigin, followed: false };
  }
  return summary;
}

/** 202: the job the submission created, to be tracked as a separate operation. */
function submissionIds(r: HttpActionResponse): Record<string, string> {
  // An empty id or location is no handle (and OPERATION_SUBMITTED's schema refuses it): skipped.
  const ids: Record<string, string> = {};
  const location = r.headers.location?.trim();
  const operationLocation = r.headers['operation-location']?.trim();
  if (location !== undefined && location !== '') ids.location = location;
  if (operationLocation !== undefined && operationLocation !== '') ids.operation_location = operationLocation;
  if (!r.truncated && r.body.length <= 64 * 1024 && /json/i.test(r.headers['content-type'] ?? '')) {
    try {
      const parsed = JSON.parse(r.body.toString('utf8')) as Record<string, unknown>;
      for (const k of ['job_id', 'jobId', 'operation_id', 'id']) {
        const v = parsed[k];
        if (typeof v === 'string' && v.trim() !== '' && v.length <= 200) {
          ids.job_id = v;
          break;
        }
      }
    } catch {
      // Not JSON after all: the Location is the handle.
    }
  }
  return ids;
}

/** A pre-dispatch refusal (record-refusal.ts), answered with its envelope. */
async function refuse(
  deps: HttpActionDeps,
  actionId: string,
  fingerprint: string,
  gate: LocalGate,
  message: string,
): Promise<HttpActionResult> {
  const { state, classification, field } = await recordRefusal(deps.journal, 'http', actionId, gate);
  log(deps, actionId, undefined, classification);
  return {
    envelope: buildHttpEnvelope({
      state,
      classification,
      message,
      ...(field === undefined ? {} : { field }),
      fingerprint,
    }),
  };
}

/** A ticket the queue closed (rejected, expired, cancelled, session revoked): its recorded envelope. */
function closedEnvelope(state: ActionState, fingerprint: string): HttpActionResult['envelope'] {
  const classification = stateClassification(state);
  if (classification === undefined)
    throw new Error(`closedEnvelope: ${state.action_id} has no recorded classification`);
  return buildHttpEnvelope({
    state,
    classification,
    message: classification.code === null ? '' : errorCodeMeanings[classification.code],
    fingerprint,
  });
}

function otherOrigin(location: string, route: Route): boolean {
  try {
    return new URL(location, route.origin).origin !== route.origin;
  } catch {
    return true;
  }
}

function poolKey(route: Route): string {
  const ca = route.ca_pem === undefined ? '' : createHash('sha256').update(route.ca_pem).digest('hex');
  return [route.name, route.origin, (route.tls?.pins ?? []).join(','), ca].join('|');
}

function truncate(text: string, charsMax: number): string {
  return text.length <= charsMax ? text : `${text.slice(0, charsMax)}…`;
}

function log(deps: HttpActionDeps, actionId: string, route: string | undefined, c: Classification): void {
  // Only ids and closed-set values: never paths, headers, bodies or credential names.
  logRecorded(deps.logger, { action_id: actionId, route }, c, 'http action recorded');
}

/**
 * A declared batch's member outcomes and the parent classification to record (broker/core
 * classifyBatch). Member ids and statuses come from the request too, so they are scrubbed of any
 * echoed secret before they are recorded.
 */
function batchVerdict(
  shape: NonNullable<Route['batch']>,
  requestBody: Buffer,
  response: HttpActionResponse,
  parent: Classification,
  sameKeyRetryAllowed: boolean,
  scrubber: SecretScrubber,
): BatchVerdict {
  // Judged over the body as delivered (decoded, scrubbed): member ids then need no second pass over the raw bytes.
  const verdict = classifyBatch({
    shape,
    requestBody,
    response: { status: response.status, body: response.body, truncated: response.truncated },
    parent,
    sameKeyRetryAllowed,
  });
  const clean = (text: string, charsMax: number): string => scrubber.scrubText(text, charsMax).text;
  return {
    classification: verdict.classification,
    batch: {
      members: verdict.batch.members.map((m) => ({
        ...m,
        id: clean(m.id, 200),
        ...(m.status === undefined ? {} : { status: clean(m.status, 100) }),
      })),
      completed_ids: verdict.batch.completed_ids.map((id) => clean(id, 200)),
    },
  };
}
