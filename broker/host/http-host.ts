import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { brokerApiMethods, brokerApiReadMethods, type BrokerApiMethod, type Reply } from '../contract/index.js';
import { bearerToken, mintAccessToken, parseCookies, tokensEqual } from './access-token.js';
import type { HostErrorCode } from './host-error-codes.js';
import type { OperatorHandlers } from './operator-handlers.js';
import { loadStaticAssets, type StaticAsset } from './static-assets.js';

export interface OperatorHttpHostOptions {
  handlers: OperatorHandlers;
  /** The built renderer (dist/renderer). A missing bundle is reported, not fatal: the API still works. */
  rendererDir: string;
  /** 0 picks an ephemeral port. */
  port: number;
  /** Tests may fix the token; the daemon always mints a fresh one. */
  token?: string;
}

export interface OperatorHttpHost {
  readonly port: number;
  /** http://127.0.0.1:PORT */
  readonly origin: string;
  /** The origin with `/?token=…`. A secret: print it once, to the operator, and nowhere else. */
  readonly operatorUrl: string;
  readonly token: string;
  readonly rendererBuilt: boolean;
  /** Stops accepting connections, lets in-flight requests finish (bounded), then resolves. */
  close(): Promise<void>;
}

export const listenHost = '127.0.0.1';
export const headersTimeoutMs = 10_000;
export const requestTimeoutMs = 30_000;
export const keepAliveTimeoutMs = 5_000;
export const closeGraceMs = 2_000;

export const contentSecurityPolicy =
  "default-src 'self'; script-src 'self'; object-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

const securityHeaders: Readonly<Record<string, string>> = {
  'Content-Security-Policy': contentSecurityPolicy,
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'X-Frame-Options': 'DENY',
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Resource-Policy': 'same-origin',
  // Everything here is behind the per-run token, so nothing may outlive the session in a cache.
  'Cache-Control': 'no-store',
};

/** An operator API request body is small JSON (a ticket and a reason at most). */
const apiBodyBytesMax = 64 * 1024;

/**
 * The headless operator host: the built renderer and the operator API on 127.0.0.1, behind a
 * per-run token. Checks run in this order for every request: Host header (DNS rebinding), one-run
 * token exchange, session cookie or bearer token, then routing.
 */
export async function startOperatorHttpHost(options: OperatorHttpHostOptions): Promise<OperatorHttpHost> {
  const token = options.token ?? mintAccessToken();
  const assets = loadStaticAssets(options.rendererDir);
  const server = createServer({ headersTimeout: headersTimeoutMs, requestTimeout: requestTimeoutMs, keepAliveTimeout: keepAliveTimeoutMs });
  let port = 0;
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    handleRequest({ req, res, port, token, assets, handlers: options.handlers }).catch(() => {
      if (!res.headersSent) sendError(res, 500, 'INTERNAL', 'The host failed while answering.');
      else res.destroy();
    });
  });
  port = await listen(server, options.port);
  const origin = `http://${listenHost}:${port}`;
  return {
    port,
    origin,
    operatorUrl: `${origin}/?token=${token}`,
    token,
    rendererBuilt: assets.has('/index.html'),
    close: () => closeServer(server),
  };
}

interface RequestContext {
  req: IncomingMessage;
  res: ServerResponse;
  port: number;
  token: string;
  assets: ReadonlyMap<string, StaticAsset>;
  handlers: OperatorHandlers;
}

async function handleRequest(ctx: RequestContext): Promise<void> {
  const { req, res, port, token } = ctx;
  const rawUrl = req.url ?? '';
  if (!hostAllowed(req.headers.host, port)) {
    sendError(res, 421, 'HOST_NOT_ALLOWED', 'Host header must be 127.0.0.1:PORT or localhost:PORT.', rawUrl);
    return;
  }
  if (!rawUrl.startsWith('/')) {
    sendError(res, 404, 'NOT_FOUND', 'Not found.');
    return;
  }
  const url = new URL(rawUrl, `http://${listenHost}:${port}`);
  const presented = url.searchParams.get('token');
  if (presented !== null) {
    exchangeToken(ctx, url, presented);
    return;
  }
  if (!authenticated(req, port, token)) {
    sendError(res, 401, 'UNAUTHENTICATED', 'Not signed in: open the URL that `postern daemon` printed.', url.pathname);
    return;
  }
  if (url.pathname.startsWith('/api/')) {
    await serveApi(ctx, url.pathname.slice('/api/'.length));
    return;
  }
  serveAsset(ctx, url.pathname);
}

/** DNS-rebinding defence: a page on evil.example resolved to 127.0.0.1 still sends its own Host. */
function hostAllowed(host: string | undefined, port: number): boolean {
  if (host === undefined) return false;
  const normalized = host.toLowerCase();
  return normalized === `127.0.0.1:${port}` || normalized === `localhost:${port}`;
}

/** Cookies ignore ports, so the name carries it: two daemons on one machine never clobber each other. */
function sessionCookieName(port: number): string {
  return `postern_session_${port}`;
}

/** The one-run token becomes an HttpOnly cookie, and a redirect takes it out of the address bar. */
function exchangeToken(ctx: RequestContext, url: URL, presented: string): void {
  const { req, res, port, token } = ctx;
  if (req.method !== 'GET' || !tokensEqual(token, presented)) {
    sendError(res, 401, 'UNAUTHENTICATED', 'The token is not valid for this run of the broker.', url.pathname);
    return;
  }
  url.searchParams.delete('token');
  const location = url.pathname + url.search;
  res.writeHead(303, {
    ...securityHeaders,
    'Set-Cookie': `${sessionCookieName(port)}=${token}; HttpOnly; SameSite=Strict; Path=/`,
    Location: location,
    'Content-Length': '0',
  });
  res.end();
}

function authenticated(req: IncomingMessage, port: number, token: string): boolean {
  const fromCookie = parseCookies(req.headers.cookie).get(sessionCookieName(port));
  if (fromCookie !== undefined && tokensEqual(token, fromCookie)) return true;
  const fromHeader = bearerToken(req.headers.authorization);
  return fromHeader !== undefined && tokensEqual(token, fromHeader);
}

/**
 * /api/<method> for every operator method in the contract's list: POST with a JSON body (the
 * input), or GET with an empty input for the read-only methods. The handler parses the input.
 */
async function serveApi(ctx: RequestContext, name: string): Promise<void> {
  const { req, res } = ctx;
  if (!(brokerApiMethods as readonly string[]).includes(name)) {
    sendError(res, 404, 'NOT_FOUND', `No operator API method "${name}".`, '/api/');
    return;
  }
  const method = name as BrokerApiMethod;
  const allowed = brokerApiReadMethods.has(method) ? 'GET, POST' : 'POST';
  if (req.method !== 'POST' && !(req.method === 'GET' && brokerApiReadMethods.has(method))) {
    res.setHeader('Allow', allowed);
    sendError(res, 405, 'METHOD_NOT_ALLOWED', `Use ${allowed} for /api/${name}.`, '/api/');
    return;
  }
  let input: unknown = {};
  if (req.method === 'POST') {
    const crossSite = crossSiteWrite(req);
    if (crossSite !== undefined) {
      sendError(res, 403, 'CROSS_SITE_REFUSED', crossSite, '/api/');
      return;
    }
    const body = await readBody(req, apiBodyBytesMax);
    if (body === undefined) {
      sendError(res, 413, 'PAYLOAD_LIMIT', `The request body is over ${apiBodyBytesMax} bytes.`, '/api/');
      return;
    }
    try {
      input = body.length === 0 ? {} : (JSON.parse(body.toString('utf8')) as unknown);
    } catch {
      sendError(res, 400, 'INVALID_ARGUMENT', 'The request body is not JSON.', '/api/');
      return;
    }
  }
  const reply = await ctx.handlers[method](input);
  sendJson(res, reply.ok ? 200 : replyErrorStatus(reply.error.code), reply);
}

/**
 * Why a state-changing call must be refused as cross-site, or undefined. The session cookie is
 * SameSite=Strict, but every page on 127.0.0.1 — any port — is the same *site*, so a page an agent
 * serves on another local port could otherwise POST a "simple" request (text/plain, no preflight)
 * that carries the cookie. So a write must be JSON (a cross-origin JSON POST needs a CORS
 * preflight this host never grants), and a browser's Origin / Sec-Fetch-Site must say it came from
 * this very origin.
 */
export function crossSiteWrite(req: Pick<IncomingMessage, 'headers'>): string | undefined {
  const type = (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase();
  if (type !== 'application/json') return 'Operator API writes must be sent as application/json.';
  const fetchSite = req.headers['sec-fetch-site'];
  if (fetchSite !== undefined && fetchSite !== 'same-origin' && fetchSite !== 'none') return `A ${fetchSite} request cannot change the broker.`;
  const origin = req.headers.origin;
  if (origin !== undefined && origin !== `http://${req.headers.host ?? ''}`) return 'A request from another origin cannot change the broker.';
  return undefined;
}

/** The body, or undefined once it passes the limit (the rest is not read). */
async function readBody(req: IncomingMessage, bytesMax: number): Promise<Buffer | undefined> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of req) {
    const buffer = chunk as Buffer;
    total += buffer.length;
    if (total > bytesMax) return undefined;
    chunks.push(buffer);
  }
  return Buffer.concat(chunks);
}

function replyErrorStatus(code: string): number {
  if (code === 'INVALID_ARGUMENT') return 400;
  if (code === 'NOT_FOUND') return 404;
  if (code === 'INTERNAL') return 500;
  return 409;
}

function serveAsset(ctx: RequestContext, pathname: string): void {
  const { req, res, assets } = ctx;
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.setHeader('Allow', 'GET, HEAD');
    sendError(res, 405, 'METHOD_NOT_ALLOWED', 'Assets are read-only.', pathname);
    return;
  }
  if (assets.size === 0) {
    sendError(res, 503, 'RENDERER_NOT_BUILT', 'The operator UI is not built: run `npm run build:renderer`. The API works.', pathname);
    return;
  }
  const asset = assets.get(pathname === '/' ? '/index.html' : pathname);
  if (asset === undefined) {
    sendError(res, 404, 'NOT_FOUND', 'Not found.', pathname);
    return;
  }
  res.writeHead(200, { ...securityHeaders, 'Content-Type': asset.contentType, 'Content-Length': String(asset.body.length) });
  res.end(req.method === 'HEAD' ? undefined : asset.body);
}

/** API paths get a JSON Reply; everything else a short plain-text line a person can read. */
function sendError(res: ServerResponse, status: number, code: HostErrorCode, message: string, pathname = '/'): void {
  if (pathname.startsWith('/api/')) {
    sendJson(res, status, { ok: false, error: { code, message } } satisfies Reply<never>);
    return;
  }
  const body = `${status} ${code}: ${message}\n`;
  res.writeHead(status, { ...securityHeaders, 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': String(Buffer.byteLength(body)) });
  res.end(body);
}

function sendJson(res: ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(status, {
    ...securityHeaders,
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': String(Buffer.byteLength(body)),
  });
  res.end(body);
}

function listen(server: Server, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (error: Error): void => reject(error);
    server.once('error', onError);
    server.listen({ port, host: listenHost, exclusive: true }, () => {
      server.off('error', onError);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    if (!server.listening) {
      resolve();
      return;
    }
    const force = setTimeout(() => server.closeAllConnections(), closeGraceMs);
    server.close(() => {
      clearTimeout(force);
      resolve();
    });
    server.closeIdleConnections();
  });
}
