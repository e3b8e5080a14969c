import type { Socket } from 'node:net';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { JSONRPCMessageSchema, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { AgentLimits } from './agent-limits.js';
import { frameEdgeBytes, leadingFrameId, trailingFrameId } from './frame-id.js';
import { jsonDepthExceeds } from './json-depth.js';
import { jsonRpcCode, jsonRpcErrorLine, type JsonRpcId } from './jsonrpc-error.js';

export interface LineTransportHooks {
  /** Sees every valid message before the MCP server does (the connection watches for initialize). */
  observe?(message: JSONRPCMessage): void;
  /** Runs when the socket closes, before the server hears of it (so in-flight calls learn "disconnected" first). */
  closing?(): void;
  /**
   * Sees every message the server sends; a returned callback hears whether its line was written
   * completely (true), was not (false), or cannot be told (undefined): see writeLine.
   */
  sending?(message: JSONRPCMessage): ((written: boolean | undefined) => void) | undefined;
}

/**
 * The server side of MCP over the agent socket: one JSON-RPC message per line (the MCP stdio
 * framing), written by us instead of the SDK's StdioServerTransport so every bound is ours. What a
 * client can do wrong, and what it gets:
 * - a line longer than frameBytesMax: a PAYLOAD_LIMIT error to the request's id where its edges show one
 *   (else id null), the rest of the line is read and dropped (never buffered), and the connection goes on;
 *   a line still going after oversizedFrameSkipBytesMax, or the oversizedFramesMax-th oversized line, is
 *   answered and the connection closes;
 * - nesting deeper than frameDepthMax: an invalid-request error (PAYLOAD_LIMIT), the connection goes on;
 * - not JSON: a parse error (-32700, id null), the connection goes on;
 * - JSON but not a JSON-RPC 2.0 message: invalid request (-32600), the connection goes on;
 * - garbageFramesMax of those in a row: the connection closes.
 */
export class LineTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private garbageInARow = 0;
  /** The oversized line being dropped: its first and (so far) last bytes, for its id, and how long it is. */
  private skipping: { head: Buffer; tail: Buffer; bytes: number } | undefined;
  private oversizedFrames = 0;
  /** No more frames are read (closing, or refused). */
  private closed = false;
  private closeHandled = false;

  constructor(
    private readonly socket: Socket,
    private readonly limits: AgentLimits,
    private readonly hooks: LineTransportHooks = {},
  ) {}

  async start(): Promise<void> {
    this.socket.on('data', (chunk: Buffer) => this.receive(chunk));
    this.socket.once('close', () => this.handleClose());
    if (this.socket.destroyed) this.handleClose();
  }

  async send(message: JSONRPCMessage): Promise<void> {
    this.writeLine(`${JSON.stringify(message)}\n`, this.hooks.sending?.(message));
  }

  async close(): Promise<void> {
    this.socket.destroy();
  }

  /**
   * Writes one line; a client that stops reading is dropped once outboundBytesMax is queued.
   * `done` hears once how the write ended: true once the whole line was handed to the socket, false
   * if it never will be (closed first, a write error, or dropped with the line still queued),
   * undefined when Node cannot tell — it calls back without an error for a write that was in flight
   * when the socket was destroyed, so a callback on a destroyed socket proves nothing either way.
   */
  writeLine(line: string, done?: (written: boolean | undefined) => void): void {
    if (this.closed || this.socket.destroyed || !this.socket.writable) {
      done?.(false);
      return;
    }
    let told = false;
    const tell = (written: boolean | undefined): void => {
      if (told) return;
      told = true;
      done?.(written);
    };
    this.socket.write(
      line,
      done === undefined
        ? undefined
        : (error) => tell(error !== undefined && error !== null ? false : this.socket.destroyed ? undefined : true),
    );
    if (this.socket.writableLength > this.limits.outboundBytesMax) {
      tell(false);
      this.socket.destroy();
    }
  }

  private receive(chunk: Buffer): void {
    let start = 0;
    while (!this.closed && start < chunk.length) {
      const newline = chunk.indexOf(0x0a, start);
      const piece = chunk.subarray(start, newline < 0 ? chunk.length : newline);
      if (this.skipping === undefined) this.collect(piece);
      else this.skip(piece);
      if (newline < 0 || this.closed) return;
      this.endOfLine();
      start = newline + 1;
    }
  }

  /** Buffers a piece of the current line; past frameBytesMax the line is dropped from here on. */
  private collect(piece: Buffer): void {
    if (piece.length > 0) {
      this.pending.push(piece);
      this.pendingBytes += piece.length;
    }
    if (this.pendingBytes <= this.limits.frameBytesMax) return;
    const seen = Buffer.concat(this.pending, this.pendingBytes);
    // Copies: a view would keep the whole buffered line alive.
    this.skipping = {
      head: Buffer.from(seen.subarray(0, frameEdgeBytes)),
      tail: Buffer.from(seen.subarray(-frameEdgeBytes)),
      bytes: this.pendingBytes,
    };
    this.pending = [];
    this.pendingBytes = 0;
    this.checkSkipBound();
  }

  private skip(piece: Buffer): void {
    const skipping = this.skipping as NonNullable<LineTransport['skipping']>;
    skipping.bytes += piece.length;
    const tail = piece.length >= frameEdgeBytes ? piece : Buffer.concat([skipping.tail, piece]);
    skipping.tail = Buffer.from(tail.subarray(-frameEdgeBytes));
    this.checkSkipBound();
  }

  private checkSkipBound(): void {
    const skipping = this.skipping;
    if (skipping === undefined || skipping.bytes <= this.limits.oversizedFrameSkipBytesMax) return;
    const message = `a message line is at most ${this.limits.frameBytesMax} bytes, and this one has no end within ${this.limits.oversizedFrameSkipBytesMax}; closing`;
    this.refuseAndClose(leadingFrameId(skipping.head) ?? null, message);
  }

  private endOfLine(): void {
    const skipping = this.skipping;
    if (skipping === undefined) {
      const line =
        this.pending.length === 1 ? (this.pending[0] as Buffer) : Buffer.concat(this.pending, this.pendingBytes);
      this.pending = [];
      this.pendingBytes = 0;
      this.handleLine(line);
      return;
    }
    this.skipping = undefined;
    this.oversizedFrames += 1;
    const id = leadingFrameId(skipping.head) ?? trailingFrameId(skipping.tail) ?? null;
    const refused = `a message line is at most ${this.limits.frameBytesMax} bytes; this one (${skipping.bytes} bytes) was dropped unread`;
    if (this.oversizedFrames >= this.limits.oversizedFramesMax) {
      this.refuseAndClose(id, `${refused}; ${this.oversizedFrames} oversized lines on this connection, closing`);
      return;
    }
    this.writeLine(jsonRpcErrorLine(id, jsonRpcCode.invalidRequest, refused, 'PAYLOAD_LIMIT'));
  }

  /**
   * Stops reading (nothing more the client sends is handled), writes one last line and closes: end() lets the
   * line drain, and a client that does not read it within drainMs is cut off (destroySoon alone would wait for
   * it as long as it likes).
   */
  endWith(line: string, drainMs: number): void {
    this.pending = [];
    this.pendingBytes = 0;
    this.skipping = undefined;
    this.closed = true;
    if (!this.socket.destroyed && this.socket.writable) this.socket.end(line);
    this.socket.destroySoon();
    setTimeout(() => this.socket.destroy(), drainMs).unref();
  }

  private refuseAndClose(id: JsonRpcId, message: string): void {
    this.pending = [];
    this.pendingBytes = 0;
    this.skipping = undefined;
    const line = jsonRpcErrorLine(id, jsonRpcCode.invalidRequest, message, 'PAYLOAD_LIMIT');
    if (!this.socket.destroyed && this.socket.writable) this.socket.end(line);
    this.closed = true;
    // end() lets the error line drain; a client that never reads it is cut off anyway.
    this.socket.destroySoon();
  }

  private handleLine(raw: Buffer): void {
    const line = raw.length > 0 && raw[raw.length - 1] === 0x0d ? raw.subarray(0, raw.length - 1) : raw;
    if (line.length === 0) return;
    if (jsonDepthExceeds(line, this.limits.frameDepthMax)) {
      this.garbage(
        jsonRpcErrorLine(
          null,
          jsonRpcCode.invalidRequest,
          `a message nests at most ${this.limits.frameDepthMax} levels deep`,
          'PAYLOAD_LIMIT',
        ),
      );
      return;
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(line.toString('utf8'));
    } catch {
      this.garbage(jsonRpcErrorLine(null, jsonRpcCode.parseError, 'Parse error: one JSON-RPC message per line'));
      return;
    }
    const message = JSONRPCMessageSchema.safeParse(parsed);
    if (!message.success) {
      this.garbage(
        jsonRpcErrorLine(
          idOf(parsed),
          jsonRpcCode.invalidRequest,
          'Invalid Request: not a JSON-RPC 2.0 message',
          'INVALID_ARGUMENT',
        ),
      );
      return;
    }
    this.garbageInARow = 0;
    try {
      this.hooks.observe?.(message.data);
      this.onmessage?.(message.data);
    } catch (error) {
      // The SDK dispatches asynchronously; a synchronous throw here is a bug, never the client's doing.
      this.onerror?.(error instanceof Error ? error : new Error(String(error)));
    }
  }

  private garbage(replyLine: string): void {
    this.garbageInARow += 1;
    this.writeLine(replyLine);
    if (this.garbageInARow >= this.limits.garbageFramesMax) {
      this.closed = true;
      this.socket.destroySoon();
    }
  }

  private handleClose(): void {
    if (this.closeHandled) return;
    this.closeHandled = true;
    this.closed = true;
    this.pending = [];
    this.skipping = undefined;
    this.hooks.closing?.();
    this.onclose?.();
  }
}

/** The id of a message we refuse, echoed only when it is a valid JSON-RPC id. */
function idOf(value: unknown): JsonRpcId {
  if (typeof value !== 'object' || value === null || !('id' in value)) return null;
  const id = (value as { id: unknown }).id;
  return typeof id === 'string' || (typeof id === 'number' && Number.isSafeInteger(id)) ? id : null;
}
