import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { brotliCompressSync, brotliDecompressSync, constants } from 'node:zlib';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { blockCountExtraBits, brotliMayGive } from './brotli-header.js';

/**
 * brotliMayGive lets the scrubber skip a brotli decoder call (compressed-views.ts). Skipping a place where the decoder
 * would write a part is a leak, so the property that matters: whenever it says false, no prefix of the input decodes
 * to that many bytes. Checked against node:zlib's own decoder on brotli's own streams (every quality, window and mode,
 * cut anywhere), on those streams with bits flipped, and on noise.
 */

/** What a streaming decoder (the agent's) gets from `input`: the most any prefix of it decodes to. */
function mostDecoded(input: Buffer): number {
  let most = 0;
  for (let length = 1; length <= input.length; length++) {
    try {
      const out = brotliDecompressSync(input.subarray(0, length), {
        finishFlush: constants.BROTLI_OPERATION_FLUSH,
        maxOutputLength: 1 << 20,
      });
      most = Math.max(most, out.length);
    } catch {
      // This prefix fails, so every longer one does.
      break;
    }
  }
  return most;
}

const compress = (data: Buffer, quality: number, window: number, mode: number): Buffer =>
  brotliCompressSync(data, {
    params: {
      [constants.BROTLI_PARAM_QUALITY]: quality,
      [constants.BROTLI_PARAM_LGWIN]: window,
      [constants.BROTLI_PARAM_MODE]: mode,
    },
  });

/** Text, hex tokens and binary, as a remote may compress them. */
const data = fc.oneof(
  fc.string({ maxLength: 300 }).map((t) => Buffer.from(t)),
  fc.uint8Array({ minLength: 8, maxLength: 60 }).map((b) => Buffer.from(Buffer.from(b).toString('hex'))),
  fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b)),
);
const settings = fc.tuple(
  fc.integer({ min: 0, max: 11 }),
  fc.integer({ min: 10, max: 24 }),
  fc.integer({ min: 0, max: 2 }),
);

describe('brotliMayGive', () => {
  it('never says false where a prefix decodes to that many bytes: brotli’s own streams, cut anywhere', () => {
    fc.assert(
      fc.property(data, settings, fc.integer({ min: 1, max: 40 }), (plain, [quality, window, mode], bytes) => {
        const stream = compress(plain, quality, window, mode);
        if (plain.length >= bytes) expect(brotliMayGive(stream, bytes)).toBe(true);
        for (let cut = 1; cut < Math.min(stream.length, 64); cut++) {
          const prefix = stream.subarray(0, cut);
          if (!brotliMayGive(prefix, bytes)) expect(mostDecoded(prefix)).toBeLessThan(bytes);
        }
      }),
      { numRuns: 300 },
    );
  });

  // Without copies (compressed-views.ts: brotli inside a stored block reached other than where data starts), what
  // uncompressed meta-blocks write is not counted: only a compressed meta-block's commands make it say true.
  it('without copies, says true where a compressed meta-block may write, false where only uncompressed ones do', () => {
    fc.assert(
      fc.property(data, settings, (plain, [quality, window, mode]) => {
        const stream = compress(plain, quality, window, mode);
        // A stream of uncompressed meta-blocks only is its input's bytes between headers: none of them says true.
        if (!brotliMayGive(stream, 1, false))
          expect(stream.includes(plain.subarray(0, Math.min(plain.length, 16)))).toBe(true);
      }),
      { numRuns: 300 },
    );
    const token = Buffer.from('0123456789abcdef0123456789abcdef01234567');
    expect(brotliMayGive(brotliCompressSync(token), 40, false)).toBe(true);
    const noise = Buffer.from(createHash('sha512').update('copied').digest());
    const copiedOnly = brotliCompressSync(noise);
    expect([brotliMayGive(copiedOnly, 40), brotliMayGive(copiedOnly, 40, false)]).toEqual([true, false]);
  });

  it('never says false where a prefix decodes to that many bytes: those streams with bits flipped, and noise', () => {
    const flipped = fc
      .tuple(data, settings, fc.array(fc.nat(), { minLength: 1, maxLength: 3 }))
      .map(([plain, [quality, window, mode], flips]) => {
        const stream = Buffer.from(compress(plain, quality, window, mode).subarray(0, 48));
        for (const flip of flips) stream[(flip >>> 3) % stream.length]! ^= 1 << (flip & 7);
        return stream;
      });
    const noise = fc.uint8Array({ minLength: 1, maxLength: 40 }).map((b) => Buffer.from(b));
    fc.assert(
      fc.property(fc.oneof(flipped, noise), fc.integer({ min: 1, max: 40 }), (input, bytes) => {
        if (!brotliMayGive(input, bytes)) expect(mostDecoded(input)).toBeLessThan(bytes);
      }),
      { numRuns: 3000 },
    );
  });

  it('says true for large streams that switch block types and use context maps (every header part read)', () => {
    // This repository's own prose, a few hundred KB: brotli splits it into block types and models literal contexts.
    const text = Buffer.concat(
      ['../../README.md', '../../ARCHITECTURE.md', '../../docs/http-channel.md', '../../docs/benchmarks.md'].map(
        (file) => readFileSync(new URL(file, import.meta.url)),
      ),
    );
    for (const [quality, window, mode] of [
      [11, 22, 1],
      [9, 18, 0],
      [5, 16, 1],
      [11, 10, 2],
    ] as const) {
      const stream = compress(text, quality, window, mode);
      expect(brotliMayGive(stream, 40)).toBe(true);
      // Cut inside its headers (they run to hundreds of bytes here): nothing written yet, so false.
      expect(mostDecoded(stream.subarray(0, 24))).toBe(0);
      expect(brotliMayGive(stream.subarray(0, 24), 1)).toBe(false);
    }
  });

  it('says true for streams of mixed text and binary at every quality that splits blocks', () => {
    const text = readFileSync(new URL('../../ARCHITECTURE.md', import.meta.url));
    for (let i = 0; i < 16; i++) {
      const parts = Array.from({ length: 1 + (i % 4) }, (_, j) => {
        const length = 2_000 + ((i * 7919 + j * 104_729) % 30_000);
        const at = (i * 15_485_863 + j * 32_452_843) % (text.length - length);
        return j % 2 === 1 ? createHash('sha512').update(`${i}/${j}`).digest() : text.subarray(at, at + length);
      });
      expect(brotliMayGive(compress(Buffer.concat(parts), 4 + (i % 8), 16 + (i % 9), i % 3), 1)).toBe(true);
    }
  });

  it('reads a block count’s extra bits as RFC 7932 6 lists its ranges (each code’s range ends where the next starts)', () => {
    const firsts = [
      1, 5, 9, 13, 17, 25, 33, 41, 49, 65, 81, 97, 113, 145, 177, 209, 241, 305, 369, 497, 753, 1265, 2289, 4337, 8433,
      16625,
    ];
    expect(blockCountExtraBits).toHaveLength(26);
    firsts.slice(1).forEach((first, i) => expect(firsts[i]! + 2 ** blockCountExtraBits[i]!).toBe(first));
    // The last range runs to 16793840.
    expect(16625 + 2 ** blockCountExtraBits[25]! - 1).toBe(16_793_840);
  });

  it('turns away most noise, so the scrubber makes few brotli calls on ids', () => {
    // Ids as the scrubber tries them: 24 bytes that look random (sha256 of a counter).
    let turnedAway = 0;
    for (let i = 0; i < 2000; i++) {
      const id = createHash('sha256').update(`id${i}`).digest().subarray(0, 24);
      if (!brotliMayGive(id, 12)) turnedAway++;
    }
    expect(turnedAway).toBeGreaterThan(1800);
  });
});
