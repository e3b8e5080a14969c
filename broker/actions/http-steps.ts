/**
 * The steps one HTTP attempt takes, shared by the first run (execute-http-action.ts) and the retry path
 * (retry-http.ts): validate, then authorize → dispatch → record → answer, and the refusal and closed-ticket answers.
 * Both import this module and neither imports the other back, so the retry path is its own module without a cycle.
 */
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { HttpChannel, HttpChannelReport } from '../channels/http/index.js';
import type { PosternConfig, Route } from '../config/index.js';
import {
  CodedError,
  errorCodeMeanings,
  isCodedError,
  type ActionState,
  type Classification,
  type Envelope,
  type IdempotencyKeyBinding,
} from '../contract/index.js';
import {
  checkHttpRequest,
  classifyOutcome,
  httpReportEvidence,
  joinBasePath,
  refusedRequestField,
  type LocalGate,
} from '../core/index.js';
import type { Journal, RequestStore, ResultStore } from '../journal/index.js';
import type { Clock, CredentialInfo, CredentialVault, IdSource, SecretMaterial } from '../ports/index.js';
import type { DispatchQueue } from '../queue/approval-queue.js';
import { buildHttpEnvelope, type EnvelopeFacts } from './http-envelope.js';
import { authorizationRefusal, closedBeforeDispatch } from './journal-failure.js';
import { stateClassification } from './state-envelope.js';
import { settle, type SettleAnswers } from './settle.js';
import { requestFingerprint, type NormalizedHttpRequest } from './http-action-request.js';
import { operationTimeoutMsDefault } from '../config/config-schema.js';
import { startAuthorization } from './authorize-credential.js';
import type { AttemptRun, RetryEngineDeps } from './retry-engine.js';
import { appendState, logRecorded, recordRefusal, vaultRefusal } from './record-refusal.js';
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

/** An admitted request bound to its route, fingerprint and key: what every attempt of the action sends. */
export interface Bound {
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

type Preflight = { ok: true; path: string } | { ok: false; gate: LocalGate; message: string };

/** The route's operation deadline (postern.yaml timeout_ms): how long the remote may take, never the caller's wait. */
export function operationTimeoutMs(route: Route): number {
  return route.timeout_ms ?? operationTimeoutMsDefault;
}

/** Validation before any secret is touched or any host resolved (the vault is only described). */
export function validate(
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

/** One attempt's steps, inside the secret's scope: authorize (a refusal ends it here), dispatch, record, answer. */
export async function authorizeAndSendOnce(deps: HttpActionDeps, b: Bound, run: AttemptRun): Promise<HttpActionResult> {
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
 * dispatch's CREDENTIAL_AUTHORIZED. A retry's refusal is thrown (retry-http.ts authorizeAndSend answers it from the record).
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
  return settle(deps.journal, b.actionId, report, httpAnswers(b, report), async () =>
    answer(deps, b, report, scrubber, await record(deps, b, report, scrubber)),
  );
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

/** The answers settle (settle.ts) gives without this attempt's record: the closure that won, or unknown. */
function httpAnswers(b: Bound, report: HttpChannelReport): SettleAnswers<HttpActionResult> {
  return {
    closed: (state) => ({ envelope: closedEnvelope(state, b.fingerprint) }),
    unknown: (facts) => ({ envelope: buildHttpEnvelope({ ...facts, report, fingerprint: b.fingerprint }) }),
  };
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
export async function refuse(
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
export function closedEnvelope(state: ActionState, fingerprint: string): HttpActionResult['envelope'] {
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

export function log(deps: HttpActionDeps, actionId: string, route: string | undefined, c: Classification): void {
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
