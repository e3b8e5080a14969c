import { createHash } from 'node:crypto';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

/** How a tools/call ended on the wire: its JSON-RPC reply, or the transport went away first. */
export type CallEnd =
  | { readonly kind: 'reply'; readonly message: Record<string, unknown>; readonly digest: string }
  | { readonly kind: 'lost' };

/**
 * The channel's own tools/call requests travel on the session's transport beside the SDK Client's traffic, with
 * ids the Client never uses (strings; the Client counts with numbers). Their replies are taken off the transport
 * here, before the Client sees them: the channel keeps the reply exactly as received (for its digest), and no SDK
 * timeout, schema or output validation stands between the wire and the record. Installed after `client.connect`,
 * because the Client chains onto whatever onmessage/onclose the transport had at connect.
 */
export class CallTap {
  private readonly waiting = new Map<string, (end: CallEnd) => void>();
  private lost = false;
  private next = 0;

  install(transport: Transport): void {
    const deliver = transport.onmessage;
    transport.onmessage = (message, extra) => {
      const id = (message as { id?: unknown }).id;
      const isResponse = 'result' in message || 'error' in message;
      const waiter = isResponse && typeof id === 'string' ? this.waiting.get(id) : undefined;
      if (waiter === undefined) {
        deliver?.(message, extra);
        return;
      }
      this.waiting.delete(id as string);
      waiter({ kind: 'reply', message: message as Record<string, unknown>, digest: digestOf(message) });
    };
    const closed = transport.onclose;
    transport.onclose = () => {
      closed?.();
      this.loseAll();
    };
  }

  newId(): string {
    this.next += 1;
    return `postern-${this.next}`;
  }

  /** Resolves with the reply to `id`, or lost when the transport closes first. */
  expect(id: string): Promise<CallEnd> {
    if (this.lost) return Promise.resolve({ kind: 'lost' });
    return new Promise((resolve) => this.waiting.set(id, resolve));
  }

  /** The reply to `id` will not be waited for (a deadline, a caller that left): a late one goes to the Client. */
  forget(id: string): void {
    this.waiting.delete(id);
  }

  /** This one call's transport broke (an HTTP POST whose connection died) while the session lives on. */
  lose(id: string): void {
    const waiter = this.waiting.get(id);
    this.waiting.delete(id);
    waiter?.({ kind: 'lost' });
  }

  private loseAll(): void {
    this.lost = true;
    const waiters = [...this.waiting.values()];
    this.waiting.clear();
    for (const waiter of waiters) waiter({ kind: 'lost' });
  }
}

/** sha256 over the reply as serialized JSON (docs/mcp-channel.md: the same bytes for stdio and HTTP). */
export function digestOf(message: JSONRPCMessage): string {
  return `sha256:${createHash('sha256').update(JSON.stringify(message)).digest('hex')}`;
}
