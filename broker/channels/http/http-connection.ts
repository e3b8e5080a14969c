import { randomBytes } from 'node:crypto';
import { Client } from 'undici';
import type { HttpLimits } from './http-limits.js';
import type { OpenedSocket } from './open-pinned-socket.js';

/**
 * One HTTP/1.1 connection: an undici Client (pipelining 1) over a socket the broker set up itself.
 * The Client's `connect` hands over that one socket, once; any later connect (undici reconnecting
 * after the socket closed) is refused, so undici can never open a connection on its own — every
 * byte it writes goes over a socket whose DISPATCH_STARTED the channel awaited before calling
 * dispatch(). No interceptors and no retry handler are composed onto the Client.
 */
export class HttpConnection {
  readonly id: string;
  readonly client: Client;
  /** Requests dispatched on this connection; > 0 means the next one is a reuse. */
  requests = 0;
  /**
   * How long this connection may stay idle in the pool before it is closed: keepAliveMs, or less when the last
   * response's `Keep-Alive: timeout=N` hint says so (N s minus keepAliveHintMarginMs, as undici reads it). At most 0:
   * the server wants no reuse.
   */
  idleLimitMs: number;
  private handedOver = false;
  private readonly keepAliveMs: number;
  private readonly hintMarginMs: number;

  constructor(
    readonly opened: OpenedSocket,
    origin: string,
    limits: HttpLimits,
  ) {
    this.id = `conn_${randomBytes(6).toString('hex')}`;
    this.idleLimitMs = limits.keepAliveMs;
    this.keepAliveMs = limits.keepAliveMs;
    this.hintMarginMs = limits.keepAliveHintMarginMs;
    // The pool owns idle expiry (HttpConnectionPool closes a connection idle past idleLimitMs, and never hands one out
    // past it). undici's own idle timer runs keepAliveHandoffGraceMs later, hint or not (its threshold is moved by the
    // same grace), so it can never close a connection the pool handed out while its DISPATCH_STARTED is made durable:
    // that close would fail the request after the boundary (unknown) although not a byte of it was written.
    const graceMs = limits.keepAliveHandoffGraceMs;
    this.client = new Client(origin, {
      pipelining: 1,
      keepAliveTimeout: limits.keepAliveMs + graceMs,
      keepAliveMaxTimeout: limits.keepAliveMs + graceMs,
      keepAliveTimeoutThreshold: limits.keepAliveHintMarginMs - graceMs,
      headersTimeout: limits.headersTimeoutMs,
      bodyTimeout: limits.bodyTimeoutMs,
      // undici's own connector answers asynchronously and its connect() relies on that
      // (a synchronous callback re-enters its resume loop and the request stalls).
      connect: (_options, callback) => {
        if (this.handedOver || opened.socket.destroyed) {
          process.nextTick(() => callback(new NoReconnectError(), null));
          return;
        }
        this.handedOver = true;
        process.nextTick(() => callback(null, opened.socket));
      },
    });
    // An idle pooled socket can error (peer reset) with nobody listening; that is not a crash.
    this.client.on('connectionError', () => undefined);
    opened.socket.on('error', () => undefined);
  }

  /** The response's `Keep-Alive` header (the server's idle timeout hint) sets how long the pool may keep it idle. */
  keepAliveHint(value: string | string[] | undefined): void {
    const hint = typeof value === 'string' ? /timeout=(\d+)/.exec(value) : null;
    this.idleLimitMs =
      hint === null ? this.keepAliveMs : Math.min(Number(hint[1]) * 1000 - this.hintMarginMs, this.keepAliveMs);
  }

  get socket(): OpenedSocket['socket'] {
    return this.opened.socket;
  }

  /** Still usable for a reuse: open, writable, not ended by the peer. */
  alive(): boolean {
    const s = this.opened.socket;
    return !s.destroyed && s.writable && s.readable && !s.readableEnded;
  }

  close(): void {
    this.opened.socket.destroy();
    void this.client.destroy().catch(() => undefined);
  }
}

/** undici fails every queued request with an error whose code is not a socket code; never retried. */
class NoReconnectError extends Error {
  readonly code = 'POSTERN_NO_RECONNECT';
  constructor() {
    super('this connection was already handed over; a new one needs a new dispatch boundary');
    this.name = 'NoReconnectError';
  }
}
