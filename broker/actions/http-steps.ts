/**
 * The steps one HTTP attempt takes, shared by the first run (execute-http-action.ts) and the retry path
 * (retry-http.ts): validate, then authorize → dispatch, which hands the channel's report to record → answer
 * (http-record.ts). Both drivers import this module and neither imports the other back, so the retry path is its own
 * module without a cycle.
 */
import { createHash } from 'node:crypto';
import type { HttpChannel } from '../channels/http/index.js';
import type { Route } from '../config/index.js';
import { CodedError, isCodedError, type ActionState } from '../contract/index.js';
import { checkHttpRequest, joinBasePath, type LocalGate } from '../core/index.js';
import type { CredentialInfo, SecretMaterial } from '../ports/index.js';
import { authorizationRefusal, closedBeforeDispatch } from './journal-failure.js';
import { settle } from './settle.js';
import { requestFingerprint, type NormalizedHttpRequest } from './http-action-request.js';
import { operationTimeoutMsDefault } from '../config/config-schema.js';
import { startAuthorization } from './authorize-credential.js';
import type { AttemptRun } from './retry-engine.js';
import { vaultRefusal } from './record-refusal.js';
import { secretParts, secretScrubber } from './secret-scrubber.js';
import type { Bound, HttpActionDeps, HttpActionResult } from './http-action-deps.js';
import { answer, closedEnvelope, deliverable, httpAnswers, record, refuse } from './http-record.js';
import {
  accessTokenFor,
  accessTokenParts,
  tokenCacheOf,
  tokenEndpointBindingProblem,
  type AccessToken,
} from './oauth-token.js';
import { signAwsV4, sigV4OwnedHeaders } from './aws-sigv4-signer.js';
import { recentSecretsOf } from './recent-secrets.js';
import { credentialChanged } from './credential-binding.js';

export type { Bound, HttpActionDeps, HttpActionResponse, HttpActionResult } from './http-action-deps.js';
// The retry path (retry-http.ts) answers a closed ticket from here too.
export { closedEnvelope } from './http-record.js';

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
    ...(route.injection === 'aws_sigv4' ? sigV4OwnedHeaders : []),
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
      // An oauth2 route's access token first (its own recorded action when none is fresh), so that authorize stays
      // the last look at the record before CREDENTIAL_AUTHORIZED.
      const token = await accessTokenFor(deps, b.route, info, secret, locked.signal);
      if (token?.kind === 'unavailable') return noToken(deps, b, token, retry);
      const stop = authorize(deps, b, info, secret, retry);
      if (stop?.kind === 'refuse') return refuse(deps, b.actionId, b.fingerprint, stop.gate, stop.message);
      if (stop?.kind === 'closed') return { envelope: closedEnvelope(stop.state, b.fingerprint) };
      return dispatch(deps, b, run, { secret, info, beforeDispatch: locked.signal, token });
    });
  } catch (error) {
    const refusal = vaultRefusal(error, 'route');
    if (refusal !== undefined) return refuse(deps, b.actionId, b.fingerprint, refusal.gate, refusal.message);
    throw error;
  } finally {
    unsubscribe();
  }
}

/**
 * No access token: the request is not_attempted (OAUTH_TOKEN_UNAVAILABLE, the token action's id in the message), unless
 * a person closed it meanwhile. A retry's is thrown like a credential no longer usable: it closes its lease unsent.
 */
async function noToken(
  deps: HttpActionDeps,
  b: Bound,
  token: { readonly transient: boolean; readonly message: string },
  retry: boolean,
): Promise<HttpActionResult> {
  if (retry) throw new CodedError('VAULT_LOCKED', token.message);
  const closed = closedBeforeDispatch(deps.journal, b.actionId);
  if (closed !== undefined) return { envelope: closedEnvelope(closed, b.fingerprint) };
  const gate = { kind: 'oauth_token_unavailable', transient: token.transient } as const;
  return refuse(deps, b.actionId, b.fingerprint, gate, token.message);
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
  // And the credential is the one bound at admission (DESIGN §3): a rotation or a replacement since is not approved.
  const changed = credentialChanged(b.credential, info);
  if (changed !== undefined && retry) throw new CodedError('FINGERPRINT_MISMATCH', changed, { field: 'credential' });
  if (changed !== undefined) return { kind: 'refuse', gate: { kind: 'fingerprint_mismatch' }, message: changed };
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
  /** An oauth2 route's access token for this attempt. */
  readonly token?: AccessToken | undefined;
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
  const wire = wireRequest(b, run, s, deps.clock.nowMs());
  // Built after signing: a remote that echoes the request back must not hand the agent a signed request it could
  // replay to the service itself (no approval, no journal) while the signature is valid. A stateful remote can echo an
  // earlier request instead (the token dropped after a 401, an older signature): the recent ones are searched too.
  const derived = [...accessTokenParts(s.token), ...signatureParts(s.secret, wire.headers)];
  const recent = recentSecretsOf(deps.vault);
  const scrubber = secretScrubber([...secretParts(s.secret), ...derived, ...recent.parts(s.info.id)]);
  recent.remember(s.info.id, derived);
  const report = await deps.channel.perform({ ...wire, scrubLookaheadBytes: scrubber.lookaheadBytes });
  // Nothing crossed the boundary: no DISPATCH_STARTED carries the held authorization, so it is committed now rather
  // than after the journal's later-flush timer.
  if (!report.dispatchStarted) deps.journal.commitHeld();
  // A 401 answers this request (rejected, never resent with the same token); only the next request fetches another.
  if (s.token !== undefined && report.response?.status === 401) tokenCacheOf(deps.vault).drop(s.token.cacheKey);
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
  // The scrub yields the event loop (delivered-response.ts): it runs here, before settle, never between settle's check
  // and the settlement's append.
  const delivered = await deliverable(deps, report, scrubber);
  return settle(deps.journal, b.actionId, report, httpAnswers(b, report), async () =>
    answer(deps, b, report, scrubber, await record(deps, b, report, scrubber, delivered)),
  );
}

/** The request as the channel sends it: the credential injected, the key header added under a contract. */
function wireRequest(
  b: Bound,
  run: AttemptRun,
  s: Secret,
  nowMs: number,
): Omit<Parameters<HttpChannel['perform']>[0], 'scrubLookaheadBytes'> {
  const body =
    b.request.body.length === 0 && !['POST', 'PUT', 'PATCH'].includes(b.request.method) ? undefined : b.request.body;
  const headers = wireHeaders(b, s.secret, s.token);
  if (s.secret.kind === 'aws_sigv4') headers.push(...sigV4Headers(b, s.secret, headers, body, nowMs));
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
    headers,
    body,
    timeoutMs: b.timeoutMs,
    beforeDispatch: s.beforeDispatch,
    firstAttempt: run.firstAttempt,
    // record() appends the settlement at once (settle.ts): the observations ride in its commit.
    observationsRideWithSettlement: true,
    ...(run.generation === undefined ? {} : { generation: run.generation }),
    ...(b.route.correlation?.provider_request_id_header === undefined
      ? {}
      : { providerRequestIdHeader: b.route.correlation.provider_request_id_header }),
  };
}

/** Why this credential cannot be used on this route (kind, binding), or undefined. Never names it. */
function credentialProblem(route: Route, info: CredentialInfo, secret: SecretMaterial): string | undefined {
  const kind = route.injection === 'oauth2_client_credentials' ? 'oauth2_client' : route.injection;
  if (info.kind !== kind || secret.kind !== kind)
    return `the route injects ${route.injection} but the credential is of another kind`;
  const host = route.hostname.toLowerCase();
  const bound = info.bindings.some((binding) => {
    const b = binding.toLowerCase();
    if (b === route.name || b === host || b === `${host}:${route.port}` || b === `[${host}]:${route.port}`) return true;
    return b.startsWith('*.') && host.endsWith(b.slice(1)) && host.length > b.length - 1;
  });
  if (!bound) return "the route's credential is not bound to this route or its host";
  return tokenEndpointBindingProblem(route, info);
}

function wirePath(b: Bound, secret: SecretMaterial): string {
  const pairs = b.request.query.map(([n, v]) => `${encodeURIComponent(n)}=${encodeURIComponent(v)}`);
  if (secret.kind === 'query') pairs.push(`${encodeURIComponent(secret.param)}=${encodeURIComponent(secret.value)}`);
  return pairs.length === 0 ? b.path : `${b.path}?${pairs.join('&')}`;
}

function wireHeaders(b: Bound, secret: SecretMaterial, token: AccessToken | undefined): Array<[string, string]> {
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
    case 'oauth2_client':
      // The client secret goes only to the token endpoint (oauth-token.ts); this request carries the token.
      if (token !== undefined) headers.push(['authorization', `Bearer ${token.token}`]);
      break;
    default:
      break;
  }
  return headers;
}

/**
 * The signature over the request exactly as the channel sends it: these headers, this body, and the Host header
 * the HTTP client derives from the route's origin (URL.host: the port only when it is not the default).
 */
function sigV4Headers(
  b: Bound,
  secret: Extract<SecretMaterial, { kind: 'aws_sigv4' }>,
  headers: ReadonlyArray<readonly [string, string]>,
  body: Uint8Array | undefined,
  nowMs: number,
): Array<[string, string]> {
  // config-schema.ts refuses an aws_sigv4 route without its scope: a missing one here is a bug.
  if (b.route.aws === undefined) throw new Error('an aws_sigv4 route reached dispatch without its aws scope');
  const request = {
    method: b.request.method,
    host: new URL(b.route.origin).host,
    path: b.path,
    query: b.request.query,
  };
  return signAwsV4({ ...request, headers, body }, b.route.aws, secret, nowMs);
}

/** A SigV4 request's Authorization value and its signature hex: with them the signed request itself replays. */
function signatureParts(secret: SecretMaterial, headers: ReadonlyArray<readonly [string, string]>): string[] {
  if (secret.kind !== 'aws_sigv4') return [];
  const authorization = headers.find(([name]) => name.toLowerCase() === 'authorization')?.[1];
  if (authorization === undefined) return [];
  const signature = /Signature=([0-9a-f]+)$/.exec(authorization)?.[1];
  return signature === undefined ? [authorization] : [authorization, signature];
}

function poolKey(route: Route): string {
  const ca = route.ca_pem === undefined ? '' : createHash('sha256').update(route.ca_pem).digest('hex');
  return [route.name, route.origin, (route.tls?.pins ?? []).join(','), ca].join('|');
}
