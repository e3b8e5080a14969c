import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * How one authorization ended: `authorized` / `failed` after the person's callback (the code was or was not
 * exchanged and stored), `refused` (the authorization server answered the person's browser with an `error=`),
 * `link_reused` (the start link was opened a second time: someone else has it, the authorization is abandoned),
 * `expired` (the window ended first), `closed` (replaced by another authorization, or the broker stopped).
 */
export const callbackOutcomes = ['authorized', 'failed', 'refused', 'link_reused', 'expired', 'closed'] as const;
export type CallbackOutcome = (typeof callbackOutcomes)[number];

export interface LoopbackCallbackOptions {
  /** The `state` sent with the authorization request; a callback must carry exactly it (and the cookie). */
  readonly state: string;
  /** The authorization's window: the listener stays bound until then, and closes then even if nothing came. */
  readonly timeoutMs: number;
  /** Runs for the person's callback before the browser is answered; true: the grant was stored. */
  readonly complete: (code: string) => Promise<boolean>;
  /** The start link was opened again after the person's callback was accepted: the grant cannot be trusted. */
  readonly reusedAfterCallback?: () => void;
}

export interface LoopbackCallback {
  /** `http://127.0.0.1:<port>/callback`: RFC 8252 §7.3, a loopback IP literal, any port. */
  readonly redirectUri: string;
  /** `http://127.0.0.1:<port>/start?n=<nonce>`: what the person opens; it works once (see listenForCallback). */
  readonly startUrl: string;
  /** Gives /start the authorization server's URL (known only after registration, which needs redirectUri). */
  arm(authorizationUrl: string): void;
  /** Settles once, with how the authorization ended; the listener may stay bound after it (until the window ends). */
  readonly done: Promise<CallbackOutcome>;
  close(): void;
}

const startPath = '/start';
const callbackPath = '/callback';
/** A code, state or nonce longer than this is not one we or an authorization server send; refused as such. */
const paramCharsMax = 2_048;
/** Browser and agent connections together; a person's browser needs a few. */
const connectionsMax = 16;
/** A request's headers (the cookie included); far above what a browser sends here. */
const headerBytesMax = 8 * 1024;
/** A connection that has not sent its whole request by then is dropped (a slow client holds no slot for long). */
const requestMs = 10_000;

/**
 * The redirect target of one authorization, bound to the person's browser. Any local process can reach a loopback
 * port, and the authorization server's URL (with `state` and the PKCE challenge) is readable wherever the browser
 * leaves it (history, the argv of xdg-open, the selection). So `state` alone cannot tell the person's callback from
 * an agent's: an agent could start its own authorization with that URL, logged in as itself, and deliver its code
 * first — the broker would seal a grant for the agent's account (login CSRF). Hence:
 *
 * - The person opens `startUrl`, not the authorization server's URL. Its first GET sets a fresh random session cookie
 *   (HttpOnly, SameSite=Lax, no expiry) and redirects to the authorization server. Any later GET answers that the
 *   link was used — someone else has it — and abandons the authorization (`link_reused`); after the person's
 *   callback it makes the owner drop the grant (`reusedAfterCallback`): whose browser completed it is unknown.
 * - `/callback` is accepted only with that cookie and the matching state (constant-time). Anything else is a 400
 *   that changes nothing: an agent's `error=` cannot end the person's authorization. With the cookie, `error=` is
 *   the person's refusal.
 * - One callback is redeemed. The listener stays bound on 127.0.0.1 for the whole window, before and after the
 *   callback, so no other process can take the port and answer the person's browser in Postern's name.
 */
export async function listenForCallback(options: LoopbackCallbackOptions): Promise<LoopbackCallback> {
  let settle: (how: CallbackOutcome) => void = () => undefined;
  const done = new Promise<CallbackOutcome>((resolve) => {
    settle = resolve;
  });
  const nonce = randomBytes(32).toString('base64url');
  const flow: Flow = {
    options,
    expectedState: digest(options.state),
    expectedNonce: digest(nonce),
    cookieName: '',
    phase: 'waiting',
    settle: (how) => settle(how),
  };
  const server = createServer({ maxHeaderSize: headerBytesMax, requestTimeout: requestMs }, (request, response) => {
    const path = new URL(request.url ?? '/', 'http://127.0.0.1').pathname;
    // Refused without ending anything: any local process can reach the port, and ending on its noise would let an
    // agent block a person's authorization. The window bounds how long the listener lives.
    if (request.method !== 'GET') return reply(response, 400, notOurs);
    if (path === startPath) return start(flow, request, response);
    if (path === callbackPath) return callback(flow, request, response);
    return reply(response, 400, notOurs);
  });
  server.maxConnections = connectionsMax;
  const close = (how: CallbackOutcome): void => {
    clearTimeout(timer);
    end(flow, how);
    if (!server.listening) return;
    server.close();
    server.closeIdleConnections();
  };
  const timer = setTimeout(() => close('expired'), options.timeoutMs);
  timer.unref();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  flow.cookieName = `postern_oauth_${port}`;
  return {
    redirectUri: `http://127.0.0.1:${port}${callbackPath}`,
    startUrl: `http://127.0.0.1:${port}${startPath}?n=${nonce}`,
    arm: (url) => {
      flow.authorizationUrl = url;
    },
    done,
    close: () => close('closed'),
  };
}

/** One listener's state. */
interface Flow {
  readonly options: LoopbackCallbackOptions;
  readonly expectedState: Buffer;
  readonly expectedNonce: Buffer;
  /** Per port: browsers send a 127.0.0.1 cookie to every port, so two listeners' cookies must not collide. */
  cookieName: string;
  authorizationUrl?: string;
  /** The digest of the cookie value /start gave the first browser that opened it. */
  session?: Buffer;
  /** waiting: for the person's callback; accepted: it came (being redeemed or done); over: ended otherwise. */
  phase: 'waiting' | 'accepted' | 'over';
  readonly settle: (how: CallbackOutcome) => void;
}

function end(flow: Flow, how: CallbackOutcome): void {
  if (flow.phase === 'waiting') flow.phase = 'over';
  flow.settle(how);
}

/** GET /start: the first opening binds the authorization to that browser; any later one abandons it. */
function start(flow: Flow, request: IncomingMessage, response: ServerResponse): void {
  if (!hasParam(request, 'n', flow.expectedNonce)) return reply(response, 400, notOurs);
  if (flow.authorizationUrl === undefined) return reply(response, 503, 'Postern is not ready yet; reload in a moment.');
  if (flow.session !== undefined) {
    if (flow.phase === 'accepted') flow.options.reusedAfterCallback?.();
    end(flow, 'link_reused');
    return reply(response, 409, linkUsed);
  }
  if (flow.phase !== 'waiting') return reply(response, 410, 'This authorization has ended. Run it again in Postern.');
  const value = randomBytes(32).toString('base64url');
  flow.session = digest(value);
  response
    .writeHead(302, {
      location: flow.authorizationUrl,
      'set-cookie': `${flow.cookieName}=${value}; HttpOnly; SameSite=Lax; Path=/`,
      ...noStore,
    })
    .end();
}

/** GET /callback: only with the session cookie and the state; then the one code is redeemed, or `error=` ends it. */
function callback(flow: Flow, request: IncomingMessage, response: ServerResponse): void {
  if (flow.phase !== 'waiting' || flow.session === undefined) return reply(response, 400, notOurs);
  if (!hasCookie(request, flow.cookieName, flow.session) || !hasParam(request, 'state', flow.expectedState))
    return reply(response, 400, notOurs);
  const url = new URL(request.url ?? '/', 'http://127.0.0.1');
  if (url.searchParams.get('error') !== null) {
    end(flow, 'refused');
    return reply(response, 400, 'The authorization was refused at the authorization server; nothing was stored.');
  }
  const code = url.searchParams.get('code');
  if (code === null || code.length === 0 || code.length > paramCharsMax) return reply(response, 400, notOurs);
  flow.phase = 'accepted';
  void redeem(flow, code, response);
}

async function redeem(flow: Flow, code: string, response: ServerResponse): Promise<void> {
  const stored = await flow.options.complete(code).catch(() => false);
  reply(
    response,
    stored ? 200 : 400,
    stored ? 'Postern is authorized. You may close this tab.' : 'The authorization did not complete; see Postern.',
  );
  flow.settle(stored ? 'authorized' : 'failed');
}

const notOurs = 'This is not the authorization Postern is waiting for.';
const linkUsed =
  'This authorization link was already used. If you did not open it before, someone else did: ' +
  'the authorization is abandoned and nothing was stored. Run postern mcp-servers authorize again.';
const noStore = { 'cache-control': 'no-store', 'referrer-policy': 'no-referrer' };

/** The query parameter `name` is present and equals the expected value (compared as digests, in constant time). */
function hasParam(request: IncomingMessage, name: string, expected: Buffer): boolean {
  const value = new URL(request.url ?? '/', 'http://127.0.0.1').searchParams.get(name);
  return value !== null && value.length <= paramCharsMax && timingSafeEqual(digest(value), expected);
}

/** The session cookie /start set is among the request's cookies (any other cookie of 127.0.0.1 is ignored). */
function hasCookie(request: IncomingMessage, name: string, expected: Buffer): boolean {
  let found = false;
  for (const pair of (request.headers.cookie ?? '').split(';')) {
    const at = pair.indexOf('=');
    if (at < 0 || pair.slice(0, at).trim() !== name) continue;
    const value = pair.slice(at + 1).trim();
    if (value.length <= paramCharsMax && timingSafeEqual(digest(value), expected)) found = true;
  }
  return found;
}

/** Equal-length digests, so the comparison's time says nothing about the expected value. */
function digest(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

function reply(response: ServerResponse, status: number, text: string): void {
  response.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', ...noStore }).end(text);
}
