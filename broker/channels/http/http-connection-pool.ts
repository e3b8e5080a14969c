import type { HttpConnection } from './http-connection.js';

/**
 * Idle keep-alive connections per route (a route's origin, CA and pins form the key, so a
 * connection verified under one route's TLS rules is never reused under another's). A connection is
 * either idle here or owned by exactly one attempt; that exclusivity is what lets the channel make
 * DISPATCH_STARTED durable before handing a request to a reused connection.
 */
export class HttpConnectionPool {
  private readonly idle = new Map<string, HttpConnection[]>();

  constructor(private readonly idleConnectionsMax: number) {}

  /** The most recently used live connection for `key`, removed from the pool; dead ones are closed. */
  take(key: string): HttpConnection | undefined {
    const list = this.idle.get(key);
    while (list !== undefined && list.length > 0) {
      const connection = list.pop() as HttpConnection;
      if (connection.alive()) return connection;
      connection.close();
    }
    return undefined;
  }

  release(key: string, connection: HttpConnection): void {
    if (!connection.alive()) {
      connection.close();
      return;
    }
    const list = this.idle.get(key) ?? [];
    list.push(connection);
    while (list.length > this.idleConnectionsMax) list.shift()?.close();
    this.idle.set(key, list);
  }

  idleCount(key: string): number {
    return this.idle.get(key)?.length ?? 0;
  }

  closeAll(): void {
    for (const list of this.idle.values()) for (const c of list) c.close();
    this.idle.clear();
  }
}
