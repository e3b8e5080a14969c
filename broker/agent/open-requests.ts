import type { JSONRPCMessage, RequestId } from '@modelcontextprotocol/sdk/types.js';

/**
 * The client's requests on one connection that the server has not answered yet, counted from the moment a
 * request is read (before the SDK dispatches it, so a call about to start is already counted). Answered
 * requests and ones the client cancelled (which MCP says get no answer) leave the count, so a client cannot
 * pin it above zero without a request actually waiting on the broker.
 */
export class OpenRequests {
  private readonly open = new Map<string, number>();

  /** A message the client sent. */
  received(message: JSONRPCMessage): void {
    if ('method' in message && 'id' in message && message.id !== undefined) {
      const key = idKey(message.id);
      this.open.set(key, (this.open.get(key) ?? 0) + 1);
      return;
    }
    if ('method' in message && message.method === 'notifications/cancelled') {
      const requestId = (message.params as { requestId?: unknown } | undefined)?.requestId;
      if (typeof requestId === 'string' || typeof requestId === 'number') this.close(idKey(requestId));
    }
  }

  /** A message the server sent: a response closes its request. True when it was a response. */
  sent(message: JSONRPCMessage): boolean {
    if ('method' in message || !('id' in message) || message.id === undefined) return false;
    this.close(idKey(message.id));
    return true;
  }

  get size(): number {
    return this.open.size;
  }

  private close(key: string): void {
    const left = (this.open.get(key) ?? 0) - 1;
    if (left > 0) this.open.set(key, left);
    else this.open.delete(key);
  }
}

/** 1 and "1" are different ids. */
function idKey(id: RequestId): string {
  return JSON.stringify(id);
}
