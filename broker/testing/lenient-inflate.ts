/**
 * A reference decoder as lenient as the agent's may be: it inflates raw deflate, zlib and gzip (RFC 1950-1952) like a
 * streaming decoder (everything up to where the data ends or stops making sense), reads a stored block's LEN and never
 * looks at its NLEN (fflate's inflate does the same), and checks no checksum (gzip's header CRC and trailers
 * included). Tests use it to prove that a stream the scrubber must redact really gives a secret to an agent; it shares
 * no code with the scrubber. Length symbols 286 and 287, which zlib refuses, are read as fflate reads them: copies of
 * 260 and 261 bytes (no extra bits); distance symbols 30 and 31 too (32,769 back, and a copy of zeros); incomplete
 * Huffman codes too (dynamicCodes). With `zeroPaddedMembers`, gzip members are joined across zero bytes between one
 * member's trailer and the next member, as Python's gzip.decompress joins them.
 */

export interface LenientOptions {
  /** gzip: skip zero bytes after a member's trailer before looking for the next member (Python's gzip.decompress). */
  readonly zeroPaddedMembers?: boolean;
}

export type LenientFormat = 'raw' | 'zlib' | 'gzip';

const lengthBase = [
  3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258,
  // 286 and 287: zlib refuses them; fflate's table (each base one past the last, 258 set apart) reads 260 and 261.
  260, 261,
];
const lengthExtra = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0, 0, 0];
// 30 and 31: zlib refuses them; fflate's table reads 30 as 32,769 back, and 31 past its end (NaN: a copy of zeros).
const distBase = [
  1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145,
  8193, 12289, 16385, 24577, 32769,
];
const distExtra = [
  0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 0, 0,
];
const clOrder = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15];

class End extends Error {}

/** Codes as a map from `${length}:${code}` to symbol (RFC 1951 3.2.2's construction). */
function codeMap(lengths: readonly number[]): Map<string, number> {
  const map = new Map<string, number>();
  const blCount = new Array<number>(16).fill(0);
  for (const l of lengths) if (l > 0) blCount[l]! += 1;
  const next = new Array<number>(16).fill(0);
  // The first code of each length: after all shorter ones, shifted (zero-length symbols have no code).
  for (let bits = 1, code = 0; bits < 16; bits++) {
    next[bits] = code;
    code = (code + blCount[bits]!) << 1;
  }
  lengths.forEach((l, symbol) => {
    if (l > 0) map.set(`${l}:${next[l]!++}`, symbol);
  });
  return map;
}

const fixedLit = codeMap(Array.from({ length: 288 }, (_, s) => (s < 144 ? 8 : s < 256 ? 9 : s < 280 ? 7 : 8)));
const fixedDist = codeMap(new Array<number>(32).fill(5));

/**
 * A dynamic block's two codes (RFC 1951 3.2.7), read with the decoder's own bit and symbol readers. An incomplete code
 * (zlib refuses it) is read as fflate reads it: its gaps stop the decoder when met, and a gap in the code lengths' own
 * code reads as lengths of 0 to the end, taking no bits (`symbol` answers -1 there, its bits left unread). An
 * over-subscribed code is read as its canonical construction gives (fflate's table differs there).
 */
function dynamicCodes(
  bits: (n: number) => number,
  symbol: (map: Map<string, number>, gapRead?: boolean) => number,
): [Map<string, number>, Map<string, number>] {
  const hlit = bits(5) + 257;
  const hdist = bits(5) + 1;
  const hclen = bits(4) + 4;
  const cl = new Array<number>(19).fill(0);
  for (let i = 0; i < hclen; i++) cl[clOrder[i]!] = bits(3);
  const clMap = codeMap(cl);
  const lengths: number[] = [];
  while (lengths.length < hlit + hdist) {
    const s = symbol(clMap, true);
    if (s < 0) lengths.push(...new Array<number>(hlit + hdist - lengths.length).fill(0));
    else if (s < 16) lengths.push(s);
    else if (s === 16) lengths.push(...new Array<number>(3 + bits(2)).fill(lengths.at(-1) ?? 0));
    else lengths.push(...new Array<number>(s === 17 ? 3 + bits(3) : 11 + bits(7)).fill(0));
  }
  return [codeMap(lengths.slice(0, hlit)), codeMap(lengths.slice(hlit, hlit + hdist))];
}

/** Where a gzip member's deflate data starts, its header skipped as fflate skips it (see lenientInflate). */
function gzipDataStart(data: Uint8Array, member: number): number {
  let at = member + 10;
  const flags = data[member + 3]!;
  if (flags & 4) at += 2 + (data[at]! | ((data[at + 1] ?? 0) << 8));
  for (const field of [8, 16]) {
    if ((flags & field) === 0) continue;
    const zero = data.indexOf(0, at);
    if (zero < 0) throw new End();
    at = zero + 1;
  }
  return flags & 2 ? at + 2 : at;
}

/** Inflates `data` as a lenient streaming decoder would; what it produced before the data ended or went wrong. */
export function lenientInflate(format: LenientFormat, data: Uint8Array, options: LenientOptions = {}): Buffer {
  const out: number[] = [];
  let pos = 0;
  const bit = (): number => {
    if (pos >= data.length * 8) throw new End();
    const b = (data[pos >> 3]! >> (pos & 7)) & 1;
    pos++;
    return b;
  };
  const bits = (n: number): number => {
    let v = 0;
    for (let i = 0; i < n; i++) v |= bit() << i;
    return v;
  };
  /** The next symbol of `map`; at a gap (no code matches), End, or with `gapRead` -1 and no bit taken. */
  const symbol = (map: Map<string, number>, gapRead = false): number => {
    const at = pos;
    let code = 0;
    for (let l = 1; l < 16; l++) {
      code = (code << 1) | bit();
      const s = map.get(`${l}:${code}`);
      if (s !== undefined) return s;
    }
    if (!gapRead) throw new End();
    pos = at;
    return -1;
  };
  const deflate = (): void => {
    const start = out.length;
    for (let final = 0; final === 0;) {
      final = bits(1);
      const type = bits(2);
      if (type === 0) {
        pos = Math.ceil(pos / 8) * 8;
        const len = bits(16);
        bits(16); // NLEN: not looked at.
        for (let i = 0; i < len; i++) out.push(bits(8));
        continue;
      }
      if (type === 3) throw new End();
      let lit = fixedLit;
      let dist = fixedDist;
      if (type === 2) [lit, dist] = dynamicCodes(bits, symbol);
      for (;;) {
        const s = symbol(lit);
        if (s < 256) out.push(s);
        else if (s === 256) break;
        else {
          const length = lengthBase[s - 257]! + bits(lengthExtra[s - 257]!);
          const d = symbol(dist);
          const distance = distBase[d]! + bits(distExtra[d]!);
          if (d === 31) out.push(...new Array<number>(length).fill(0));
          else if (distance > out.length - start) throw new End();
          else for (let i = 0; i < length; i++) out.push(out[out.length - distance]!);
        }
      }
    }
    pos = Math.ceil(pos / 8) * 8;
  };
  try {
    if (format === 'raw') deflate();
    else if (format === 'zlib') {
      pos = 16;
      deflate();
    } else {
      // gzip members, one after another, their outputs joined (a member after a wrong trailer too). Header fields are
      // skipped as fflate skips them: any FLG (reserved bits ignored), FEXTRA by its XLEN, FNAME and FCOMMENT to their
      // zero byte (none: nothing more is read), FHCRC unchecked; trailers (CRC-32, ISIZE) are not checked.
      while (pos + 80 <= data.length * 8 && data[pos >> 3] === 0x1f && data[(pos >> 3) + 1] === 0x8b) {
        pos = gzipDataStart(data, pos >> 3) * 8;
        deflate();
        pos += 64;
        if (options.zeroPaddedMembers === true) while (pos < data.length * 8 && data[pos >> 3] === 0) pos += 8;
      }
    }
  } catch (error) {
    if (!(error instanceof End)) throw error;
  }
  return Buffer.from(out);
}
