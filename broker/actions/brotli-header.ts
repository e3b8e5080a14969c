/*
 * Whether brotli data can decode to enough bytes to hold a secret part, told without a decoder call. The scrubber
 * tries brotli wherever data without a signature starts (compressed-views.ts): every id and word of an answer, each a
 * node:zlib decoder built and thrown away (~15-25 µs), and noise is nearly all of them. A brotli decoder writes nothing
 * before a compressed meta-block's first command (RFC 7932 9.2): first it reads the window size, the meta-block
 * header, the block type and count codes, the distance parameters, the context modes and maps and every prefix code
 * of the meta-block, and noise breaks one of those within a few bytes (a prefix code whose lengths do not fill its
 * space, a simple code naming a symbol twice or past its alphabet, nonzero padding, a run past a context map's end).
 * Before that, only uncompressed meta-blocks write: their bytes as they are.
 *
 * So brotliMayGive reads what a decoder reads up to that first command, as RFC 7932 says and the reference decoder
 * (google/brotli, c/dec/decode.c) does, and answers false only when the decoder stops there with an error, or the input
 * ends first, with fewer bytes written than asked: then no prefix of the input decodes to that many (a decoder that
 * fails on some bytes fails on every input that starts with them, and one that ends early has written what it has).
 * True otherwise: the commands may write anything, and the decoder is asked. Where this reading is unsure whether the
 * decoder fails (the window size's reserved values) it reads on as if it did not, so it never answers false where the
 * decoder writes on.
 */

class EndOfInput {}
class Invalid {}
const endOfInput = new EndOfInput();
const invalid = new Invalid();

/** Bits of `src` least significant first (RFC 7932 2), throwing `endOfInput` past its end. */
class BitReader {
  private bit = 0;
  private readonly endBit: number;

  constructor(private readonly src: Buffer) {
    this.endBit = src.length * 8;
  }

  /** `n` bits (at most 24) as a number, the first read the least significant. */
  read(n: number): number {
    if (this.bit + n > this.endBit) throw endOfInput;
    let value = 0;
    for (let k = 0; k < n; k++) {
      const at = this.bit + k;
      value |= ((this.src[at >>> 3]! >>> (at & 7)) & 1) << k;
    }
    this.bit += n;
    return value;
  }

  /** The next `n` bits, zeros past the end, without taking them; and how many of them the input holds. */
  peek(n: number): { value: number; available: number } {
    let value = 0;
    const available = Math.max(0, Math.min(n, this.endBit - this.bit));
    for (let k = 0; k < available; k++) {
      const at = this.bit + k;
      value |= ((this.src[at >>> 3]! >>> (at & 7)) & 1) << k;
    }
    return { value, available };
  }

  skip(n: number): void {
    if (this.bit + n > this.endBit) throw endOfInput;
    this.bit += n;
  }

  /** To the next byte boundary; false when the padding bits are not all zero (the decoder's PADDING error). */
  toByteBoundary(): boolean {
    return this.read((8 - (this.bit & 7)) & 7) === 0;
  }

  bytesLeft(): number {
    return (this.endBit - this.bit) >>> 3;
  }
}

/** A prefix code: each symbol's code length (0: not in the code), decoded canonically (RFC 7932 3.2). */
interface PrefixCode {
  decode(r: BitReader): number;
}

/** A code of one symbol reads no bits. */
const oneSymbol = (symbol: number): PrefixCode => ({ decode: () => symbol });

/** The canonical code of `lengths` (each 0-15), codes read most significant bit first, bit by bit. */
function canonicalCode(lengths: ArrayLike<number>): PrefixCode {
  const counts = new Uint16Array(16);
  for (let s = 0; s < lengths.length; s++) counts[lengths[s]!]!++;
  counts[0] = 0;
  const offsets = new Uint16Array(16);
  for (let len = 1; len < 16; len++) offsets[len] = offsets[len - 1]! + counts[len - 1]!;
  const symbols = new Uint16Array(lengths.length);
  for (let s = 0; s < lengths.length; s++) if (lengths[s]! !== 0) symbols[offsets[lengths[s]!]!++] = s;
  return {
    decode(r) {
      let code = 0;
      let first = 0;
      let index = 0;
      for (let len = 1; len < 16; len++) {
        code |= r.read(1);
        const count = counts[len]!;
        if (code - first < count) return symbols[index + code - first]!;
        index += count;
        first = (first + count) << 1;
        code <<= 1;
      }
      // Only an incomplete code leaves a gap, and the codes read here are complete.
      throw invalid;
    },
  };
}

/** The order complex prefix codes send their code length code lengths in (RFC 7932 3.5). */
const codeLengthOrder = [1, 2, 3, 4, 0, 5, 17, 6, 16, 7, 8, 9, 10, 11, 12, 13, 14, 15];
/** The static code of a code length code length, by the next 4 bits: its value and how many bits it takes. */
const codeLengthPrefixValue = [0, 4, 3, 2, 0, 4, 3, 1, 0, 4, 3, 2, 0, 4, 3, 5];
const codeLengthPrefixBits = [2, 2, 2, 3, 2, 2, 2, 4, 2, 2, 2, 3, 2, 2, 2, 4];
/** Extra bits of each block count code (RFC 7932 6; exported for its test). */
export const blockCountExtraBits = [2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 7, 8, 9, 10, 11, 12, 13, 24];

/** Bits that hold any symbol below `alphabetSize` (a simple code's symbols are sent in that many). */
function symbolBits(alphabetSize: number): number {
  let bits = 0;
  for (let x = alphabetSize - 1; x > 0; x >>>= 1) bits++;
  return bits;
}

/** One prefix code's description (RFC 7932 3.4, 3.5), read and checked as the decoder checks it. */
function readPrefixCode(r: BitReader, alphabetSize: number): PrefixCode {
  const hskip = r.read(2);
  if (hskip === 1) {
    const count = r.read(2) + 1;
    const bits = symbolBits(alphabetSize);
    const symbols: number[] = [];
    for (let i = 0; i < count; i++) {
      const symbol = r.read(bits);
      if (symbol >= alphabetSize || symbols.includes(symbol)) throw invalid;
      symbols.push(symbol);
    }
    if (count === 1) return oneSymbol(symbols[0]!);
    const shape = count === 2 ? [1, 1] : count === 3 ? [1, 2, 2] : r.read(1) === 1 ? [1, 2, 3, 3] : [2, 2, 2, 2];
    const lengths = new Uint8Array(alphabetSize);
    symbols.forEach((symbol, i) => (lengths[symbol] = shape[i]!));
    return canonicalCode(lengths);
  }
  // Complex: the code length code's lengths, then every symbol's length in that code.
  const codeLengthLengths = new Uint8Array(18);
  let space = 32;
  let codes = 0;
  for (let i = hskip; i < 18; i++) {
    const { value, available } = r.peek(4);
    if (codeLengthPrefixBits[value]! > available) throw endOfInput;
    r.skip(codeLengthPrefixBits[value]!);
    const length = codeLengthPrefixValue[value]!;
    codeLengthLengths[codeLengthOrder[i]!] = length;
    if (length !== 0) {
      space -= 32 >> length;
      codes++;
      if (space <= 0) break;
    }
  }
  if (!(codes === 1 || space === 0)) throw invalid;
  const lengthCode =
    codes === 1 ? oneSymbol(codeLengthLengths.findIndex((l) => l !== 0)) : canonicalCode(codeLengthLengths);
  const lengths = new Uint8Array(alphabetSize);
  let symbol = 0;
  let previous = 8;
  let repeat = 0;
  let repeatLength = 0;
  space = 32768;
  while (symbol < alphabetSize && space > 0) {
    const code = lengthCode.decode(r);
    if (code < 16) {
      repeat = 0;
      lengths[symbol++] = code;
      if (code !== 0) {
        previous = code;
        space -= 32768 >> code;
      }
      continue;
    }
    // 16 repeats the previous nonzero length, 17 repeats zero; consecutive repeats multiply (RFC 7932 3.5).
    const extraBits = code === 16 ? 2 : 3;
    const extra = r.read(extraBits);
    const length = code === 16 ? previous : 0;
    if (repeatLength !== length) [repeat, repeatLength] = [0, length];
    const before = repeat;
    if (repeat > 0) repeat = (repeat - 2) << extraBits;
    repeat += extra + 3;
    const delta = repeat - before;
    if (symbol + delta > alphabetSize) throw invalid;
    if (length !== 0) {
      lengths.fill(length, symbol, symbol + delta);
      space -= delta << (15 - length);
    }
    symbol += delta;
  }
  if (space !== 0) throw invalid;
  return canonicalCode(lengths);
}

/** RFC 7932 9.2's VarLenUint8: 0-255 in 1-11 bits. */
function varLenUint8(r: BitReader): number {
  if (r.read(1) === 0) return 0;
  const n = r.read(3);
  return n === 0 ? 1 : (1 << n) + r.read(n);
}

/** A context map of `size` entries (RFC 7932 7.3), read for its checks; the number of prefix codes it indexes. */
function readContextMap(r: BitReader, size: number): number {
  const trees = varLenUint8(r) + 1;
  if (trees < 2) return trees;
  const runLengthMax = r.read(1) === 1 ? r.read(4) + 1 : 0;
  const code = readPrefixCode(r, trees + runLengthMax);
  for (let i = 0; i < size;) {
    const symbol = code.decode(r);
    if (symbol === 0 || symbol > runLengthMax) {
      i++;
      continue;
    }
    // A run of zeros: a run past the map's end is the decoder's CONTEXT_MAP_REPEAT error.
    const run = (1 << symbol) + r.read(symbol);
    if (i + run > size) throw invalid;
    i += run;
  }
  r.read(1);
  return trees;
}

/** A compressed meta-block's header, up to its first command (RFC 7932 9.2); throws where the decoder stops. */
function readCompressedHeader(r: BitReader): void {
  const blockTypes = [0, 0, 0];
  for (let i = 0; i < 3; i++) {
    blockTypes[i] = varLenUint8(r) + 1;
    if (blockTypes[i]! < 2) continue;
    readPrefixCode(r, blockTypes[i]! + 2);
    const countCode = readPrefixCode(r, 26);
    r.read(blockCountExtraBits[countCode.decode(r)]!);
  }
  const distance = r.read(6);
  const postfixBits = distance & 3;
  const directCodes = (distance >>> 2) << postfixBits;
  for (let i = 0; i < blockTypes[0]!; i++) r.read(2);
  const literalTrees = readContextMap(r, blockTypes[0]! * 64);
  const distanceTrees = readContextMap(r, blockTypes[2]! * 4);
  for (let i = 0; i < literalTrees; i++) readPrefixCode(r, 256);
  for (let i = 0; i < blockTypes[1]!; i++) readPrefixCode(r, 704);
  for (let i = 0; i < distanceTrees; i++) readPrefixCode(r, 16 + directCodes + (48 << postfixBits));
}

/**
 * Whether a brotli decoder may write `outputBytes` bytes or more from `input` (a stream from its first byte): false
 * only when it cannot (see the module comment), true when its commands may. With `copies` false, what uncompressed
 * meta-blocks write is not counted (they copy input bytes as they lie): true only where a compressed meta-block's
 * commands may write.
 */
export function brotliMayGive(input: Buffer, outputBytes: number, copies = true): boolean {
  const r = new BitReader(input);
  let written = 0;
  try {
    // The window size: 1, 4 or 7 bits. Its reserved values are read on as if valid (see the module comment).
    if (r.read(1) === 1 && r.read(3) === 0) r.read(3);
    for (;;) {
      const last = r.read(1) === 1;
      if (last && r.read(1) === 1) return written >= outputBytes;
      const nibbles = r.read(2);
      if (nibbles === 3) {
        // Metadata: a reserved bit, its length in 0-3 bytes (no needless zero byte last), then bytes skipped.
        if (r.read(1) !== 0) return written >= outputBytes;
        const lengthBytes = r.read(2);
        let skipped = 0;
        for (let i = 0; i < lengthBytes; i++) {
          const byte = r.read(8);
          if (i + 1 === lengthBytes && lengthBytes > 1 && byte === 0) return written >= outputBytes;
          skipped |= byte << (8 * i);
        }
        if (!r.toByteBoundary()) return written >= outputBytes;
        r.skip(8 * (lengthBytes > 0 ? skipped + 1 : 0));
        if (last) return written >= outputBytes;
        continue;
      }
      // MLEN - 1 in 4-6 nibbles (no needless zero nibble last).
      let length = 0;
      for (let i = 0; i < nibbles + 4; i++) {
        const nibble = r.read(4);
        if (i + 1 === nibbles + 4 && nibbles > 0 && nibble === 0) return written >= outputBytes;
        length |= nibble << (4 * i);
      }
      length += 1;
      if (!last && r.read(1) === 1) {
        // Uncompressed: its bytes are written as they come, up to where the input ends.
        if (!r.toByteBoundary()) return written >= outputBytes;
        if (copies) written += Math.min(length, r.bytesLeft());
        if (written >= outputBytes) return true;
        r.skip(8 * length);
        continue;
      }
      readCompressedHeader(r);
      return true;
    }
  } catch (error) {
    if (error === endOfInput || error === invalid) return written >= outputBytes;
    throw error;
  }
}
