import { deflateRawSync, inflateRawSync } from 'node:zlib';

/** A byte a header value may hold (RFC 9110: field-vchar, obs-text, and a space or tab inside). */
export const headerLegalByte = (b: number): boolean => b === 0x09 || (b >= 0x20 && b <= 0x7e) || b >= 0x80;

/** `raw` with the padding bits after its last block set (deflate ignores them), as many as still inflate the same. */
function padded(raw: Buffer): Buffer {
  const want = inflateRawSync(raw);
  let best = raw;
  for (const mask of [0x80, 0xc0, 0xe0, 0xf0, 0xf8, 0xfc, 0xfe]) {
    const bytes = Buffer.from(raw);
    bytes[bytes.length - 1]! |= mask;
    try {
      if (inflateRawSync(bytes).equals(want)) best = bytes;
    } catch {
      // Those bits were the stream's: not padding.
    }
  }
  return best;
}

/**
 * Raw deflate holding `secret` whose every byte may stand in a response header, some past 0x7F (a hostile remote
 * searches for one: sent as such a header, undici hands it over as latin1 and an agent inflates the latin1 bytes).
 * Literals past 143 take 9 bits in deflate's fixed code, so a few of them in front move the bit alignment; a counter
 * around the secret varies the rest. Deterministic for a given secret; throws when none is found.
 */
export function headerLegalDeflate(secret: string): Buffer {
  for (let shift = 0; shift < 8; shift++)
    for (let i = 0; i < 3000; i++) {
      const plain = Buffer.concat([Buffer.alloc(shift, 0xf0), Buffer.from(`${i.toString(36)}=${secret}&${i * 7}`)]);
      const raw = deflateRawSync(plain);
      if (!raw.subarray(0, -1).every(headerLegalByte)) continue;
      const stream = padded(raw);
      const ends = [stream[0]!, stream[stream.length - 1]!];
      if (stream.every(headerLegalByte) && ends.every((b) => b > 0x20) && stream.some((b) => b >= 0x80)) return stream;
    }
  throw new Error('no header-legal deflate stream found for this secret');
}
