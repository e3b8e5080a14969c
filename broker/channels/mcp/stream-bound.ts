import type { Clock } from '../../ports/index.js';

/** Why a server's reply outside a call was cut: one message over `replyBytesMax`, or bytes faster than the rate. */
export type StreamOverBound = 'stream_message_bytes' | 'stream_rate';

export interface StreamBoundOptions {
  /** One message: an SSE event (bytes up to its blank line), or a whole JSON body. */
  readonly messageBytesMax: number;
  /**
   * Sustained rate, after a burst of up to two whole messages (a token bucket of 2 × `messageBytesMax`: one message
   * over its bound always breaks the message bound first, so the reason given is the specific one).
   */
  readonly bytesPerSecond: number;
  readonly clock: Clock;
  /** `text/event-stream`: messages end at a blank line. Otherwise the whole body is one message. */
  readonly eventStream: boolean;
}

/**
 * Counts what a server sends outside a call (initialize, tools/list, the GET stream of server-initiated messages)
 * as it is read. The SDK's SSE parser holds an event until its blank line, so the per-message bound is what bounds
 * the broker's memory; the rate bound keeps a stream of small messages from taking the broker's CPU.
 */
export class StreamMeter {
  private messageBytes = 0;
  private tokens: number;
  private lastMs: number;
  /** At the start of a line (the previous byte ended one), and whether that byte was a CR of a possible CRLF. */
  private lineStart = true;
  private afterCr = false;

  constructor(private readonly options: StreamBoundOptions) {
    this.tokens = 2 * options.messageBytesMax;
    this.lastMs = options.clock.nowMs();
  }

  /** The chunk is counted; the first bound it breaks, if any. */
  add(chunk: Uint8Array): StreamOverBound | undefined {
    const now = this.options.clock.nowMs();
    const refill = (Math.max(0, now - this.lastMs) * this.options.bytesPerSecond) / 1_000;
    this.tokens = Math.min(2 * this.options.messageBytesMax, this.tokens + refill) - chunk.byteLength;
    this.lastMs = now;
    // A message may start and end inside one chunk: its size is checked as it is counted, not at the chunk's end.
    const over = this.options.eventStream
      ? this.countEvents(chunk)
      : (this.messageBytes += chunk.byteLength) > this.options.messageBytesMax;
    if (over) return 'stream_message_bytes';
    return this.tokens < 0 ? 'stream_rate' : undefined;
  }

  /** SSE lines end in CR, LF or CRLF; an empty line ends the event. True once an event passes the bound. */
  private countEvents(chunk: Uint8Array): boolean {
    const max = this.options.messageBytesMax;
    for (const byte of chunk) {
      const crlf = byte === 0x0a && this.afterCr;
      this.afterCr = byte === 0x0d;
      if (crlf) continue;
      if (byte !== 0x0a && byte !== 0x0d) {
        this.lineStart = false;
        this.messageBytes += 1;
        if (this.messageBytes > max) return true;
      } else if (this.lineStart) this.messageBytes = 0;
      else this.lineStart = true;
    }
    return false;
  }
}

/**
 * `response` with its body counted by a StreamMeter as the SDK reads it: over a bound, `drop` closes the connection,
 * the body errors, and `overBound` says why (the session must go: the stream may not be resumed).
 */
export function meteredResponse(
  response: Response,
  meter: StreamMeter,
  drop: () => void,
  overBound: (why: StreamOverBound) => void,
): Response {
  if (response.body === null) return response;
  const init = { status: response.status, statusText: response.statusText, headers: response.headers };
  const reader = response.body.getReader();
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      let next: Awaited<ReturnType<typeof reader.read>>;
      try {
        next = await reader.read();
      } catch {
        controller.error(new Error('connection lost while reading'));
        return;
      }
      if (next.done) {
        controller.close();
        return;
      }
      const over = meter.add(next.value);
      if (over !== undefined) {
        drop();
        controller.error(new Error(`server stream over its bound (${over})`));
        overBound(over);
        return;
      }
      controller.enqueue(next.value);
    },
    cancel: (reason) => reader.cancel(reason),
  });
  return new Response(body, init);
}
