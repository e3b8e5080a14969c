import type { HttpConnection } from './http-connection.js';

/** An idle connection, since when, and the timer that closes it when its idle limit passes. */
interface Idle {
  readonly connection: HttpConnection;
  readonly sinceMs: number;
  readonly expiry: NodeJS.Timeout;
}

/**
 * Idle keep-alive connections per route (a route's origin, CA and pins form the key, so a
 * connection verified under one route's TLS rules is never reused under another's). A connection is
 * either idle here or owned by exactly one attempt; that exclusivity is what lets the channel make
 * DISPATCH_STARTED durable before handing a request to a reused connection.
 *
 * The pool, not undici, ends an idle connection: at its idle limit (HttpConnection.idleLimitMs) a timer closes it, and
 * take() never hands out one past it (a timer late on a busy loop changes nothing). undici's own idle timer is set a
 * grace later (http-connection.ts), so nothing on this side closes a connection between take() and the write unless
 * its DISPATCH_STARTED takes longer than that grace (then the break is still reported as unknown, never not_attempted).
 */
export class HttpConnectionPool {
  private readonly idle = new Map<string, Idle[]>();

  constructor(private readonly idleConnectionsMax: number) {}

  /** The most recently used live connection for `key` within its idle limit, removed from the pool; others are closed. */
  take(key: string): HttpConnection | undefined {
    const list = this.idle.get(key);
    while (list !== undefined && list.length > 0) {
      const { connection, sinceMs, expiry } = list.pop() as Idle;
      clearTimeout(expiry);
      if (connection.alive() && performance.now() - sinceMs < connection.idleLimitMs) return connection;
      connection.close();
    }
    return undefined;
  }

  release(key: string, connection: HttpConnection): void {
    if (!connection.alive() || connection.idleLimitMs <= 0) {
      connection.close();
      return;
    }
    const list = this.idle.get(key) ?? [];
    const expiry = setTimeout(() => this.expire(key, connection), connection.idleLimitMs);
    expiry.unref();
    list.push({ connection, sinceMs: performance.now(), expiry });
    while (list.length > this.idleConnectionsMax) this.drop(list.shift());
    this.idle.set(key, list);
  }

  idleCount(key: string): number {
    return this.idle.get(key)?.length ?? 0;
  }

  closeAll(): void {
    for (const list of this.idle.values()) for (const idle of list) this.drop(idle);
    this.idle.clear();
  }

  private expire(key: string, connection: HttpConnection): void {
    const list = this.idle.get(key);
    const at = list?.findIndex((idle) => idle.connection === connection) ?? -1;
    if (list === undefined || at < 0) return;
    this.drop(list.splice(at, 1)[0]);
  }

  private drop(idle: Idle | undefined): void {
    if (idle === undefined) return;
    clearTimeout(idle.expiry);
    idle.connection.close();
  }
}
