import type { Route } from '../config/index.js';
import {
  CodedError,
  isCodedError,
  type ApprovalMode,
  type IdempotencyKeyBinding,
  type NewEvent,
} from '../contract/index.js';
import { classifyOutcome } from '../core/index.js';
import { copyPair, httpCardPreview, httpRequestView, type HttpRequestView } from '../queue/card-preview.js';
import { buildHttpEnvelope } from './http-envelope.js';
import { dropWhenSettled, keepRequest } from './kept-request.js';
import {
  agentParse,
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
import { correlationValues } from './correlation-values.js';
import { runRecorded } from './record-broker-error.js';
import { retryWhileAllowed } from './retry-engine.js';
import { acceptedEvent, appendState, recordAccepted } from './record-refusal.js';
import { authorizeAndSendOnce, operationTimeoutMs, validate } from './http-steps.js';
import { closedEnvelope, log, refuse } from './http-record.js';
import type { Bound, HttpActionDeps, HttpActionResult } from './http-action-deps.js';
import { credentialBinding, type BoundCredential } from './credential-binding.js';
import { admissionPolicy, type AdmissionPolicy, type HttpActionOptions } from './admission-policy.js';
import { retryHttpAction, retrySubject } from './retry-http.js';

export type { HttpActionDeps, HttpActionResponse, HttpActionResult } from './http-action-deps.js';
export type { HttpActionOptions } from './admission-policy.js';

/**
 * Drives one HTTP action from admission to a recorded outcome (DESIGN §2): ACTION_ACCEPTED →
 * PREFLIGHT_VALIDATED | PREFLIGHT_FAILED → its turn in the queue (card, decision, lane order; a
 * closure ends it here) → CREDENTIAL_AUTHORIZED → the channel's
 * attempts (SETUP_ATTEMPT_FAILED… / DISPATCH_STARTED, REQUEST_SENT, REMOTE_RESPONSE_*) → the result
 * rows with RESULT_COMMITTED (one transaction); or OUTCOME_RECORDED. Every classification comes from broker/core
 * classifyOutcome. Returns only after the record is durable (article 000's order).
 */
export async function executeHttpAction(deps: HttpActionDeps, input: unknown): Promise<HttpActionResult> {
  const retryOf = retryOfField(input);
  const parsed = httpActionRequestSchema.safeParse(input, agentParse);
  if (retryOf !== undefined) {
    // retryHttpAction records and settles only from the retry's turn on: a refusal before it changes nothing.
    if (parsed.success) return retryHttpAction(deps, retryOf, internalRequestOf(parsed.data));
    const issue = parsed.error.issues[0];
    throw new CodedError('INVALID_ARGUMENT', `the retried request is malformed: ${issueMessage(issue)}`, {
      field: issueField(issue),
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
  const { bound, kept, retriesAllowed, requestView } = admitted;
  const run = async (): Promise<HttpActionResult> => {
    const closed = await waitForTurn(deps, bound, requestView);
    if (closed !== undefined) return closed;
    const first = await authorizeAndSendOnce(deps, bound, { firstAttempt: 1 });
    return retriesAllowed ? retryWhileAllowed(deps, retrySubject(deps, bound), first) : first;
  };
  // Only an action whose request was kept reads its record again at the end (not the hot path).
  return kept ? dropWhenSettled(deps, actionId, await run()) : run();
}

type Admitted =
  | { kind: 'refused'; result: HttpActionResult }
  | { kind: 'admitted'; bound: Bound; kept: boolean; retriesAllowed: boolean; requestView: HttpRequestView };

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
  const policy = admissionPolicy(route, request, options);
  const admission = {
    ...admissionOf(route, request, fingerprint, policy),
    ...credentialBinding(deps.vault, route.credential),
  };
  // Validation is pure and touches no secret, so it runs before admission is written: a passing
  // request's ACTION_ACCEPTED and PREFLIGHT_VALIDATED then share one commit (one fsync).
  const preflight = validate(deps, route, policy.methods, request, input.idempotency_key);
  if (!preflight.ok) {
    await accept(deps, actionId, admission);
    return { kind: 'refused', result: await refuse(deps, actionId, fingerprint, preflight.gate, preflight.message) };
  }
  const binding = idempotencyBinding(deps, route, request, input.idempotency_key);
  // What its card shows of the request, built once: sealed in ACTION_ACCEPTED (a card rebuilt from the journal shows
  // it) and the live card's own (waitForTurn).
  const requestView = httpRequestView(request);
  try {
    const correlation = correlationValues(route, request.body);
    const validated = {
      ...(binding === undefined ? {} : { idempotency: binding }),
      ...(correlation === undefined ? {} : { correlation_values: correlation }),
    };
    await deps.journal.appendBatch([
      httpAccepted(deps, actionId, { ...admission, requestView }),
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
    (await keepRequest(deps, actionId, route, input, binding.expires_at_ms));
  const bound: Bound = {
    actionId,
    route,
    request,
    fingerprint,
    idempotent: admission.idempotent,
    path: preflight.path,
    binding,
    timeoutMs: operationTimeoutMs(route),
    credential: admission.credential,
  };
  return { kind: 'admitted', bound, kept, retriesAllowed: policy.retriesAllowed, requestView };
}

/** What ACTION_ACCEPTED records of a known route: the request's target, and its lane, approval and budget (policy). */
function admissionOf(
  route: Route,
  request: NormalizedHttpRequest,
  fingerprint: string,
  policy: AdmissionPolicy,
): Admission {
  return {
    target: `route:${route.name} ${request.method} ${truncate(request.path, 1900)}`,
    fingerprint,
    lane: policy.lane,
    approval: policy.approval,
    idempotent: route.idempotent_methods.includes(request.method as never),
    origin: route.base_url,
    ...(policy.approvalRule === undefined ? {} : { approvalRule: policy.approvalRule }),
    ...(policy.reconciles === undefined ? {} : { reconciles: policy.reconciles }),
    ...(policy.retryBudget === undefined ? {} : { retryBudget: policy.retryBudget }),
  };
}

/** Waits for the action's turn in the queue (card, decision, lane order): the closure's answer if it was closed. */
async function waitForTurn(
  deps: HttpActionDeps,
  b: Bound,
  requestView: HttpRequestView,
): Promise<HttpActionResult | undefined> {
  // The card preview is the agent's own request, taken before any injection; its pairs are the view sealed at admission.
  const turn = await deps.queue.awaitTurn(b.actionId, httpCardPreview(b.route, b.request, requestView));
  return turn.kind === 'closed' ? { envelope: closedEnvelope(turn.state, b.fingerprint) } : undefined;
}

/** The action id an agent's `retry_of` names, read before parsing (the retry path parses the rest itself). */
function retryOfField(input: unknown): string | undefined {
  if (typeof input !== 'object' || input === null || !('retry_of' in input)) return undefined;
  const value = (input as { retry_of?: unknown }).retry_of;
  return typeof value === 'string' ? value : undefined;
}

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
  /** The credential bound at admission (ACTION_ACCEPTED credential). */
  credential?: BoundCredential;
  /** A validated request's card view (ACTION_ACCEPTED request_view). */
  requestView?: HttpRequestView;
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
    ...(a.credential === undefined ? {} : { credential: a.credential }),
    ...(a.requestView === undefined
      ? {}
      : {
          request_view: {
            query: a.requestView.query.map(copyPair),
            headers: a.requestView.headers.map(copyPair),
            body_bytes: a.requestView.body_bytes,
          },
        }),
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

function truncate(text: string, charsMax: number): string {
  return text.length <= charsMax ? text : `${text.slice(0, charsMax)}…`;
}
