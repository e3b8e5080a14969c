import fc from 'fast-check';
import { brotliCompressSync, deflateRawSync, deflateSync, gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import {
  concurrentDecodesMax,
  decodeContent,
  decodeContentAsync,
  decodesRunning,
  type DecodedContent,
} from './decode-content.js';

const limits = { decodedBytesMax: 1024 * 1024 };
const plain = Buffer.from('{"authorization":"Bearer canary-0123456789"}');

describe('decodeContent', () => {
  it.each([
    ['gzip', gzipSync(plain)],
    ['x-gzip', gzipSync(plain)],
    ['deflate', deflateSync(plain)],
    ['br', brotliCompressSync(plain)],
  ])('when the remote compressed with %s anyway, the plain bytes come back for the scrubber', (coding, body) => {
    const decoded = decodeContent(body, coding, true, limits);
    expect(decoded).toMatchObject({ kind: 'decoded', codings: [coding] });
    expect(decoded.kind === 'decoded' && decoded.bytes.equals(plain)).toBe(true);
  });

  it('when deflate arrives raw (no zlib wrapper), it is still decoded', () => {
    const decoded = decodeContent(deflateRawSync(plain), 'Deflate', true, limits);
    expect(decoded.kind === 'decoded' && decoded.bytes.equals(plain)).toBe(true);
  });

  it('when codings are stacked, they are undone last first', () => {
    const decoded = decodeContent(brotliCompressSync(gzipSync(plain)), 'gzip, br', true, limits);
    expect(decoded.kind === 'decoded' && decoded.bytes.equals(plain)).toBe(true);
  });

  it('when there is no coding or identity, the bytes pass as they are', () => {
    expect(decodeContent(plain, undefined, true, limits)).toEqual({ kind: 'identity', bytes: plain });
    expect(decodeContent(plain, ' identity ', false, limits)).toEqual({ kind: 'identity', bytes: plain });
  });

  it.each([
    ['an unknown coding', plain, 'zstd', true, 'unsupported_content_encoding'],
    [
      'a stack deeper than two',
      gzipSync(gzipSync(gzipSync(plain))),
      'gzip, gzip, gzip',
      true,
      'unsupported_content_encoding',
    ],
    ['a body the channel kept only in part', gzipSync(plain), 'gzip', false, 'compressed_body_truncated'],
    ['bytes that are not gzip', plain, 'gzip', true, 'corrupt_compressed_body'],
    ['a cut gzip stream', gzipSync(plain).subarray(0, 20), 'gzip', true, 'corrupt_compressed_body'],
  ])(
    'when the body is %s, it is withheld (never passed through compressed)',
    (_what, body, coding, complete, reason) => {
      expect(decodeContent(body, coding, complete, limits)).toMatchObject({ kind: 'withheld', reason });
    },
  );

  it.each(['gzip', 'deflate', 'br'])(
    'when a %s bomb decodes past the bound, it is withheld, not inflated',
    (coding) => {
      const bomb = Buffer.alloc(16 * 1024 * 1024);
      const body =
        coding === 'gzip' ? gzipSync(bomb) : coding === 'deflate' ? deflateSync(bomb) : brotliCompressSync(bomb);
      expect(body.length).toBeLessThan(64 * 1024);
      expect(decodeContent(body, coding, true, limits)).toMatchObject({
        kind: 'withheld',
        reason: 'decoded_body_too_large',
      });
    },
  );
});

/** A coding as a remote may declare it, and how a remote (honest or not) may have applied it. */
const encoders: Readonly<Record<string, (bytes: Buffer) => Buffer>> = {
  gzip: (b) => gzipSync(b),
  'x-gzip': (b) => gzipSync(b, { level: 1 }),
  deflate: (b) => deflateSync(b),
  'deflate-raw': (b) => deflateRawSync(b),
  br: (b) => brotliCompressSync(b),
  identity: (b) => b,
  zstd: (b) => b,
};

/** What a remote can do to a well-formed body on the way: nothing, cut it, flip a byte, add bytes, or send noise. */
const damageArb = fc.oneof(
  fc.constant({ kind: 'none' as const }),
  fc.record({ kind: fc.constant('cut' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('flip' as const), at: fc.nat(), mask: fc.integer({ min: 1, max: 255 }) }),
  fc.record({ kind: fc.constant('append' as const), tail: fc.uint8Array({ maxLength: 16 }) }),
  fc.record({ kind: fc.constant('noise' as const), bytes: fc.uint8Array({ maxLength: 64 }) }),
);
type Damage = typeof damageArb extends fc.Arbitrary<infer T> ? T : never;

function damaged(body: Buffer, damage: Damage): Buffer {
  switch (damage.kind) {
    case 'none':
      return body;
    case 'cut':
      return body.subarray(0, damage.at % (body.length + 1));
    case 'flip': {
      if (body.length === 0) return body;
      const copy = Buffer.from(body);
      const at = damage.at % copy.length;
      copy.writeUInt8(copy.readUInt8(at) ^ damage.mask, at);
      return copy;
    }
    case 'append':
      return Buffer.concat([body, damage.tail]);
    case 'noise':
      return Buffer.from(damage.bytes);
  }
}

/**
 * Plain bytes that compress well (runs) or not at all (random), so small bounds are crossed and met exactly; some runs
 * are longer than the decoder's 16 KiB output chunk, so a bound or an error can fall in a later chunk.
 */
const plainArb = fc.oneof(
  fc.uint8Array({ maxLength: 600 }).map((b) => Buffer.from(b)),
  fc
    .tuple(fc.uint8Array({ minLength: 1, maxLength: 8 }), fc.oneof(fc.nat(4000), fc.nat(100_000)))
    .map(([unit, length]) => Buffer.alloc(length, Buffer.from(unit))),
);

function same(sync: DecodedContent, async: DecodedContent): void {
  expect({ ...async, bytes: undefined }).toEqual({ ...sync, bytes: undefined });
  if (sync.kind !== 'withheld' && async.kind !== 'withheld') expect(async.bytes.equals(sync.bytes)).toBe(true);
}

describe('decodeContentAsync (the broker decodes off the event loop: THREAT-MODEL 4)', () => {
  it('when any body arrives under any declared codings, it answers exactly what decodeContent answers', async () => {
    await fc.assert(
      fc.asyncProperty(
        plainArb,
        fc.array(fc.constantFrom(...Object.keys(encoders)), { maxLength: 3 }),
        damageArb,
        fc.boolean(),
        fc.oneof(fc.integer({ min: 1, max: 5000 }), fc.integer({ min: -2, max: 2 })),
        async (plain, applied, damage, complete, bound) => {
          // Applied in order, as Content-Encoding lists them; `deflate-raw` is declared as `deflate`.
          const body = damaged(
            applied.reduce<Buffer>((bytes, coding) => encoders[coding]!(bytes), plain),
            damage,
          );
          const declared = applied.map((c) => (c === 'deflate-raw' ? 'deflate' : c)).join(', ');
          // A bound near the plain length (-2..2 around it) as often as an arbitrary one: exactly at the limit counts.
          const decodedBytesMax = bound > 2 ? bound : Math.max(1, plain.length + bound);
          const limits = { decodedBytesMax };
          same(
            decodeContent(body, declared, complete, limits),
            await decodeContentAsync(body, declared, complete, limits),
          );
        },
      ),
      { numRuns: 1500 },
    );
  });

  it.each(['gzip', 'deflate', 'br', 'gzip, br', 'br, deflate'])(
    'when a %s bomb decodes past the bound, it is withheld as too large, as the sync decode says',
    async (declared) => {
      const bomb = Buffer.alloc(16 * 1024 * 1024);
      const body = declared
        .split(', ')
        .reduce<Buffer>(
          (bytes, coding) =>
            coding === 'gzip' ? gzipSync(bytes) : coding === 'deflate' ? deflateSync(bytes) : brotliCompressSync(bytes),
          bomb,
        );
      const sync = decodeContent(body, declared, true, limits);
      expect(sync).toMatchObject({ kind: 'withheld', reason: 'decoded_body_too_large' });
      same(sync, await decodeContentAsync(body, declared, true, limits));
    },
  );
});

describe('decodeContentAsync under many answers at once', () => {
  it(`runs at most ${concurrentDecodesMax} decodes at a time, each with the sync result`, async () => {
    const body = gzipSync(Buffer.alloc(4 * 1024 * 1024, 0x61));
    const tight = { decodedBytesMax: 8 * 1024 * 1024 };
    let most = 0;
    const watch = setInterval(() => (most = Math.max(most, decodesRunning())), 1);
    const decodes = Array.from({ length: 6 }, () => decodeContentAsync(body, 'gzip', true, tight));
    const results = await Promise.all(decodes).finally(() => clearInterval(watch));
    expect(most).toBe(concurrentDecodesMax);
    expect(decodesRunning()).toBe(0);
    const sync = decodeContent(body, 'gzip', true, tight);
    if (sync.kind !== 'decoded') throw new Error('the sync decode withheld the body');
    // Buffer.equals, not toEqual: a deep compare of 4 MiB element by element takes seconds.
    for (const decoded of results) expect(decoded.kind === 'decoded' && decoded.bytes.equals(sync.bytes)).toBe(true);
  });
});
