import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { registerUpstreamTools } from './upstream-tools.js';

/**
 * A local OAuth 2.1 authorization server and an MCP resource server that requires its tokens, both real HTTP on
 * 127.0.0.1 (tests of broker/channels/mcp/oauth-grants.ts). The AS serves RFC 8414 metadata, RFC 7591 /register,
 * /authorize that approves at once (302 to the redirect URI with code and state — the "person" consented), and
 * /token that checks the PKCE verifier (S256) and the resource, issuing access tokens and refresh tokens that carry
 * `canary`, so a test can look for them in every byte the broker wrote. A browser's `x-account` header on /authorize
 * stands for the account logged in at the authorization server (default `person`); `accountOf` says whose account
 * a token is for (an attacker's code redeemed by the broker shows up there). The resource server answers 401 with
 * `WWW-Authenticate: Bearer resource_metadata=…` to anything without a live access token.
 */
export interface OAuthServersOptions {
  /** Put inside every issued token, so a leak is findable by string search. */
  readonly canary: string;
  /** Access token lifetime (expires_in) in seconds; default 3600. */
  readonly accessTtlS?: number;
}

export interface OAuthServers {
  /** The MCP endpoint, `http://127.0.0.1:<port>/mcp`. */
  readonly mcpUrl: string;
  /** The authorization server's issuer URL. */
  readonly issuer: string;
  /** Refresh grants answered with new tokens. */
  refreshes(): number;
  /** Clients registered through /register. */
  registrations(): number;
  /** Token requests refused (bad verifier, bad code, refused refresh). */
  tokenRefusals(): number;
  /** The next refresh grants are answered `invalid_grant` (the AS revoked the refresh token). */
  refuseRefresh(): void;
  /** Every request the resource server received (any path), and the tools/call ones that passed the token check. */
  resourceRequests(): number;
  toolCalls(): Array<{ tool: string; authorization: string }>;
  /** The account (the `x-account` of the browser that consented) an access or refresh token was issued for. */
  accountOf(token: string): string | undefined;
  /** Authorization codes exchanged for tokens. */
  codesRedeemed(): number;
  /** Requests the resource server answered 401. */
  unauthorized(): number;
  close(): Promise<void>;
}

interface AsState {
  readonly canary: string;
  readonly accessTtlS: number;
  issuer: string;
  resource: string;
  readonly clients: Map<string, string[]>;
  readonly codes: Map<string, AsCode>;
  readonly access: Set<string>;
  readonly refresh: Set<string>;
  readonly accounts: Map<string, string>;
  redeemed: number;
  issued: number;
  refreshes: number;
  refusals: number;
  refuseRefresh: boolean;
}

interface AsCode {
  readonly clientId: string;
  readonly redirectUri: string;
  readonly challenge: string;
  readonly resource: string | null;
  readonly account: string;
}

interface ResourceState {
  requests: number;
  unauthorized: number;
  readonly calls: Array<{ tool: string; authorization: string }>;
  readonly sessions: Map<string, StreamableHTTPServerTransport>;
}

export async function startOAuthServers(options: OAuthServersOptions): Promise<OAuthServers> {
  const as: AsState = {
    canary: options.canary,
    accessTtlS: options.accessTtlS ?? 3600,
    issuer: '',
    resource: '',
    clients: new Map(),
    codes: new Map(),
    access: new Set(),
    refresh: new Set(),
    accounts: new Map(),
    redeemed: 0,
    issued: 0,
    refreshes: 0,
    refusals: 0,
    refuseRefresh: false,
  };
  const rs: ResourceState = { requests: 0, unauthorized: 0, calls: [], sessions: new Map() };
  const asServer = await listen((request, response) => handleAs(as, request, response));
  as.issuer = `http://127.0.0.1:${port(asServer)}`;
  const rsServer = await listen((request, response) => handleResource(as, rs, request, response));
  const rsBase = `http://127.0.0.1:${port(rsServer)}`;
  as.resource = `${rsBase}/mcp`;
  return {
    mcpUrl: as.resource,
    issuer: as.issuer,
    refreshes: () => as.refreshes,
    registrations: () => as.clients.size,
    tokenRefusals: () => as.refusals,
    refuseRefresh: () => {
      as.refuseRefresh = true;
    },
    resourceRequests: () => rs.requests,
    toolCalls: () => [...rs.calls],
    unauthorized: () => rs.unauthorized,
    accountOf: (token) => as.accounts.get(token),
    codesRedeemed: () => as.redeemed,
    close: async () => {
      await Promise.all([...rs.sessions.values()].map((t) => t.close()));
      await Promise.all([asServer, rsServer].map(stop));
    },
  };
}

async function listen(handler: (request: IncomingMessage, response: ServerResponse) => Promise<void>): Promise<Server> {
  const server = createServer((request, response) => {
    handler(request, response).catch(() => {
      if (!response.headersSent) send(response, 500, { error: 'server_error' });
      else response.destroy();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return server;
}

function port(server: Server): number {
  return (server.address() as AddressInfo).port;
}

async function stop(server: Server): Promise<void> {
  server.closeAllConnections();
  if (server.listening) await new Promise<void>((resolve) => server.close(() => resolve()));
}

async function handleAs(as: AsState, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const url = new URL(request.url ?? '/', as.issuer);
  if (url.pathname === '/.well-known/oauth-authorization-server') return send(response, 200, asMetadata(as));
  if (url.pathname === '/register' && request.method === 'POST') {
    const body = JSON.parse(await readBody(request)) as { redirect_uris?: string[]; client_name?: string };
    const clientId = `client-${randomUUID()}`;
    as.clients.set(clientId, body.redirect_uris ?? []);
    return send(response, 201, { ...body, client_id: clientId, client_id_issued_at: Math.floor(Date.now() / 1000) });
  }
  if (url.pathname === '/authorize') return authorize(as, url, accountOf(request), response);
  if (url.pathname === '/token' && request.method === 'POST')
    return token(as, new URLSearchParams(await readBody(request)), response);
  return send(response, 404, { error: 'not_found' });
}

function asMetadata(as: AsState): Record<string, unknown> {
  return {
    issuer: as.issuer,
    authorization_endpoint: `${as.issuer}/authorize`,
    token_endpoint: `${as.issuer}/token`,
    registration_endpoint: `${as.issuer}/register`,
    response_types_supported: ['code'],
    grant_types_supported: ['authorization_code', 'refresh_token'],
    code_challenge_methods_supported: ['S256'],
    token_endpoint_auth_methods_supported: ['none'],
  };
}

/** The person "consents" at once: a 302 back to the registered redirect URI with a one-time code and the state. */
function authorize(as: AsState, url: URL, account: string, response: ServerResponse): void {
  const q = url.searchParams;
  const clientId = q.get('client_id') ?? '';
  const redirectUri = q.get('redirect_uri') ?? '';
  if (!(as.clients.get(clientId) ?? []).includes(redirectUri) || q.get('code_challenge_method') !== 'S256')
    return send(response, 400, { error: 'invalid_request' });
  const code = randomBytes(16).toString('hex');
  const challenge = q.get('code_challenge') ?? '';
  as.codes.set(code, { clientId, redirectUri, challenge, resource: q.get('resource'), account });
  const to = new URL(redirectUri);
  to.searchParams.set('code', code);
  to.searchParams.set('state', q.get('state') ?? '');
  response.writeHead(302, { location: to.toString() }).end();
}

function token(as: AsState, form: URLSearchParams, response: ServerResponse): void {
  const refuse = (error: string): void => {
    as.refusals += 1;
    send(response, 400, { error });
  };
  if (form.get('grant_type') === 'authorization_code') {
    const code = as.codes.get(form.get('code') ?? '');
    as.codes.delete(form.get('code') ?? '');
    const verifier = form.get('code_verifier') ?? '';
    const challenge = createHash('sha256').update(verifier).digest('base64url');
    if (code === undefined || code.challenge !== challenge || code.redirectUri !== form.get('redirect_uri'))
      return refuse('invalid_grant');
    if (code.resource !== as.resource || form.get('resource') !== as.resource) return refuse('invalid_target');
    as.redeemed += 1;
    return send(response, 200, issue(as, code.account));
  }
  if (form.get('grant_type') === 'refresh_token') {
    const presented = form.get('refresh_token') ?? '';
    if (as.refuseRefresh || !as.refresh.delete(presented)) return refuse('invalid_grant');
    as.refreshes += 1;
    return send(response, 200, issue(as, as.accounts.get(presented) ?? ''));
  }
  return refuse('unsupported_grant_type');
}

function issue(as: AsState, account: string): Record<string, unknown> {
  as.issued += 1;
  const access = `at-${as.canary}-${as.issued}-${randomBytes(4).toString('hex')}`;
  const refresh = `rt-${as.canary}-${as.issued}-${randomBytes(4).toString('hex')}`;
  as.access.add(access);
  as.refresh.add(refresh);
  as.accounts.set(access, account);
  as.accounts.set(refresh, account);
  return { access_token: access, token_type: 'Bearer', expires_in: as.accessTtlS, refresh_token: refresh };
}

async function handleResource(
  as: AsState,
  rs: ResourceState,
  request: IncomingMessage,
  response: ServerResponse,
): Promise<void> {
  rs.requests += 1;
  const url = new URL(request.url ?? '/', as.resource);
  if (url.pathname.startsWith('/.well-known/oauth-protected-resource'))
    return send(response, 200, {
      resource: as.resource,
      authorization_servers: [as.issuer],
      scopes_supported: ['tools.read'],
    });
  if (url.pathname !== '/mcp') return send(response, 404, { error: 'not_found' });
  const authorization = request.headers.authorization ?? '';
  const bearer = authorization.startsWith('Bearer ') ? authorization.slice('Bearer '.length) : '';
  if (!as.access.has(bearer)) {
    rs.unauthorized += 1;
    response.setHeader(
      'www-authenticate',
      `Bearer resource_metadata="${new URL(as.resource).origin}/.well-known/oauth-protected-resource/mcp"`,
    );
    return send(response, 401, { error: 'invalid_token' });
  }
  const sessionId = request.headers['mcp-session-id'] as string | undefined;
  if (request.method !== 'POST') {
    const transport = sessionId === undefined ? undefined : rs.sessions.get(sessionId);
    if (transport === undefined) return send(response, 404, { error: 'no session' });
    return transport.handleRequest(request, response);
  }
  const body = JSON.parse(await readBody(request)) as unknown;
  const message = body as { method?: unknown; params?: { name?: unknown } };
  if (message.method === 'tools/call') rs.calls.push({ tool: String(message.params?.name ?? ''), authorization });
  const existing = sessionId === undefined ? undefined : rs.sessions.get(sessionId);
  if (existing !== undefined) return existing.handleRequest(request, response, body);
  if (!isInitializeRequest(body)) return send(response, 400, { error: 'no valid session' });
  const transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    onsessioninitialized: (id) => void rs.sessions.set(id, transport),
    onsessionclosed: (id) => void rs.sessions.delete(id),
  });
  const mcp = new McpServer({ name: 'postern-oauth-resource', version: '1.0.0' });
  registerUpstreamTools(mcp, { processTools: false });
  await mcp.connect(transport);
  await transport.handleRequest(request, response, body);
}

function accountOf(request: IncomingMessage): string {
  const account = request.headers['x-account'];
  return typeof account === 'string' && account !== '' ? account : 'person';
}

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    bytes += chunk.length;
    if (bytes > 1024 * 1024) throw new Error('body too large');
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function send(response: ServerResponse, status: number, value: unknown): void {
  response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value));
}
