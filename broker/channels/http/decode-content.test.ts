import { brotliCompressSync, deflateRawSync, deflateSync, gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { decodeContent } from './decode-content.js';

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
