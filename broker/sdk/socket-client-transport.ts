import { createConnection, type Socket } from 'node:net';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { JSONRPCMessageSchema, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

/** A reply line larger than this is not from a Postern broker (results are capped far below it). */
export const replyLineBytesMax = 64 * 1024 * 1024;

/**
 * The client side of MCP over the agent socket: connect to the Unix socket, one JSON-RPC message
 * per line each way. Used by the SDK directly (no shim process in between).
 */
export class SocketClientTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  /** Told each message as it is sent (the client maps its tool calls to the JSON-RPC ids they went out under). */
  onsend?: (message: JSONRPCMessage) => void;

  private socket: Socket | undefined;
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private closeReported = false;
  /** A connection-level refusal the broker sent (id null, data.code), e.g. PEER_REFUSED or RATE_LIMITED. */
  refusal: { code: string; message: string } | undefined;

  constructor(private readonly socketPath: string) {}

  start(): Promise<void> {
    return new Promise((resolve, reject) => {
      const socket = createConnection(this.socketPath);
      this.socket = socket;
      const onConnectError = (error: Error): void => reject(error);
      socket.once('error', onConnectError);
      socket.once('connect', () => {
        socket.off('error', onConnectError);
        socket.on('error', (error) => this.onerror?.(error));
        resolve();
      });
      socket.on('data', (chunk: Buffer) => this.receive(chunk));
      socket.once('close', () => this.reportClose());
    });
  }

  send(message: JSONRPCMessage): Promise<void> {
    const socket = this.socket;
    if (socket === undefined || socket.destroyed)
      return Promise.reject(new Error('the Postern socket is not connected'));
    this.onsend?.(message);
    return new Promise((resolve, reject) => {
      socket.write(`${JSON.stringify(message)}\n`, (error) => (error ? reject(error) : resolve()));
    });
  }

  /** Whether the connection has closed (the broker's side, ours, or an error). */
  get closed(): boolean {
    return this.closeReported;
  }

  async close(): Promise<void> {
    this.socket?.destroy();
    this.reportClose();
  }

  private reportClose(): void {
    if (this.closeReported) return;
    this.closeReported = true;
    this.onclose?.();
  }

  private receive(chunk: Buffer): void {
    let start = 0;
    for (;;) {
      const newline = chunk.indexOf(0x0a, start);
      if (newline < 0) {
        this.pending.push(chunk.subarray(start));
        this.pendingBytes += chunk.length - start;
        if (this.pendingBytes > replyLineBytesMax) {
          this.onerror?.(new Error(`the broker sent a line over ${replyLineBytesMax} bytes; closing`));
          this.socket?.destroy();
        }
        return;
      }
      const line = Buffer.concat([...this.pending, chunk.subarray(start, newline)]);
      this.pending = [];
      this.pendingBytes = 0;
      start = newline + 1;
      this.handleLine(line.toString('utf8').trim());
    }
  }

  private handleLine(line: string): void {
    if (line.length === 0) return;
    let raw: unknown;
    try {
      raw = JSON.parse(line);
    } catch (error) {
      this.onerror?.(error instanceof Error ? error : new Error(String(error)));
      return;
    }
    this.noteRefusal(raw);
    const message = JSONRPCMessageSchema.safeParse(raw);
    if (!message.success) {
      this.onerror?.(new Error('the broker sent a line that is not a JSON-RPC message'));
      return;
    }
    this.onmessage?.(message.data);
  }

  /** The broker refuses a connection with one error line whose id is null (JSON-RPC 2.0), which the SDK's schema does not accept. */
  private noteRefusal(raw: unknown): void {
    if (typeof raw !== 'object' || raw === null) return;
    const { id, error } = raw as { id?: unknown; error?: { message?: unknown; data?: { code?: unknown } } };
    if (id !== null || typeof error !== 'object' || error === null) return;
    const code = error.data?.code;
    if (typeof code === 'string')
      this.refusal = { code, message: typeof error.message === 'string' ? error.message : code };
  }
}
