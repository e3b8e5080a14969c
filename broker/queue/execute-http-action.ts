import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { HttpChannel, HttpChannelReport } from '../channels/http/index.js';
import type { PosternConfig, Route } from '../config/index.js';
import {
  errorCodeMeanings,
  isCodedError,
  type ActionState,
  type Classification,
  type Envelope,
  type IdempotencyKeyBinding,
  type NewEvent,
} from '../contract/index.js';
import { checkHttpRequest, classifyOutcome, joinBasePath, parseRetryAfterMs, resolveLane, type LocalGate, type OutcomeEvidence } from '../core/index.js';
import type { Journal, ResultStore } from '../journal/index.js';
import type { Clock, CredentialInfo, CredentialVault, IdSource, SecretMaterial } from '../ports/index.js';
import type { DispatchQueue } from './approval-queue.js';
import { httpCardPreview } from './card-preview.js';
import { buildHttpEnvelope, type EnvelopeFacts } from './http-envelope.js';
import { authorizationRefusal, closedBeforeDispatch, dispatchJournalFailure, journalFailedFacts } from './journal-failure.js';
import { stateClassification } from './state-envelope.js';
import { httpActionRequestSchema, normalizeHttpRequest, requestFingerprint, unparsedFingerprint, type NormalizedHttpRequest } from './http-action-request.js';
import { runRecorded } from './record-broker-error.js';
import { acceptedEvent, appendState, logRecorded, recordAccepted, recordRefusal, vaultRefusal } from './record-refusal.js';
import { scrubBytes, scrubText, secretForms } from './secret-scrubber.js';

export interface HttpActionDeps {
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

/** The body as the caller receives it: scrubbed of any echoed secret, capped, flagged. */
export interface HttpActionResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
  readonly truncated: boolean;
  readonly total_bytes: number;
  readonly digest: string;
  readonly redacted: boolean;
}

export interface HttpActionResult {
  readonly envelope: Envelope;
  /** A complete, settled response (also stored under envelope.evidence.result_id). */
  readonly response?: HttpActionResponse;
  /** An incomplete response's first bytes: a marked diagnostic, never a result. */
  readonly diagnostic?: { readonly kind: 'incomplete_response_partial_body'; readonly status: number; readonly body: Buffer; readonly total_bytes: number };
}

/**
 * Drives one HTTP action from admission to a recorded outcome (DESIGN §2): ACTION_ACCEPTED →
 * PREFLIGHT_VALIDATED | PREFLIGHT_FAILED → its turn in the queue (card, decision, lane order; a
 * closure ends it here) → CREDENTIAL_AUTHORIZED → the channel's
 * attempts (SETUP_ATTEMPT_FAILED… / DISPATCH_STARTED, REQUEST_SENT, REMOTE_RESPONSE_*) → the result
 * rows, then RESULT_COMMITTED; or OUTCOME_RECORDED. Every classification comes from broker/core
 * classifyOutcome. Returns only after the record is durable (article 000's order).
 */
export async function executeHttpAction(deps: HttpActionDeps, input: unknown, options: HttpActionOptions = {}): Promise<HttpActionResult> {
  const actionId = deps.ids.newActionId();
  return runRecorded(deps, actionId, () => admitAndRun(deps, actionId, input, options));
}

async function admitAndRun(deps: HttpActionDeps, actionId: string, input: unknown, options: HttpActionOptions): Promise<HttpActionResult> {
  const parsed = httpActionRequestSchema.safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = issue === undefined ? '' : issue.path.map(String).join('.');
    await accept(deps, actionId, { target: 'route:(invalid)', fingerprint: unparsedFingerprint(input), lane: null, approval: 'none', idempotent: false });
    return refuse(deps, actionId, unparsedFingerprint(input), { kind: 'validation', code: 'INVALID_ARGUMENT', field }, 'the request is malformed');
  }
  const request = normalizeHttpRequest(parsed.data);
  const fingerprint = requestFingerprint(request);
  const route = deps.config.routes.get(request.route);
  if (route === undefined) {
    await accept(deps, actionId, { target: 'route:(unknown)', fingerprint, lane: null, approval: 'none', idempotent: false });
    return refuse(deps, actionId, fingerprint, { kind: 'validation', code: 'INVALID_TARGET', field: 'route' }, 'no such route');
  }
  const lane = resolveLane(route, request.method, request.path);
  const idempotent = route.idempotent_methods.includes(request.method as never);
  const admission: Admission = {
    target: `route:${route.name} ${request.method} ${truncate(request.path, 1900)}`,
    fingerprint,
    lane: lane.kind === 'lane' && options.reconciles === undefined ? lane.lane : null,
    approval: options.reconciles === undefined ? route.approval : 'none',
    idempotent,
    ...(options.reconciles === undefined ? {} : { reconciles: options.reconciles }),
  };
  // Validation is pure and touches no secret, so it runs before admission is written: a passing
  // request's ACTION_ACCEPTED and PREFLIGHT_VALIDATED then share one commit (one fsync).
  // A lookup's method comes from the route's `lookup`, not the agent's method list (only that one).
  const methods = options.reconciles === undefined || route.lookup === undefined ? route.methods : [...route.methods, route.lookup.method];
  const preflight = validate(deps, route, methods, request, parsed.data.idempotency_key, parsed.data.timeout_ms);
  if (!preflight.ok) {
    await accept(deps, actionId, admission);
    return refuse(deps, actionId, fingerprint, preflight.gate, preflight.message);
  }
  const binding = idempotencyBinding(deps, route, request, parsed.data.idempotency_key);
  try {
    await deps.journal.appendBatch([httpAccepted(deps, actionId, admission), { kind: 'PREFLIGHT_VALIDATED', action_id: actionId, payload: binding === undefined ? {} : { idempotency: binding } }]);
  } catch (error) {
    // The journal refused the key's binding (the whole unit, so nothing of it was written).
    if (binding === undefined || !isCodedError(error) || error.code !== 'IDEMPOTENCY_MISMATCH') throw error;
    await accept(deps, actionId, admission);
    return refuseKeyReuse(deps, actionId, fingerprint, binding, route.idempotency?.fingerprint ?? []);
  }
  deps.onAdmitted?.(actionId);
  // The card preview is the agent's own request, taken before any injection.
  const turn = await deps.queue.awaitTurn(actionId, httpCardPreview(route, request));
  if (turn.kind === 'closed') return { envelope: closedEnvelope(turn.state, fingerprint) };
  return authorizeAndSend(deps, { actionId, route, request, fingerprint, idempotent, path: preflight.path, binding, timeoutMs: preflight.timeoutMs, followRedirects: parsed.data.follow_redirects === true });
}

interface Admission {
  target: string;
  fingerprint: string;
  lane: string | null;
  approval: 'none' | 'session' | 'per_call';
  idempotent: boolean;
  reconciles?: string;
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
function idempotencyBinding(deps: HttpActionDeps, route: Route, request: NormalizedHttpRequest, key: string | undefined): IdempotencyKeyBinding | undefined {
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
async function refuseKeyReuse(deps: HttpActionDeps, actionId: string, fingerprint: string, binding: IdempotencyKeyBinding, parts: readonly string[]): Promise<HttpActionResult> {
  const classification = classifyOutcome({ channel: 'http', gate: { kind: 'idempotency_mismatch' }, dispatchStarted: false, handedToTransport: false, requestComplete: false, idempotent: false });
  const field = 'idempotency_key';
  const state = await appendState(deps.journal, { kind: 'PREFLIGHT_FAILED', action_id: actionId, payload: { field }, classification });
  log(deps, actionId, binding.route, classification);
  return {
    envelope: buildHttpEnvelope({
      state,
      classification,
      message: `the idempotency key is already bound to a different request on this route and scope (compared: ${parts.join(', ')}); a new request needs a new key`,
      field,
      fingerprint,
      idempotency: { key: binding.key, scope: binding.scope, fingerprint: binding.fingerprint, remote_contract: 'configured' },
    }),
  };
}

type Preflight = { ok: true; path: string; timeoutMs: number } | { ok: false; gate: LocalGate; message: string };

/** Validation before any secret is touched or any host resolved (the vault is only described). */
function validate(deps: HttpActionDeps, route: Route, methods: readonly string[], request: NormalizedHttpRequest, key: string | undefined, timeoutMs: number | undefined): Preflight {
  const limits = deps.channel.limits;
  const info = deps.vault.state() === 'uninitialized' ? undefined : deps.vault.describe(route.credential);
  if (deps.vault.state() !== 'uninitialized' && info === undefined) {
    // The credential name comes from configuration and may itself be sensitive: never echoed.
    return { ok: false, gate: { kind: 'validation', code: 'UNKNOWN_CREDENTIAL', field: 'route' }, message: 'the route names a credential the vault does not hold' };
  }
  const owned = [info?.kind === 'header' && info.header !== undefined ? info.header.toLowerCase() : undefined, route.idempotency?.header.toLowerCase()].filter(
    (h): h is string => h !== undefined,
  );
  const check = checkHttpRequest(
    { method: request.method, path: request.path, query: request.query, headers: request.headers, bodyBytes: request.body.length, idempotencyKey: key },
    { methods, ownedHeaders: owned, ownedQueryParam: info?.kind === 'query' ? info.param : undefined, hasIdempotencyContract: route.idempotency !== undefined },
    limits,
  );
  if (!check.ok) return { ok: false, gate: { kind: 'validation', code: check.code, field: check.field }, message: check.message };
  if (timeoutMs !== undefined && timeoutMs > limits.callTimeoutMsMax) {
    return { ok: false, gate: { kind: 'validation', code: 'INVALID_ARGUMENT', field: 'timeout_ms' }, message: `timeout_ms is at most ${limits.callTimeoutMsMax}` };
  }
  return { ok: true, path: joinBasePath(route.base_path, check.path), timeoutMs: timeoutMs ?? limits.callTimeoutMsDefault };
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
  timeoutMs: number;
  followRedirects: boolean;
}

async function authorizeAndSend(deps: HttpActionDeps, b: Bound): Promise<HttpActionResult> {
  if (deps.vault.state() !== 'unlocked') return refuse(deps, b.actionId, b.fingerprint, { kind: 'vault_locked' }, 'the vault is locked');
  const locked = new AbortController();
  const unsubscribe = deps.vault.onLock(() => locked.abort());
  try {
    return await deps.vault.withSecret(b.route.credential, async (secret, info) => {
      const unusable = credentialProblem(b.route, info, secret);
      if (unusable !== undefined) return refuse(deps, b.actionId, b.fingerprint, { kind: 'credential_missing' }, unusable);
      // The bound fingerprint is recomputed from what will be sent, right before the write.
      if (requestFingerprint(b.request) !== b.fingerprint) return refuse(deps, b.actionId, b.fingerprint, { kind: 'fingerprint_mismatch' }, 'the request changed');
      // A person may have cancelled between the queue's release and here: nothing is even set up.
      const closed = closedBeforeDispatch(deps.journal, b.actionId);
      if (closed !== undefined) return { envelope: closedEnvelope(closed, b.fingerprint) };
      // Not awaited on its own: the journal commits in FIFO order, so the DISPATCH_STARTED the
      // channel awaits is durable only with this row before it (often in the same commit), and a
      // refusal of this row makes DISPATCH_STARTED impossible too (projection: authorized first).
      const authorized = appendState(deps.journal, {
        kind: 'CREDENTIAL_AUTHORIZED',
        action_id: b.actionId,
        payload: { credential_id: info.id, version_tag: info.version_tag, injection_mode: b.route.injection, request_fingerprint: b.fingerprint },
      });
      authorized.catch(() => undefined);
      const report = await deps.channel.perform({
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
        path: wirePath(b, secret),
        headers: wireHeaders(b, secret),
        body: b.request.body.length === 0 && !['POST', 'PUT', 'PATCH'].includes(b.request.method) ? undefined : b.request.body,
        timeoutMs: b.timeoutMs,
        beforeDispatch: locked.signal,
      });
      // A refused authorization (a closure that landed first) made DISPATCH_STARTED impossible too:
      // nothing was sent, and the answer is the recorded closure.
      const refusedAs = await authorizationRefusal(deps.journal, b.actionId, authorized);
      if (refusedAs !== undefined) return { envelope: closedEnvelope(refusedAs, b.fingerprint) };
      return settle(deps, b, report, secretForms(secret));
    });
  } catch (error) {
    const refusal = vaultRefusal(error, 'route');
    if (refusal !== undefined) return refuse(deps, b.actionId, b.fingerprint, refusal.gate, refusal.message);
    throw error;
  } finally {
    unsubscribe();
  }
}

/** Why this credential cannot be used on this route (kind, binding), or undefined. Never names it. */
function credentialProblem(route: Route, info: CredentialInfo, secret: SecretMaterial): string | undefined {
  if (info.kind !== route.injection || secret.kind !== route.injection) return `the route injects ${route.injection} but the credential is of another kind`;
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
  // Only under a declared contract (a binding exists only then): never added silently.
  if (b.binding !== undefined && b.route.idempotency !== undefined) headers.push([b.route.idempotency.header, b.binding.key]);
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
async function settle(deps: HttpActionDeps, b: Bound, report: HttpChannelReport, forms: readonly string[]): Promise<HttpActionResult> {
  if (report.journalFailed !== undefined) {
    const failure = dispatchJournalFailure(deps.journal, b.actionId, report.journalFailed);
    return { envelope: failure.kind === 'closed' ? closedEnvelope(failure.state, b.fingerprint) : buildHttpEnvelope({ ...failure, report, fingerprint: b.fingerprint }) };
  }
  try {
    return await record(deps, b, report, forms);
  } catch (error) {
    // After DISPATCH_STARTED a failed record is never not_attempted: the agent hears unknown.
    if (!report.dispatchStarted || !isCodedError(error) || error.code !== 'JOURNAL_UNAVAILABLE') throw error;
    return { envelope: buildHttpEnvelope({ ...journalFailedFacts(deps.journal, b.actionId), report, fingerprint: b.fingerprint }) };
  }
}

async function record(deps: HttpActionDeps, b: Bound, report: HttpChannelReport, forms: readonly string[]): Promise<HttpActionResult> {
  const nowMs = deps.clock.nowMs();
  // The expiry the journal holds for this key (PREFLIGHT_VALIDATED), not a recomputed one.
  const expiryMs = b.binding?.expires_at_ms;
  const response = report.response;
  const location = response?.headers.location;
  const crossOrigin = location === undefined ? false : otherOrigin(location, b.route);
  const evidence: OutcomeEvidence = {
    channel: 'http',
    dispatchStarted: report.dispatchStarted,
    handedToTransport: report.handedToTransport,
    requestComplete: report.requestComplete,
    transportBroken: report.transportBroken,
    idempotent: b.idempotent,
    ...(report.connection === undefined ? {} : { connection: report.connection }),
    ...(report.setup === undefined ? {} : { setup: report.setup }),
    ...(report.stoppedBeforeDispatch === 'signal' ? { gate: { kind: 'vault_locked' } as const } : {}),
    ...(report.stoppedBeforeDispatch === 'deadline' || report.callerDeadline ? { caller: 'deadline' as const } : {}),
    ...(expiryMs === undefined ? {} : { idempotencyContract: { withinRetention: nowMs < expiryMs } }),
    ...(response === undefined
      ? report.informationalSeen === true
        ? { http: { informationalOnly: true, framingComplete: false } }
        : {}
      : {
          http: {
            status: response.status,
            framingComplete: response.framingComplete,
            fromProxy: response.headers['proxy-status'] !== undefined,
            redirectBlocked: response.status >= 300 && response.status < 400 && b.followRedirects && crossOrigin,
            ...retryAfter(response.headers['retry-after'], nowMs, deps.channel.limits.retryAfterMsMax),
          },
        }),
  };
  const classification = classifyOutcome(evidence);
  const lastAttempt = report.attempts.at(-1)?.n;
  if (report.callerDeadline || report.stoppedBeforeDispatch === 'deadline') {
    await appendState(deps.journal, { kind: 'CALLER_DEADLINE_EXCEEDED', action_id: b.actionId, payload: { stage: report.dispatchStarted ? 'remote_execution' : 'connection_setup' } });
  }
  const settled = response !== undefined && response.framingComplete && (classification.outcome === 'committed' || classification.outcome === 'rejected');
  let result: HttpActionResponse | undefined;
  let resultId: string | undefined;
  let state: ActionState;
  if (settled && lastAttempt !== undefined) {
    const body = scrubBytes(response.body, forms);
    const headers: Record<string, string> = {};
    let redacted = body.redacted;
    for (const [name, value] of Object.entries(response.headers)) {
      const scrubbed = scrubText(value, forms);
      headers[name] = scrubbed.text;
      redacted ||= scrubbed.redacted;
    }
    result = { status: response.status, headers, body: body.bytes, truncated: response.truncated, total_bytes: response.totalBytes, digest: response.digest, redacted };
    resultId = `res_${b.actionId.slice(4)}_${lastAttempt}`;
    // Article 000's order: the retrievable result is durable first, then RESULT_COMMITTED names it.
    deps.results.commit({
      result_id: resultId,
      action_id: b.actionId,
      attempt: lastAttempt,
      summary: resultSummary(result, b, crossOrigin, report.peerFingerprint),
      body: result.body,
      total_bytes: result.total_bytes,
      truncated: result.truncated,
      digest: result.digest,
      created_at_ms: nowMs,
    });
    state = await appendState(deps.journal, { kind: 'RESULT_COMMITTED', action_id: b.actionId, payload: { attempt: lastAttempt, result_id: resultId, result_digest: response.digest }, classification });
    if (result.status === 202) {
      // A 202 settles the submission only; the job it created is tracked as its own operation.
      const ids = submissionIds(result);
      const statusLocation = ids.operation_location ?? ids.location;
      if (ids.job_id !== undefined || statusLocation !== undefined) {
        state = await appendState(deps.journal, {
          kind: 'OPERATION_SUBMITTED',
          action_id: b.actionId,
          payload: {
            attempt: lastAttempt,
            result_id: resultId,
            ...(ids.job_id === undefined ? {} : { job_id: ids.job_id }),
            ...(statusLocation === undefined ? {} : { status_location: statusLocation.slice(0, 2048) }),
          },
        });
      }
    }
  } else {
    state = await appendState(deps.journal, { kind: 'OUTCOME_RECORDED', action_id: b.actionId, payload: lastAttempt === undefined ? {} : { attempt: lastAttempt }, classification });
  }
  log(deps, b.actionId, b.route.name, classification);
  const facts: EnvelopeFacts = {
    state,
    classification,
    message: classification.code === null ? '' : errorCodeMeanings[classification.code],
    report,
    ...(resultId === undefined ? {} : { resultId }),
    ...(b.binding === undefined
      ? {}
      : { idempotency: { key: b.binding.key, scope: b.binding.scope, fingerprint: b.binding.fingerprint, remote_contract: 'configured' as const, earliest_safe_expiry_ms: b.binding.expires_at_ms } }),
  };
  const envelope = buildHttpEnvelope(facts);
  const diagnostic =
    response !== undefined && !settled
      ? { kind: 'incomplete_response_partial_body' as const, status: response.status, body: scrubBytes(response.body, forms).bytes, total_bytes: response.totalBytes }
      : undefined;
  return { envelope, ...(result === undefined ? {} : { response: result }), ...(diagnostic === undefined ? {} : { diagnostic }) };
}

function resultSummary(r: HttpActionResponse, b: Bound, crossOrigin: boolean, peer: string | undefined): Record<string, unknown> {
  const summary: Record<string, unknown> = {
    status: r.status,
    headers: r.headers,
    body_bytes: r.total_bytes,
    stored_bytes: r.body.length,
    truncated: r.truncated,
    digest: r.digest,
    redacted: r.redacted,
  };
  if (peer !== undefined) summary.peer_identity = peer;
  if (r.status === 202) summary.submission = submissionIds(r);
  if (r.status >= 300 && r.status < 400 && r.headers.location !== undefined) {
    summary.redirect = { location: r.headers.location, cross_origin: crossOrigin, followed: false, follow_requested: b.followRedirects };
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
async function refuse(deps: HttpActionDeps, actionId: string, fingerprint: string, gate: LocalGate, message: string): Promise<HttpActionResult> {
  const { state, classification, field } = await recordRefusal(deps.journal, 'http', actionId, gate);
  log(deps, actionId, undefined, classification);
  return { envelope: buildHttpEnvelope({ state, classification, message, ...(field === undefined ? {} : { field }), fingerprint }) };
}

/** A ticket the queue closed (rejected, expired, cancelled, session revoked): its recorded envelope. */
function closedEnvelope(state: ActionState, fingerprint: string): HttpActionResult['envelope'] {
  const classification = stateClassification(state);
  if (classification === undefined) throw new Error(`closedEnvelope: ${state.action_id} has no recorded classification`);
  return buildHttpEnvelope({ state, classification, message: classification.code === null ? '' : errorCodeMeanings[classification.code], fingerprint });
}

function retryAfter(value: string | undefined, nowMs: number, maxMs: number): { retryAfterMs?: number } {
  const ms = parseRetryAfterMs(value, nowMs, maxMs);
  return ms === undefined ? {} : { retryAfterMs: ms };
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

