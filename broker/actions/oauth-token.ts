/**
 * OAuth2 client credentials (RFC 6749 §4.4) for an `oauth2_client_credentials` route: the access token a request
 * carries, cached sealed by the vault and fetched, when there is none fresh, as the broker's own recorded action.
 *
 * Why a token fetch is its own action (target `token:<route>`, approval none, no lane, no session): it crosses the
 * network with the client secret, so it gets the same record as any other request — its own ticket,
 * CREDENTIAL_AUTHORIZED, DISPATCH_STARTED and outcome — and a failed fetch is the reason, recorded there, that the
 * request needing it was `not_attempted` (OAUTH_TOKEN_UNAVAILABLE). The agent never sees the token, the client secret
 * or the token action's result (it belongs to no session); the result is kept scrubbed of both.
 */
import { createHash } from 'node:crypto';
import type { HttpChannel, HttpChannelReport } from '../channels/http/index.js';
import type { Route } from '../config/index.js';
import { operationTimeoutMsDefault } from '../config/config-schema.js';
import type { ActionState, Classification } from '../contract/index.js';
import { classifyOutcome, httpReportEvidence } from '../core/index.js';
import type { CredentialInfo, CredentialVault, SecretMaterial } from '../ports/index.js';
import type { CardPreview } from '../queue/card-preview.js';
import { startAuthorization } from './authorize-credential.js';
import { deliveredResponse, type HttpActionResponse } from './delivered-response.js';
import type { HttpActionDeps } from './http-action-deps.js';
import { authorizationRefusal } from './journal-failure.js';
import { runRecorded } from './record-broker-error.js';
import { acceptedEvent, appendResultCommitted, appendState, logRecorded } from './record-refusal.js';
import { formEncode, secretParts, secretScrubber } from './secret-scrubber.js';
import { settle } from './settle.js';

/** A cached token is fetched again this long before its expiry (or at half its life, if that is sooner). */
export const tokenRefreshMarginMs = 60_000;
/** A token answer without `expires_in` is trusted this long (RFC 6749 leaves it to the server's documentation). */
export const tokenLifetimeMsDefault = 300_000;
/** The longest `expires_in` believed: a longer one is cut to this, so a stolen sealed cache entry ages out. */
export const tokenLifetimeMsMax = 24 * 3_600_000;
/** An access token is 8 to 16 KiB characters of visible ASCII (a JWT fits; a header-breaking value does not). */
const accessTokenCharsMin = 8;
const accessTokenCharsMax = 16 * 1024;
const accessTokenPattern = /^[\x21-\x7e]+$/;

/** A token for one request: `fresh` when this request's own fetch (or one it joined) produced it. */
export interface AccessToken {
  readonly kind: 'token';
  readonly token: string;
  readonly fresh: boolean;
  readonly cacheKey: string;
}

/** No token: why, in words that name no secret, and the token action that says more (when one ran). */
export interface TokenUnavailable {
  readonly kind: 'unavailable';
  readonly transient: boolean;
  readonly message: string;
}

type Fetched = { ok: true; token: string; expiresAtMs: number } | { ok: false; transient: boolean; why: string };

interface CachedToken {
  readonly sealed: Uint8Array;
  readonly purpose: string;
  readonly expiresAtMs: number;
  readonly refreshAtMs: number;
}

/**
 * The sealed tokens of one vault, in memory only: never plaintext, never on disk (a restart fetches again). Sealed
 * under the vault's data key with a purpose naming the credential id and version, so a rotation never reuses a token
 * and a lock makes every entry unreadable; entries are dropped at lock anyway. One fetch per key at a time: callers
 * that need the same token meanwhile wait for it.
 */
export class OAuthTokenCache {
  private readonly entries = new Map<string, CachedToken>();
  private readonly fetching = new Map<string, Promise<Fetched & { actionId: string }>>();

  constructor(private readonly vault: CredentialVault) {
    vault.onLock(() => this.entries.clear());
  }

  /** The cached token if it is not due for refresh; undefined otherwise (or if the vault cannot open it). */
  fresh(key: string, nowMs: number): string | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined || nowMs >= entry.refreshAtMs) return undefined;
    try {
      return Buffer.from(this.vault.unwrap(entry.purpose, entry.sealed)).toString('utf8');
    } catch {
      this.entries.delete(key);
      return undefined;
    }
  }

  keep(key: string, purpose: string, token: string, fetchedAtMs: number, expiresAtMs: number): void {
    const sealed = this.vault.wrap(purpose, Buffer.from(token, 'utf8'));
    const margin = Math.min(tokenRefreshMarginMs, (expiresAtMs - fetchedAtMs) / 2);
    this.entries.set(key, { sealed, purpose, expiresAtMs, refreshAtMs: expiresAtMs - margin });
  }

  /** The remote refused a request carrying this token: the next request fetches another (this one is not resent). */
  drop(key: string): void {
    this.entries.delete(key);
  }

  /** Runs `fetch` unless a fetch for `key` is already running, whose answer is shared. */
  once(key: string, fetch: () => Promise<Fetched & { actionId: string }>): Promise<Fetched & { actionId: string }> {
    const running = this.fetching.get(key);
    if (running !== undefined) return running;
    const started = fetch().finally(() => this.fetching.delete(key));
    this.fetching.set(key, started);
    return started;
  }
}

const caches = new WeakMap<CredentialVault, OAuthTokenCache>();

/** The token cache of this vault (one per runtime: the vault that seals the tokens is the one that owns them). */
export function tokenCacheOf(vault: CredentialVault): OAuthTokenCache {
  let cache = caches.get(vault);
  if (cache === undefined) {
    cache = new OAuthTokenCache(vault);
    caches.set(vault, cache);
  }
  return cache;
}

/** The access token's parts for the scrubber: the token and the header it travels in. */
export function accessTokenParts(token: AccessToken | undefined): string[] {
  return token === undefined ? [] : [token.token, `Bearer ${token.token}`];
}

/**
 * Why this oauth2 route may not send its client to the token endpoint, or undefined: the client secret goes to the
 * token URL's host, so a credential bound by host must name that host as well as the route's (a binding to the route
 * by name covers its whole configuration, token_url included).
 */
export function tokenEndpointBindingProblem(route: Route, info: CredentialInfo): string | undefined {
  if (route.oauth2 === undefined || info.bindings.some((b) => b.toLowerCase() === route.name)) return undefined;
  const url = new URL(route.oauth2.token_url);
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1').toLowerCase();
  const port = url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port);
  const bound = info.bindings.some((binding) => {
    const b = binding.toLowerCase();
    if (b === host || b === `${host}:${port}` || b === `[${host}]:${port}`) return true;
    return b.startsWith('*.') && host.endsWith(b.slice(1)) && host.length > b.length - 1;
  });
  return bound ? undefined : "the route's credential is not bound to its token endpoint's host";
}

/**
 * The access token for one request on an oauth2 route: the cached one while fresh, else a fetch recorded as its own
 * action. Undefined for any other route, or when the credential does not fit (authorize refuses that, unsent).
 */
export async function accessTokenFor(
  deps: HttpActionDeps,
  route: Route,
  info: CredentialInfo,
  secret: SecretMaterial,
  beforeDispatch: AbortSignal,
): Promise<AccessToken | TokenUnavailable | undefined> {
  const oauth2 = route.oauth2;
  if (route.injection !== 'oauth2_client_credentials' || oauth2 === undefined || secret.kind !== 'oauth2_client')
    return undefined;
  if (tokenEndpointBindingProblem(route, info) !== undefined) return undefined;
  const cache = tokenCacheOf(deps.vault);
  const cacheKey = [
    route.name,
    info.id,
    info.version_tag,
    oauth2.token_url,
    (oauth2.scopes ?? []).join(' '),
    oauth2.audience ?? '',
  ].join('\n');
  const cached = cache.fresh(cacheKey, deps.clock.nowMs());
  if (cached !== undefined) return { kind: 'token', token: cached, fresh: false, cacheKey };
  const fetched = await cache.once(cacheKey, async () => {
    const fetchedAtMs = deps.clock.nowMs();
    const result = await fetchToken(deps, route, info, secret, beforeDispatch);
    if (result.ok) {
      const purpose = `oauth2-token:${info.id}:${info.version_tag}:${route.name}`;
      cache.keep(cacheKey, purpose, result.token, fetchedAtMs, result.expiresAtMs);
    }
    return result;
  });
  if (fetched.ok) return { kind: 'token', token: fetched.token, fresh: true, cacheKey };
  return {
    kind: 'unavailable',
    transient: fetched.transient,
    message: `no OAuth2 access token: the token fetch ${fetched.actionId} ${fetched.why}; nothing was sent`,
  };
}

/** The token action: admitted, its turn (approval none, no lane), authorized, sent, recorded. */
async function fetchToken(
  deps: HttpActionDeps,
  route: Route,
  info: CredentialInfo,
  client: Extract<SecretMaterial, { kind: 'oauth2_client' }>,
  beforeDispatch: AbortSignal,
): Promise<Fetched & { actionId: string }> {
  const actionId = deps.ids.newActionId();
  const request = tokenRequest(route, client);
  const withId = (f: Fetched): Fetched & { actionId: string } => ({ ...f, actionId });
  return runRecorded(deps, actionId, async () => {
    // The broker's own action: no session (no agent may read it), no lane (it must not wait behind the request).
    await deps.journal.appendBatch([
      acceptedEvent({ journal: deps.journal }, actionId, null, {
        channel: 'http',
        target: `token:${route.name}`,
        request_fingerprint: request.fingerprint,
        approval: 'none',
        // Asking for a client-credentials token again changes nothing at the endpoint but the token it hands out.
        idempotent: true,
        origin: request.url.origin,
      }),
      { kind: 'PREFLIGHT_VALIDATED', action_id: actionId, payload: {} },
    ]);
    const turn = await deps.queue.awaitTurn(actionId, tokenCardPreview(route, request.url));
    if (turn.kind === 'closed') return withId({ ok: false, transient: false, why: 'was closed before dispatch' });
    const authorized = startAuthorization(deps.journal, actionId, {
      credential_id: info.id,
      version_tag: info.version_tag,
      injection_mode: route.injection,
      request_fingerprint: request.fingerprint,
    });
    const clientParts = secretParts(client);
    const report = await deps.channel.perform(
      tokenWireRequest(deps, route, actionId, request, beforeDispatch, secretScrubber(clientParts).lookaheadBytes),
    );
    const closed = await authorizationRefusal(deps.journal, actionId, authorized);
    if (closed !== undefined) return withId({ ok: false, transient: false, why: 'was closed before dispatch' });
    const unsure = (): Fetched & { actionId: string } =>
      withId({ ok: false, transient: true, why: 'could not be recorded' });
    return settle(deps.journal, actionId, report, { closed: unsure, unknown: unsure }, async () =>
      withId(await recordToken(deps, route.name, actionId, report, clientParts)),
    );
  });
}

interface TokenRequest {
  readonly url: URL;
  readonly body: Buffer;
  readonly authorization: string;
  /** sha256 over what identifies the request (endpoint, grant, scopes, audience): never the client secret. */
  readonly fingerprint: string;
}

/** RFC 6749 §4.4.2 with client_secret_basic (§2.3.1: the id and secret form-encoded, then HTTP basic). */
function tokenRequest(route: Route, client: Extract<SecretMaterial, { kind: 'oauth2_client' }>): TokenRequest {
  const oauth2 = route.oauth2;
  if (oauth2 === undefined) throw new Error('tokenRequest: the route has no oauth2 settings');
  const fields: Array<[string, string]> = [['grant_type', 'client_credentials']];
  if (oauth2.scopes !== undefined && oauth2.scopes.length > 0) fields.push(['scope', oauth2.scopes.join(' ')]);
  if (oauth2.audience !== undefined) fields.push(['audience', oauth2.audience]);
  const body = Buffer.from(fields.map(([n, v]) => `${n}=${formEncode(v)}`).join('&'));
  const pair = `${formEncode(client.clientId)}:${formEncode(client.clientSecret)}`;
  const fingerprint = `sha256:${createHash('sha256')
    .update(
      JSON.stringify([
        route.name,
        oauth2.token_url,
        'client_credentials',
        oauth2.scopes ?? [],
        oauth2.audience ?? null,
      ]),
    )
    .digest('hex')}`;
  return {
    url: new URL(oauth2.token_url),
    body,
    authorization: `Basic ${Buffer.from(pair).toString('base64')}`,
    fingerprint,
  };
}

function tokenWireRequest(
  deps: HttpActionDeps,
  route: Route,
  actionId: string,
  request: TokenRequest,
  beforeDispatch: AbortSignal,
  scrubLookaheadBytes: number,
): Parameters<HttpChannel['perform']>[0] {
  const { url } = request;
  const protocol = url.protocol === 'https:' ? 'https:' : 'http:';
  const port = url.port === '' ? (protocol === 'https:' ? 443 : 80) : Number(url.port);
  const ca = route.ca_pem === undefined ? '' : createHash('sha256').update(route.ca_pem).digest('hex');
  return {
    actionId,
    target: {
      protocol,
      hostname: url.hostname.replace(/^\[(.*)\]$/, '$1'),
      port,
      // The route's private CA (if any) is added to the system roots for its token endpoint too; its pins are the
      // API host's and do not apply here.
      caPem: route.ca_pem,
      pins: undefined,
      origin: url.origin,
      poolKey: ['token', route.name, url.origin, ca].join('|'),
    },
    method: 'POST',
    path: url.pathname === '' ? '/' : url.pathname,
    headers: [
      ['content-type', 'application/x-www-form-urlencoded'],
      ['accept', 'application/json'],
      ['accept-encoding', 'identity'],
      ['authorization', request.authorization],
    ],
    body: request.body,
    timeoutMs: route.timeout_ms ?? operationTimeoutMsDefault,
    beforeDispatch,
    scrubLookaheadBytes,
  };
}

/**
 * Record: the channel's report classified like any HTTP answer. A settled answer is kept as the token action's result,
 * scrubbed of the client secret and of the token it carries; anything else is recorded as known so far.
 */
async function recordToken(
  deps: HttpActionDeps,
  routeName: string,
  actionId: string,
  report: HttpChannelReport,
  clientParts: readonly string[],
): Promise<Fetched> {
  const nowMs = deps.clock.nowMs();
  const classification = classifyOutcome(
    httpReportEvidence(report, {
      locationElsewhere: false,
      idempotent: true,
      nowMs,
      retryAfterMsMax: deps.channel.limits.retryAfterMsMax,
    }),
  );
  const response = report.response;
  const attempt = report.attempts.at(-1)?.n;
  const settled =
    response !== undefined &&
    response.framingComplete &&
    attempt !== undefined &&
    (classification.outcome === 'committed' || classification.outcome === 'rejected');
  if (!settled) {
    await appendState(deps.journal, {
      kind: 'OUTCOME_RECORDED',
      action_id: actionId,
      payload: attempt === undefined ? {} : { attempt },
      classification,
    });
    logToken(deps, actionId, routeName, classification);
    return {
      ok: false,
      transient: transient(classification),
      why: `ended ${classification.outcome} (${classification.code ?? 'no code'})`,
    };
  }
  // The token is read from the decoded body first (scrubbed of the client only), so the kept result can hide it too.
  // The scrubs give the event loop turns (delivered-response.ts). A token fetch holds no observations for its
  // settlement (no observationsRideWithSettlement), so waiting here before the append is safe (settle.ts).
  const fetched = tokenAnswer(
    await deliveredResponse(response, secretScrubber(clientParts), deps.channel.limits),
    classification,
    nowMs,
  );
  const scrubber = secretScrubber([
    ...clientParts,
    ...(fetched.ok ? accessTokenParts({ kind: 'token', token: fetched.token, fresh: true, cacheKey: '' }) : []),
  ]);
  await commitTokenResult(
    deps,
    actionId,
    attempt,
    await deliveredResponse(response, scrubber, deps.channel.limits),
    classification,
    nowMs,
  );
  logToken(deps, actionId, routeName, classification);
  return fetched;
}

async function commitTokenResult(
  deps: HttpActionDeps,
  actionId: string,
  attempt: number,
  result: HttpActionResponse,
  classification: Classification,
  nowMs: number,
): Promise<ActionState> {
  const resultId = `res_${actionId.slice(4)}_${attempt}`;
  const stored = {
    result_id: resultId,
    action_id: actionId,
    attempt,
    summary: {
      status: result.status,
      headers: result.headers,
      body_bytes: result.total_bytes,
      stored_bytes: result.body.length,
      truncated: result.truncated,
      digest: result.digest,
      redacted: result.redacted,
    },
    body: result.body,
    total_bytes: result.total_bytes,
    truncated: result.truncated,
    digest: result.digest,
    created_at_ms: nowMs,
  };
  return appendResultCommitted(deps, stored, {
    kind: 'RESULT_COMMITTED',
    action_id: actionId,
    payload: { attempt, result_id: resultId, result_digest: result.digest },
    classification,
  });
}

/** A token endpoint's settled answer: a bearer access token and its lifetime (RFC 6749 §5.1), or why there is none. */
function tokenAnswer(result: HttpActionResponse, classification: Classification, nowMs: number): Fetched {
  if (classification.outcome !== 'committed' || result.status !== 200)
    return {
      ok: false,
      transient: transient(classification),
      why: `was answered ${result.status} (${classification.code ?? 'no code'})`,
    };
  let parsed: unknown;
  try {
    parsed = result.truncated ? undefined : JSON.parse(result.body.toString('utf8'));
  } catch {
    parsed = undefined;
  }
  const answer = typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, unknown>) : {};
  const token = answer.access_token;
  const type = answer.token_type;
  if (
    typeof token !== 'string' ||
    token.length < accessTokenCharsMin ||
    token.length > accessTokenCharsMax ||
    !accessTokenPattern.test(token)
  )
    return { ok: false, transient: false, why: 'was answered without a usable access_token' };
  if (type !== undefined && (typeof type !== 'string' || type.toLowerCase() !== 'bearer'))
    return { ok: false, transient: false, why: 'was answered with a token that is not a bearer token' };
  const expiresIn = answer.expires_in;
  const lifetimeMs =
    typeof expiresIn === 'number' && Number.isFinite(expiresIn) && expiresIn > 0
      ? Math.min(expiresIn * 1000, tokenLifetimeMsMax)
      : tokenLifetimeMsDefault;
  return { ok: true, token, expiresAtMs: nowMs + lifetimeMs };
}

/** Asking again may help: the token endpoint was unreachable, unsure or asked to wait. */
function transient(c: Classification): boolean {
  return c.outcome === 'unknown' || c.retry === 'backoff';
}

/** What the queue keeps for the token action (approval none: no card is shown): the endpoint, never the client. */
function tokenCardPreview(route: Route, url: URL): CardPreview {
  return {
    target: `token:${route.name}`,
    method: 'POST',
    path: url.pathname.slice(0, 512),
    query: [],
    headers: [],
    command: null,
    body_preview: null,
    body_bytes: 0,
    credential: route.credential,
    retry_of: null,
  };
}

function logToken(deps: HttpActionDeps, actionId: string, route: string, c: Classification): void {
  // Only ids and closed-set values: never the endpoint's answer, the client or the token.
  logRecorded(deps.logger, { action_id: actionId, route, for: 'oauth2_token' }, c, 'oauth2 token action recorded');
}
