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
  private handedOver = false;

  constructor(
    readonly opened: OpenedSocket,
    origin: string,
    limits: HttpLimits,
  ) {
    this.id = `conn_${randomBytes(6).toString('hex')}`;
    this.client = new Client(origin, {
      pipelining: 1,
      keepAliveTimeout: limits.keepAliveMs,
      keepAliveMaxTimeout: limits.keepAliveMs,
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
