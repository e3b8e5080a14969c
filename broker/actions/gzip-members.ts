/*
 * gzip (RFC 1952) as a lenient decoder reads it. zlib refuses a member whose header CRC (FHCRC) is wrong or whose
 * reserved FLG bits (5-7) are set, and stops at a member whose trailer (CRC-32, ISIZE) is wrong; a more lenient decoder
 * (fflate) skips the header fields without checking them, reads the deflate data, skips the trailer unchecked and
 * reads on into the next member. compressed-views.ts reads gzip that way: it finds each member's deflate data here,
 * decodes it as raw deflate (no header, no trailer to check) and joins consecutive members' outputs into one view.
 * Python's gzip.decompress also reads on through zero bytes after a trailer (`unused_data[8:].lstrip(b"\x00")`): a
 * member that follows only after zero bytes is joined too (zerosEnd).
 */

/** A member's fixed header: ID1 ID2 CM FLG MTIME(4) XFL OS. */
const fixedHeaderBytes = 10;
/** The trailer after a member's deflate data: CRC-32 and ISIZE, never checked here. */
export const gzipTrailerBytes = 8;
const fhcrc = 0x02;
const fextra = 0x04;
const fname = 0x08;
const fcomment = 0x10;

/** A gzip member starts at `at` (1f 8b 08; any FLG, reserved bits included). */
export function gzipMemberAt(src: Buffer, at: number, end = src.length): boolean {
  return at + 3 <= end && src[at] === 0x1f && src[at + 1] === 0x8b && src[at + 2] === 0x08;
}

/**
 * Where the deflate data of the gzip member at `at` starts, its header read as a lenient decoder reads it: any FLG
 * (reserved bits ignored), FEXTRA skipped by its XLEN whatever its subfields hold, FNAME and FCOMMENT skipped to their
 * zero byte, FHCRC skipped unchecked. Undefined when `at` does not start a member or its header runs past `end` (a
 * name without its zero byte, an XLEN past the end): then no decoder reads any deflate data of it.
 */
export function gzipDataAt(src: Buffer, at: number, end = src.length): number | undefined {
  if (!gzipMemberAt(src, at, end) || at + fixedHeaderBytes > end) return undefined;
  const flags = src[at + 3]!;
  let next = at + fixedHeaderBytes;
  if ((flags & fextra) !== 0) {
    if (next + 2 > end) return undefined;
    next += 2 + src.readUInt16LE(next);
  }
  for (const flag of [fname, fcomment]) {
    if ((flags & flag) === 0) continue;
    const zero = next < end ? src.subarray(0, end).indexOf(0, next) : -1;
    if (zero < 0) return undefined;
    next = zero + 1;
  }
  if ((flags & fhcrc) !== 0) next += 2;
  return next < end ? next : undefined;
}

/** Zero bytes compared at once by zerosEnd (memcmp, not a byte loop: a run of a megabyte costs microseconds). */
const zeroChunk = Buffer.alloc(4096);

/**
 * Where the run of zero bytes at `at` ends (`at` itself when there is none), at most `end`: after a member's trailer
 * Python's gzip.decompress skips zero bytes and reads the next member. Zero bytes are not data; only their number
 * bounds the walk.
 */
export function zerosEnd(src: Buffer, at: number, end = src.length): number {
  let next = at;
  while (
    next + zeroChunk.length <= end &&
    src.compare(zeroChunk, 0, zeroChunk.length, next, next + zeroChunk.length) === 0
  )
    next += zeroChunk.length;
  while (next < end && src[next] === 0) next++;
  return next;
}
