import { brotliDecompressSync, constants, gunzipSync, inflateRawSync, inflateSync } from 'node:zlib';

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
 */
export function decodeContent(
  body: Buffer,
  contentEncoding: string | undefined,
  complete: boolean,
  limits: DecodeLimits,
): DecodedContent {
  const codings = (contentEncoding ?? '')
    .split(',')
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== '' && c !== 'identity');
  if (codings.length === 0) return { kind: 'identity', bytes: body };
  if (codings.length > codingsMax || !codings.every(isSupported))
    return { kind: 'withheld', reason: 'unsupported_content_encoding', codings };
  if (!complete) return { kind: 'withheld', reason: 'compressed_body_truncated', codings };
  let bytes = body;
  // Codings are listed in the order they were applied: undo them last first.
  for (const coding of [...codings].reverse()) {
    try {
      bytes = decodeOne(coding, bytes, limits.decodedBytesMax);
    } catch (error) {
      const tooLarge = error instanceof RangeError || (error as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE';
      return { kind: 'withheld', reason: tooLarge ? 'decoded_body_too_large' : 'corrupt_compressed_body', codings };
    }
  }
  return { kind: 'decoded', bytes, codings };
}

function isSupported(coding: string): boolean {
  return coding === 'gzip' || coding === 'x-gzip' || coding === 'deflate' || coding === 'br';
}

function decodeOne(coding: string, bytes: Buffer, maxOutputLength: number): Buffer {
  switch (coding) {
    case 'br':
      return brotliDecompressSync(bytes, { maxOutputLength, finishFlush: constants.BROTLI_OPERATION_FINISH });
    case 'deflate':
      // RFC 9110 says zlib-wrapped; some servers send raw deflate. Both are tried, both bounded.
      try {
        return inflateSync(bytes, { maxOutputLength });
      } catch (error) {
        if (error instanceof RangeError || (error as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') throw error;
        return inflateRawSync(bytes, { maxOutputLength });
      }
    default:
      return gunzipSync(bytes, { maxOutputLength });
  }
}
