/*
 * A stored deflate block (BTYPE 0) says its length twice: LEN, then NLEN, its one's complement. zlib refuses a block
 * whose two disagree ("invalid stored block lengths") and stops there; a more lenient decoder reads LEN and ignores
 * NLEN (fflate does). A hostile remote can split a secret across stored blocks with a wrong NLEN: zlib, and so a
 * scrubber searching what zlib decodes, never sees it whole; the agent's lenient decoder gives it out.
 *
 * mendStoredLengths walks a stream's blocks as such a decoder does (RFC 1951: stored blocks skipped by LEN, Huffman
 * blocks decoded symbol by symbol without keeping their output) and returns a copy in which every stored block's NLEN
 * is LEN's complement, cut where the walk stopped: zlib then decodes exactly what the lenient decoder reads. The walk
 * refuses nothing zlib accepts (it stops only where zlib stops too, or later), so no block zlib would reach is missed.
 * It is linear in the stream and bounded by the caller's budget; stored data costs nothing to skip.
 */

export type DeflateFormat = 'raw' | 'zlib' | 'gzip';

export interface WalkBudget {
  /** Bytes of block headers and Huffman-coded data the walk may still read in this scrub (a copied byte: 1/16). */
  walkBytesLeft: number;
}

/**
 * A copy of `input` with every stored block's NLEN mended, cut where a lenient decoder stops; undefined when no stored
 * block disagrees (zlib already reads what a lenient decoder does) or a lenient decoder reads nothing but one stored
 * block's data (bytes the input holds as they are); 'unchecked' when the budget ran out first.
 */
export function mendStoredLengths(
  format: DeflateFormat,
  input: Buffer,
  budget: WalkBudget,
): Buffer | 'unchecked' | undefined {
  const mends: number[] = [];
  const walk = new Walk(input, budget);
  let at = format === 'raw' ? 0 : format === 'zlib' ? 2 : gzipDataStart(input, 0);
  let cut = input.length;
  while (at !== undefined) {
    const end = walk.blocks(at, (lenAt) => mends.push(lenAt));
    if (end === 'unchecked') return end;
    if (end.stopped) {
      cut = Math.min(input.length, Math.ceil(end.bit / 8));
      break;
    }
    // The final block ended: zlib and raw streams end here; a gzip member's trailer may be followed by another member.
    const trailerEnd = Math.ceil(end.bit / 8) + 8;
    at = format === 'gzip' ? gzipDataStart(input, trailerEnd) : undefined;
    cut = at === undefined ? Math.min(input.length, Math.ceil(end.bit / 8)) : cut;
  }
  // One stored block and nothing else: what a lenient decoder gives is bytes the input holds as they are.
  if (mends.length === 0 || (walk.huffmanBytes === 0 && walk.storedPieces <= 1)) return undefined;
  // The copy is cut where the walk stopped, and charged too: a copied byte costs a sixteenth of a walked one.
  budget.walkBytesLeft -= cut / 16;
  if (budget.walkBytesLeft < 0) return 'unchecked';
  const copy = Buffer.from(input.subarray(0, cut));
  for (const lenAt of mends) if (lenAt + 4 <= cut) copy.writeUInt16LE(input.readUInt16LE(lenAt) ^ 0xffff, lenAt + 2);
  return copy;
}

/** Where the deflate data of a gzip member starting at `at` begins (RFC 1952 header), or undefined. */
function gzipDataStart(src: Buffer, at: number): number | undefined {
  if (at + 10 > src.length || src[at] !== 0x1f || src[at + 1] !== 0x8b || src[at + 2] !== 0x08) return undefined;
  const flags = src[at + 3]!;
  if ((flags & 0xe0) !== 0) return undefined;
  let next = at + 10;
  if (flags & 0x04) next = next + 2 > src.length ? src.length + 1 : next + 2 + src.readUInt16LE(next);
  for (const flag of [0x08, 0x10]) {
    if ((flags & flag) === 0) continue;
    const zero = next < src.length ? src.indexOf(0, next) : -1;
    next = zero < 0 ? src.length + 1 : zero + 1;
  }
  if (flags & 0x02) next += 2;
  return next < src.length ? next : undefined;
}

const lengthBase = [
  3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258,
];
const lengthExtra = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0];
const distanceBase = [
  1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145,
  8193, 12289, 16385, 24577,
];
const distanceExtra = [
  0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13,
];
/** The order code length code lengths are sent in (RFC 1951 3.2.7). */
const codeLengthOrder = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15];

/** A canonical Huffman code: how many codes of each length, and the symbols in code order. */
interface Code {
  readonly count: Uint16Array;
  readonly symbol: Uint16Array;
  /** zlib builds it (inflate_table): not over-subscribed, and complete unless it is one code of one bit. */
  readonly accepted: boolean;
}

function canonicalCode(lengths: Uint8Array, codeLengths = false): Code {
  const count = new Uint16Array(16);
  for (const length of lengths) count[length]! += 1;
  count[0] = 0;
  let left = 1;
  let longest = 0;
  for (let length = 1; length < 16; length++) {
    left = (left << 1) - count[length]!;
    if (count[length]! > 0) longest = length;
    if (left < 0) break;
  }
  // No code at all is built too (a block without distances); reading from it fails where zlib's does.
  const accepted = longest === 0 || (left >= 0 && (left === 0 || (!codeLengths && longest === 1)));
  const offset = new Uint16Array(16);
  for (let length = 1; length < 15; length++) offset[length + 1] = offset[length]! + count[length]!;
  const symbol = new Uint16Array(lengths.length);
  lengths.forEach((length, s) => {
    if (length !== 0) symbol[offset[length]!++] = s;
  });
  return { count, symbol, accepted };
}

const fixedLiteral = canonicalCode(
  Uint8Array.from({ length: 288 }, (_, s) => (s < 144 ? 8 : s < 256 ? 9 : s < 280 ? 7 : 8)),
);
const fixedDistance = canonicalCode(new Uint8Array(30).fill(5));

/** Why a walk stopped: the input ended or held what no decoder reads (stopped), or the final block ended. */
interface WalkEnd {
  readonly stopped: boolean;
  /** Where: the bit the failing structure starts at, or the input's end; or the final block's end. */
  readonly bit: number;
}

/** A symbol or field could not be read: the input ended (truncated) or the code is not one (invalid). */
const truncated = -1;
const invalid = -2;

class Walk {
  private bit = 0;
  private readonly endBit: number;
  /** Bytes the stream produced so far: how far back a distance may reach. */
  private produced = 0;
  /** Where the bits charged to the budget were last counted from. */
  private chargedFrom = 0;
  /** Stored blocks that held data, and bytes Huffman blocks produced, over the whole walk. */
  storedPieces = 0;
  huffmanBytes = 0;

  constructor(
    private readonly src: Buffer,
    private readonly budget: WalkBudget,
  ) {
    this.endBit = src.length * 8;
  }

  /** Walks the blocks of one deflate stream from byte `at`, calling `mend` with each disagreeing stored block's LEN offset. */
  blocks(at: number, mend: (lenAt: number) => void): WalkEnd | 'unchecked' {
    this.bit = this.chargedFrom = at * 8;
    this.produced = 0;
    for (;;) {
      const start = this.bit;
      const header = this.bits(3);
      if (header < 0) return { stopped: true, bit: start };
      const type = header >> 1;
      if (type === 0) {
        const lenAt = Math.ceil(this.bit / 8);
        if (lenAt + 4 > this.src.length) return { stopped: true, bit: this.endBit };
        const length = this.src.readUInt16LE(lenAt);
        if ((length ^ this.src.readUInt16LE(lenAt + 2)) !== 0xffff) mend(lenAt);
        this.produced += length;
        if (length > 0) this.storedPieces += 1;
        this.bit = (lenAt + 4) * 8;
        if (!this.charge()) return 'unchecked';
        // Stored data is skipped, not read: it costs nothing however long it is.
        this.bit = this.chargedFrom = (lenAt + 4 + length) * 8;
        if (this.bit > this.endBit) return { stopped: true, bit: this.endBit };
      } else if (type === 3) {
        return { stopped: true, bit: start };
      } else {
        const codes = type === 1 ? { literal: fixedLiteral, distance: fixedDistance } : this.dynamicCodes();
        if (codes === 'unchecked') return codes;
        if (typeof codes === 'number') return { stopped: true, bit: codes === truncated ? this.endBit : start };
        const end = this.huffmanData(codes.literal, codes.distance);
        if (end !== undefined) return end;
      }
      if ((header & 1) === 1) return { stopped: false, bit: this.bit };
    }
  }

  /** Reads one block's symbols up to end-of-block; a WalkEnd (or 'unchecked') when it stops inside. */
  private huffmanData(literal: Code, distance: Code): WalkEnd | 'unchecked' | undefined {
    for (let symbols = 0; ; symbols++) {
      if ((symbols & 0xff) === 0 && !this.charge()) return 'unchecked';
      const at = this.bit;
      const symbol = this.decode(literal);
      const stop = (code: number): WalkEnd => ({ stopped: true, bit: code === truncated ? this.endBit : at });
      if (symbol < 0) return stop(symbol);
      if (symbol < 256) {
        this.produced += 1;
        this.huffmanBytes += 1;
      } else if (symbol === 256) return this.charge() ? undefined : 'unchecked';
      else {
        const l = symbol - 257;
        if (l >= 29) return stop(invalid);
        const extra = this.bits(lengthExtra[l]!);
        if (extra < 0) return stop(truncated);
        const d = this.decode(distance);
        if (d < 0 || d >= 30) return stop(d < 0 ? d : invalid);
        const distanceExtraBits = this.bits(distanceExtra[d]!);
        if (distanceExtraBits < 0) return stop(truncated);
        // zlib refuses a distance past what the stream produced so far ("invalid distance too far back").
        if (distanceBase[d]! + distanceExtraBits > this.produced) return stop(invalid);
        this.produced += lengthBase[l]! + extra;
        this.huffmanBytes += lengthBase[l]! + extra;
      }
    }
  }

  /** A dynamic block's header (RFC 1951 3.2.7): its two codes, or where it cannot be read. */
  private dynamicCodes(): { literal: Code; distance: Code } | number | 'unchecked' {
    const literals = this.bits(5);
    const distances = this.bits(5);
    const codeLengthCodes = this.bits(4);
    if (codeLengthCodes < 0) return truncated;
    if (literals + 257 > 286 || distances + 1 > 30) return invalid;
    const codeLengths = new Uint8Array(19);
    for (let i = 0; i < codeLengthCodes + 4; i++) {
      const length = this.bits(3);
      if (length < 0) return truncated;
      codeLengths[codeLengthOrder[i]!] = length;
    }
    const lengthCode = canonicalCode(codeLengths, true);
    if (!lengthCode.accepted) return invalid;
    const lengths = new Uint8Array(literals + 257 + distances + 1);
    for (let i = 0; i < lengths.length;) {
      const symbol = this.decode(lengthCode);
      if (symbol < 0) return symbol;
      if (symbol < 16) {
        lengths[i++] = symbol;
        continue;
      }
      if (symbol === 16 && i === 0) return invalid;
      const repeat = symbol === 16 ? this.bits(2) + 3 : symbol === 17 ? this.bits(3) + 3 : this.bits(7) + 11;
      if (repeat < 3) return truncated;
      if (i + repeat > lengths.length) return invalid;
      lengths.fill(symbol === 16 ? lengths[i - 1]! : 0, i, i + repeat);
      i += repeat;
    }
    if (lengths[256] === 0) return invalid;
    if (!this.charge()) return 'unchecked';
    const literal = canonicalCode(lengths.subarray(0, literals + 257));
    const distance = canonicalCode(lengths.subarray(literals + 257));
    return literal.accepted && distance.accepted ? { literal, distance } : invalid;
  }

  /** Charges what was read since the last charge; false when the budget is spent. */
  private charge(): boolean {
    this.budget.walkBytesLeft -= (this.bit - this.chargedFrom) / 8;
    this.chargedFrom = this.bit;
    return this.budget.walkBytesLeft >= 0;
  }

  /** `n` bits (at most 16), least significant first (RFC 1951 3.1.1), or `truncated`. */
  private bits(n: number): number {
    if (this.bit + n > this.endBit) return truncated;
    const value = (this.peek() >>> 0) & ((1 << n) - 1);
    this.bit += n;
    return value;
  }

  /** The next 16 bits or fewer, least significant first; past the end, zeros. */
  private peek(): number {
    const at = this.bit >> 3;
    const src = this.src;
    return ((src[at] ?? 0) | ((src[at + 1] ?? 0) << 8) | ((src[at + 2] ?? 0) << 16)) >>> (this.bit & 7);
  }

  /** One symbol of `code`, a bit at a time from the code's first bit (as puff.c does), or `truncated` / `invalid`. */
  private decode(code: Code): number {
    const bits = this.peek();
    const available = this.endBit - this.bit;
    let value = 0;
    let first = 0;
    let index = 0;
    for (let length = 1; length < 16; length++) {
      if (length > available) return truncated;
      value |= (bits >> (length - 1)) & 1;
      const count = code.count[length]!;
      if (value - count < first) {
        this.bit += length;
        const at = index + (value - first);
        return at >= 0 && at < code.symbol.length ? code.symbol[at]! : invalid;
      }
      index += count;
      first = (first + count) << 1;
      value <<= 1;
    }
    return invalid;
  }
}
