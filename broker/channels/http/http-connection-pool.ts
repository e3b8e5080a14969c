import type { HttpConnection } from './http-connection.js';

/** An idle connection and the moment (performance.now()) its idle limit passes. */
interface Idle {
  readonly connection: HttpConnection;
  readonly untilMs: number;
}

/**
 * Idle keep-alive connections per route (a route's origin, CA and pins form the key, so a
 * connection verified under one route's TLS rules is never reused under another's). A connection is
 * either idle here or owned by exactly one attempt; that exclusivity is what lets the channel make
 * DISPATCH_STARTED durable before handing a request to a reused connection.
 *
 * The pool, not undici, ends an idle connection: take() never hands out one at or past its idle limit (it reads the
 * clock at hand-out, so a timer late on a busy loop changes nothing), and one sweep timer per pool closes the expired
 * ones: due at the earliest idle limit (brought forward when a connection with a shorter one comes in), re-armed by
 * each sweep while connections stay idle. Not a timer per release (the dispatch path releases a connection per
 * action); nor is it cleared when take() empties the pool: a sweep that finds nothing idle just arms no more.
 * undici's own idle timer is set a grace later (http-connection.ts), so nothing on this side closes a connection
 * between take() and the write unless its DISPATCH_STARTED takes longer than that grace (then the break is still
 * reported as unknown, never not_attempted).
 */
export class HttpConnectionPool {
  private readonly idle = new Map<string, Idle[]>();
  private sweepTimer: NodeJS.Timeout | undefined;
  /** When the armed sweep is due (performance.now()); meaningful while sweepTimer is set. */
  private sweepAtMs = 0;

  constructor(private readonly idleConnectionsMax: number) {}

  /** The most recently used live connection for `key` within its idle limit, removed from the pool; others are closed. */
  take(key: string): HttpConnection | undefined {
    const list = this.idle.get(key);
    while (list !== undefined && list.length > 0) {
      const { connection, untilMs } = list.pop() as Idle;
      if (connection.alive() && performance.now() < untilMs) return connection;
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
    const untilMs = performance.now() + connection.idleLimitMs;
    list.push({ connection, untilMs });
    while (list.length > this.idleConnectionsMax) list.shift()?.connection.close();
    this.idle.set(key, list);
    this.armSweep(untilMs);
  }

  idleCount(key: string): number {
    return this.idle.get(key)?.length ?? 0;
  }

  closeAll(): void {
    clearTimeout(this.sweepTimer);
    this.sweepTimer = undefined;
    for (const list of this.idle.values()) for (const { connection } of list) connection.close();
    this.idle.clear();
  }

  /** Makes the sweep due no later than `atMs`; an armed sweep due earlier stays as it is (the common case). */
  private armSweep(atMs: number): void {
    if (this.sweepTimer !== undefined && this.sweepAtMs <= atMs) return;
    clearTimeout(this.sweepTimer);
    this.sweepAtMs = atMs;
    // At least 1 ms: Node's timer clock is coarser than performance.now(), so a sweep can run a fraction early and
    // find the earliest connection not yet expired; it then re-arms for the rest instead of spinning.
    this.sweepTimer = setTimeout(() => this.sweep(), Math.max(1, Math.ceil(atMs - performance.now())));
    this.sweepTimer.unref();
  }

  /** Closes every connection at or past its idle limit, then re-arms for the earliest one left (if any). */
  private sweep(): void {
    this.sweepTimer = undefined;
    const now = performance.now();
    let nextMs = Infinity;
    for (const [key, list] of this.idle) {
      const kept = list.filter(({ connection, untilMs }) => {
        if (now < untilMs) return true;
        connection.close();
        return false;
      });
      for (const { untilMs } of kept) nextMs = Math.min(nextMs, untilMs);
      if (kept.length > 0) this.idle.set(key, kept);
      else this.idle.delete(key);
    }
    if (nextMs !== Infinity) this.armSweep(nextMs);
  }
}
