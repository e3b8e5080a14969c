import fc from 'fast-check';
import type * as Zlib from 'node:zlib';
import { beforeEach, describe, expect, it, vi } from 'vitest';

/**
 * gzip that zlib refuses to read, or stops reading, and that a lenient decoder (fflate; lenient-inflate.ts is the
 * tests' stand-in, sharing no code with the scrubber) reads to the end: a wrong header CRC (FHCRC), reserved FLG bits
 * set, a secret split across two members whose first has a wrong trailer, and a member whose only stored block has a
 * wrong NLEN joined to the next. Each attack is proven real first (the lenient decoder gives the secret, zlib does
 * not), then scrubbed: the answer is redacted and a lenient decode of what the agent gets does not give the secret.
 * node:zlib is wrapped (not replaced) to watch the scrubber's decoder calls.
 */
const decoderCalls = vi.hoisted(() => [] as Array<{ region: string }>);

vi.mock('node:zlib', async (importOriginal) => {
  const zlib = await importOriginal<typeof Zlib>();
  const buffers = new WeakMap<ArrayBufferLike, number>();
  let nextBufferId = 0;
  const watched =
    <O>(format: string, decode: (input: Buffer, options?: O) => Buffer) =>
    (input: Buffer, options?: O): Buffer => {
      let id = buffers.get(input.buffer);
      if (id === undefined) buffers.set(input.buffer, (id = nextBufferId++));
      decoderCalls.push({ region: `${format}:${id}:${input.byteOffset}:${input.length}` });
      return decode(input, options);
    };
  return {
    ...zlib,
    inflateRawSync: watched('raw', zlib.inflateRawSync),
    inflateSync: watched('zlib', zlib.inflateSync),
    gunzipSync: watched('gzip', zlib.gunzipSync),
    brotliDecompressSync: watched('br', zlib.brotliDecompressSync),
  };
});

const zlibReal = await vi.importActual<typeof Zlib>('node:zlib');
const { secretParts, secretScrubber } = await import('./secret-scrubber.js');
const { lenientInflate } = await import('../testing/lenient-inflate.js');
type LenientOptions = Parameters<typeof lenientInflate>[2];
const { constants, crc32, deflateRawSync, gunzipSync, gzipSync } = zlibReal;

beforeEach(() => {
  decoderCalls.length = 0;
});

const tokenChar = fc.constantFrom(...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.');

interface HeaderFields {
  /** FLG bits 5-7 (reserved): zlib refuses a member with any set. */
  readonly reserved?: number;
  readonly extra?: Uint8Array;
  readonly name?: Uint8Array;
  readonly comment?: Uint8Array;
  /** FHCRC present: the low 16 bits of the header's CRC-32, XORed with this (0: right, else wrong). */
  readonly headerCrcXor?: number;
}

/** A gzip member of `plain`: header with the fields asked for, deflate data, and a right or wrong trailer. */
function member(plain: Buffer, fields: HeaderFields = {}, trailerXor = 0): Buffer {
  let flags = fields.reserved ?? 0;
  const parts: Buffer[] = [];
  if (fields.extra !== undefined) {
    flags |= 0x04;
    const xlen = Buffer.alloc(2);
    xlen.writeUInt16LE(fields.extra.length);
    parts.push(xlen, Buffer.from(fields.extra));
  }
  // Name and comment end at their first zero byte: the bytes are cut there and the zero added.
  const zeroEnded = (bytes: Uint8Array): Buffer => {
    const text = Buffer.from(bytes);
    const zero = text.indexOf(0);
    return Buffer.concat([zero < 0 ? text : text.subarray(0, zero), Buffer.from([0])]);
  };
  if (fields.name !== undefined) {
    flags |= 0x08;
    parts.push(zeroEnded(fields.name));
  }
  if (fields.comment !== undefined) {
    flags |= 0x10;
    parts.push(zeroEnded(fields.comment));
  }
  if (fields.headerCrcXor !== undefined) flags |= 0x02;
  let header = Buffer.concat([Buffer.from([0x1f, 0x8b, 0x08, flags, 0, 0, 0, 0, 0, 3]), ...parts]);
  if (fields.headerCrcXor !== undefined) {
    const crc16 = Buffer.alloc(2);
    crc16.writeUInt16LE((crc32(header) & 0xffff) ^ fields.headerCrcXor);
    header = Buffer.concat([header, crc16]);
  }
  const trailer = Buffer.alloc(8);
  trailer.writeUInt32LE((crc32(plain) ^ trailerXor) >>> 0);
  trailer.writeUInt32LE(plain.length, 4);
  return Buffer.concat([header, deflateRawSync(plain), trailer]);
}

/** What zlib gives of `stream` as a streaming gunzip: the output of the longest prefix it accepts. */
function zlibGives(stream: Buffer): Buffer {
  let best = Buffer.alloc(0);
  for (let length = 1; length <= stream.length; length++) {
    try {
      best = gunzipSync(stream.subarray(0, length), { finishFlush: constants.Z_SYNC_FLUSH });
    } catch {
      break;
    }
  }
  return best;
}

/**
 * Whether an agent that decodes leniently gets `token` out of `bytes`: gzip from every place a member starts, in the
 * bytes as they are and in the base64 they carry (every run of base64 characters, at each of four alignments).
 */
function agentGets(bytes: Buffer, token: string): boolean {
  const text = bytes.toString('latin1');
  const blobs = [bytes];
  for (const run of text.match(/[A-Za-z0-9+/=]{16,}/g) ?? [])
    for (let skip = 0; skip < 4; skip++) blobs.push(Buffer.from(run.slice(skip), 'base64'));
  return blobs.some((blob) => {
    for (let at = blob.indexOf(0x1f); at >= 0; at = blob.indexOf(0x1f, at + 1))
      if (lenientInflate('gzip', blob.subarray(at)).includes(token)) return true;
    return false;
  });
}

type Attack = 'header-crc' | 'reserved-flags' | 'split-members' | 'stored-member';

/** The attack's bytes: `plain` (which holds the token at `tokenAt`) in gzip that zlib does not read whole. */
function attackStream(
  attack: Attack,
  plain: Buffer,
  tokenAt: number,
  tokenLength: number,
  cut: number,
  fields: HeaderFields,
  wrong: number,
): Buffer {
  // A cut inside the token: each member holds less than the whole token.
  const split = tokenAt + 1 + Math.floor(cut * (tokenLength - 1));
  switch (attack) {
    case 'header-crc':
      return member(plain, { ...fields, headerCrcXor: wrong });
    case 'reserved-flags':
      return member(plain, { ...fields, reserved: ((wrong % 7) + 1) << 5 });
    case 'split-members':
      return Buffer.concat([member(plain.subarray(0, split), fields, wrong), member(plain.subarray(split))]);
    case 'stored-member': {
      // The first member's deflate data: one final stored block whose NLEN is wrong (zlib refuses it); when `wrong`
      // is odd, behind an empty fixed Huffman block (its header, end-of-block, then the stored block's header bits).
      const head = plain.subarray(0, split);
      const emptyHuffman = wrong % 2 === 1;
      const block = Buffer.alloc(emptyHuffman ? 6 : 5);
      if (emptyHuffman) block.set([0x02, 0x04]);
      else block[0] = 1;
      block.writeUInt16LE(head.length, block.length - 4);
      block.writeUInt16LE((head.length ^ 0xffff ^ wrong) & 0xffff, block.length - 2);
      const first = member(head, fields);
      const data = first.length - 8 - deflateRawSync(head).length;
      const stored = Buffer.concat([first.subarray(0, data), block, head, first.subarray(-8)]);
      return Buffer.concat([stored, member(plain.subarray(split))]);
    }
  }
}

const fieldsArbitrary: fc.Arbitrary<HeaderFields> = fc.record(
  {
    extra: fc.uint8Array({ maxLength: 24 }),
    // Odd contents: anything but a zero byte, a gzip signature included.
    name: fc.oneof(fc.uint8Array({ maxLength: 16 }), fc.constant(Uint8Array.from([0x1f, 0x8b, 0x08, 0x41]))),
    comment: fc.uint8Array({ maxLength: 16 }),
  },
  { requiredKeys: [] },
);

describe('gzip that zlib does not read whole and a lenient decoder does', () => {
  it.each(['header-crc', 'reserved-flags', 'split-members', 'stored-member'] as const)(
    '%s: the token is redacted, as bytes behind a prefix or as base64 in JSON',
    (attack) => {
      fc.assert(
        fc.property(
          fc.string({ unit: tokenChar, minLength: 8, maxLength: 40 }),
          fc.double({ min: 0, max: 0.99, noNaN: true }),
          fieldsArbitrary,
          fc.integer({ min: 1, max: 0xffff }),
          fc.constantFrom('bytes' as const, 'base64' as const),
          fc.nat(3),
          (token, cut, fields, wrong, encoding, glue) => {
            const plain = Buffer.from(`{"authorization":"Bearer ${token}"}`);
            const stream = attackStream(attack, plain, plain.indexOf(token), token.length, cut, fields, wrong);
            // The attack is real: a lenient decoder gives the token, zlib does not.
            expect(lenientInflate('gzip', stream).includes(token)).toBe(true);
            expect(zlibGives(stream).includes(token)).toBe(false);
            const sent =
              encoding === 'bytes'
                ? Buffer.concat([Buffer.from('binary:\x00\x01'), stream, Buffer.from('\x00tail')])
                : Buffer.from(`{"blob":"${'Q'.repeat(glue)}${stream.toString('base64')}"}`);
            expect(agentGets(sent, token)).toBe(true);
            const out = secretScrubber(secretParts({ kind: 'bearer', token })).scrub(sent);
            expect(out.redacted).toBe(true);
            expect(agentGets(Buffer.from(out.bytes), token)).toBe(false);
          },
        ),
        { numRuns: 60 },
      );
    },
  );

  it('a member with a wrong header CRC is read though zlib refuses it at once (no output at all)', () => {
    const token = 'canary-h34d3r-crc';
    const stream = member(Buffer.from(`Bearer ${token}`), { headerCrcXor: 1 });
    expect(() => gunzipSync(stream, { finishFlush: constants.Z_SYNC_FLUSH })).toThrow(/header crc/);
    expect(zlibGives(stream).length).toBe(0);
    const out = secretScrubber(secretParts({ kind: 'bearer', token })).scrub(stream);
    expect(out.redacted).toBe(true);
    expect(lenientInflate('gzip', Buffer.from(out.bytes)).includes(token)).toBe(false);
  });
});

/** As agentGets, and gzip inside what gzip gives, `depth` levels deep (bytes only). */
function agentGetsNested(bytes: Buffer, token: string, depth = 2, options?: LenientOptions): boolean {
  if (bytes.includes(token)) return true;
  if (depth === 0) return false;
  for (let at = bytes.indexOf(0x1f); at >= 0; at = bytes.indexOf(0x1f, at + 1)) {
    const out = lenientInflate('gzip', bytes.subarray(at), options);
    if (out.length > 0 && agentGetsNested(out, token, depth - 1, options)) return true;
  }
  return false;
}

/** A gzip member whose deflate data is one final stored block of `data` with a wrong NLEN (zlib refuses it). */
function storedMember(data: Buffer, nlenXor = 0x5a): Buffer {
  const block = Buffer.alloc(5);
  block[0] = 1;
  block.writeUInt16LE(data.length, 1);
  block.writeUInt16LE((data.length ^ 0xffff ^ nlenXor) & 0xffff, 3);
  return Buffer.concat([Buffer.from([0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 3]), block, data, Buffer.alloc(8)]);
}

describe('gzip that a lenient decoder joins across members', () => {
  it('gzip split across two members that are each one stored block with a wrong NLEN is read inside the join', () => {
    // Each member's output alone lies in the body as it is; joined, the two halves are gzip of the token, which no
    // byte of the body holds: the joined view is looked into again (it is not "stored only").
    const token = 'canary-st0r3d-n3st-t0k';
    const inner = gzipSync(Buffer.from(`{"authorization":"Bearer ${token}"}`));
    let tried = 0;
    for (let cut = 11; cut < inner.length - 4; cut++) {
      const [head, tail] = [inner.subarray(0, cut), inner.subarray(cut)];
      const body = Buffer.concat([Buffer.from('bin:'), storedMember(head), storedMember(tail), Buffer.from(':end')]);
      // The attack is real: neither half gives the token, the lenient join of the two does.
      if (agentGetsNested(Buffer.concat([storedMember(head), Buffer.from('|')]), token)) continue;
      if (agentGetsNested(Buffer.concat([Buffer.from('|'), storedMember(tail)]), token)) continue;
      expect(agentGetsNested(body, token)).toBe(true);
      tried++;
      const out = secretScrubber(secretParts({ kind: 'bearer', token })).scrub(body);
      expect(out.redacted).toBe(true);
      expect(agentGetsNested(Buffer.from(out.bytes), token)).toBe(false);
    }
    expect(tried).toBeGreaterThan(10);
  });

  it.each([1, 4, 4095, 4096, 9000])(
    'members with %i zero bytes between them are joined, as Python gzip.decompress joins them',
    (zeros) => {
      const token = 'canary-z3r0-p4dd1ng';
      const plain = Buffer.from(`{"authorization":"Bearer ${token}"}`);
      const python = { zeroPaddedMembers: true };
      for (let cut = plain.indexOf(token) + 1; cut < plain.indexOf(token) + token.length; cut += 3) {
        const members = [gzipSync(plain.subarray(0, cut)), Buffer.alloc(zeros), gzipSync(plain.subarray(cut))];
        const body = Buffer.concat([Buffer.from('bin:'), ...members, Buffer.from('\x00\x01end')]);
        // The attack is real: zlib's members are right, a decoder that stops at the zero bytes gets half the token,
        // Python's reads through them and gets all of it.
        expect(agentGetsNested(body, token, 1)).toBe(false);
        expect(agentGetsNested(body, token, 1, python)).toBe(true);
        const out = secretScrubber(secretParts({ kind: 'bearer', token })).scrub(body);
        expect(out.redacted).toBe(true);
        expect(agentGetsNested(Buffer.from(out.bytes), token, 2, python)).toBe(false);
        expect(out.bytes.toString('latin1').startsWith('bin:')).toBe(true);
      }
    },
  );
});

describe('gzip headers that share one data start', () => {
  it('are decoded once: headers whose names run to one zero byte cost one decode, and all are redacted', () => {
    // k headers with FNAME, each name running on through the headers after it to one shared zero byte: every header's
    // deflate data starts at the same byte. Decoding it once per header cost k decoder calls over the same data
    // (~50-65 ms each over ~900 KB of empty dynamic blocks that output nothing).
    const token = 'canary-sh4r3d-d4t4';
    const header = Buffer.from([0x1f, 0x8b, 0x08, 0x08, 1, 1, 1, 1, 1, 1]);
    const headers = 50;
    const data = deflateRawSync(Buffer.from(`{"authorization":"Bearer ${token}"}`));
    const body = Buffer.concat([
      Buffer.from('bin:'),
      ...Array.from({ length: headers }, () => header),
      Buffer.from([0]),
      data,
      Buffer.alloc(8),
    ]);
    // The attack is real from every header: each gives the token.
    const starts = Array.from({ length: headers }, (_, i) => 4 + i * header.length);
    for (const at of starts) expect(lenientInflate('gzip', body.subarray(at)).includes(token)).toBe(true);
    const out = secretScrubber(secretParts({ kind: 'bearer', token })).scrub(body);
    expect(out.redacted).toBe(true);
    expect(agentGets(Buffer.from(out.bytes), token)).toBe(false);
    expect(out.bytes.toString('latin1').startsWith('bin:')).toBe(true);
    // One decode of the shared data, not one per header.
    const dataCalls = decoderCalls.filter(
      (call) => call.region.startsWith('raw:') && call.region.endsWith(`:${data.length + 8}`),
    );
    expect(dataCalls.length).toBe(1);
  });
});

describe('gzip headers that each point their data at a different place in one long stream', () => {
  it('spend the budget of input consumed: the calls stop there and the rest is redacted', () => {
    // 200 headers, each with FEXTRA whose XLEN points its data at a different block of ~1 MiB of empty stored blocks:
    // each decode reads on to the end (~1 MiB) and outputs nothing, so neither the decoded-bytes budget nor sharing
    // a data start bounds it. (Empty dynamic Huffman blocks cost zlib ~50-70 ms a megabyte; stored ones keep this fast.)
    const headers = 200;
    const headerBytes = 12;
    const blocks = Buffer.concat([
      ...Array.from({ length: (1 << 20) / 5 }, () => Buffer.from([0, 0, 0, 0xff, 0xff])),
      Buffer.from([1, 0, 0, 0xff, 0xff]),
    ]);
    const head = Buffer.alloc(headers * headerBytes);
    for (let i = 0; i < headers; i++) {
      head.set([0x1f, 0x8b, 0x08, 0x04, 1, 1, 1, 1, 1, 1], i * headerBytes);
      head.writeUInt16LE(head.length - (i + 1) * headerBytes + i * 5, i * headerBytes + 10);
    }
    const body = Buffer.concat([head, blocks, Buffer.alloc(8)]);
    // Each header's data really is the blocks from its own place on: a lenient decoder reads them all (no output).
    expect(lenientInflate('gzip', body.subarray((headers - 1) * headerBytes)).length).toBe(0);
    const out = secretScrubber(secretParts({ kind: 'bearer', token: 'canary-1nput-budg3t' })).scrub(body);
    const dataCalls = decoderCalls.filter(
      (call) => call.region.startsWith('raw:') && Number(call.region.split(':')[3]) > 1 << 19,
    );
    // 64 MiB of input consumed at most: ~64 calls of ~1 MiB, not one per header; what is left is redacted unread.
    expect(dataCalls.length).toBeGreaterThan(32);
    expect(dataCalls.length).toBeLessThanOrEqual(66);
    expect(out.redacted).toBe(true);
  });
});

describe('honest gzip', () => {
  it('of several members is one view, each member decoded once: no member again on its own', () => {
    const token = 'canary-h0n35t-gz';
    const page = Buffer.from(JSON.stringify({ items: Array.from({ length: 40 }, (_, i) => `item ${i}`) }));
    const members = [page, Buffer.from(`"note":"Bearer ${token}"`), page].map((p) => gzipSync(p));
    const body = Buffer.concat(members);
    const out = secretScrubber(secretParts({ kind: 'bearer', token })).scrub(body);
    expect(out.redacted).toBe(true);
    expect(agentGets(Buffer.from(out.bytes), token)).toBe(false);
    const seen = new Map<string, number>();
    for (const call of decoderCalls) seen.set(call.region, (seen.get(call.region) ?? 0) + 1);
    // A member read again from its own signature would decode its data from the same place to the same end again.
    expect([...seen].filter(([, count]) => count > 1)).toEqual([]);
    expect(decoderCalls.filter((call) => call.region.startsWith('gzip:'))).toEqual([]);
  });

  it('of many small members (800: a multi-member file) is read through once and delivered whole', () => {
    const lines = Array.from({ length: 800 }, (_, i) => `{"id":${i},"name":"item ${i}","note":"nothing here"}\n`);
    const body = Buffer.concat(lines.map((line) => gzipSync(line)));
    const out = secretScrubber(secretParts({ kind: 'bearer', token: 'canary-m4ny-m3mb3r5' })).scrub(body);
    // Each member is read once, in the first member's view. Read again from its own signature, each would read on
    // through every member after it (gunzip did): quadratic, past the budget, and the answer was redacted unread.
    // Each member still costs a decoder call or more: past ~3,000 members the call bound is reached (redacted).
    expect(out.redacted).toBe(false);
    expect(Buffer.from(out.bytes).equals(body)).toBe(true);
  });

  it('of one member: the token inside is redacted over the member, the text around is kept', () => {
    // (Before, gunzip read on past the member for another one, failed there, and the redaction ran to the end.)
    const token = 'canary-0n3-m3mb3r';
    const gz = gzipSync(Buffer.from(`{"authorization":"Bearer ${token}"}`));
    const body = Buffer.concat([Buffer.from('before:'), gz, Buffer.from(':after')]);
    const out = secretScrubber(secretParts({ kind: 'bearer', token })).scrub(body);
    expect(out.redacted).toBe(true);
    expect(out.bytes.toString('latin1').startsWith('before:')).toBe(true);
    expect(out.bytes.toString('latin1').endsWith(':after')).toBe(true);
    expect(agentGets(Buffer.from(out.bytes), token)).toBe(false);
  });
});
