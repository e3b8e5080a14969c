import { createHash, timingSafeEqual } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** What the one accepted callback carried: the authorization code, or the authorization server's error code. */
export type CallbackAnswer = { readonly code: string } | { readonly error: string };

export interface LoopbackCallbackOptions {
  /** The `state` sent with the authorization request; only a callback carrying exactly it is accepted. */
  readonly state: string;
  /** The listener closes after this even if no callback came (the person never finished). */
  readonly timeoutMs: number;
  /** Runs for the accepted callback before the browser is answered; true: the grant was stored. */
  readonly complete: (answer: CallbackAnswer) => Promise<boolean>;
}

export interface LoopbackCallback {
  /** `http://127.0.0.1:<port>/callback`: RFC 8252 §7.3, a loopback IP literal, any port. */
  readonly redirectUri: string;
  /** Settles once: `authorized` / `failed` after the accepted callback, `expired` when the time ran out. */
  readonly done: Promise<'authorized' | 'failed' | 'expired' | 'closed'>;
  close(): void;
}

const callbackPath = '/callback';
/** A code or error longer than this is not one an authorization server sends; refused as such. */
const paramCharsMax = 2_048;

/**
 * The redirect target of one authorization: a listener on 127.0.0.1:0 that accepts exactly one callback whose
 * `state` matches (compared in constant time), then closes; anything else is answered 400 and changes nothing.
 * Any local process can reach a loopback port, so the state is the only thing that makes a callback ours.
 */
export async function listenForCallback(options: LoopbackCallbackOptions): Promise<LoopbackCallback> {
  const expected = digest(options.state);
  let accepted = false;
  let settle: (how: 'authorized' | 'failed' | 'expired' | 'closed') => void = () => undefined;
  const done = new Promise<'authorized' | 'failed' | 'expired' | 'closed'>((resolve) => {
    settle = resolve;
  });
  const server = createServer((request, response) => {
    const answer = accepted ? undefined : acceptable(request, expected);
    // Refused without closing: any local process can reach the port, and closing on its noise would let an agent
    // block a person's authorization. The timeout bounds how long the listener lives.
    if (answer === undefined) return reply(response, 400, 'This is not the authorization Postern is waiting for.');
    accepted = true;
    void finish(answer, response);
  });
  const finish = async (answer: CallbackAnswer, response: ServerResponse): Promise<void> => {
    const stored = await options.complete(answer).catch(() => false);
    reply(
      response,
      stored ? 200 : 400,
      stored ? 'Postern is authorized. You may close this tab.' : 'The authorization did not complete; see Postern.',
    );
    close(stored ? 'authorized' : 'failed');
  };
  const close = (how: 'authorized' | 'failed' | 'expired' | 'closed'): void => {
    clearTimeout(timer);
    settle(how);
    server.close();
    server.closeIdleConnections();
  };
  const timer = setTimeout(() => close('expired'), options.timeoutMs);
  timer.unref();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  return { redirectUri: `http://127.0.0.1:${port}${callbackPath}`, done, close: () => close('closed') };
}

/** The callback's answer when it is ours (GET /callback, the state matches), else undefined. */
function acceptable(request: IncomingMessage, expected: Buffer): CallbackAnswer | undefined {
  if (request.method !== 'GET') return undefined;
  const url = new URL(request.url ?? '/', 'http://127.0.0.1');
  if (url.pathname !== callbackPath) return undefined;
  const state = url.searchParams.get('state');
  if (state === null || state.length > paramCharsMax || !timingSafeEqual(digest(state), expected)) return undefined;
  const code = url.searchParams.get('code');
  const error = url.searchParams.get('error');
  if (error !== null) return { error: /^[\w.-]{1,64}$/.test(error) ? error : 'error' };
  if (code === null || code.length === 0 || code.length > paramCharsMax) return undefined;
  return { code };
}

/** Equal-length digests, so the comparison's time says nothing about the expected state. */
function digest(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

function reply(response: ServerResponse, status: number, text: string): void {
  response.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' }).end(text);
}
