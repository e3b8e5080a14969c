import { runSteps, type Steps } from './sliced-work.js';

/*
 * A stored deflate block (BTYPE 0) says its length twice: LEN, then NLEN, its one's complement. zlib refuses a block
 * whose two disagree ("invalid stored block lengths") and stops there; a more lenient decoder reads LEN and ignores
 * NLEN (fflate does). A hostile remote can split a secret across stored blocks with a wrong NLEN: zlib, and so a
 * scrubber searching what zlib decodes, never sees it whole; the agent's lenient decoder gives it out.
 *
 * mendStoredLengthSteps walks a stream's blocks as such a decoder does (RFC 1951: stored blocks skipped by LEN,
 * Huffman blocks decoded symbol by symbol through lookup tables, without keeping their output) and returns a copy in
 * which every stored block's NLEN is LEN's complement, cut where the walk stopped: zlib then decodes exactly what the
 * lenient decoder reads. The walk refuses nothing zlib accepts (it stops only where zlib stops too, or later), so no
 * block zlib would reach is missed. It also reads a dynamic block whose Huffman codes zlib refuses and fflate reads (an
 * incomplete code: Walk.zlibRefuses); no NLEN mended makes zlib read that, so the copy is then the output itself, as
 * stored blocks.
 *
 * Cost (THREAT-MODEL 4): the walk is linear in the symbols it decodes, charged to the caller's budget in units (a
 * symbol, a block header, a lookup-table entry built, 16 bytes copied: each ~5-20 ns), and written as steps
 * (sliced-work.ts) that yield every `unitsPerStep` units; stored data is skipped, free. Past the budget: 'unchecked'.
 */

/** gzip is not walked here: its members' deflate data is walked as raw deflate (gzip-members.ts, gzipMembers). */
export type DeflateFormat = 'raw' | 'zlib';

export interface WalkBudget {
  /** Walk units (symbols decoded, block headers, table entries built, 16-byte copies) left in this scrub. */
  walkUnitsLeft: number;
}

/** Where a stream's stored blocks that held data lie in its output, and how many bytes Huffman blocks produced. */
export interface StoredPieceSpans {
  readonly huffmanBytes: number;
  /**
   * Bytes stored blocks produced, up to and with each stored block that held data, in order: when only stored blocks
   * produced the output (huffmanBytes 0), where each ends in it (the last may lie past what a copy holds, when its data
   * is cut). Between two of them the output joins bytes that are not next to each other in the input.
   */
  readonly pieceEnds: Uint32Array;
  /**
   * Where each of them starts in the output, whatever else produced output: with `pieceEnds`, the output's bytes that
   * lie as they are in the input.
   */
  readonly pieceStarts: Uint32Array;
}

/** A mended copy, and whether anything in it came out of a Huffman block (not only stored blocks' own bytes). */
export interface Mended extends StoredPieceSpans {
  readonly copy: Buffer;
  /**
   * When the copy is re-encoded (a block zlib refuses and a lenient decoder reads, Walk.zlibRefuses): the bytes of the
   * input the stream takes (where the walk stopped or the final block ended). The copy's own length says nothing then:
   * it is the output, as stored blocks.
   */
  readonly inputBytes?: number;
}

/** Units walked between two yields (~0.5-2 ms). */
const unitsPerStep = 1 << 16;

/** A lenient decoder reads nothing but one stored block's data: input bytes `at` to `end`, as they are. */
export interface InPlace {
  readonly inPlace: readonly [at: number, end: number];
}

/**
 * A copy of `input` with every stored block's NLEN mended, cut where a lenient decoder stops; undefined when no stored
 * block disagrees and no block needs a lenient decoder (zlib already reads what a lenient decoder does); InPlace when a
 * lenient decoder reads nothing but one stored block's data (bytes the input holds as they are, and all zlib gave
 * before it stopped too), unless `inPlace` is false (a gzip member's output joined to the next member's: the copy is
 * returned then too); 'unchecked' when the budget ran out first. When a Huffman block zlib refuses is read
 * (Walk.zlibRefuses: an incomplete code), no NLEN mended makes zlib read it: the copy is then the lenient decoder's
 * output itself, decoded by the walk (at most `outputBytesMax` bytes), as stored blocks behind the same header.
 */
export function* mendStoredLengthSteps(
  format: DeflateFormat,
  input: Buffer,
  budget: WalkBudget,
  inPlace = true,
  outputBytesMax = Number.POSITIVE_INFINITY,
): Steps<Mended | InPlace | 'unchecked' | undefined> {
  if (budget.walkUnitsLeft <= 0) return 'unchecked';
  const walk = new Walk(input, budget);
  const end = yield* walk.blocks(format === 'raw' ? 0 : 2);
  if (end === 'unchecked') return end;
  // Where the walk stopped, or where the final block ended (the stream ends there).
  const cut = Math.min(input.length, Math.ceil(end.bit / 8));
  if (!walk.charge()) return 'unchecked';
  if (walk.mendCount === 0 && !walk.zlibRefuses) return undefined;
  // One stored block and nothing else: what a lenient decoder gives is bytes the input holds as they are.
  if (inPlace && walk.huffmanBytes === 0 && walk.storedPieces <= 1) {
    const at = Math.min(input.length, walk.firstPieceAt);
    return { inPlace: [at, Math.min(input.length, at + (walk.pieceEnds[0] ?? 0))] };
  }
  if (walk.zlibRefuses) return yield* reencodedSteps(format, input, budget, walk, cut, outputBytesMax);
  // The copy is cut where the walk stopped, and charged too: 16 copied bytes cost a unit.
  budget.walkUnitsLeft -= cut / 16;
  if (budget.walkUnitsLeft < 0) return 'unchecked';
  const copy = Buffer.from(input.subarray(0, cut));
  for (let i = 0; i < walk.mendCount; i++) {
    const lenAt = walk.mends[i]!;
    if (lenAt + 4 <= cut) copy.writeUInt16LE(input.readUInt16LE(lenAt) ^ 0xffff, lenAt + 2);
  }
  return {
    copy,
    huffmanBytes: walk.huffmanBytes,
    pieceEnds: walk.pieceEnds.subarray(0, walk.storedPieces),
    pieceStarts: walk.pieceStarts.subarray(0, walk.storedPieces),
  };
}

/** The maximum data of one stored block (LEN is 16 bits). */
const storedBlockBytesMax = 0xffff;

/**
 * mendStoredLengthSteps for a stream with a block zlib refuses: the lenient decoder's output, decoded by a second walk
 * that keeps it (the first only counted it), as non-final stored blocks behind the zlib header if any, so that zlib's
 * streaming decode gives exactly that output. The output's bytes are charged like a mended copy's (16 bytes a unit).
 */
function* reencodedSteps(
  format: DeflateFormat,
  input: Buffer,
  budget: WalkBudget,
  counted: Walk,
  cut: number,
  outputBytesMax: number,
): Steps<Mended | 'unchecked' | undefined> {
  const outputBytes = Math.min(counted.outputBytes, outputBytesMax);
  if (outputBytes === 0) return undefined;
  budget.walkUnitsLeft -= outputBytes / 16;
  if (budget.walkUnitsLeft < 0) return 'unchecked';
  const walk = new Walk(input, budget, false, Buffer.alloc(outputBytes));
  const end = yield* walk.blocks(format === 'raw' ? 0 : 2);
  if (end === 'unchecked' || !walk.charge()) return 'unchecked';
  const output = walk.out!.subarray(0, Math.min(outputBytes, walk.outputBytes));
  const header = format === 'zlib' ? input.subarray(0, 2) : Buffer.alloc(0);
  const blocks = Math.max(1, Math.ceil(output.length / storedBlockBytesMax));
  const copy = Buffer.alloc(header.length + blocks * 5 + output.length);
  header.copy(copy);
  for (let block = 0, at = header.length; block < blocks; block++) {
    const data = output.subarray(block * storedBlockBytesMax, (block + 1) * storedBlockBytesMax);
    // BFINAL 0, BTYPE 00, then LEN and NLEN: zlib reads it and waits for more, as for a stream cut where it stopped.
    copy[at] = 0;
    copy.writeUInt16LE(data.length, at + 1);
    copy.writeUInt16LE(data.length ^ 0xffff, at + 3);
    data.copy(copy, at + 5);
    at += 5 + data.length;
  }
  return {
    copy,
    huffmanBytes: counted.huffmanBytes,
    pieceEnds: counted.pieceEnds.subarray(0, counted.storedPieces),
    pieceStarts: counted.pieceStarts.subarray(0, counted.storedPieces),
    inputBytes: cut,
  };
}

/**
 * How many bytes of `input` (a stream of `format` from its first byte) a lenient decoder reads as the walk reads it
 * (NLEN ignored, the codes zlib refuses that it emulates read): up to where the walk stops (the first bit it could not
 * read, rounded up to a byte) or its last block ends; 'unchecked' when the budget ran out first. What the stream gives
 * depends on these bytes only: one that ends or stops before some byte gives the same output whatever follows.
 */
export function* lenientExtentSteps(
  format: DeflateFormat,
  input: Buffer,
  budget: WalkBudget,
): Steps<number | 'unchecked'> {
  if (budget.walkUnitsLeft <= 0) return 'unchecked';
  const walk = new Walk(input, budget);
  const end = yield* walk.blocks(format === 'raw' ? 0 : 2);
  if (end === 'unchecked') return end;
  const extent = Math.min(input.length, Math.ceil(end.bit / 8));
  return walk.charge() ? extent : 'unchecked';
}

/**
 * The stored pieces of a stream of `format` (from its first byte) as zlib reads it (a stored block whose NLEN disagrees
 * stops the walk, as it stops zlib); 'unchecked' when the budget ran out first. Stored data costs nothing to walk.
 */
export function* storedPieceSpansSteps(
  format: DeflateFormat,
  input: Buffer,
  budget: WalkBudget,
): Steps<StoredPieceSpans | 'unchecked'> {
  if (budget.walkUnitsLeft <= 0) return 'unchecked';
  const walk = new Walk(input, budget, true);
  if ((yield* walk.blocks(format === 'raw' ? 0 : 2)) === 'unchecked' || !walk.charge()) return 'unchecked';
  return {
    huffmanBytes: walk.huffmanBytes,
    pieceStarts: walk.pieceStarts.subarray(0, walk.storedPieces),
    pieceEnds: walk.pieceEnds.subarray(0, walk.storedPieces),
  };
}

/**
 * How many bytes a lenient decoder (NLEN ignored) gets out of `input`, raw deflate from its first byte, before it
 * stops or the stream ends: no fewer than zlib gets from any prefix of `input`, or of its mended copy, since the walk
 * stops nowhere before zlib does (stored blocks count their LEN, however much of their data `input` holds). So a start
 * this says holds fewer bytes than the shortest part needs no decoder call: nothing it decodes to can hold one.
 * 'unchecked' when the budget ran out first.
 */
export function* lenientOutputBytesSteps(input: Buffer, budget: WalkBudget): Steps<number | 'unchecked'> {
  if (budget.walkUnitsLeft <= 0) return 'unchecked';
  const walk = new Walk(input, budget);
  const end = yield* walk.blocks(0);
  if (end === 'unchecked' || !walk.charge()) return 'unchecked';
  return walk.producedBytes;
}

/** What a lenient decoder gets out of raw deflate that gives it fewer bytes than a bound (lenientShortOutputSteps). */
export interface ShortOutput {
  readonly bytes: Buffer;
  /** Bytes of the input read: up to where the walk stopped (rounded up to a byte) or the final block ended. */
  readonly consumed: number;
}

/**
 * What a lenient decoder (NLEN ignored) gets out of `input`, raw deflate from its first byte, when that is fewer than
 * `bytesBelow` bytes: the bytes themselves, decoded by the walk (literals, copies, stored data as far as `input` holds
 * it), with no decoder call. A number (no fewer than `bytesBelow`) when it gets at least that many, counted as
 * lenientOutputBytesSteps counts; 'unchecked' when the budget ran out first.
 */
export function* lenientShortOutputSteps(
  input: Buffer,
  budget: WalkBudget,
  bytesBelow: number,
): Steps<ShortOutput | number | 'unchecked'> {
  if (budget.walkUnitsLeft <= 0) return 'unchecked';
  const walk = new Walk(input, budget, false, Buffer.alloc(bytesBelow));
  const end = yield* walk.blocks(0);
  if (end === 'unchecked' || !walk.charge()) return 'unchecked';
  if (walk.producedBytes >= bytesBelow) return walk.producedBytes;
  return {
    bytes: walk.out!.subarray(0, walk.outputBytes),
    consumed: Math.min(input.length, Math.ceil(end.bit / 8)),
  };
}

/** mendStoredLengthSteps run at once: the copy, or undefined / 'unchecked' as it says. */
export function mendStoredLengths(
  format: DeflateFormat,
  input: Buffer,
  budget: WalkBudget,
): Buffer | 'unchecked' | undefined {
  const mended = runSteps(mendStoredLengthSteps(format, input, budget));
  return typeof mended !== 'object' ? mended : 'copy' in mended ? mended.copy : undefined;
}

const lengthBase = Uint16Array.from([
  3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258,
]);
const lengthExtra = Uint8Array.from([
  0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0,
]);
const distanceBase = Uint16Array.from([
  1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145,
  8193, 12289, 16385, 24577,
]);
const distanceExtra = Uint8Array.from([
  0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13,
]);
/**
 * Distance symbol 30 as fflate reads it (zlib refuses 30 and 31: "invalid distance code"): its base table runs one past
 * 29's range with no extra bits, 32,769 back. Symbol 31 falls off the table's end (NaN): a copy of zeros.
 */
const distance30Reach = 32_769;
/** The order code length code lengths are sent in (RFC 1951 3.2.7). */
const codeLengthOrder = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15];

/**
 * A canonical Huffman code as a lookup table indexed by the next `bits` input bits (least significant first): each
 * entry is symbol << 4 | code length, 0 where no code starts (an incomplete code's gaps).
 */
interface Code {
  readonly table: Int32Array;
  readonly bits: number;
  /** zlib builds it (inflate_table): not over-subscribed, and complete unless it is one code of one bit. */
  readonly accepted: boolean;
  /**
   * A lenient decoder builds it: not over-subscribed (fflate's table for an incomplete code has the same gaps as this
   * one; an over-subscribed code's it overwrites in an order of its own, not emulated here).
   */
  readonly readable: boolean;
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
  const readable = left >= 0;
  const table = new Int32Array(1 << longest);
  // An over-subscribed code has no table; an incomplete one (the fixed distance code: 30 of 32) has gaps.
  if (left < 0) return { table, bits: longest, accepted, readable };
  const next = new Uint16Array(16);
  for (let length = 1, code = 0; length < 16; length++) {
    code = (code + count[length - 1]!) << 1;
    next[length] = code;
  }
  for (let symbol = 0; symbol < lengths.length; symbol++) {
    const length = lengths[symbol]!;
    if (length === 0) continue;
    const code = next[length]!++;
    let reversed = 0;
    for (let i = 0; i < length; i++) reversed |= ((code >> i) & 1) << (length - 1 - i);
    for (let index = reversed; index < table.length; index += 1 << length) table[index] = (symbol << 4) | length;
  }
  return { table, bits: longest, accepted, readable };
}

const fixedLiteral = canonicalCode(
  Uint8Array.from({ length: 288 }, (_, s) => (s < 144 ? 8 : s < 256 ? 9 : s < 280 ? 7 : 8)),
);
// All 32 five-bit codes: zlib's and fflate's fixed tables both have 30 and 31 (zlib refuses them when met).
const fixedDistance = canonicalCode(new Uint8Array(32).fill(5));
const fixedCodes = { literal: fixedLiteral, distance: fixedDistance };

/** Why a walk stopped: the input ended or held what no decoder reads (stopped), or the final block ended. */
interface WalkEnd {
  readonly stopped: boolean;
  /** Where: the bit the failing structure starts at, or the input's end; or the final block's end. */
  readonly bit: number;
}

/** A walk's lists start empty and are made when a first entry comes (most walks of noise make none): never written. */
const noEntries = new Uint32Array(0);

/** A symbol or field could not be read: the input ended (truncated) or the code is not one (invalid). */
const truncated = -1;
const invalid = -2;

/** The next 32 - (bit & 7) >= 25 bits from `bit`, least significant first; past the input's end, zeros. */
function peek(src: Buffer, bit: number): number {
  const at = bit >>> 3;
  if (at + 3 < src.length) {
    return ((src[at]! | (src[at + 1]! << 8) | (src[at + 2]! << 16) | (src[at + 3]! << 24)) >>> (bit & 7)) >>> 0;
  }
  return (((src[at] ?? 0) | ((src[at + 1] ?? 0) << 8) | ((src[at + 2] ?? 0) << 16)) >>> (bit & 7)) >>> 0;
}

/** One symbol of `code` at `bit`: its table entry (symbol << 4 | length), or `truncated` / `invalid`. */
function decode(code: Code, src: Buffer, bit: number, endBit: number): number {
  const entry = code.table[peek(src, bit) & (code.table.length - 1)]!;
  const length = entry & 15;
  const available = endBit - bit;
  // Past the end the bits read as zeros: no code there, or a longer one than is left, is the input ending.
  if (length === 0) return available >= code.bits ? invalid : truncated;
  return length > available ? truncated : entry;
}

class Walk {
  private bit = 0;
  private readonly endBit: number;
  /** Bytes the stream produced so far: how far back a distance may reach. */
  private produced = 0;
  /** Units spent since the last charge to the budget. */
  private units = 0;
  /** Stored blocks that held data, and bytes Huffman blocks produced, over the whole walk. */
  storedPieces = 0;
  huffmanBytes = 0;
  /** Where the first stored block that held data starts its data in the input (when `storedPieces` > 0). */
  firstPieceAt = 0;
  /** Bytes stored blocks produced over the whole walk, and where each of the first `storedPieces` ended in them. */
  private storedBytes = 0;
  pieceEnds = noEntries;
  /** Where each of the first `storedPieces` started in the output. */
  pieceStarts = noEntries;
  /** The LEN offsets of the stored blocks whose NLEN disagrees: the first `mendCount` entries. */
  mends = noEntries;
  mendCount = 0;

  /**
   * The walk read a Huffman block zlib refuses to read and a lenient decoder reads (fflate, by its code): a code that
   * is incomplete but not over-subscribed (its gaps stop the decoder, as zlib's table would have none), a gap in the
   * code lengths' own code (read as lengths of 0 to the end, no bits taken), a repeat of the previous length with none
   * before it (0) or past the last length (cut there), no end-of-block code (the block runs to where the data stops),
   * more than 286 literal/length or 30 distance codes; or in its data length symbols 286 and 287 (copies of 260 and
   * 261), distance symbol 30 (32,769 back) or 31 (a copy of zeros).
   * What zlib gives then is not what the agent's decoder gives: mendStoredLengthSteps re-encodes the output.
   */
  zlibRefuses = false;

  /** The header being read met a leniency (readsAs): `zlibRefuses` once its codes are built and read. */
  private headerLenient = false;

  /** Bytes the walk's stream produced before it stopped or ended (`blocks`). */
  get producedBytes(): number {
    return this.produced;
  }

  /** Bytes a decoder gives out of the input: `producedBytes`, less a stored block's LEN past the input's end. */
  get outputBytes(): number {
    return this.storedCut ?? this.produced;
  }

  /** Output bytes when a stored block's data ran past the input's end (its LEN is counted whole in `produced`). */
  private storedCut: number | undefined;

  constructor(
    private readonly src: Buffer,
    private readonly budget: WalkBudget,
    /**
     * Read as zlib does: stop at a stored block whose NLEN disagrees and at a Huffman block whose codes zlib refuses.
     * Else read on as a lenient decoder does (fflate): NLEN ignored, and a block read whose codes are incomplete
     * (`zlibRefuses`).
     */
    private readonly asZlib = false,
    /** When given, the first bytes the stream produces are written here (as many as it holds). */
    readonly out?: Buffer,
  ) {
    this.endBit = src.length * 8;
  }

  /** Walks the blocks of one deflate stream from byte `at`, noting each disagreeing stored block's LEN offset. */
  *blocks(at: number): Steps<WalkEnd | 'unchecked'> {
    this.bit = at * 8;
    this.produced = 0;
    for (;;) {
      if (this.units >= unitsPerStep) {
        if (!this.charge()) return 'unchecked';
        yield;
      }
      // A block header: a stored block's is the whole cost of the block, and costs about two symbols.
      this.units += 2;
      const start = this.bit;
      const header = this.bits(3);
      if (header < 0) return { stopped: true, bit: start };
      const type = header >> 1;
      if (type === 0) {
        const src = this.src;
        const lenAt = (this.bit + 7) >>> 3;
        if (lenAt + 4 > src.length) return { stopped: true, bit: this.endBit };
        const length = src[lenAt]! | (src[lenAt + 1]! << 8);
        if ((length ^ (src[lenAt + 2]! | (src[lenAt + 3]! << 8))) !== 0xffff) {
          if (this.asZlib) return { stopped: true, bit: start };
          this.mend(lenAt);
        }
        if (length > 0 && this.storedPieces === 0) this.firstPieceAt = lenAt + 4;
        const held = Math.max(0, Math.min(length, src.length - (lenAt + 4)));
        if (this.out !== undefined && this.produced < this.out.length)
          src.copy(this.out, this.produced, lenAt + 4, lenAt + 4 + held);
        if (held < length) this.storedCut = this.produced + held;
        if (length > 0) this.piece(this.produced, length);
        this.produced += length;
        // Stored data is skipped, not read: it costs nothing however long it is.
        this.bit = (lenAt + 4 + length) * 8;
        if (this.bit > this.endBit) return { stopped: true, bit: this.endBit };
      } else if (type === 3) {
        return { stopped: true, bit: start };
      } else {
        // A Huffman block's setup (its codes, a generator to read it) costs about as much as 32 symbols.
        this.units += 32;
        const codes = type === 1 ? fixedCodes : this.dynamicCodes();
        if (typeof codes === 'number') return { stopped: true, bit: codes === truncated ? this.endBit : start };
        const end = yield* this.huffmanData(codes.literal, codes.distance);
        if (end !== undefined) return end;
      }
      if ((header & 1) === 1) return this.charge() ? { stopped: false, bit: this.bit } : 'unchecked';
    }
  }

  /** Reads one block's symbols up to end-of-block; a WalkEnd (or 'unchecked') when it stops inside. */
  private *huffmanData(literal: Code, distance: Code): Steps<WalkEnd | 'unchecked' | undefined> {
    const { src, endBit, out } = this;
    const outBytes = out?.length ?? 0;
    let bit = this.bit;
    let produced = this.produced;
    let huffmanBytes = 0;
    let units = 0;
    const stop = (at: number, code: number): WalkEnd => {
      this.bit = bit;
      this.produced = produced;
      this.huffmanBytes += huffmanBytes;
      this.units += units;
      return { stopped: true, bit: code === truncated ? endBit : at };
    };
    for (;;) {
      if (units >= unitsPerStep) {
        this.units += units;
        units = 0;
        if (!this.charge()) return 'unchecked';
        yield;
      }
      units += 1;
      const at = bit;
      const entry = decode(literal, src, bit, endBit);
      if (entry < 0) return stop(at, entry);
      const symbol = entry >> 4;
      bit += entry & 15;
      if (symbol < 256) {
        if (produced < outBytes) out![produced] = symbol;
        produced += 1;
        huffmanBytes += 1;
        continue;
      }
      if (symbol === 256) break;
      const l = symbol - 257;
      let length: number;
      if (l >= 29) {
        // Length symbols 286 and 287: zlib refuses them ("invalid literal/length code"), fflate reads lengths of 260 and
        // 261 (its table's bases run on past 258) with no extra bits.
        if (this.asZlib) return stop(at, invalid);
        this.zlibRefuses = true;
        length = 260 + l - 29;
      } else {
        const lengthBits = lengthExtra[l]!;
        if (bit + lengthBits > endBit) return stop(at, truncated);
        length = lengthBase[l]! + (peek(src, bit) & ((1 << lengthBits) - 1));
        bit += lengthBits;
      }
      const d = decode(distance, src, bit, endBit);
      if (d < 0) return stop(at, d);
      const symbolD = d >> 4;
      bit += d & 15;
      let reach: number;
      if (symbolD >= 30) {
        if (this.asZlib) return stop(at, invalid);
        reach = symbolD === 30 ? distance30Reach : 0;
      } else {
        const distanceBits = distanceExtra[symbolD]!;
        if (bit + distanceBits > endBit) return stop(at, truncated);
        reach = distanceBase[symbolD]! + (peek(src, bit) & ((1 << distanceBits) - 1));
        bit += distanceBits;
      }
      // zlib refuses a distance past what the stream produced so far ("invalid distance too far back"), as fflate does.
      if (reach > produced) return stop(at, invalid);
      if (reach === 0) {
        // Distance symbol 31: fflate copies from index NaN, which reads as zeros.
        this.zlibRefuses = true;
        out?.fill(0, produced, Math.min(produced + length, outBytes));
      } else {
        if (symbolD === 30) this.zlibRefuses = true;
        // A copy may overlap what it writes (a distance shorter than its length), byte by byte as a decoder copies.
        for (let k = produced; k < produced + length && k < outBytes; k++) out![k] = out![k - reach]!;
      }
      produced += length;
      huffmanBytes += length;
      // A length and a distance: two symbols.
      units += 1;
    }
    this.bit = bit;
    this.produced = produced;
    this.huffmanBytes += huffmanBytes;
    this.units += units;
    return undefined;
  }

  /** A dynamic block's header (RFC 1951 3.2.7): its two codes, or where it cannot be read. */
  private dynamicCodes(): { literal: Code; distance: Code } | number {
    this.headerLenient = false;
    const literals = this.bits(5);
    const distances = this.bits(5);
    const codeLengthCodes = this.bits(4);
    if (codeLengthCodes < 0) return truncated;
    // More codes than RFC 1951 has symbols (288 and 32 fit the fields): fflate reads their lengths, and the symbols past
    // 285 and 29 in the data as huffmanData says.
    if ((literals + 257 > 286 || distances + 1 > 30) && !this.readsAs(false, true)) return invalid;
    const codeLengths = new Uint8Array(19);
    for (let i = 0; i < codeLengthCodes + 4; i++) {
      const length = this.bits(3);
      if (length < 0) return truncated;
      codeLengths[codeLengthOrder[i]!] = length;
    }
    const lengthCode = canonicalCode(codeLengths, true);
    if (!this.readsAs(lengthCode.accepted, lengthCode.readable)) return invalid;
    const lengths = new Uint8Array(literals + 257 + distances + 1);
    for (let i = 0; i < lengths.length;) {
      const entry = decode(lengthCode, this.src, this.bit, this.endBit);
      // fflate reads a gap as a length of 0 that takes no bits: the same gap again, so every length left is 0. It reads
      // the bits past the input's end as zeros (as `peek` does), so a gap there is one too, however few bits are left.
      const gap = entry < 0 && lengthCode.table[peek(this.src, this.bit) & (lengthCode.table.length - 1)] === 0;
      if (gap && this.readsAs(false, true)) break;
      if (entry < 0) return entry;
      this.bit += entry & 15;
      const symbol = entry >> 4;
      if (symbol < 16) {
        lengths[i++] = symbol;
        continue;
      }
      // A repeat with no length before it repeats nothing fflate has: 0.
      if (symbol === 16 && i === 0 && !this.readsAs(false, true)) return invalid;
      const extra = this.bits(symbol === 16 ? 2 : symbol === 17 ? 3 : 7);
      if (extra < 0) return truncated;
      const repeat = extra + (symbol === 18 ? 11 : 3);
      if (i + repeat > lengths.length && !this.readsAs(false, true)) return invalid;
      lengths.fill(symbol === 16 ? (lengths[i - 1] ?? 0) : 0, i, i + repeat);
      i += repeat;
    }
    if (lengths[256] === 0 && !this.readsAs(false, true)) return invalid;
    const literal = canonicalCode(lengths.subarray(0, literals + 257));
    const distance = canonicalCode(lengths.subarray(literals + 257));
    // Every table entry built is a unit, as are the code lengths read.
    this.units += lengths.length + literal.table.length + distance.table.length;
    const readable =
      this.readsAs(literal.accepted, literal.readable) && this.readsAs(distance.accepted, distance.readable);
    if (!readable) return invalid;
    // Only a header read whole makes zlib's reading differ: one refused after a leniency stops both where zlib stops.
    if (this.headerLenient) this.zlibRefuses = true;
    return { literal, distance };
  }

  /**
   * Whether this walk reads a structure zlib reads (`accepted`) or only a lenient decoder does (`readable`): zlib's
   * walk reads only the first, a lenient walk both, noting when it read one zlib refuses (`headerLenient`).
   */
  private readsAs(accepted: boolean, readable: boolean): boolean {
    if (accepted) return true;
    if (this.asZlib || !readable) return false;
    this.headerLenient = true;
    return true;
  }

  private piece(at: number, length: number): void {
    if (this.storedPieces === this.pieceEnds.length) {
      const size = Math.max(16, this.pieceEnds.length * 2);
      [this.pieceEnds, this.pieceStarts] = [grown(this.pieceEnds, size), grown(this.pieceStarts, size)];
    }
    this.storedBytes += length;
    this.pieceStarts[this.storedPieces] = at;
    this.pieceEnds[this.storedPieces++] = this.storedBytes;
  }

  private mend(lenAt: number): void {
    if (this.mendCount === this.mends.length) this.mends = grown(this.mends, Math.max(16, this.mends.length * 2));
    this.mends[this.mendCount++] = lenAt;
  }

  /** Charges the units spent since the last charge; false when the budget is spent. */
  charge(): boolean {
    this.budget.walkUnitsLeft -= this.units;
    this.units = 0;
    return this.budget.walkUnitsLeft >= 0;
  }

  /** `n` bits (at most 16), least significant first (RFC 1951 3.1.1), or `truncated`. */
  private bits(n: number): number {
    if (this.bit + n > this.endBit) return truncated;
    const value = peek(this.src, this.bit) & ((1 << n) - 1);
    this.bit += n;
    return value;
  }
}

/** `entries` in a new array of `size`. */
function grown(entries: Uint32Array, size: number): Uint32Array<ArrayBuffer> {
  const next = new Uint32Array(size);
  next.set(entries);
  return next;
}
