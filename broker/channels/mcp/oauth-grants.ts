import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import {
  discoverOAuthServerInfo,
  exchangeAuthorization,
  refreshAuthorization,
  registerClient,
  startAuthorization,
} from '@modelcontextprotocol/sdk/client/auth.js';
import {
  InvalidClientError,
  InvalidGrantError,
  UnauthorizedClientError,
} from '@modelcontextprotocol/sdk/server/auth/errors.js';
import { checkResourceAllowed, resourceUrlFromServerUrl } from '@modelcontextprotocol/sdk/shared/auth-utils.js';
import type {
  AuthorizationServerMetadata,
  OAuthClientInformationMixed,
  OAuthTokens,
} from '@modelcontextprotocol/sdk/shared/auth.js';
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import { CodedError } from '../../contract/index.js';
import type { Clock } from '../../ports/index.js';
import type { McpServerSpec } from './mcp-types.js';
import { listenForCallback, type CallbackOutcome, type LoopbackCallback } from './oauth-callback.js';
import { StartFailed } from './upstream-session.js';

/**
 * One server's OAuth grant as sealed at rest: where it was obtained (a changed server URL or authorization server
 * drops it), the client it was obtained for, and the tokens. Never logged, never journaled, never in an answer.
 */
export interface McpOAuthGrant {
  readonly version: 1;
  /** The MCP server URL the grant is for. */
  readonly url: string;
  /** The authorization server (its issuer URL as discovery found it). */
  readonly issuer: string;
  readonly metadata?: AuthorizationServerMetadata;
  /** The RFC 8707 resource indicator sent with every token request. */
  readonly resource?: string;
  readonly client: OAuthClientInformationMixed;
  /** The client was registered by the broker (RFC 7591): it may register again for another redirect port. */
  readonly registered: boolean;
  readonly tokens?: OAuthTokens;
  readonly expiresAtMs?: number;
}

/** Where grants live: sealed under the vault's key by the host (broker/host/mcp-oauth-store.ts). */
export interface McpOAuthStore {
  /** A grant with tokens is held for the server (a plaintext marker: readable while the vault is locked). */
  held(server: string): boolean;
  /** The grant, or undefined; throws CodedError VAULT_LOCKED while the vault is locked. */
  load(server: string): McpOAuthGrant | undefined;
  save(server: string, grant: McpOAuthGrant | undefined): void;
}

export interface McpOAuthLimits {
  /** A token expiring within this is refreshed during the call's setup, before the boundary. */
  readonly refreshWithinMs: number;
  /** How long the loopback listener of one authorization waits for the person. */
  readonly callbackTimeoutMs: number;
  /** Each request to the authorization server (discovery, registration, token). */
  readonly requestTimeoutMs: number;
}

export const defaultMcpOAuthLimits: McpOAuthLimits = {
  refreshWithinMs: 60_000,
  callbackTimeoutMs: 10 * 60_000,
  requestTimeoutMs: 20_000,
};

export interface McpOAuthOptions {
  readonly store: McpOAuthStore;
  readonly clock: Clock;
  /** The OAuth traffic's fetch: createGuardedFetch (pinned-fetch.ts) in the broker. */
  readonly fetch: FetchLike;
  readonly logger?: Logger;
  readonly limits?: Partial<McpOAuthLimits>;
}

export interface McpAuthorization {
  /**
   * What the person opens: the broker's own loopback `/start?n=<nonce>`, not the authorization server's URL. It is
   * a one-time secret: its first opening binds the authorization to that browser (a session cookie) and redirects
   * to the authorization server; a second opening abandons the authorization (oauth-callback.ts says why).
   */
  readonly startUrl: string;
  readonly expiresAtMs: number;
  /** Settles when the person's callback was redeemed or refused, the link was reused, the time ran out, or closed. */
  readonly done: Promise<CallbackOutcome>;
}

/** Errors with which an authorization server says the refresh token or the client is no good any more. */
const refusedGrant = [InvalidGrantError, InvalidClientError, UnauthorizedClientError];

/**
 * OAuth 2.1 with PKCE for streamable_http servers (docs/upstream-mcp.md), built on the SDK's client auth helpers
 * (discovery of RFC 9728 + RFC 8414 metadata, RFC 7591 registration, PKCE S256, code exchange, refresh). The SDK's
 * `auth()` orchestration and the transport's authProvider are not used: they refresh or re-authorize wherever a
 * 401 appears, which after DISPATCH_STARTED would resend a call. Here a token is refreshed only in a call's setup.
 */
export class McpOAuth {
  private readonly limits: McpOAuthLimits;
  private readonly refreshing = new Map<string, Promise<McpOAuthGrant>>();
  /** Each server's latest authorization listener; it stays bound for its whole window, so it stays here too. */
  private readonly pending = new Map<string, LoopbackCallback>();
  /**
   * Every token handed to each server, kept until it expires, for scrubbing what it answers (never persisted, never
   * logged): a call still running on a token a concurrent refresh replaced may echo the old one.
   */
  private readonly handedOut = new Map<string, Map<string, number>>();

  constructor(private readonly options: McpOAuthOptions) {
    this.limits = { ...defaultMcpOAuthLimits, ...options.limits };
  }

  authState(spec: McpServerSpec): 'none' | 'ok' | 'required' {
    if (spec.oauth === undefined) return 'none';
    return this.options.store.held(spec.name) ? 'ok' : 'required';
  }

  /** Every token form the server was given lately: the executor scrubs them from what the server answers. */
  secretsOf(server: string): readonly string[] {
    const tokens = this.handedOut.get(server);
    if (tokens === undefined) return [];
    const now = this.options.clock.nowMs();
    for (const [token, untilMs] of tokens) if (untilMs <= now) tokens.delete(token);
    return [...tokens.keys()];
  }

  /**
   * The `authorization` header value for a call, refreshed first when the token expires within refreshWithinMs.
   * Runs in setup: every failure is a StartFailed at stage `authorize`, so nothing has been sent to the server.
   */
  async bearer(spec: McpServerSpec): Promise<string> {
    let grant = this.usableGrant(spec);
    const expiresAt = grant.expiresAtMs;
    if (expiresAt !== undefined && this.options.clock.nowMs() >= expiresAt - this.limits.refreshWithinMs)
      grant = await this.refreshOnce(spec, grant);
    const token = grant.tokens?.access_token ?? '';
    const tokens = this.handedOut.get(spec.name) ?? new Map<string, number>();
    this.handedOut.set(spec.name, tokens);
    // No expiry known: kept for the broker's life (a grant refreshed only on expiry adds few).
    const untilMs = grant.expiresAtMs ?? Number.POSITIVE_INFINITY;
    for (const t of [token, grant.tokens?.refresh_token ?? ''])
      if (t !== '') tokens.set(t, Math.max(untilMs, tokens.get(t) ?? 0));
    return `Bearer ${token}`;
  }

  private usableGrant(spec: McpServerSpec): McpOAuthGrant {
    let grant: McpOAuthGrant | undefined;
    try {
      grant = this.options.store.load(spec.name);
    } catch (error) {
      const locked = error instanceof CodedError && error.code === 'VAULT_LOCKED';
      throw new StartFailed(
        'mcp_authorization',
        'authorize',
        locked ? 'vault_locked' : 'grant_unreadable',
        'authorization_required',
      );
    }
    if (grant?.tokens === undefined || grant.url !== spec.url)
      throw new StartFailed('mcp_authorization', 'authorize', 'not_authorized', 'authorization_required');
    return grant;
  }

  /** One refresh per server at a time: concurrent calls wait for it rather than spend the refresh token twice. */
  private refreshOnce(spec: McpServerSpec, grant: McpOAuthGrant): Promise<McpOAuthGrant> {
    const running = this.refreshing.get(spec.name);
    if (running !== undefined) return running;
    const refresh = this.refresh(spec, grant).finally(() => this.refreshing.delete(spec.name));
    this.refreshing.set(spec.name, refresh);
    return refresh;
  }

  private async refresh(spec: McpServerSpec, grant: McpOAuthGrant): Promise<McpOAuthGrant> {
    const refreshToken = grant.tokens?.refresh_token;
    if (refreshToken === undefined) {
      this.forgetTokens(spec.name, grant);
      throw new StartFailed(
        'mcp_authorization',
        'authorize',
        'expired_without_refresh_token',
        'authorization_required',
      );
    }
    let tokens: OAuthTokens;
    try {
      tokens = await refreshAuthorization(grant.issuer, {
        ...(grant.metadata === undefined ? {} : { metadata: grant.metadata }),
        clientInformation: grant.client,
        refreshToken,
        ...(grant.resource === undefined ? {} : { resource: grant.resource }),
        fetchFn: this.fetch(),
      });
    } catch (error) {
      if (refusedGrant.some((kind) => error instanceof kind)) {
        this.forgetTokens(spec.name, grant);
        this.options.logger?.warn({ mcp_server: spec.name }, 'mcp oauth refresh refused: authorization required');
        throw new StartFailed('mcp_authorization', 'authorize', 'refresh_refused', 'authorization_required');
      }
      this.options.logger?.warn({ mcp_server: spec.name }, 'mcp oauth refresh failed');
      throw new StartFailed('mcp_initialize', 'authorize', 'refresh_failed', 'authorization_failed');
    }
    const refreshed = { ...grant, tokens, ...this.expiry(tokens) };
    this.options.store.save(spec.name, refreshed);
    this.options.logger?.info({ mcp_server: spec.name }, 'mcp oauth token refreshed');
    return refreshed;
  }

  private forgetTokens(server: string, grant: McpOAuthGrant): void {
    const { tokens: _tokens, expiresAtMs: _expires, ...rest } = grant;
    this.options.store.save(server, rest);
  }

  private expiry(tokens: OAuthTokens): { expiresAtMs?: number } {
    const seconds = tokens.expires_in;
    return seconds === undefined ? {} : { expiresAtMs: this.options.clock.nowMs() + seconds * 1000 };
  }

  /**
   * A person's step (operator method `mcp_servers.authorize`): discovery, registration when needed, PKCE, and a
   * loopback listener bound to the person's browser; the returned start URL is for that browser. A second call for
   * the same server replaces the first (its listener closes). The vault must be unlocked: the grant is sealed in it.
   */
  async authorize(spec: McpServerSpec): Promise<McpAuthorization> {
    if (spec.oauth === undefined || spec.url === undefined)
      throw new CodedError('INVALID_ARGUMENT', `the MCP server ${spec.name} is not configured for OAuth`, {
        field: 'server',
      });
    const stored = this.options.store.load(spec.name);
    const state = randomBytes(32).toString('base64url');
    const flow: Flow = { verifier: '', tainted: false, saved: false };
    const callback = await listenForCallback({
      state,
      timeoutMs: this.limits.callbackTimeoutMs,
      complete: (code) => this.complete(spec, code, flow),
      reusedAfterCallback: () => this.untrust(spec, flow),
    });
    this.pending.get(spec.name)?.close();
    this.pending.set(spec.name, callback);
    try {
      flow.context = await this.flowContext(spec, stored, callback.redirectUri);
      const scope = spec.oauth.scopes?.join(' ') ?? flow.context.scopesSupported;
      const started = await startAuthorization(flow.context.issuer, {
        ...(flow.context.metadata === undefined ? {} : { metadata: flow.context.metadata }),
        clientInformation: flow.context.client,
        redirectUrl: callback.redirectUri,
        state,
        ...(scope === undefined || scope === '' ? {} : { scope }),
        resource: flow.context.resource,
      });
      flow.verifier = started.codeVerifier;
      callback.arm(started.authorizationUrl.toString());
      return {
        startUrl: callback.startUrl,
        expiresAtMs: this.options.clock.nowMs() + this.limits.callbackTimeoutMs,
        done: callback.done,
      };
    } catch (error) {
      callback.close();
      if (error instanceof CodedError) throw error;
      throw new CodedError('MCP_AUTHORIZATION_REQUIRED', `the authorization server of ${spec.name} could not be used`, {
        field: 'server',
        cause: error,
      });
    }
  }

  /**
   * The start link was opened again after a callback was accepted: the browser that completed the authorization
   * may have been an agent's, logged in as someone else. Nothing this authorization obtained is kept.
   */
  private untrust(spec: McpServerSpec, flow: Flow): void {
    flow.tainted = true;
    this.options.logger?.warn({ mcp_server: spec.name }, 'mcp oauth start link opened twice: grant not kept');
    if (!flow.saved) return;
    flow.saved = false;
    // Still this flow's grant (or a refresh of it): another authorization of the server would have closed this
    // listener, and a closed listener reports nothing.
    try {
      const current = this.options.store.load(spec.name);
      if (current !== undefined) this.forgetTokens(spec.name, current);
    } catch {
      this.options.logger?.error({ mcp_server: spec.name }, 'mcp oauth grant could not be dropped (vault locked?)');
    }
  }

  /** Closes every listener still bound (broker stop). */
  close(): void {
    for (const callback of this.pending.values()) callback.close();
    this.pending.clear();
  }

  private async flowContext(
    spec: McpServerSpec,
    stored: McpOAuthGrant | undefined,
    redirectUri: string,
  ): Promise<FlowContext> {
    const url = spec.url ?? '';
    const fetchFn = this.fetch();
    const info = await discoverOAuthServerInfo(url, { fetchFn });
    const resourceMetadata = info.resourceMetadata;
    const fallback = resourceUrlFromServerUrl(url);
    if (
      resourceMetadata !== undefined &&
      !checkResourceAllowed({ requestedResource: fallback, configuredResource: resourceMetadata.resource })
    )
      throw new CodedError(
        'MCP_AUTHORIZATION_REQUIRED',
        `the resource metadata of ${spec.name} names another resource`,
        {
          field: 'server',
        },
      );
    const resource = resourceMetadata?.resource ?? fallback.href;
    const issuer = info.authorizationServerUrl;
    const metadata = info.authorizationServerMetadata;
    let client: OAuthClientInformationMixed;
    let registered = false;
    if (spec.oauth?.clientId !== undefined) client = { client_id: spec.oauth.clientId };
    else if (stored?.registered === true && stored.issuer === issuer && redirectsTo(stored.client, redirectUri))
      ({ client, registered } = stored);
    else {
      // The loopback port differs per authorization and many servers match redirect URIs exactly: register anew.
      client = await registerClient(issuer, {
        ...(metadata === undefined ? {} : { metadata }),
        clientMetadata: {
          client_name: spec.oauth?.clientName ?? 'Postern',
          redirect_uris: [redirectUri],
          grant_types: ['authorization_code', 'refresh_token'],
          response_types: ['code'],
          token_endpoint_auth_method: 'none',
        },
        fetchFn,
      });
      registered = true;
    }
    const scopesSupported = resourceMetadata?.scopes_supported?.join(' ');
    return {
      issuer,
      ...(metadata === undefined ? {} : { metadata }),
      resource,
      client,
      registered,
      redirectUri,
      ...(scopesSupported === undefined ? {} : { scopesSupported }),
    };
  }

  private async complete(spec: McpServerSpec, code: string, flow: Flow): Promise<boolean> {
    const context = flow.context;
    if (context === undefined || flow.verifier === '' || flow.tainted) return false;
    const tokens = await exchangeAuthorization(context.issuer, {
      ...(context.metadata === undefined ? {} : { metadata: context.metadata }),
      clientInformation: context.client,
      authorizationCode: code,
      codeVerifier: flow.verifier,
      redirectUri: context.redirectUri,
      resource: context.resource,
      fetchFn: this.fetch(),
    });
    if (flow.tainted) return false;
    this.options.store.save(spec.name, {
      version: 1,
      url: spec.url ?? '',
      issuer: context.issuer,
      ...(context.metadata === undefined ? {} : { metadata: context.metadata }),
      resource: context.resource,
      client: context.client,
      registered: context.registered,
      tokens,
      ...this.expiry(tokens),
    });
    flow.saved = true;
    this.options.logger?.info({ mcp_server: spec.name }, 'mcp oauth authorized');
    return true;
  }

  /** The OAuth fetch with this flow's per-request deadline. */
  private fetch(): FetchLike {
    const ms = this.limits.requestTimeoutMs;
    return (input, init) => {
      const timeout = AbortSignal.timeout(ms);
      const signal = init?.signal == null ? timeout : AbortSignal.any([init.signal, timeout]);
      return this.options.fetch(input, { ...init, signal });
    };
  }
}

/** One authorization in progress: what the callback's redemption needs, and whether it may still be trusted. */
interface Flow {
  context?: FlowContext;
  verifier: string;
  /** The start link was opened twice after the callback: nothing of this flow is stored or kept. */
  tainted: boolean;
  /** This flow stored a grant (dropped again when the flow turns out tainted). */
  saved: boolean;
}

/** What discovery and registration settled for one authorization. */
interface FlowContext {
  readonly issuer: string;
  readonly metadata?: AuthorizationServerMetadata;
  readonly resource: string;
  readonly client: OAuthClientInformationMixed;
  readonly registered: boolean;
  readonly redirectUri: string;
  readonly scopesSupported?: string;
}

function redirectsTo(client: OAuthClientInformationMixed, redirectUri: string): boolean {
  const uris = (client as { redirect_uris?: unknown }).redirect_uris;
  return Array.isArray(uris) && uris.includes(redirectUri);
}
