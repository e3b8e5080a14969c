import { brotliDecompressSync, constants, gunzipSync, inflateRawSync, inflateSync } from 'node:zlib';

const syncFlush = { finishFlush: constants.Z_SYNC_FLUSH };

/**
 * How an agent decompresses what a remote sent, as a streaming decoder would: gzip, zlib, raw deflate and brotli,
 * each flushed so that a truncated or corrupt tail still yields what came before it. Each throws where its format is
 * not (the scrubber's attack tests try every one at several offsets).
 */
export const streamingDecoders: ReadonlyArray<(b: Buffer) => Buffer> = [
  (b) => gunzipSync(b, syncFlush),
  (b) => inflateSync(b, syncFlush),
  (b) => inflateRawSync(b, syncFlush),
  (b) => brotliDecompressSync(b, { finishFlush: constants.BROTLI_OPERATION_FLUSH }),
];
