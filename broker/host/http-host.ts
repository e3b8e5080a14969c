import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createNetServer, type AddressInfo, type Server as NetServer } from 'node:net';
import {
  brokerApiMethods,
  brokerApiReadMethods,
  hostHttpStatus,
  isDecisionMethod,
  type BrokerApiMethod,
  type HostErrorCode,
  type Reply,
} from '../contract/index.js';
import {
  bearerToken,
  mintAccessToken,
  mintSignInCode,
  OperatorSecrets,
  signInCodeAttemptsMax,
} from './access-token.js';
import type { ChangeFeed } from './change-feed.js';
import { guardConnections, type ConnectionCounts, type ConnectionGuard } from './connection-guard.js';
import type { OperatorHandlers } from './operator-handlers.js';
import { loadStaticAssets, type StaticAsset } from './static-assets.js';
import { webPassphraseRequired, type WebProof } from './web-proof.js';

export interface OperatorHttpHostOptions {
  handlers: OperatorHandlers;
  /**
   * What proves a person here (web-proof.ts): a session decides only once it presented the vault passphrase in this
   * run; the sign-in code alone never does.
   */
  proof: WebProof;
  /** The built renderer (dist/renderer). A missing bundle is reported, not fatal: the API still works. */
  rendererDir: string;
  /** 0 picks an ephemeral port. */
  port: number;
  /** Tests may fix the first sign-in token and code; the daemon always mints fresh ones. */
  token?: string;
  signInCode?: string;
  /**
   * Told the next sign-in URL and code whenever the current ones are spent: by a sign-in (each URL works once) or by
   * signInCodeAttemptsMax wrong codes. The daemon prints them on the operator's own terminal, so another tab or window
   * signs in without a restart.
   */
  onSignIn?: (next: SignInLink) => void;
  /**
   * Told each wrong code presented with the current URL: the daemon warns on its terminal, since a person who did not
   * mistype it learns that a program read the link. `attemptsLeft` 0: the URL is spent (onSignIn follows).
   */
  onWrongCode?: (attemptsLeft: number) => void;
  /** Tests shorten the timeouts; the daemon uses operatorHttpLimits. */
  limits?: Partial<OperatorHttpLimits>;
  /** The runtime's change feed, streamed at GET /api/events; without it that path is a 404 like any unknown method. */
  changes?: Pick<ChangeFeed, 'subscribe'>;
}

export interface OperatorHttpHost {
  readonly port: number;
  /** http://127.0.0.1:PORT */
  readonly origin: string;
  /**
   * The origin with `/?token=…`: opens the sign-in of one browser tab, once, together with signInCode. Print it once,
   * to the operator, and nowhere else.
   */
  readonly operatorUrl: string;
  /** The sign-in token; with the code it grants nothing but one exchange (POST /auth/session). */
  readonly token: string;
  /** The code printed beside operatorUrl (never in it): the person types it on the page. */
  readonly signInCode: string;
  /** The URL and code the next sign-in must use (the first ones until they are spent; then each sign-in rotates them). */
  currentSignIn(): SignInLink;
  readonly rendererBuilt: boolean;
  /** What the connection cap has done so far. */
  connections(): ConnectionCounts;
  /** GET /api/events streams open now. */
  eventStreams(): number;
  /** Stops accepting connections, lets in-flight requests finish (bounded), then resolves. */
  close(): Promise<void>;
}

/** A printed sign-in: the URL (its token can be read from a browser's command line) and the code typed beside it. */
export interface SignInLink {
  url: string;
  code: string;
}

/** How the daemon labels the code on its terminal: `Sign-in code: 1234-5678 …` (tests and benches read the line). */
export const signInCodeLabel = 'Sign-in code';

export const listenHost = '127.0.0.1';
export const closeGraceMs = 2_000;

export interface OperatorHttpLimits {
  /** Connections held at once; one page and a few programs need a handful. */
  connectionsMax: number;
  /** From a connection's first byte (or its previous response) to a complete header block. */
  headersTimeoutMs: number;
  /** For a whole request, body included. */
  requestTimeoutMs: number;
  /** A socket with no traffic at all in either direction for this long is closed. */
  idleTimeoutMs: number;
  keepAliveTimeoutMs: number;
  /** How often Node checks the two request timeouts; its default of 30 s would make them 30 s coarse. */
  connectionsCheckingIntervalMs: number;
  /** GET /api/events streams at once: well under connectionsMax, so open streams never lock the operator's calls out. */
  eventStreamsMax: number;
  /** A comment line this often on every stream: under idleTimeoutMs, so neither this host nor a proxy cuts a quiet stream. */
  eventHeartbeatMs: number;
  /** A stream whose unsent bytes pass this is dropped: a reader that stopped reading is not buffered for without end. */
  eventBufferedBytesMax: number;
}

export const operatorHttpLimits: Readonly<OperatorHttpLimits> = {
  connectionsMax: 64,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  idleTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
  connectionsCheckingIntervalMs: 500,
  eventStreamsMax: 8,
  eventHeartbeatMs: 15_000,
  eventBufferedBytesMax: 64 * 1024,
};

export const contentSecurityPolicy =
  "default-src 'self'; script-src 'self'; object-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/** Every answer of an operator surface, refusals included (the desktop's app:// handler sends the same). */
export const securityHeaders: Readonly<Record<string, string>> = {
  'Content-Security-Policy': contentSecurityPolicy,
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'X-Frame-Options': 'DENY',
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Resource-Policy': 'same-origin',
  // The sign-in page carries the session secret and API replies carry the broker's state: no cache keeps either.
  'Cache-Control': 'no-store',
};

/** An operator API request body is small JSON (a ticket and a reason at most). */
const apiBodyBytesMax = 64 * 1024;

/**
 * The headless operator host: the built renderer and the operator API on 127.0.0.1. Checks run in
 * this order for every request: Host header (DNS rebinding), a parseable path, the one-time
 * sign-in exchange, then the API behind `Authorization: Bearer <session secret>`; the renderer's
 * files are public (they are the published bundle and hold no state or secret).
 */
export async function startOperatorHttpHost(options: OperatorHttpHostOptions): Promise<OperatorHttpHost> {
  const token = options.token ?? mintAccessToken();
  const signInCode = options.signInCode ?? mintSignInCode();
  const secrets = new OperatorSecrets(token, signInCode);
  const limits = { ...operatorHttpLimits, ...options.limits };
  const assets = loadStaticAssets(options.rendererDir);
  const server = createServer({
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    connectionsCheckingInterval: limits.connectionsCheckingIntervalMs,
  });
  // Without a 'timeout' listener Node destroys the socket when it fires.
  server.setTimeout(limits.idleTimeoutMs);
  const guard = guardConnections(server, limits.connectionsMax);
  const streams = new Set<ServerResponse>();
  const events = { changes: options.changes, streams, limits };
  let port = 0;
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const notify: SignInNotices = {
      spent: () => options.onSignIn?.(signInLink(port, secrets)),
      wrongCode: (attemptsLeft) => options.onWrongCode?.(attemptsLeft),
    };
    handleRequest({
      req,
      res,
      port,
      secrets,
      guard,
      assets,
      handlers: options.handlers,
      proof: options.proof,
      notify,
      events,
    }).catch(() => {
      if (!res.headersSent) sendError(res, 'INTERNAL', 'The host failed while answering.');
      else res.destroy();
    });
  });
  const bound = await listenOnLoopbacks(server, options.port);
  port = bound.port;
  const origin = `http://${listenHost}:${port}`;
  return {
    port,
    origin,
    operatorUrl: `${origin}/?token=${token}`,
    token,
    signInCode,
    currentSignIn: () => signInLink(port, secrets),
    rendererBuilt: assets.has('/index.html'),
    connections: () => guard.counts(),
    eventStreams: () => streams.size,
    close: () => {
      // A stream never ends by itself: end them first, so close does not wait out the grace period.
      for (const stream of streams) stream.end();
      return closeListeners(server, bound.v6);
    },
  };
}

function signInLink(port: number, secrets: OperatorSecrets): SignInLink {
  return { url: `http://${listenHost}:${port}/?token=${secrets.currentToken}`, code: secrets.currentCode };
}

interface SignInNotices {
  /** The token and code were spent (a sign-in, or too many wrong codes): tell the operator the next ones. */
  spent: () => void;
  wrongCode: (attemptsLeft: number) => void;
}

interface RequestContext {
  req: IncomingMessage;
  res: ServerResponse;
  port: number;
  secrets: OperatorSecrets;
  notify: SignInNotices;
  guard: ConnectionGuard;
  assets: ReadonlyMap<string, StaticAsset>;
  handlers: OperatorHandlers;
  proof: WebProof;
  events: EventStreams;
}

interface EventStreams {
  changes: Pick<ChangeFeed, 'subscribe'> | undefined;
  streams: Set<ServerResponse>;
  limits: Pick<OperatorHttpLimits, 'eventStreamsMax' | 'eventHeartbeatMs' | 'eventBufferedBytesMax'>;
}

async function handleRequest(ctx: RequestContext): Promise<void> {
  const { req, res, port, secrets } = ctx;
  const rawUrl = req.url ?? '';
  if (!hostAllowed(req.headers.host, port)) {
    sendError(res, 'HOST_NOT_ALLOWED', 'Host header must be 127.0.0.1:PORT or localhost:PORT.', rawUrl);
    return;
  }
  const url = parseRequestTarget(rawUrl, port);
  if (url === undefined) {
    sendError(res, 'MALFORMED_PATH', 'The request path is not a valid path on this host.');
    return;
  }
  if (url.pathname === sessionPath) {
    await exchangeForSession(ctx);
    return;
  }
  const presented = url.searchParams.get('token');
  if (presented !== null) {
    openSignIn(ctx, url, presented);
    return;
  }
  if (url.pathname.startsWith('/api/')) {
    if (!secrets.sessionValid(bearerToken(req.headers.authorization))) {
      sendError(
        res,
        'UNAUTHENTICATED',
        'Not signed in: open the newest sign-in URL `postern daemon` printed on its terminal and type the code ' +
          'printed beside it. A tab keeps its session in memory only, so a reload or a new tab signs in again.',
        url.pathname,
      );
      return;
    }
    ctx.guard.hold(req.socket, res);
    if (url.pathname === eventsPath) serveEvents(ctx);
    else await serveApi(ctx, url.pathname.slice('/api/'.length));
    return;
  }
  if (url.pathname === provePath) {
    await proveSession(ctx);
    return;
  }
  serveAsset(ctx, url.pathname);
}

/**
 * Only origin-form targets ("/…") are paths here. The origin is put in front as text rather than
 * passed as a base, so `//[` is parsed as a path and not a (malformed) host: a target the URL
 * parser refuses is a 400, never a 500. A path that comes out starting with "//" (`//x`, `/.//x`,
 * `/\\x`) names nothing here and would read as another host if it were ever echoed into a
 * Location or a link, so it is refused too.
 */
function parseRequestTarget(rawUrl: string, port: number): URL | undefined {
  if (!rawUrl.startsWith('/')) return undefined;
  try {
    const url = new URL(`http://${listenHost}:${port}${rawUrl}`);
    return url.pathname.startsWith('//') ? undefined : url;
  } catch {
    return undefined;
  }
}

/** DNS-rebinding defence: a page on evil.example resolved to 127.0.0.1 still sends its own Host. */
function hostAllowed(host: string | undefined, port: number): boolean {
  if (host === undefined) return false;
  const normalized = host.toLowerCase();
  return normalized === `127.0.0.1:${port}` || normalized === `localhost:${port}`;
}

/** Pages and programs sign in here: POST {"token": T, "code": C} answers {ok, value: {session}} once. */
export const sessionPath = '/auth/session';

const usedMessage =
  'This sign-in URL was already used: each printed URL signs in one browser tab, once. The broker printed a new URL and ' +
  'code on its terminal when it was used; if that was not you, a program running as you read the link (from a ' +
  "browser's command line or the clipboard): sign in with the newest URL, type its code (do not copy it), and check " +
  'that the address bar shows exactly the printed address.';

/**
 * The printed URL in a browser: answered with the operator UI's own page, which takes the token out of the address
 * into its memory (renderer/src/api/page-session.ts) and asks for the code printed beside the URL. Nothing is spent:
 * the token alone signs nothing in, since opening the URL put it on a command line every process of the user reads.
 * A spent or foreign token is refused here already, so the person learns at once. Only at "/", where the UI's page
 * lives (its assets are relative to it), and only once the UI is built.
 */
function openSignIn(ctx: RequestContext, url: URL, presented: string): void {
  const { req, res, secrets } = ctx;
  if (req.method !== 'GET') {
    sendError(res, 'METHOD_NOT_ALLOWED', 'Open the sign-in URL with GET, in a browser.', url.pathname);
    return;
  }
  if (url.pathname !== '/') {
    sendError(res, 'NOT_FOUND', 'Open the sign-in URL as printed: the operator UI lives at "/".', url.pathname);
    return;
  }
  const page = ctx.assets.get('/index.html');
  if (page === undefined) {
    sendError(res, 'RENDERER_NOT_BUILT', 'The operator UI is not built: run `npm run build:renderer`.', url.pathname);
    return;
  }
  const state = secrets.tokenState(presented);
  if (state === 'used') sendError(res, 'SIGN_IN_USED', usedMessage, url.pathname);
  else if (state === 'wrong') sendError(res, 'UNAUTHENTICATED', wrongTokenMessage, url.pathname);
  else sendBody(res, 'GET', page.contentType, page.body);
}

const wrongTokenMessage = 'The token is not valid for this run of the broker.';

async function exchangeForSession(ctx: RequestContext): Promise<void> {
  const { req, res, secrets } = ctx;
  if (req.method !== 'POST') {
    res.setHeader('Allow', 'POST');
    sendError(res, 'METHOD_NOT_ALLOWED', `Use POST for ${sessionPath}.`, sessionPath);
    return;
  }
  const input = await readJsonWrite(req, res, sessionPath);
  if (input === undefined) return;
  const { token, code } = (input ?? {}) as { token?: unknown; code?: unknown };
  if (typeof token !== 'string' || typeof code !== 'string') {
    sendError(
      res,
      'INVALID_ARGUMENT',
      `The body must be {"token": "<the token from the printed URL>", "code": "<the sign-in code printed beside it>"}: ` +
        `${typeof token !== 'string' ? 'token' : 'code'} is missing or not a string.`,
      sessionPath,
    );
    return;
  }
  const exchanged = secrets.exchange(token, code);
  if (exchanged.ok) {
    ctx.notify.spent();
    sendJson(res, 200, { ok: true, value: { session: exchanged.session } });
  } else if (exchanged.reason === 'code_wrong') {
    ctx.notify.wrongCode(exchanged.attemptsLeft);
    if (exchanged.attemptsLeft === 0) ctx.notify.spent();
    const code = exchanged.attemptsLeft === 0 ? 'SIGN_IN_CODE_SPENT' : 'SIGN_IN_CODE_WRONG';
    sendError(res, code, codeWrongMessage(exchanged.attemptsLeft), sessionPath);
  } else if (exchanged.reason === 'used') sendError(res, 'SIGN_IN_USED', usedMessage, sessionPath);
  else sendError(res, 'UNAUTHENTICATED', wrongTokenMessage, sessionPath);
}

function codeWrongMessage(attemptsLeft: number): string {
  const spent =
    attemptsLeft === 0
      ? `That was wrong code ${signInCodeAttemptsMax} of ${signInCodeAttemptsMax} for this URL, so it is spent: the ` +
        'daemon printed a new URL and code on its terminal.'
      : `This URL takes ${attemptsLeft} more ${attemptsLeft === 1 ? 'try' : 'tries'}.`;
  return (
    `The sign-in code does not match the one printed beside this URL. ${spent} If you typed it right, a program on ` +
    "this machine read the link (a browser's command line is readable by every process of your user)."
  );
}

/** The change feed as Server-Sent Events, behind the same session secret as every /api call. */
export const eventsPath = '/api/events';

/**
 * GET /api/events: one `data: {"seq":N,"topics":[…]}` line per coalesced notice (broker/host/change-feed.ts) and a
 * comment line every eventHeartbeatMs. A notice names views, never a ticket, a session or a value: the page re-reads
 * through the API. Bounded three ways: streams at once (EVENT_STREAMS_LIMIT), unsent bytes per stream (a stalled
 * reader is cut), and the host's close ends every stream.
 */
function serveEvents(ctx: RequestContext): void {
  const { req, res, events } = ctx;
  if (req.method !== 'GET') {
    res.setHeader('Allow', 'GET');
    sendError(res, 'METHOD_NOT_ALLOWED', `Use GET for ${eventsPath}.`, eventsPath);
    return;
  }
  if (events.changes === undefined) {
    sendError(res, 'NOT_FOUND', 'This host has no change feed.', eventsPath);
    return;
  }
  if (events.streams.size >= events.limits.eventStreamsMax) {
    sendError(
      res,
      'EVENT_STREAMS_LIMIT',
      `At most ${events.limits.eventStreamsMax} event streams at once; close another tab.`,
      eventsPath,
    );
    return;
  }
  const keptUp = (): boolean => res.writableLength <= events.limits.eventBufferedBytesMax;
  const subscribed = events.changes.subscribe({
    notice: (notice) => {
      res.write(`data: ${JSON.stringify({ seq: notice.seq, topics: notice.topics })}\n\n`);
      return keptUp();
    },
    dropped: (reason) => (reason === 'slow' ? res.destroy() : res.end()),
  });
  if (!subscribed.ok) {
    sendError(res, 'EVENT_STREAMS_LIMIT', `The change feed is ${subscribed.reason}.`, eventsPath);
    return;
  }
  events.streams.add(res);
  // Connection: close: once a stream ends its socket goes too, instead of idling in keep-alive.
  res.writeHead(200, {
    ...securityHeaders,
    'Content-Type': 'text/event-stream; charset=utf-8',
    Connection: 'close',
    'X-Accel-Buffering': 'no',
  });
  res.write(': ready\n\n');
  const heartbeat = setInterval(() => {
    res.write(': \n\n');
    if (!keptUp()) res.destroy();
  }, events.limits.eventHeartbeatMs);
  res.once('close', () => {
    clearInterval(heartbeat);
    subscribed.unsubscribe();
    events.streams.delete(res);
  });
}

/**
 * /api/<method> for every operator method in the contract's list: POST with a JSON body (the
 * input), or GET with an empty input for the read-only methods. The handler parses the input.
 */
async function serveApi(ctx: RequestContext, name: string): Promise<void> {
  const { req, res } = ctx;
  if (!(brokerApiMethods as readonly string[]).includes(name)) {
    sendError(res, 'NOT_FOUND', `No operator API method "${name}".`, '/api/');
    return;
  }
  const method = name as BrokerApiMethod;
  const allowed = brokerApiReadMethods.has(method) ? 'GET, POST' : 'POST';
  if (req.method !== 'POST' && !(req.method === 'GET' && brokerApiReadMethods.has(method))) {
    res.setHeader('Allow', allowed);
    sendError(res, 'METHOD_NOT_ALLOWED', `Use ${allowed} for /api/${name}.`, '/api/');
    return;
  }
  let input: unknown = {};
  if (req.method === 'POST') {
    const read = await readJsonWrite(req, res, '/api/');
    if (read === undefined) return;
    input = read;
  }
  const reply = await decideOrRead(ctx, method, input);
  sendJson(res, reply.ok ? 200 : replyErrorStatus(reply.error.code), reply);
}

/**
 * Reaching here took the session secret exchanged once for the printed token and code: enough to read, never to
 * decide (web-proof.ts). A decision runs only for a session that presented the vault passphrase in this run, and
 * only while a passphrase can prove anyone (none read from a file); the page's unlock and the vault's creation present
 * the passphrase themselves and prove the session when they succeed.
 */
async function decideOrRead(ctx: RequestContext, method: BrokerApiMethod, input: unknown): Promise<Reply<unknown>> {
  const { handlers, proof, secrets } = ctx;
  const session = bearerToken(ctx.req.headers.authorization);
  if (!isDecisionMethod(method)) return handlers[method](input, { surface: 'web', auth: 'operator_session' });
  const person = { surface: 'web', auth: 'web_passphrase' } as const;
  if (method === 'vault.init') {
    // No passphrase exists before this call: the session that chooses it knows it.
    const reply = await handlers[method](input, person);
    if (reply.ok && proof.provable()) secrets.markProven(session);
    return reply;
  }
  if (method === 'vault.unlock') {
    const reply = await proof.gated(() => handlers[method](input, person));
    if (reply.ok && proof.provable()) secrets.markProven(session);
    return reply;
  }
  const refused = proof.refusal(method);
  if (refused !== undefined) return refused;
  if (!secrets.sessionProven(session)) return webPassphraseRequired(method);
  return handlers[method](input, person);
}

/** A signed-in tab presents the vault passphrase here: POST {"passphrase": P} → {ok, value: {proven: true}}. */
export const provePath = '/auth/prove';

async function proveSession(ctx: RequestContext): Promise<void> {
  const { req, res, secrets } = ctx;
  const session = bearerToken(req.headers.authorization);
  if (!secrets.sessionValid(session)) {
    sendError(res, 'UNAUTHENTICATED', 'Sign in first: the passphrase proves a person for a signed-in tab.', provePath);
    return;
  }
  if (req.method !== 'POST') {
    res.setHeader('Allow', 'POST');
    sendError(res, 'METHOD_NOT_ALLOWED', `Use POST for ${provePath}.`, provePath);
    return;
  }
  ctx.guard.hold(req.socket, res);
  const input = await readJsonWrite(req, res, provePath);
  if (input === undefined) return;
  const { passphrase } = (input ?? {}) as { passphrase?: unknown };
  if (typeof passphrase !== 'string' || passphrase === '') {
    sendError(
      res,
      'INVALID_ARGUMENT',
      'The body must be {"passphrase": "<the vault passphrase>"}: passphrase is missing or empty.',
      provePath,
    );
    return;
  }
  const reply = await ctx.proof.prove(passphrase);
  if (reply.ok) secrets.markProven(session);
  sendJson(res, reply.ok ? 200 : replyErrorStatus(reply.error.code), reply);
}

/**
 * Why a state-changing call must be refused as cross-site, or undefined. There is no cookie to
 * ride along any more, so this is a second wall: a write must be JSON (a cross-origin JSON POST
 * needs a CORS preflight this host never grants), and a browser's Origin / Sec-Fetch-Site must say
 * it came from this very origin. Every page on 127.0.0.1, whatever its port, is the same *site*.
 */
export function crossSiteWrite(req: Pick<IncomingMessage, 'headers'>): string | undefined {
  const type = (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase();
  if (type !== 'application/json') return 'Operator API writes must be sent as application/json.';
  const fetchSite = req.headers['sec-fetch-site'];
  if (fetchSite !== undefined && fetchSite !== 'same-origin' && fetchSite !== 'none')
    return `A ${fetchSite} request cannot change the broker.`;
  const origin = req.headers.origin;
  if (origin !== undefined && origin !== `http://${req.headers.host ?? ''}`)
    return 'A request from another origin cannot change the broker.';
  return undefined;
}

/** A state-changing call's parsed JSON body, or undefined once a refusal has been sent. */
async function readJsonWrite(req: IncomingMessage, res: ServerResponse, pathname: string): Promise<unknown> {
  const crossSite = crossSiteWrite(req);
  if (crossSite !== undefined) {
    sendError(res, 'CROSS_SITE_REFUSED', crossSite, pathname);
    return undefined;
  }
  const body = await readBody(req, apiBodyBytesMax);
  if (body === undefined) {
    sendError(res, 'PAYLOAD_LIMIT', `The request body is over ${apiBodyBytesMax} bytes.`, pathname);
    return undefined;
  }
  try {
    return body.length === 0 ? {} : (JSON.parse(body.toString('utf8')) as unknown);
  } catch {
    sendError(res, 'INVALID_ARGUMENT', 'The request body is not JSON.', pathname);
    return undefined;
  }
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
    sendError(res, 'METHOD_NOT_ALLOWED', 'Assets are read-only.', pathname);
    return;
  }
  if (assets.size === 0) {
    sendError(
      res,
      'RENDERER_NOT_BUILT',
      'The operator UI is not built: run `npm run build:renderer`. The API works.',
      pathname,
    );
    return;
  }
  const asset = assets.get(pathname === '/' ? '/index.html' : pathname);
  if (asset === undefined) {
    sendError(res, 'NOT_FOUND', 'Not found.', pathname);
    return;
  }
  sendBody(res, req.method, asset.contentType, asset.body);
}

function sendBody(res: ServerResponse, method: string | undefined, contentType: string, body: Buffer): void {
  res.writeHead(200, { ...securityHeaders, 'Content-Type': contentType, 'Content-Length': String(body.length) });
  res.end(method === 'HEAD' ? undefined : body);
}

/**
 * API and program sign-in paths get a JSON Reply; everything else a short plain-text line a person can read.
 * The status comes with the code from the registry, so one code never answers with two statuses.
 */
function sendError(res: ServerResponse, code: HostErrorCode, message: string, pathname = '/'): void {
  const status = hostHttpStatus[code];
  if (pathname.startsWith('/api/') || pathname === sessionPath || pathname === provePath) {
    sendJson(res, status, { ok: false, error: { code, message } } satisfies Reply<never>);
    return;
  }
  const body = `${status} ${code}: ${message}\n`;
  res.writeHead(status, {
    ...securityHeaders,
    'Content-Type': 'text/plain; charset=utf-8',
    'Content-Length': String(Buffer.byteLength(body)),
  });
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

/** How many random ports are tried for one free on both loopbacks (a port free on 127.0.0.1 may be taken on ::1). */
const freePortTriesMax = 8;

/**
 * Listens on 127.0.0.1:PORT and holds [::1]:PORT too, so `localhost:PORT` reaches this host whichever address the
 * browser tries first, and no other program can serve a look-alike page there (a program that read the printed link
 * could otherwise bind [::1]:PORT, or [::]:PORT IPv6-only, and collect the code a person types at localhost:PORT).
 * The IPv6 socket hands each connection to the same HTTP server, so every check runs as on 127.0.0.1. A machine
 * without an IPv6 loopback has nothing there to hold (nobody can bind it either). With port 0 another random port is
 * tried when ::1 already has the chosen one; a port asked for by number that is taken on ::1 is refused, like one
 * taken on 127.0.0.1 (the error's `address` says which).
 */
async function listenOnLoopbacks(server: Server, port: number): Promise<{ port: number; v6: NetServer | undefined }> {
  for (let tries = 1; ; tries += 1) {
    const chosen = await listen(server, port);
    try {
      return { port: chosen, v6: await holdIpv6Loopback(server, chosen) };
    } catch (error) {
      await closeServer(server);
      const inUse = (error as NodeJS.ErrnoException).code === 'EADDRINUSE';
      if (port !== 0 || !inUse || tries >= freePortTriesMax) throw error;
    }
  }
}

export const listenHostV6 = '::1';

function holdIpv6Loopback(server: Server, port: number): Promise<NetServer | undefined> {
  // noDelay as the HTTP server's own listener sets it (node:http's default), so both loopbacks answer alike.
  const v6 = createNetServer({ noDelay: true }, (socket) => server.emit('connection', socket));
  return new Promise((resolve, reject) => {
    v6.once('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'EADDRNOTAVAIL' || error.code === 'EAFNOSUPPORT') resolve(undefined);
      else reject(error);
    });
    v6.listen({ port, host: listenHostV6, ipv6Only: true, exclusive: true }, () => resolve(v6));
  });
}

/**
 * Stops both listeners; in-flight requests get closeGraceMs, then every connection is ended — those that came in on
 * ::1 too. They belong to the HTTP server (its checks and timeouts), but its own close stops waiting once its own
 * listener is closed, and stops the header and request timeouts with it: without one grace over both, a connection
 * on ::1 trickling a header byte now and then would hold the close (and the daemon's shutdown) for ever.
 */
async function closeListeners(server: Server, v6: NetServer | undefined): Promise<void> {
  const force = setTimeout(() => server.closeAllConnections(), closeGraceMs);
  try {
    await Promise.all([closeServer(server), closeNetServer(v6)]);
  } finally {
    clearTimeout(force);
  }
}

function closeNetServer(server: NetServer | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (server?.listening !== true) {
      resolve();
      return;
    }
    // Its connections belong to the HTTP server, which ends them; this stops listening and waits for them to go.
    server.close(() => resolve());
  });
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
