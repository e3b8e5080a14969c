import { performance } from 'node:perf_hooks';
import type { Transform } from 'node:stream';
import {
  brotliDecompressSync,
  constants,
  createBrotliDecompress,
  createGunzip,
  createInflate,
  createInflateRaw,
  gunzipSync,
  inflateRawSync,
  inflateSync,
  type BrotliOptions,
  type ZlibOptions,
} from 'node:zlib';
import { nextSlice } from '../../ports/loop-slices.js';

/**
 * Why a response body is not delivered: the broker could not see its plain bytes, so it cannot scrub them.
 * A compressed body the broker cannot decode is never passed through — a reflected secret inside it would
 * reach the agent untouched (the agent decompresses, the scrubber compared compressed bytes).
 */
export const bodyWithheldReasons = [
  'unsupported_content_encoding',
  'compressed_body_truncated',
  'decoded_body_too_large',
  'corrupt_compressed_body',
] as const;
export type BodyWithheldReason = (typeof bodyWithheldReasons)[number];

export type DecodedContent =
  | { readonly kind: 'identity'; readonly bytes: Buffer }
  | { readonly kind: 'decoded'; readonly bytes: Buffer; readonly codings: readonly string[] }
  | { readonly kind: 'withheld'; readonly reason: BodyWithheldReason; readonly codings: readonly string[] };

export interface DecodeLimits {
  /** Decoded bytes at most (the decompression-bomb bound); beyond it the body is withheld. */
  readonly decodedBytesMax: number;
}

/** Stacked codings (`gzip, br`) decoded at most this deep; a deeper stack is withheld, not unwound. */
const codingsMax = 2;

/**
 * The plain bytes of a response body under its Content-Encoding (RFC 9110 §8.4), so the scrubber sees what
 * the agent would see. The broker sends `Accept-Encoding: identity`; a remote that compresses anyway is
 * decoded here (gzip, deflate, br), bounded by `decodedBytesMax`. `complete` is false when the channel kept
 * only part of the body: a truncated compressed stream is withheld rather than decoded in part.
 *
 * This one decodes on the calling thread, at once: a `br, br` body under 50 bytes holds it ~40-100 ms (8 MiB, twice).
 * The broker's event loop uses `decodeContentAsync` (THREAT-MODEL 4); this is the reference it is tested against.
 */
export function decodeContent(
  body: Buffer,
  contentEncoding: string | undefined,
  complete: boolean,
  limits: DecodeLimits,
): DecodedContent {
  const declared = declaredCodings(body, contentEncoding, complete);
  if ('answer' in declared) return declared.answer;
  const { codings } = declared;
  let bytes = body;
  // Codings are listed in the order they were applied: undo them last first.
  for (const coding of [...codings].reverse()) {
    try {
      bytes = decodeOne(coding, bytes, limits.decodedBytesMax);
    } catch (error) {
      return withheldFor(error, codings);
    }
  }
  return { kind: 'decoded', bytes, codings };
}

/**
 * `decodeContent` off the event loop (THREAT-MODEL 4: one agent's remote must not wedge the others): the same codings,
 * bounds, results and withheld reasons, decoded by node:zlib's asynchronous streams, which inflate on the libuv thread
 * pool one output chunk (16 KiB) at a time and give the loop a turn between chunks; the chunks are then joined in
 * slices (`decodeOffLoop`). The property test holds it to `decodeContent` on random, corrupt and truncated bodies.
 */
export async function decodeContentAsync(
  body: Buffer,
  contentEncoding: string | undefined,
  complete: boolean,
  limits: DecodeLimits,
): Promise<DecodedContent> {
  const declared = declaredCodings(body, contentEncoding, complete);
  if ('answer' in declared) return declared.answer;
  const { codings } = declared;
  await decodeSlots.take();
  try {
    let bytes = body;
    for (const coding of [...codings].reverse()) {
      try {
        bytes = await decodeOneAsync(coding, bytes, limits.decodedBytesMax);
      } catch (error) {
        return withheldFor(error, codings);
      }
    }
    return { kind: 'decoded', bytes, codings };
  } finally {
    decodeSlots.give();
  }
}

/**
 * Decodes at once, at most (the rest wait their turn, first come first served). Each holds up to twice its bound
 * (the chunks and the joined output, ~16-24 MiB for a `br, br` bomb) and a thread of libuv's pool, which the WAL's
 * fdatasync shares: without a bound, one agent's reads that bypass lanes could run dozens at once (a review measured
 * 32 bombs at 816 MiB RSS and the sync's p50 at 3.9 ms). The sync decode they replaced ran one at a time.
 */
export const concurrentDecodesMax = 2;

/** A FIFO counting semaphore. */
class Slots {
  private free: number;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly count: number) {
    this.free = count;
  }

  take(): Promise<void> {
    if (this.free > 0) {
      this.free -= 1;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  give(): void {
    const next = this.waiting.shift();
    if (next === undefined) this.free += 1;
    else next();
  }

  /** Decodes running now (a test's window on the bound). */
  busy(): number {
    return this.count - this.free;
  }
}

const decodeSlots = new Slots(concurrentDecodesMax);

/** How many decodes run now (tests). */
export function decodesRunning(): number {
  return decodeSlots.busy();
}

/** The codings to undo, or the answer when there is nothing to decode (identity) or nothing that may be decoded. */
function declaredCodings(
  body: Buffer,
  contentEncoding: string | undefined,
  complete: boolean,
): { readonly codings: readonly string[] } | { readonly answer: DecodedContent } {
  const codings = (contentEncoding ?? '')
    .split(',')
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== '' && c !== 'identity');
  if (codings.length === 0) return { answer: { kind: 'identity', bytes: body } };
  if (codings.length > codingsMax || !codings.every(isSupported))
    return { answer: { kind: 'withheld', reason: 'unsupported_content_encoding', codings } };
  if (!complete) return { answer: { kind: 'withheld', reason: 'compressed_body_truncated', codings } };
  return { codings };
}

function withheldFor(error: unknown, codings: readonly string[]): DecodedContent {
  return {
    kind: 'withheld',
    reason: isTooLarge(error) ? 'decoded_body_too_large' : 'corrupt_compressed_body',
    codings,
  };
}

function isTooLarge(error: unknown): boolean {
  return error instanceof RangeError || (error as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE';
}

function isSupported(coding: string): boolean {
  return coding === 'gzip' || coding === 'x-gzip' || coding === 'deflate' || coding === 'br';
}

/*
 * The body is handed to the decoder whole and finished in the same call (`flush` is the finish flag), which is what the
 * sync API does; the async one would otherwise write it with no flush first and finish in a second call: the same
 * bytes, but a stream both too large and corrupt could then be refused for the other reason. With the same calls on
 * the same 16 KiB output chunks, the bound and an error are met in the same order (the property test holds them to it).
 */
function brotliOptions(maxOutputLength: number): BrotliOptions {
  return {
    maxOutputLength,
    flush: constants.BROTLI_OPERATION_FINISH,
    finishFlush: constants.BROTLI_OPERATION_FINISH,
  };
}

function zlibOptions(maxOutputLength: number): ZlibOptions {
  return { maxOutputLength, flush: constants.Z_FINISH, finishFlush: constants.Z_FINISH };
}

function decodeOne(coding: string, bytes: Buffer, maxOutputLength: number): Buffer {
  switch (coding) {
    case 'br':
      return brotliDecompressSync(bytes, brotliOptions(maxOutputLength));
    case 'deflate':
      // RFC 9110 says zlib-wrapped; some servers send raw deflate. Both are tried, both bounded.
      try {
        return inflateSync(bytes, zlibOptions(maxOutputLength));
      } catch (error) {
        if (isTooLarge(error)) throw error;
        return inflateRawSync(bytes, zlibOptions(maxOutputLength));
      }
    default:
      return gunzipSync(bytes, zlibOptions(maxOutputLength));
  }
}

/** `decodeOne`, step for step, on the thread pool. */
async function decodeOneAsync(coding: string, bytes: Buffer, maxOutputLength: number): Promise<Buffer> {
  switch (coding) {
    case 'br':
      return decodeOffLoop(createBrotliDecompress(brotliOptions(maxOutputLength)), bytes, maxOutputLength);
    case 'deflate':
      try {
        return await decodeOffLoop(createInflate(zlibOptions(maxOutputLength)), bytes, maxOutputLength);
      } catch (error) {
        if (isTooLarge(error)) throw error;
        return decodeOffLoop(createInflateRaw(zlibOptions(maxOutputLength)), bytes, maxOutputLength);
      }
    default:
      return decodeOffLoop(createGunzip(zlibOptions(maxOutputLength)), bytes, maxOutputLength);
  }
}

/** Loop time at most between turns while the decoded chunks are joined (as the scrubber's slices: sliced-work.ts). */
const joinSliceMs = 5;

/**
 * What node:zlib's async convenience call (`zlib.gunzip(buf, opts, cb)`) does — the whole body written and ended at
 * once, output counted chunk by chunk, the stream closed and `ERR_BUFFER_TOO_LARGE` as soon as it passes the bound —
 * except the join. That call joins the chunks with one `Buffer.concat` on the loop, and an 8 MiB buffer in memory the
 * process has not touched yet costs its page faults there: 25-55 ms measured on a 2-core VM, as long as the decode
 * itself. Here the chunks are copied into the result in slices that give the loop a turn every few milliseconds.
 */
async function decodeOffLoop(engine: Transform, input: Buffer, maxOutputLength: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let length = 0;
  await new Promise<void>((resolve, reject) => {
    engine.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      length += chunk.length;
      if (length <= maxOutputLength) return;
      engine.removeAllListeners('end');
      engine.destroy();
      reject(new RangeError(`the decoded body passes ${maxOutputLength} bytes`));
    });
    engine.on('error', (error) => {
      engine.removeAllListeners('end');
      reject(error);
    });
    engine.on('end', () => {
      engine.destroy();
      resolve();
    });
    engine.end(input);
  });
  const joined = Buffer.allocUnsafe(length);
  let offset = 0;
  let sliceStart = performance.now();
  for (const chunk of chunks) {
    offset += chunk.copy(joined, offset);
    if (performance.now() - sliceStart >= joinSliceMs) {
      await nextSlice();
      sliceStart = performance.now();
    }
  }
  return joined;
}
