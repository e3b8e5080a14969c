import fc from 'fast-check';
import { constants, deflateRawSync, inflateRawSync, inflateSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { inflateSync as fflateInflate } from 'fflate';
import {
  dynamicBlock,
  fflateStreaming,
  incompleteCodeDeflate,
  tailGapBlock,
  type LengthSymbol,
} from '../testing/incomplete-code-deflate.js';
import { lenientInflate } from '../testing/lenient-inflate.js';
import { runSteps } from './sliced-work.js';
import {
  lenientOutputBytesSteps,
  lenientShortOutputSteps,
  mendStoredLengthSteps,
  mendStoredLengths,
} from './stored-block-lengths.js';

/** A stored block (not final) holding `data` whose NLEN is `nlen`. */
function stored(data: Uint8Array, nlen: number): Buffer {
  const header = Buffer.alloc(5);
  header.writeUInt16LE(data.length, 1);
  header.writeUInt16LE(nlen, 3);
  return Buffer.concat([header, data]);
}

const finalEmptyStored = Buffer.from([0x01, 0x00, 0x00, 0xff, 0xff]);

describe('mendStoredLengths', () => {
  it('gives zlib what a lenient decoder reads: stored, fixed, dynamic and incomplete-code blocks, cut anywhere', () => {
    const piece = fc.record({
      data: fc.oneof(
        fc.uint8Array({ maxLength: 60 }),
        fc.string({ maxLength: 200 }).map((t) => Buffer.from(t)),
      ),
      kind: fc.constantFrom('stored' as const, 'fixed' as const, 'dynamic' as const, 'incomplete' as const),
      nlen: fc.integer({ min: 0, max: 0xffff }),
      level: fc.integer({ min: 1, max: 9 }),
    });
    fc.assert(
      fc.property(fc.array(piece, { minLength: 1, maxLength: 6 }), fc.double({ min: 0, max: 1 }), (pieces, cut) => {
        const stream = Buffer.concat([
          ...pieces.map(({ data, kind, nlen, level }) =>
            kind === 'stored'
              ? stored(data, nlen)
              : kind === 'incomplete'
                ? incompleteCodeDeflate(data, { final: false })
                : deflateRawSync(data, {
                    finishFlush: constants.Z_FULL_FLUSH,
                    level,
                    strategy: kind === 'fixed' ? constants.Z_FIXED : constants.Z_DEFAULT_STRATEGY,
                  }),
          ),
          finalEmptyStored,
        ]);
        const sent = stream.subarray(0, Math.round(cut * stream.length));
        const lenient = lenientInflate('raw', sent);
        const budget = { walkUnitsLeft: 1 << 20 };
        const mended = mendStoredLengths('raw', sent, budget);
        expect(mended).not.toBe('unchecked');
        const zlibReads = (bytes: Buffer): Buffer | undefined => {
          try {
            return inflateRawSync(bytes, { finishFlush: constants.Z_SYNC_FLUSH });
          } catch {
            return undefined;
          }
        };
        if (mended !== undefined) expect(zlibReads(mended as Buffer)?.equals(lenient)).toBe(true);
        // Not mended: zlib already reads it all, or all a lenient decoder reads is one stored block's own bytes.
        else expect(zlibReads(sent)?.equals(lenient) === true || sent.includes(lenient)).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it('stops at its budget: a long chain of stored blocks is unchecked, not walked to the end', () => {
    const blocks = 300_000;
    const chain = Buffer.concat(Array.from({ length: blocks }, () => stored(Buffer.from('ab'), 0)));
    const budget = { walkUnitsLeft: 1000 };
    expect(mendStoredLengths('raw', chain, budget)).toBe('unchecked');
    // Two units a block, charged every 65 536 units: it stopped after the first charge past the budget, not at the end.
    expect(budget.walkUnitsLeft).toBeGreaterThan(-70_000);
    const enough = { walkUnitsLeft: 1 << 20 };
    expect(mendStoredLengths('raw', chain, enough)).toBeInstanceOf(Buffer);
    expect((1 << 20) - enough.walkUnitsLeft).toBeLessThanOrEqual(2 * blocks + chain.length / 16 + 2);
  });

  it('yields every ~65 000 units: a long walk is many short steps', () => {
    // 400 000 empty fixed blocks (10 bits each, 34 units): ~13.6 M units.
    const blocks = 400_000;
    const stream = Buffer.alloc(1 + (blocks * 10) / 8 + 5);
    stream.set([0x00, 0x00, 0x00, 0x34, 0x12]);
    for (let block = 0, bit = 5 * 8; block < blocks; block++, bit += 10) {
      stream[bit >> 3]! |= (2 << (bit & 7)) & 0xff;
      stream[(bit >> 3) + 1]! |= (2 << (bit & 7)) >> 8;
    }
    const budget = { walkUnitsLeft: 1e9 };
    const steps = mendStoredLengthSteps('raw', stream, budget);
    let yields = 0;
    while (steps.next().done !== true) yields += 1;
    const units = 1e9 - budget.walkUnitsLeft;
    expect(units).toBeGreaterThan(blocks * 34);
    expect(yields).toBeGreaterThanOrEqual(Math.floor(units / 65_536) - 1);
  });
});

describe('lenientOutputBytesSteps', () => {
  const zlibReads = (bytes: Buffer): Buffer | undefined => {
    try {
      return inflateRawSync(bytes, { finishFlush: constants.Z_SYNC_FLUSH });
    } catch {
      return undefined;
    }
  };
  /** Streams of every block kind (stored with any NLEN, fixed, dynamic), cut anywhere, noise after; and noise alone. */
  const sent = fc.oneof(
    fc
      .tuple(
        fc.array(
          fc.record({
            data: fc.oneof(
              fc.uint8Array({ maxLength: 40 }),
              fc.string({ maxLength: 80 }).map((t) => Buffer.from(t)),
            ),
            kind: fc.constantFrom('stored' as const, 'fixed' as const, 'dynamic' as const, 'incomplete' as const),
            nlen: fc.integer({ min: 0, max: 0xffff }),
          }),
          { minLength: 1, maxLength: 4 },
        ),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.uint8Array({ maxLength: 16 }),
      )
      .map(([pieces, cut, tail]) => {
        const stream = Buffer.concat([
          ...pieces.map(({ data, kind, nlen }) =>
            kind === 'stored'
              ? stored(data, nlen)
              : kind === 'incomplete'
                ? incompleteCodeDeflate(data, { final: false })
                : deflateRawSync(data, {
                    finishFlush: constants.Z_FULL_FLUSH,
                    strategy: kind === 'fixed' ? constants.Z_FIXED : constants.Z_DEFAULT_STRATEGY,
                  }),
          ),
          finalEmptyStored,
        ]);
        return Buffer.concat([stream.subarray(0, Math.round(cut * stream.length)), tail]);
      }),
    fc.uint8Array({ minLength: 1, maxLength: 64 }).map((a) => Buffer.from(a)),
  );

  // The scrubber decodes no raw deflate start this says gives fewer bytes than the shortest part: it must never say
  // less than zlib decodes from any prefix (the longest that decodes is what a failing stream gives), mended or not.
  it('is never less than zlib decodes from any prefix of the input or of its mended copy', () => {
    fc.assert(
      fc.property(sent, (input) => {
        const bound = runSteps(lenientOutputBytesSteps(input, { walkUnitsLeft: 1 << 20 }));
        if (bound === 'unchecked') throw new Error('the walk ran out of a budget it cannot spend here');
        const mended = mendStoredLengths('raw', input, { walkUnitsLeft: 1 << 20 });
        for (const bytes of mended instanceof Buffer ? [input, mended] : [input])
          for (let length = 1; length <= bytes.length; length++)
            expect(zlibReads(bytes.subarray(0, length))?.length ?? 0).toBeLessThanOrEqual(bound);
      }),
      { numRuns: 300 },
    );
  });

  // Output shorter than a part is kept without a decoder call when compressed data may lie inside it (the scrubber's
  // compressed-views.ts: raw deflate of raw deflate of a token): the walk's bytes must be what a decoder gives.
  it('lenientShortOutputSteps gives, below its bound, the bytes a lenient decoder gives first, and all zlib gives', () => {
    fc.assert(
      fc.property(sent, fc.integer({ min: 1, max: 120 }), (input, below) => {
        const got = runSteps(lenientShortOutputSteps(input, { walkUnitsLeft: 1 << 20 }, below));
        if (got === 'unchecked') throw new Error('the walk ran out of a budget it cannot spend here');
        const count = runSteps(lenientOutputBytesSteps(input, { walkUnitsLeft: 1 << 20 }));
        if (typeof got === 'number') {
          // At or past the bound: counted as lenientOutputBytesSteps counts.
          expect(got).toBe(count);
          expect(got).toBeGreaterThanOrEqual(below);
          return;
        }
        expect(got.bytes.length).toBeLessThan(below);
        expect(got.consumed).toBeLessThanOrEqual(input.length);
        // The walk stops where zlib stops, or later (a wrong NLEN), and nowhere a lenient decoder reads on from
        // (it may stop sooner than one that reads codes zlib refuses: fflate's length symbols 286 and 287).
        expect(lenientInflate('raw', input).subarray(0, got.bytes.length).equals(got.bytes)).toBe(true);
        const mended = mendStoredLengths('raw', input, { walkUnitsLeft: 1 << 20 });
        for (const bytes of mended instanceof Buffer ? [input, mended] : [input])
          for (let length = 1; length <= bytes.length; length++) {
            const zlib = zlibReads(bytes.subarray(0, length)) ?? Buffer.alloc(0);
            expect(got.bytes.subarray(0, zlib.length).equals(zlib)).toBe(true);
          }
      }),
      { numRuns: 300 },
    );
  });

  it('lenientShortOutputSteps gives a short stream whole: literals, copies that overlap, stored data cut short', () => {
    const text = Buffer.from('abcabcabcabcabcab-xyzxyz');
    for (const level of [1, 9]) {
      const got = runSteps(lenientShortOutputSteps(deflateRawSync(text, { level }), { walkUnitsLeft: 1 << 20 }, 40));
      expect(got).toEqual({ bytes: text, consumed: deflateRawSync(text, { level }).length });
    }
    // A stored block whose NLEN is wrong and whose data the input holds only 7 bytes of: those 7.
    const cut = stored(Buffer.from('0123456789'), 0x1234).subarray(0, 12);
    expect(runSteps(lenientShortOutputSteps(cut, { walkUnitsLeft: 1 << 20 }, 40))).toEqual({
      bytes: Buffer.from('0123456'),
      consumed: 12,
    });
  });

  it('counts what a stream gives, so a start that holds a part is decoded', () => {
    const part = Buffer.from('canary-0123456789abcdef');
    const bound = runSteps(lenientOutputBytesSteps(deflateRawSync(part), { walkUnitsLeft: 1 << 20 }));
    expect(bound).toBe(part.length);
    expect(runSteps(lenientOutputBytesSteps(deflateRawSync(part), { walkUnitsLeft: 0 }))).toBe('unchecked');
  });
});

// A Huffman code zlib refuses (incomplete: "invalid literal/lengths set") and fflate reads: no NLEN mended makes zlib read
// it, so the walk's own output is the copy (stored blocks). A token compressed so went past the scrubber (THREAT-MODEL 1).
describe('mendStoredLengthSteps on a block whose code is incomplete', () => {
  const zlibReads = (format: 'raw' | 'zlib', bytes: Buffer): Buffer =>
    (format === 'raw' ? inflateRawSync : inflateSync)(bytes, { finishFlush: constants.Z_SYNC_FLUSH });
  const before = fc.array(
    fc.record({ data: fc.uint8Array({ maxLength: 60 }), fixed: fc.boolean() }).map(({ data, fixed }) =>
      deflateRawSync(data, {
        finishFlush: constants.Z_FULL_FLUSH,
        strategy: fixed ? constants.Z_FIXED : constants.Z_DEFAULT_STRATEGY,
      }),
    ),
    { maxLength: 3 },
  );

  it('re-encodes the stream: zlib reads from the copy what fflate reads from the stream, and the stream is taken whole', () => {
    fc.assert(
      fc.property(before, fc.uint8Array({ minLength: 1, maxLength: 300 }), (blocks, data) => {
        const stream = Buffer.concat([...blocks, incompleteCodeDeflate(data)]);
        expect(() => inflateRawSync(stream)).toThrow('invalid literal/lengths set');
        const agent = Buffer.from(fflateInflate(stream));
        expect(agent.subarray(agent.length - data.length).equals(Buffer.from(data))).toBe(true);
        for (const format of ['raw', 'zlib'] as const) {
          const input = format === 'raw' ? stream : Buffer.concat([Buffer.from([0x78, 0x9c]), stream]);
          const mended = runSteps(mendStoredLengthSteps(format, input, { walkUnitsLeft: 1 << 20 }));
          if (typeof mended !== 'object' || !('copy' in mended)) throw new Error(`not re-encoded: ${String(mended)}`);
          expect(zlibReads(format, mended.copy).equals(agent)).toBe(true);
          expect(mended.inputBytes).toBe(input.length);
        }
      }),
      { numRuns: 200 },
    );
  });

  it('keeps at most outputBytesMax bytes of the output, and stops at its budget', () => {
    const data = Buffer.from('0123456789abcdef'.repeat(8));
    const stream = incompleteCodeDeflate(data);
    const mended = runSteps(mendStoredLengthSteps('raw', stream, { walkUnitsLeft: 1 << 20 }, true, 10));
    if (typeof mended !== 'object' || !('copy' in mended)) throw new Error('not re-encoded');
    expect(zlibReads('raw', mended.copy).equals(data.subarray(0, 10))).toBe(true);
    expect(runSteps(mendStoredLengthSteps('raw', stream, { walkUnitsLeft: 40 }))).toBe('unchecked');
  });

  it('counts and gives short outputs of such blocks as fflate reads them, without a decoder call', () => {
    const data = Buffer.from('short-but-whole');
    const stream = incompleteCodeDeflate(data);
    expect(runSteps(lenientOutputBytesSteps(stream, { walkUnitsLeft: 1 << 20 }))).toBe(data.length);
    expect(runSteps(lenientShortOutputSteps(stream, { walkUnitsLeft: 1 << 20 }, 40))).toEqual({
      bytes: data,
      consumed: stream.length,
    });
  });
});

// fflate's other leniencies in a dynamic block's header, each refused by zlib: the walk reads them as fflate does.
describe('code lengths zlib refuses and fflate reads', () => {
  const abc = { 97: 2, 98: 2, 99: 2, 256: 2 };
  const zeros = (n: number): LengthSymbol[] => Array.from({ length: n }, () => 0);
  const cases: ReadonlyArray<readonly [string, string, Buffer]> = [
    [
      'a repeat of the previous length with none before it (fflate repeats 0)',
      'invalid bit length repeat',
      dynamicBlock({
        literalCodes: 257,
        distanceCodes: 1,
        lengthsCode: { 16: 2, 18: 2, 2: 2, 0: 2 },
        lengths: [[16, 0], [18, 83], 2, 2, 2, [18, 127], [18, 7], 2, 0],
        literalCode: abc,
        data: [99, 97, 98, 97, 256],
      }),
    ],
    [
      'a repeat past the last length (fflate stops at the last)',
      'invalid bit length repeat',
      dynamicBlock({
        literalCodes: 257,
        distanceCodes: 1,
        lengthsCode: { 17: 2, 18: 2, 2: 2, 0: 2 },
        lengths: [[18, 86], 2, 2, 2, [18, 127], [18, 7], 2, [17, 7]],
        literalCode: abc,
        data: [99, 97, 98, 97, 256],
      }),
    ],
    [
      'more literal/length and distance codes than RFC 1951 has symbols (fflate reads their lengths)',
      'too many length or distance symbols',
      dynamicBlock({
        literalCodes: 288,
        distanceCodes: 32,
        lengthsCode: { 0: 1, 2: 1 },
        lengths: [...zeros(97), 2, 2, 2, ...zeros(156), 2, ...zeros(31 + 32)],
        literalCode: abc,
        data: [99, 97, 98, 97, 256],
      }),
    ],
    [
      // The code lengths' code has codes 00 and 01 only; the data's first code, 10 ('c'), reads there as its gap.
      'a gap in the code lengths code (fflate reads lengths of 0 to the end, taking no bits)',
      'invalid code lengths set',
      dynamicBlock({
        literalCodes: 257,
        distanceCodes: 1,
        lengthsCode: { 0: 2, 2: 2 },
        lengths: [...zeros(97), 2, 2, 2, ...zeros(156), 2],
        literalCode: abc,
        data: [99, 97, 98, 256],
      }),
    ],
  ];
  it('reads a gap in the code lengths’ code met in the input’s last bits, past its end as zeros, as fflate does', () => {
    for (const byte of [1, 48, 97, 127]) {
      const stream = tailGapBlock(byte);
      expect(() => inflateRawSync(stream)).toThrow('invalid code lengths set');
      expect(fflateStreaming(stream)).toEqual(Buffer.from([byte]));
      expect(runSteps(lenientShortOutputSteps(stream, { walkUnitsLeft: 1 << 20 }, 1 << 16))).toEqual({
        bytes: Buffer.from([byte]),
        consumed: stream.length,
      });
    }
  });
  it.each(cases)('%s', (_name, zlibSays, stream) => {
    const agent = fflateStreaming(stream);
    expect(agent.length).toBeGreaterThan(2);
    expect(() => inflateRawSync(stream)).toThrow(zlibSays);
    const budget = { walkUnitsLeft: 1 << 20 };
    expect(runSteps(lenientShortOutputSteps(stream, budget, 1 << 16))).toEqual({
      bytes: agent,
      consumed: stream.length,
    });
    const mended = runSteps(mendStoredLengthSteps('raw', stream, budget));
    if (typeof mended !== 'object' || !('copy' in mended)) throw new Error('not re-encoded');
    expect(inflateRawSync(mended.copy, { finishFlush: constants.Z_SYNC_FLUSH }).equals(agent)).toBe(true);
  });
});

it('takes no re-encoded copy when a leniency is met in a header that is then refused (the copy would be zlib’s own)', () => {
  // 'a', 'b' and end-of-block of two bits (an incomplete code, which fflate reads), then three distance codes of one bit
  // (over-subscribed, which the walk does not read): the block stops the walk, as it stops zlib, after the stored block.
  const stored = Buffer.concat([Buffer.from([0x00, 5, 0, 0xfa, 0xff]), Buffer.from('hello')]);
  const zeros = (n: number): LengthSymbol[] => Array.from({ length: n }, () => 0);
  const stream = Buffer.concat([
    stored,
    dynamicBlock({
      literalCodes: 257,
      distanceCodes: 3,
      lengthsCode: { 0: 2, 1: 2, 2: 2, 18: 2 },
      lengths: [...zeros(97), 2, 2, ...zeros(157), 2, 1, 1, 1],
      literalCode: { 97: 2, 98: 2, 256: 2 },
      data: [97, 256],
    }),
  ]);
  expect(() => inflateRawSync(stream)).toThrow('invalid literal/lengths set');
  expect(inflateRawSync(stored.subarray(0, 10), { finishFlush: constants.Z_SYNC_FLUSH }).toString()).toBe('hello');
  expect(runSteps(mendStoredLengthSteps('raw', stream, { walkUnitsLeft: 1 << 20 }))).toBeUndefined();
});

it('stops the walk where a repeat’s extra bits run past the input, as zlib stops and fflate waits', () => {
  // A complete code lengths' code (18: '0', 0: '10', 1: '11'), 'a' and 'b' of one bit, then an 18 whose 7 extra bits the
  // input does not hold: read as 10 zeros (-1 + 11), it let the walk decode the padding as literals no decoder gives.
  const stream = dynamicBlock({
    literalCodes: 257,
    distanceCodes: 1,
    lengthsCode: { 18: 1, 0: 2, 1: 2 },
    lengths: [[18, 86], 1, 1, [18, 127], 18],
    literalCode: {},
    data: [],
  });
  expect(inflateRawSync(stream, { finishFlush: constants.Z_SYNC_FLUSH }).length).toBe(0);
  expect(fflateStreaming(stream).length).toBe(0);
  const walked = runSteps(lenientShortOutputSteps(stream, { walkUnitsLeft: 1 << 20 }, 1 << 16));
  expect(walked).toEqual({ bytes: Buffer.alloc(0), consumed: stream.length });
});
