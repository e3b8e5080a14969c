/**
 * Raw deflate a hostile remote can send that zlib refuses and a lenient decoder reads: dynamic blocks (RFC 1951
 * 3.2.7) whose codes or code lengths zlib refuses and fflate reads. For tests of the scrubber (THREAT-MODEL 1: the
 * credential compressed, read by the agent's own decoder).
 */
import { Inflate as FflateInflate } from 'fflate';

/** Code-length symbols as sent: a length (0-15), or a repeat (16, 17, 18) with the value of its extra bits. */
export type LengthSymbol = number | readonly [repeat: 16 | 17 | 18, extra: number];

export interface DynamicBlock {
  readonly final?: boolean;
  /** An empty stored block follows (the stream then ends on a byte, as after a full flush; another may follow). */
  readonly emptyStoredAfter?: boolean;
  /** HLIT + 257 and HDIST + 1: how many literal/length and distance code lengths the header says follow. */
  readonly literalCodes: number;
  readonly distanceCodes: number;
  /** The code lengths' own code: a length for some of the 19 code-length symbols (the rest 0). */
  readonly lengthsCode: Readonly<Record<number, number>>;
  /** The code lengths as sent, each in the code lengths' code: they need not add up to what the header says. */
  readonly lengths: readonly LengthSymbol[];
  /** The literal/length code as a decoder builds it from what was sent (to write `data` with). */
  readonly literalCode: Readonly<Record<number, number>>;
  /** Literal/length symbols: bytes, and end-of-block (256) where the block ends; no copies. */
  readonly data: readonly number[];
}

/** One dynamic block as `block` says, its last byte filled with zero bits. */
export function dynamicBlock(block: DynamicBlock): Buffer {
  const out = new BitWriter();
  out.bits(block.final === false ? 0 : 1, 1); // BFINAL
  out.bits(2, 2); // BTYPE 10: dynamic codes
  out.bits(block.literalCodes - 257, 5);
  out.bits(block.distanceCodes - 1, 5);
  const order = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15];
  let sent = 4;
  for (let i = 0; i < order.length; i++) if ((block.lengthsCode[order[i]!] ?? 0) > 0) sent = Math.max(sent, i + 1);
  out.bits(sent - 4, 4); // HCLEN
  for (let i = 0; i < sent; i++) out.bits(block.lengthsCode[order[i]!] ?? 0, 3);
  const lengthsCode = canonical(block.lengthsCode);
  const extraBits = { 16: 2, 17: 3, 18: 7 } as const;
  for (const symbol of block.lengths) {
    const [value, extra] = typeof symbol === 'number' ? [symbol, undefined] : symbol;
    out.code(lengthsCode.get(value)!);
    if (extra !== undefined) out.bits(extra, extraBits[value as 16 | 17 | 18]);
  }
  const literalCode = canonical(block.literalCode);
  for (const symbol of block.data) out.code(literalCode.get(symbol)!);
  // An empty stored block: its header, then LEN 0 and NLEN 0xffff on the next byte.
  if (block.emptyStoredAfter === true) out.bits(0, 3);
  return block.emptyStoredAfter === true ? Buffer.concat([out.bytes(), Buffer.from([0, 0, 0xff, 0xff])]) : out.bytes();
}

/**
 * One final dynamic block whose literal/length code is incomplete (zlib: "invalid literal/lengths set"; fflate builds
 * its table with the gaps left empty and decodes every code that is there): literals only, each distinct byte of
 * `data` and end-of-block coded with one length, fewer of them than that length has codes.
 *
 * Not `final`: the block is followed by an empty stored block (the stream ends on a byte, as after a full flush, and
 * another block may follow). Without `endOfBlock`, end-of-block has no code and is never sent: zlib refuses the block
 * ("invalid code -- missing end-of-block"); fflate's streaming decoder gives out what it read when the input ends.
 */
export function incompleteCodeDeflate(
  data: Uint8Array,
  { final = true, endOfBlock = true }: { final?: boolean; endOfBlock?: boolean } = {},
): Buffer {
  const symbols = [...new Set(data)];
  if (endOfBlock) symbols.push(256);
  let length = 1;
  while (1 << length <= symbols.length) length += 1;
  const literalCode = Object.fromEntries(symbols.map((symbol) => [symbol, length]));
  return dynamicBlock({
    final: final && endOfBlock,
    emptyStoredAfter: !final && endOfBlock,
    literalCodes: 257,
    distanceCodes: 1,
    // 0 and `length`, one bit each.
    lengthsCode: { 0: 1, [length]: 1 },
    // 257 literal/length code lengths, then the one distance code's (0: no copies).
    lengths: Array.from({ length: 258 }, (_, symbol) => literalCode[symbol] ?? 0),
    literalCode,
    data: endOfBlock ? [...data, 256] : [...data],
  });
}

/**
 * One final block that gives `byte` (1-127) to fflate's streaming decoder, from its last bits: the code lengths' code
 * (0: '0', 1: '100', 2: '101') leaves '11' a gap, and the data's one code, `byte`'s '11', is read there first, as that
 * gap (lengths of 0 to the end, no bits taken), with fewer bits left in the input than the code's longest (3). zlib
 * refuses the code lengths' code; the block has no end-of-block code. Lengths are sent up to symbol 128, so the data
 * ends the last byte.
 */
export function tailGapBlock(byte: number): Buffer {
  const literalCode = { 0: 2, [byte]: 2, 128: 1 };
  return dynamicBlock({
    literalCodes: 257,
    distanceCodes: 1,
    lengthsCode: { 0: 1, 1: 3, 2: 3 },
    lengths: Array.from({ length: 129 }, (_, symbol) => literalCode[symbol] ?? 0),
    literalCode,
    data: [byte],
  });
}

/** A canonical code (RFC 1951 3.2.2) from symbol lengths: each symbol's code, most significant bit first. */
function canonical(lengths: Readonly<Record<number, number>>): Map<number, { code: number; length: number }> {
  const symbols = Object.entries(lengths)
    .map(([symbol, length]) => [Number(symbol), length] as const)
    .filter(([, length]) => length > 0)
    .sort(([a, la], [b, lb]) => la - lb || a - b);
  const codes = new Map<number, { code: number; length: number }>();
  let code = 0;
  let previous = 0;
  for (const [symbol, length] of symbols) {
    code <<= length - previous;
    previous = length;
    codes.set(symbol, { code, length });
    code += 1;
  }
  return codes;
}

/** Bits least significant first (RFC 1951 3.1.1); Huffman codes most significant bit first. */
class BitWriter {
  private readonly out: number[] = [];
  private bit = 0;

  bits(value: number, count: number): void {
    for (let i = 0; i < count; i++) this.push((value >> i) & 1);
  }

  code({ code, length }: { code: number; length: number }): void {
    for (let i = length - 1; i >= 0; i--) this.push((code >> i) & 1);
  }

  bytes(): Buffer {
    return Buffer.from(this.out);
  }

  /** Zero bits up to the next byte. */
  align(): void {
    this.bits(0, (8 - (this.bit % 8)) % 8);
  }

  private push(b: number): void {
    if (this.bit % 8 === 0) this.out.push(0);
    this.out[this.out.length - 1]! |= b << (this.bit % 8);
    this.bit += 1;
  }
}

/** One block of `mixedStream`: literals of a fixed Huffman block, or a stored block whose NLEN is wrong. */
export type MixedBlock = { readonly literals: Uint8Array } | { readonly stored: Uint8Array };

/**
 * Raw deflate whose output Huffman blocks give in part: each block as `blocks` says, the last one final. A stored
 * block's NLEN is wrong (zlib refuses it, a lenient decoder reads it), so the stream is mended and its output is
 * stored pieces (bytes as they lie in the stream) among bytes the Huffman blocks produced.
 */
export function mixedStream(blocks: readonly MixedBlock[]): Buffer {
  const out = new BitWriter();
  blocks.forEach((block, i) => {
    out.bits(i === blocks.length - 1 ? 1 : 0, 1); // BFINAL
    if ('literals' in block) {
      out.bits(1, 2); // BTYPE 01: fixed codes
      for (const b of block.literals)
        out.code(b < 144 ? { code: 0x30 + b, length: 8 } : { code: 0x190 + b - 144, length: 9 });
      out.code({ code: 0, length: 7 }); // end-of-block
      return;
    }
    out.bits(0, 2); // BTYPE 00: stored, from the next byte
    out.align();
    const length = block.stored.length;
    for (const b of [length & 0xff, length >> 8, (length ^ 0xfffe) & 0xff, (length ^ 0xfffe) >> 8, ...block.stored])
      out.bits(b, 8);
  });
  return out.bytes();
}

/**
 * One final fixed Huffman block of `symbols` and end-of-block: literals (below 256), or lengths whose codes need no
 * extra bits (257-264, 285, and 286 and 287, which zlib refuses and fflate reads), each with distance code 0 (one back)
 * unless given with its own (`{ length, distance }`: 0-3, which need no extra bits, and 30 and 31, which zlib refuses).
 */
export function fixedBlock(symbols: readonly (number | { length: number; distance: number })[]): Buffer {
  const out = new BitWriter();
  out.bits(1, 1); // BFINAL
  out.bits(1, 2); // BTYPE 01: fixed codes
  const code = (s: number): { code: number; length: number } =>
    s < 144
      ? { code: 0x30 + s, length: 8 }
      : s < 256
        ? { code: 0x190 + s - 144, length: 9 }
        : s < 280
          ? { code: s - 256, length: 7 }
          : { code: 0xc0 + s - 280, length: 8 };
  for (const entry of symbols) {
    const { length: s, distance } = typeof entry === 'number' ? { length: entry, distance: 0 } : entry;
    out.code(code(s));
    if (s > 256) out.code({ code: distance, length: 5 });
  }
  out.code(code(256));
  return out.bytes();
}

/**
 * fflate's streaming decoder, the agent's in these tests: what it gives out of input that has not ended (no
 * end-of-block met yet too), where its one-shot inflateSync throws.
 */
export function fflateStreaming(stream: Uint8Array): Buffer {
  const chunks: Uint8Array[] = [];
  new FflateInflate((chunk) => chunks.push(chunk)).push(stream, false);
  return Buffer.concat(chunks);
}
