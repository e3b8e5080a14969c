import fc from 'fast-check';
import { constants, deflateRawSync, inflateRawSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
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
  it('gives zlib what a decoder that ignores NLEN reads: stored, fixed and dynamic blocks, cut anywhere', () => {
    const piece = fc.record({
      data: fc.oneof(
        fc.uint8Array({ maxLength: 60 }),
        fc.string({ maxLength: 200 }).map((t) => Buffer.from(t)),
      ),
      kind: fc.constantFrom('stored' as const, 'fixed' as const, 'dynamic' as const),
      nlen: fc.integer({ min: 0, max: 0xffff }),
      level: fc.integer({ min: 1, max: 9 }),
    });
    fc.assert(
      fc.property(fc.array(piece, { minLength: 1, maxLength: 6 }), fc.double({ min: 0, max: 1 }), (pieces, cut) => {
        const stream = Buffer.concat([
          ...pieces.map(({ data, kind, nlen, level }) =>
            kind === 'stored'
              ? stored(data, nlen)
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
            kind: fc.constantFrom('stored' as const, 'fixed' as const, 'dynamic' as const),
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
