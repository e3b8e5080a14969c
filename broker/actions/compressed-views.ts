import { isUtf8 } from 'node:buffer';
import {
  brotliDecompressSync,
  constants,
  inflateRawSync,
  inflateSync,
  type BrotliOptions,
  type ZlibOptions,
} from 'node:zlib';
import { brotliMayGive } from './brotli-header.js';
import { gzipDataAt, gzipTrailerBytes, zerosEnd } from './gzip-members.js';
import { runSteps, type Steps } from './sliced-work.js';
import {
  lenientOutputBytesSteps,
  lenientShortOutputSteps,
  mendStoredLengthSteps,
  storedPieceSpansSteps,
  type Mended,
  type ShortOutput,
  lenientExtentSteps,
  type DeflateFormat,
} from './stored-block-lengths.js';

/*
 * Compressed data the remote sent WITHOUT saying so (no Content-Encoding): a hostile remote answers gzip of its echo
 * of the request as application/octet-stream, or base64 of that as text, and the agent decompresses it. The channel
 * decodes only declared codings (decode-content.ts); this module lets the scrubber look inside compressed streams
 * wherever they are, by their bytes, in every view it searches (the body, escape-decoded and base64/hex-decoded
 * views), so a secret inside is redacted like any other form of it.
 *
 *   with a signature, found at any offset: gzip (1f 8b 08), zlib (a valid two-byte header: CM 8, CINFO <= 7, FCHECK,
 *                   no preset dictionary), zip entries stored with deflate (the local header says where the raw data
 *                   starts). gzip is read as a lenient decoder reads it (gzip-members.ts): any FLG, header fields
 *                   skipped unchecked (FHCRC too), each member's data decoded as raw deflate, trailers unchecked, and
 *                   consecutive members joined into one view.
 *   without one:    raw deflate and brotli, tried where data starts (a view's first byte, each base64/hex run on its
 *                   own, after each '=' or line break inside a run: `key=<base64>`, `hello\n<base64>`, and in a
 *                   view of percent escapes each run of escapes after plain bytes: `q=%63%b4…`) when
 *                   those bytes do not look like text: at every such place, runs too short to hold a part as they
 *                   are too (compressed, a part can be shorter than itself), so every id and every word of prose.
 *                   Neither is decoded where it cannot give enough bytes to hold the shortest part, told without a
 *                   decoder call: raw deflate by a walk of its blocks (stored-block-lengths.ts), brotli by reading up
 *                   to its first command (brotli-header.ts: noise breaks its header within a few bytes) and not at
 *                   all on fewer bytes than can give that many (`brotliBytesFor`: 9 for a part, 6 for a short output). What a short start decodes to is kept (`outcomeMemo`), and a start met
 *                   again in one input is free, so the call budget counts distinct places. Where a lenient decoder
 *                   reads nothing but a stored block's data (a lone one with a wrong NLEN, not decoded; one zlib
 *                   stops at, `DecodeTrace.inPlace`; behind a zlib header), that data is bytes of the view as they
 *                   are, but it starts nowhere data starts: it is a place of its own (`tryPlace`); so is each stored
 *                   piece's start in a view of stored pieces (`pieceStarts`).
 *   short outputs:  compressed, a part can be shorter than itself, so a stream around it can be too (raw deflate of
 *                   raw deflate of a 40-hex token: 38 bytes in the middle). While a view can still be decompressed
 *                   again, output shorter than a part but at least `headlessBytesMin` long is kept when something
 *                   could be read out of it (ShortOutputs: an encoding, or compressed data `mayHoldCompressed` finds
 *                   without a call). Raw deflate's is decoded by the walk itself (lenientShortOutputSteps, no call).
 *   cannot check:   zstd, xz, bzip2 and lz4 frames (node:zlib has no decoder here), a stream that decodes to more than
 *                   its share of the budget or the ratio bound, and anything left once the budget is spent: redacted
 *                   from its first byte to the end of the view — what the broker cannot read it does not hand over.
 *
 * A stream corrupt past some point still gives a streaming decoder (the agent's) everything before the corruption,
 * and a truncated one everything so far: when a whole decode fails, the longest prefix that decodes is found and
 * searched. A decoder more lenient than zlib reads on where zlib stops at a stored block whose NLEN is not LEN's
 * complement (fflate ignores NLEN): when zlib stops there, the stream's stored blocks are mended in a copy
 * (stored-block-lengths.ts) and the copy is decoded, so a secret split across such blocks is seen whole, and so is
 * compressed data split across them (see `seamsOfViews`). It also reads on where zlib refuses a dynamic block's
 * Huffman codes (fflate reads an incomplete code): then the copy is the stream's output as the walk decodes it, as
 * stored blocks (`lenient_codes`).
 * Everything is bounded per scrub (THREAT-MODEL 4): decoded bytes, the decoded/encoded ratio per stream,
 * decoder calls, the input they consume, decodes of data without a signature, and bytes walked to mend stored blocks.
 */

/**
 * Decoded bytes at most, over every stream found in one input (the decompression-bomb bound). A megabyte of random
 * binary (an encrypted or already compressed download) spends 4.3-9.2 MiB of it (twenty seeds, since distance symbols
 * 30 and 31 are read as fflate reads them; 3.9-8.4 before): what noise a lenient decoder reads on through is decoded
 * and looked into like any stream. Past the bound the rest is redacted, so it keeps a margin over that.
 */
export const inflatedBytesMax = 12 * 1024 * 1024;
/** Decoded bytes per encoded byte at most (deflate's own maximum is ~1032): a brotli bomb stops here. */
export const inflateRatioMax = 1032;
/** A small stream may always decode this much, whatever the ratio. */
const inflateFloorBytes = 64 * 1024;
/**
 * Decoder calls at most per input (~20-50 µs each): a body full of signature-like pairs or distinct words cannot spin
 * the CPU. A megabyte of random binary holds ~400 zlib-like headers at ~5 calls each, a megabyte of English prose ~9k
 * distinct words (a brotli try each; raw deflate is walked instead); past the bound what is left is redacted.
 */
export const inflateCallsMax = 65_536;
/**
 * Encoded bytes that decoder calls that succeed may consume at most per input. A call's cost follows the input it
 * reads, not its output: ~900 KB of empty dynamic Huffman blocks costs ~50-70 ms and outputs nothing, and gzip headers
 * can each point their data at a different place in it (FEXTRA). 64 MiB is ~3-4 s of such blocks; honest inputs
 * consume a few times their own length (each view, the prefixes a bisection decodes).
 */
export const inflateInputBytesMax = 64 * 1024 * 1024;
/**
 * Walk units at most per input to mend stored blocks (stored-block-lengths.ts: a symbol decoded, a block header, a
 * lookup-table entry built, 16 bytes copied; stored data is skipped free). Measured at ~3-15 ns a unit on one core
 * (worst: stored-block chains and tiny Huffman blocks), so the bound is ~0.05-0.2 s per scrub. Past it a stream that
 * needs mending is redacted unread, and charged to the decoded-bytes budget as a stream too large is.
 */
export const storedWalkUnitsMax = 12 * 1024 * 1024;
/**
 * Walk units at most per input to bound what raw deflate decodes to before a decoder call (lenientOutputBytesSteps):
 * ~0.05-0.3 s. Past it every raw start is decoded (the call budget still bounds that).
 */
export const probeWalkUnitsMax = 16 * 1024 * 1024;
/**
 * Data shorter than this is not tried without a signature: two bytes decode to at most one byte of deflate (a block
 * header and a literal) and to nothing of brotli (a meta-block header alone is longer). The only sound length bound:
 * a stream's length says nothing else about how much it decodes to.
 */
export const headlessBytesMin = 3;
/**
 * Seams (stored blocks joined: `seamsOfViews`) at most in a view that is looked into for compressed data across them.
 * Noise almost never chains more than a few stored blocks, nor does a secret need more than a few; a chain of
 * thousands (bench/scrub.ts's hostile row) made every view decoded from it a run view with as many seams, and looking
 * into those cost several times the scrub. Past the bound the stream is redacted whole (what is not read is not
 * handed over) and its view is searched as it is.
 */
export const seamsMax = 64;
/**
 * Fewest bytes a brotli stream needs to decode to `outputBytes` bytes (RFC 7932 9.2), so shorter data is not tried: a
 * compressed meta-block reads at least 70 bits of headers before its first command (WBITS 1, ISLAST with ISLASTEMPTY
 * or ISUNCOMPRESSED 2, MNIBBLES and MLEN 18, three block type counts 3, NPOSTFIX and NDIRECT 6, a context mode 2, two
 * tree counts 2, and three prefix codes: simple ones of 12, 14 and 10 bits are the shortest), so 9 bytes; an
 * uncompressed one copies its bytes after a header of at least 3 bytes; metadata blocks decode to nothing.
 */
export function brotliBytesFor(outputBytes: number): number {
  return Math.min(9, 3 + outputBytes);
}
/** Compressed inside compressed, at most this deep, on one path of views. */
export const inflationsMax = 2;
/** Bytes looked at to decide whether data starts like text (then no signature-less decode is tried there). */
const textProbeBytes = 32;
/** A decoder call on a prefix this long or longer is a step of its own (longestDecodable yields after it). */
const longCallBytes = 1024;
/** Inputs shorter than this are decoded into a first output buffer of smallChunkBytes (chunkSizeFor). */
const smallInputBytes = 1024;
const smallChunkBytes = 1024;
/** zlib's message for a stored block whose NLEN is not LEN's complement (inflate.c). */
const storedLengthsMessage = 'invalid stored block lengths';
/**
 * zlib's messages for a dynamic block's codes it refuses (inflate.c) where a lenient decoder (fflate) may read on: an
 * incomplete code, a gap in the code lengths' code, a repeat with nothing before it or past the end, no end-of-block
 * code, more codes than RFC 1951 has symbols; and length symbols 286 and 287 or distance symbols 30 and 31 met in the
 * data. An over-subscribed code meets the same messages; the walk tells them apart (Walk.zlibRefuses).
 */
const lenientCodesMessages = new Set([
  'invalid literal/length code',
  'invalid distance code',
  'invalid code lengths set',
  'invalid bit length repeat',
  'invalid code -- missing end-of-block',
  'invalid literal/lengths set',
  'invalid distances set',
  'too many length or distance symbols',
]);
/** First prefix tried when a whole decode fails (noise mostly fails before it); each next one is 8x longer. */
const probeBytesFirst = 8;

/** The part of a scrubber view this module needs: decoded bytes, each mapped back to input bytes. */
export interface ScanView {
  readonly bytes: Buffer;
  readonly depth: number;
  inputStart(i: number): number;
  inputEnd(i: number): number;
}

export interface InflateBudget {
  bytesLeft: number;
  callsLeft: number;
  /** Encoded bytes consumed by decoder calls that succeeded (inflateInputBytesMax). */
  inputBytesLeft: number;
  /** Walk units left to bound raw deflate's output before a call (`probeWalkUnitsMax`). */
  probeUnitsLeft: number;
  walkUnitsLeft: number;
  /**
   * What each short start met in this input decoded to (longestDecodable), by its memo key: met again, it costs nothing,
   * so the budget is charged once per distinct place, whatever the memo across inputs holds.
   */
  readonly outcomes: Map<string, Decoded | undefined>;
}

export function inflateBudget(): InflateBudget {
  return {
    bytesLeft: inflatedBytesMax,
    callsLeft: inflateCallsMax,
    inputBytesLeft: inflateInputBytesMax,
    probeUnitsLeft: probeWalkUnitsMax,
    walkUnitsLeft: storedWalkUnitsMax,
    outcomes: new Map(),
  };
}

/** Decoded bytes of one stream: every byte maps to the whole stream's span in the input (redacted whole). */
class InflatedView implements ScanView {
  constructor(
    readonly bytes: Buffer,
    /** Decompression is not an encoding layer: the escapes and runs inside still get their two layers. */
    readonly depth: number,
    private readonly start: number,
    private readonly end: number,
  ) {}

  inputStart(): number {
    return this.start;
  }

  inputEnd(): number {
    return this.end;
  }
}

/**
 * Seams: offsets in a view where it joins bytes that are not next to each other where they came from (sorted, each
 * strictly inside the view). A view decoded from a mended stream that only stored blocks produced (the walk decoded
 * no Huffman output) is those blocks' bytes laid end to end, and a seam lies where each block's bytes end: compressed
 * data that lies whole between two seams lies whole in the view the stream was found in, and was looked for there
 * already; data that crosses a seam is whole only here, as a lenient decoder gives it to the agent (gzip of a secret
 * cut across two stored blocks with a wrong NLEN). In a view with seams only compressed data that crosses one is tried:
 * noise mends often (a quarter of random zlib-like headers start a stored block), and trying every start again
 * multiplied the cost of scrubbing random binary. Whether a deflate stream crosses is told by a walk of its blocks as a
 * lenient decoder reads them (stored-block-lengths.ts: no decoder call, and most starts in noise stop within a few
 * symbols; an incomplete code zlib stops at inside a piece is read on, as fflate reads it); brotli is decoded and
 * kept when what it took crosses. A stream in such a view is not mended again: it is read as zlib reads it, up to a
 * stored block of its own whose NLEN disagrees (in noise nearly every stored block's does, and a stored block skips
 * up to 64 KiB, over a seam as often as not: mending those multiplied the decoded bytes of random binary past the
 * budget). The scrubber gives the views it decodes from a view with seams seams of their own (setViewSeams), so base64
 * of gzip cut across stored blocks is read too; a view whose seams are none holds nothing new. A view that holds
 * Huffman output among its stored pieces has fresh ranges as well (see `freshOfViews`).
 */
const seamsOfViews = new WeakMap<ScanView, Int32Array>();

/**
 * A view whose bytes lie in part as they are in the view it was decoded from, the rest new (`fresh`: [start, end)
 * pairs): a mended stream's output that Huffman blocks produced in part (noise: a few literals, then a stored block of
 * up to 64 KiB), the output of a stream zlib reads as it is that is about as long as the stream (its stored blocks
 * found by a walk: `withPieces`), an escape view's plain bytes among its decoded escapes (`setFreshRanges`). It has a
 * seam where each piece starts and ends. A stream in it is skipped only when a lenient decoder's reading of it stays
 * inside one piece (that was tried where it lies whole); anything else, and anything that starts in a fresh range, is
 * tried as in a view without seams: mended, short outputs kept, brotli kept. The views decoded from it are looked into
 * whole. Looking into such views whole decoded the same streams again at each depth and in each escape view: a
 * megabyte of random binary spent the decoded-bytes budget on them and was redacted in part (2 seeds in 10).
 */
const freshOfViews = new WeakMap<ScanView, Int32Array>();

/**
 * The fresh ranges of `view` ([start, end) pairs, see `freshOfViews`), if it has any: the views decoded from it are
 * looked into whole.
 */
export function freshRangesOf(view: ScanView): Int32Array | undefined {
  return freshOfViews.get(view);
}

/** Fresh ranges at most in a view given them by `setFreshRanges`: past it the view is looked into whole. */
export const freshRangesMax = 16_384;

/**
 * Says which ranges of `view` ([start, end) pairs, sorted, apart) are new where they lie, the rest of it lying as it is
 * in the view it was decoded from (an escape view's decoded escapes among its plain bytes): a seam at each range's
 * ends (see `freshOfViews`). Past `freshRangesMax` ranges (or none given) nothing is said: the view is looked into whole.
 */
export function setFreshRanges(view: ScanView, fresh: Int32Array | undefined): void {
  if (fresh === undefined || fresh.length / 2 > freshRangesMax) return;
  const seams: number[] = [];
  for (const at of fresh) if (at > 0 && at < view.bytes.length && at !== seams.at(-1)) seams.push(at);
  seamsOfViews.set(view, Int32Array.from(seams));
  freshOfViews.set(view, fresh);
}

/** Seams and fresh ranges of an output of `length` bytes whose stored pieces are `pieces` (see `freshOfViews`). */
function mixedSeams(pieces: StoredPieces, length: number): { seams: Int32Array; fresh: Int32Array } | undefined {
  const seams: number[] = [];
  const fresh: number[] = [];
  let from = 0;
  for (let i = 0; i < pieces.starts.length; i++) {
    const start = Math.min(length, pieces.starts[i]!);
    const end = Math.min(length, pieces.ends[i]!);
    if (start > from) fresh.push(from, start);
    for (const at of [start, end]) if (at > 0 && at < length && at !== seams.at(-1)) seams.push(at);
    from = Math.max(from, end);
  }
  if (from < length) fresh.push(from, length);
  return seams.length > 2 * freshRangesMax
    ? undefined
    : { seams: Int32Array.from(seams), fresh: Int32Array.from(fresh) };
}

/** Whether `at` lies in one of the [start, end) pairs of `ranges` (sorted). */
function inRanges(ranges: Int32Array, at: number): boolean {
  let lo = 0;
  let hi = ranges.length / 2;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (ranges[2 * mid + 1]! <= at) lo = mid + 1;
    else hi = mid;
  }
  return lo < ranges.length / 2 && ranges[2 * lo]! <= at;
}

/** The seams of `view`, or undefined when every byte of it is new where it lies (see `seamsOfViews`). */
export function viewSeams(view: ScanView): Int32Array | undefined {
  return seamsOfViews.get(view);
}

/**
 * Whether nothing in `view` is new to look into for compressed data: it has seams, none of them inside it, no fresh
 * range (one that covers it whole has no seam inside either), and it is not a stream's stored pieces (whose start is
 * a place of its own: see `pieceStarts` in inflatedViewSteps).
 */
export function holdsNothingNew(view: ScanView): boolean {
  return seamsOfViews.get(view)?.length === 0 && !freshOfViews.has(view) && !(view instanceof InflatedView);
}

/** Says where `view` joins bytes that are not next to each other where they came from (see `seamsOfViews`). */
export function setViewSeams(view: ScanView, seams: Int32Array): void {
  seamsOfViews.set(view, seams);
}

/** The first seam after `at`, or undefined. */
function seamAfter(seams: Int32Array, at: number): number | undefined {
  let lo = 0;
  let hi = seams.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (seams[mid]! <= at) lo = mid + 1;
    else hi = mid;
  }
  return seams[lo];
}

/** Whether a seam lies strictly between `from` and `to`: data that holds bytes on both sides of it. */
function seamBetween(seams: Int32Array, from: number, to: number): boolean {
  const seam = seamAfter(seams, from);
  return seam !== undefined && seam < to;
}

/**
 * Whether the deflate stream of `format` whose data starts at `at` (its header or zip entry opened at `opensAt`) reads
 * bytes on both sides of a seam as a lenient decoder reads it (NLEN ignored, codes zlib refuses read: one that zlib
 * stops at inside a piece may be read by the agent's decoder into the next; see `seamsOfViews`). Past the walk budget
 * it is tried like any other (its decode is bounded by the rest of the budget).
 */
function* crossesSeam(
  seams: Int32Array,
  src: Buffer,
  format: DeflateFormat,
  opensAt: number,
  at: number,
  end: number,
  budget: InflateBudget,
): Steps<boolean> {
  const seam = seamAfter(seams, opensAt);
  if (seam === undefined || seam >= end) return false;
  if (seam <= at) return true;
  const extent = yield* lenientExtentSteps(format, src.subarray(at, end), budget);
  return extent === 'unchecked' || at + extent > seam;
}

/**
 * In a view with seams only a stream that crosses one is new (see `seamsOfViews`); brotli is told after its decode.
 * gzip is always tried there: its members are joined as a lenient decoder joins them (gzipMembers), so a chain whose
 * first member lies inside one stored piece may still cross a seam further on (and its signature is rare in noise).
 */
function* worthTrying(
  seams: Int32Array | undefined,
  src: Buffer,
  format: Format,
  opensAt: number,
  at: number,
  end: number,
  budget: InflateBudget,
): Steps<boolean> {
  if (seams === undefined || format === 'br') return true;
  // A chain of gzip members may cross a seam further on than its first member reads; with none, none does.
  if (format === 'gzip') return seams.length > 0;
  return yield* crossesSeam(seams, src, format, opensAt, at, end, budget);
}

/** Where stored pieces ending at `pieceEnds` join in a view of `length` bytes. */
function seamsWithin(pieceEnds: Uint32Array, length: number): Int32Array {
  let count = 0;
  while (count < pieceEnds.length && pieceEnds[count]! < length) count++;
  return Int32Array.from(pieceEnds.subarray(0, count));
}

export interface Inflation {
  readonly views: ScanView[];
  /** Input ranges that hold compressed data the broker could not check: to be redacted. */
  readonly uncheckable: Array<readonly [number, number]>;
}

type Format = 'gzip' | 'zlib' | 'raw' | 'br';

/** Where signature-less data may start in a view, and how it is tried there. */
export interface DataStarts {
  /** Sorted offsets: 0, or each run of a base64/hex view and each place after a '=' inside one. */
  readonly at: ArrayLike<number>;
  /** Where the data from each start ends (the end of its run); by default the next start, or the view's end. */
  readonly end?: ArrayLike<number>;
}

/**
 * The decoded views of every compressed stream in `view`, and what could not be checked. `starts` are where data
 * starts in the view (0, or each run of a base64/hex view): signature-less formats are tried there only.
 */
export function inflatedViews(
  view: ScanView,
  starts: ArrayLike<number> | DataStarts,
  budget: InflateBudget,
  outputBytesMin: number,
  shortOutputs?: ShortOutputs,
): Inflation {
  return runSteps(inflatedViewSteps(view, starts, budget, outputBytesMin, shortOutputs));
}

/**
 * Outputs shorter than `outputBytesMin` (a part) that are kept too: compressed, a part can be shorter than itself, so
 * the stream around it can be too (raw deflate of raw deflate of a 40-hex token: 38 bytes in the middle). Kept when at
 * least `bytesMin` long and something could be read out of them: an encoding (`readable`, the caller's) or compressed
 * data (`mayHoldCompressed`); what raw deflate of noise gives (a few random bytes) mostly holds neither.
 */
export interface ShortOutputs {
  readonly bytesMin: number;
  readonly readable: (bytes: Buffer) => boolean;
}

/**
 * inflatedViews as steps (sliced-work.ts): it yields after each place tried and after each decoder call on a long
 * prefix, so a caller may run it in slices.
 */
export function* inflatedViewSteps(
  view: ScanView,
  dataStarts: ArrayLike<number> | DataStarts,
  budget: InflateBudget,
  outputBytesMin: number,
  shortOutputs?: ShortOutputs,
): Steps<Inflation> {
  const inflation = new ViewInflation(view, budget, outputBytesMin, shortOutputs);
  yield* inflation.signatures();
  yield* inflation.places('length' in dataStarts ? { at: dataStarts } : dataStarts);
  return inflation.result();
}

/** One view looked into for compressed data (inflatedViewSteps): the views its streams decode to, what is unchecked. */
class ViewInflation {
  private readonly views: ScanView[] = [];
  private readonly src: Buffer;
  private readonly seams: Int32Array | undefined;
  /** The ranges of a view with seams that are new where they lie (see `freshOfViews`). */
  private readonly fresh: Int32Array | undefined;
  /** Starts of gzip members read as part of an earlier member's view (gzipMembers): not read again on their own. */
  private readonly chained = new Set<number>();
  private readonly shortOutputBytesMin: number;
  /** What could not be checked runs to the view's end: one range from the earliest (not one per signature: 300k). */
  private uncheckableFrom = Infinity;

  constructor(
    private readonly view: ScanView,
    private readonly budget: InflateBudget,
    private readonly outputBytesMin: number,
    private readonly shortOutputs: ShortOutputs | undefined,
  ) {
    this.src = view.bytes;
    this.seams = seamsOfViews.get(view);
    this.fresh = freshOfViews.get(view);
    this.shortOutputBytesMin = shortOutputs?.bytesMin ?? outputBytesMin;
  }

  result(): Inflation {
    const { views, uncheckableFrom, view, src } = this;
    return {
      views,
      uncheckable: uncheckableFrom === Infinity ? [] : [[uncheckableFrom, view.inputEnd(src.length - 1)]],
    };
  }

  /** Signatures, found at any offset: gzip, zlib, zip entries; formats that cannot be checked are redacted. */
  *signatures(): Steps<void> {
    const src = this.src;
    /**
     * Where the deflate data of each gzip start tried begins. Headers whose FNAME (FCOMMENT) fields all run to one
     * zero byte share one data start: a later one is not tried again. Its decode would be the earlier one's (the same
     * data to the same end), and its span, from a later header to the same end, lies inside the earlier span: redacted
     * with it.
     */
    const gzipDataTried = new Set<number>();
    for (const at of signatureStarts(src, gzipMagic)) {
      const data = gzipDataAt(src, at);
      if (!this.chained.has(at) && (data === undefined || !gzipDataTried.has(data))) {
        if (data !== undefined) gzipDataTried.add(data);
        yield* this.tryAt('gzip', at);
      }
      yield;
    }
    for (const at of zlibStarts(src)) {
      // A lone stored block first (not decoded: loneStoredBlock) gives a lenient decoder its bytes, as they lie here.
      if (loneStoredBlock(src, at + 2, src.length)) {
        const [data, dataEnd] = storedData(src, at + 2, src.length);
        if (dataEnd - data >= headlessBytesMin && !looksLikeText(src, data))
          yield* this.tryPlace(data, dataEnd, false, true, false);
      } else yield* this.tryAt('zlib', at);
      yield;
    }
    for (const at of signatureStarts(src, zipMagic)) {
      const data = zipDeflateData(src, at);
      if (data !== undefined) yield* this.tryAt('raw', data, src.length, at);
      yield;
    }
    for (const magic of undecodableMagics) for (const at of signatureStarts(src, magic)) this.untilEnd(at);
  }

  /** Raw deflate and brotli where data starts (DataStarts), and at each stored piece's start (`pieceStarts`). */
  *places({ at: starts, end: ends }: DataStarts): Steps<void> {
    const { src, seams } = this;
    // Where each stored piece starts in a view that joins them (0 and each seam): its bytes lie as they are in the view
    // the stream was found in, but start nowhere data starts there, so raw deflate and brotli were not tried at them.
    const pieceStarts = this.view instanceof InflatedView && seams !== undefined ? new Set([0, ...seams]) : undefined;
    for (let i = 0; i < starts.length; i++) {
      const at = starts[i]!;
      const end = ends?.[i] ?? (i + 1 < starts.length ? starts[i + 1]! : src.length);
      // Not the part's own length: compressed, a part can take fewer bytes than it has (see `headlessBytesMin`).
      if (end - at < headlessBytesMin || looksLikeText(src, at)) continue;
      // In a view with seams, a run that crosses none was tried where it lies whole (see `seamsOfViews`).
      if (seams !== undefined && !pieceStarts?.has(at) && !this.isFresh(at) && !seamBetween(seams, at, end)) continue;
      yield* this.tryPlace(at, end, pieceStarts?.has(at) === true);
      yield;
    }
    for (const at of pieceStarts ?? []) {
      if (at === 0 || src.length - at < headlessBytesMin || looksLikeText(src, at)) continue;
      yield* this.tryPlace(at, src.length, true);
      yield;
    }
  }

  /**
   * Whether streams are mended: not in a view of stored pieces only, where they are decoded as zlib reads them (see
   * `seamsOfViews`); in one with fresh ranges they are, wherever they open (see `freshOfViews`).
   */
  private get mends(): boolean {
    return this.seams === undefined || this.fresh !== undefined;
  }

  /** Whether `at` lies in a fresh range (see `freshOfViews`): tried there as in a view without seams. */
  private isFresh(at: number): boolean {
    return this.fresh !== undefined && inRanges(this.fresh, at);
  }

  private untilEnd(at: number): void {
    this.uncheckableFrom = Math.min(this.uncheckableFrom, this.view.inputStart(at));
  }

  /** Whether an output shorter than a part is worth a view (see ShortOutputs). */
  private *worthKeeping(bytes: Buffer): Steps<boolean> {
    if (bytes.length >= this.outputBytesMin) return true;
    if (bytes.length < this.shortOutputBytesMin) return false;
    return this.shortOutputs!.readable(bytes) || (yield* mayHoldCompressed(bytes, this.outputBytesMin, this.budget));
  }

  /**
   * A stream of `format` from `at` (to `end`), its header or zip entry opened at `opensAt`. `anyway`: a place whose
   * stream is new in a view with seams whether it crosses one or not (`pieceStarts`).
   */
  private *tryAt(
    format: Format,
    at: number,
    end = this.src.length,
    opensAt = at,
    anyway = false,
    mendsHere = this.mends,
  ): Steps<void> {
    const { src, seams, budget, view } = this;
    const fresh = this.isFresh(opensAt);
    if (!anyway && !fresh && !(yield* worthTrying(seams, src, format, opensAt, at, end, budget))) return;
    const maxOutput = Math.min(budget.bytesLeft, Math.max(inflateFloorBytes, (end - at) * inflateRatioMax));
    // Past the walk budget a stream that starts with a stored block zlib refuses could not be mended: not tried.
    if (budget.walkUnitsLeft <= 0 && format !== 'br' && storedLengthsDisagree(src, firstBlockAt(format, src, at), end))
      return this.untilEnd(at);
    const trace: DecodeTrace = { mended: false };
    const decoded =
      budget.callsLeft <= 0 || budget.bytesLeft <= 0 || budget.inputBytesLeft <= 0
        ? 'too_large'
        : format === 'gzip'
          ? yield* gzipMembers(src, at, end, maxOutput, budget, this.chained, this.mends)
          : yield* withPieces(
              format,
              src.subarray(at, end),
              yield* longestDecodable(format, src.subarray(at, end), maxOutput, budget, { mends: mendsHere }, trace),
              budget,
            );
    // One stored block's bytes, as they lie in this view: where they start is a place of its own (see `tryPlace`).
    if (trace.inPlace !== undefined) {
      const [from, to] = trace.inPlace;
      if (to - from >= headlessBytesMin && !looksLikeText(src, at + from))
        yield* this.tryPlace(at + from, at + to, anyway, true, false);
      return;
    }
    if (decoded === 'too_large' || decoded === 'unchecked') {
      // A stream refused as too large was decoded up to its bound first: that work is charged like output kept, so a
      // body of many bombs spends the budget once (then what is left is redacted unread), not the bound per stream.
      // One left unchecked past the walk budget was decoded by zlib up to its stored block (its output, up to the
      // bound, thrown away with the error): charged the same, so many such streams cannot each decode a bomb again.
      budget.bytesLeft -= maxOutput;
      return this.untilEnd(at);
    }
    if (decoded === undefined || decoded.bytes.length < this.shortOutputBytesMin) return;
    if (decoded.pieceEnds === undefined && !(yield* this.worthKeeping(decoded.bytes))) return;
    if (
      !anyway &&
      !fresh &&
      seams !== undefined &&
      format === 'br' &&
      !seamBetween(seams, opensAt, at + decoded.consumed)
    )
      return;
    budget.bytesLeft -= decoded.bytes.length;
    const span = [view.inputStart(at), view.inputEnd(at + Math.max(1, decoded.consumed) - 1)] as const;
    const inflated = new InflatedView(decoded.bytes, view.depth, span[0], span[1]);
    if (decoded.pieceEnds !== undefined) {
      const joins = seamsWithin(decoded.pieceEnds, decoded.bytes.length);
      // Past `seamsMax` the stream is redacted whole, its view searched but not looked into (see `seamsMax`).
      if (joins.length > seamsMax) this.untilEnd(at);
      seamsOfViews.set(inflated, joins.length > seamsMax ? new Int32Array(0) : joins);
    }
    const mixed = decoded.storedPieces && mixedSeams(decoded.storedPieces, decoded.bytes.length);
    if (mixed !== undefined) {
      seamsOfViews.set(inflated, mixed.seams);
      freshOfViews.set(inflated, mixed.fresh);
    }
    this.views.push(inflated);
  }

  /** A view of raw deflate's output shorter than a part (ShortOutputs), decoded by the walk at `at`. */
  private *short(output: ShortOutput, at: number): Steps<void> {
    const { budget, view } = this;
    if ((this.seams !== undefined && this.fresh === undefined) || output.bytes.length > budget.bytesLeft) return;
    if (!(yield* this.worthKeeping(output.bytes))) return;
    budget.bytesLeft -= output.bytes.length;
    const last = at + Math.max(1, output.consumed) - 1;
    this.views.push(new InflatedView(Buffer.from(output.bytes), view.depth, view.inputStart(at), view.inputEnd(last)));
  }

  /**
   * Raw deflate and brotli from `at` to `end`, a place where data starts. A stream a lenient decoder reads nothing of
   * but one stored block's data (a lone stored block whose NLEN is wrong, not decoded: loneStoredBlock; or one zlib
   * stops at, `DecodeTrace.inPlace`) gives the agent bytes that lie in this view as they are, so they were searched,
   * and signatures in them found; but they start nowhere data starts, so where they start is a place of its own (raw
   * deflate inside such a block: the agent decodes it twice). `stored`: the place is such data (decoded as zlib reads
   * it, not mended); `copies`: brotli is tried there even where only uncompressed meta-blocks may write (not where a
   * signature or a stream led to the block: noise opens many such blocks, and brotli's uncompressed meta-blocks copy
   * the whole of it, which spent the decoded-bytes budget on random binary).
   */
  private *tryPlace(at: number, end: number, anyway: boolean, stored = false, copies = true): Steps<void> {
    const { src, budget, outputBytesMin, shortOutputBytesMin } = this;
    for (;;) {
      // A run is decoded on its own, as the agent would decode it; what gives fewer bytes than a part, by the walk.
      const raw = yield* rawMayHold(src, at, end, budget, outputBytesMin, shortOutputBytesMin);
      if (raw === true) yield* this.tryAt('raw', at, end, at, anyway, !stored && this.mends);
      else if (raw !== false) yield* this.short(raw, at);
      // Brotli is read up to its first command first (brotli-header.ts): noise stops before it, with no call.
      const brotliBytes = shortOutputBytesMin;
      if (end - at >= brotliBytesFor(brotliBytes) && brotliMayGive(src.subarray(at, end), brotliBytes, copies))
        yield* this.tryAt('br', at, end, at, anyway, false);
      if (!loneStoredBlock(src, at, end)) return;
      [at, end] = storedData(src, at, end);
      if (end - at < headlessBytesMin || looksLikeText(src, at)) return;
      stored = true;
      yield;
    }
  }
}

/**
 * Whether inflatedViewSteps, run on a view of `src` with data starting at its first byte only and `outputBytesMin` for
 * every output, could find anything in it, told without a decoder call: no when no signature may start in it (gzip,
 * zip, zlib, the formats that cannot be checked) and neither raw deflate (the lenient walk; a stored block first is
 * taken as yes) nor brotli (its header) at its start gives that many bytes.
 */
function* mayHoldCompressed(src: Buffer, outputBytesMin: number, budget: InflateBudget): Steps<boolean> {
  if (mayHoldSignature(src)) return true;
  if (src.length < headlessBytesMin || looksLikeText(src, 0)) return false;
  if (loneStoredBlock(src, 0, src.length)) return true;
  if ((yield* rawMayHold(src, 0, src.length, budget, outputBytesMin, outputBytesMin)) !== false) return true;
  return src.length >= brotliBytesFor(outputBytesMin) && brotliMayGive(src, outputBytesMin);
}

/** Whether a signature inflatedViewSteps looks for may start somewhere in `src`: its first byte or two, one pass. */
function mayHoldSignature(src: Buffer): boolean {
  for (let at = 0; at < src.length; at++) {
    const b = src[at]!;
    if (signatureFirstBytes[b] === 1) return true;
    if ((b & 0x8f) === 0x08 && at + 1 < src.length && (b * 256 + src[at + 1]!) % 31 === 0) return true;
  }
  return false;
}

/** The first bytes of gzip's, zip's and each undecodable format's signature. */
const signatureFirstBytes = new Uint8Array(256);

/**
 * Whether raw deflate from `at` (to `end`) can decode to `outputBytes` bytes or more: not when its first block type is
 * reserved or it is a lone stored block (`loneStoredBlock`), nor when a walk (lenientOutputBytesSteps, no decoder call,
 * `probeWalkUnitsMax`) says a lenient decoder gets fewer out of it; past the walk budget, assumed so.
 */
function* rawMayHold(
  src: Buffer,
  at: number,
  end: number,
  budget: InflateBudget,
  outputBytes: number,
  shortOutputBytes: number,
): Steps<boolean | ShortOutput> {
  if (((src[at]! >> 1) & 3) === 3 || loneStoredBlock(src, at, end)) return false;
  const walk = { walkUnitsLeft: budget.probeUnitsLeft };
  const produced = yield* lenientOutputBytesSteps(src.subarray(at, end), walk);
  // Counted first, then walked again for the bytes only where a short output is kept (most noise gives fewer).
  const got =
    produced !== 'unchecked' && produced >= shortOutputBytes && produced < outputBytes
      ? yield* lenientShortOutputSteps(src.subarray(at, end), walk, outputBytes)
      : produced;
  budget.probeUnitsLeft = walk.walkUnitsLeft;
  if (typeof got === 'object') return got.bytes.length >= shortOutputBytes && got;
  return got === 'unchecked' || got >= outputBytes;
}

/**
 * A first block that is stored (BTYPE 0) says its length twice, after the header's byte: LEN, then its one's
 * complement. zlib refuses a block whose two disagree; a lenient decoder reads LEN bytes of it, and nothing more when
 * the block is final or its data runs to the end: bytes the view already holds as they are. Noise starts like that
 * (a quarter of random bytes have BTYPE 0), so such a start is not tried. One followed by another block is: a secret
 * split across the two is whole only in what a lenient decoder gives out.
 */
function loneStoredBlock(src: Buffer, at: number, end: number): boolean {
  if (!storedLengthsDisagree(src, at, end)) return false;
  return (src[at]! & 1) === 1 || at + 5 + src.readUInt16LE(at + 1) >= end;
}

/** Where the data of the stored block at `at` (bit 0) lies, up to `end`. */
function storedData(src: Buffer, at: number, end: number): readonly [number, number] {
  return [at + 5, Math.min(end, at + 5 + src.readUInt16LE(at + 1))];
}

/** A stored block starts at byte `at` (bit 0) and its LEN and NLEN disagree. */
function storedLengthsDisagree(src: Buffer, at: number, end: number): boolean {
  return (
    at + 5 <= end && ((src[at]! >> 1) & 3) === 0 && (src.readUInt16LE(at + 1) ^ src.readUInt16LE(at + 3)) !== 0xffff
  );
}

/** Where the first block of a stream of this format at `at` starts (gzip: past its header, read leniently). */
function firstBlockAt(format: Format, src: Buffer, at: number): number {
  return format === 'raw' ? at : format === 'zlib' ? at + 2 : (gzipDataAt(src, at) ?? at + 10);
}

/**
 * The gzip members from `at` on, read as a lenient decoder reads them (gzip-members.ts): each member's deflate data
 * decoded as raw deflate (longestDecodable: a corrupt tail, stored blocks zlib refuses), its trailer skipped
 * unchecked, and the outputs of members that follow one another (zero bytes between them skipped) joined, so a secret
 * split across members is seen whole (a member whose only output is one stored block with a wrong NLEN too: alone its
 * bytes lie in the view already, joined they may not; so a join is never stored-only, and what it holds is looked
 * into again). Every member after the first is added to `chained`: its output is in this view, and it is not decoded
 * again on its own.
 */
function* gzipMembers(
  src: Buffer,
  at: number,
  end: number,
  maxOutput: number,
  budget: InflateBudget,
  chained: Set<number>,
  mends: boolean,
): Steps<Decoded | 'too_large' | 'unchecked' | undefined> {
  const outputs: Buffer[] = [];
  let total = 0;
  let pieces: Pick<Decoded, 'pieceEnds' | 'storedPieces'> = {};
  let readTo = at;
  for (let member = at; ;) {
    const data = gzipDataAt(src, member, end);
    if (data === undefined) break;
    const read = yield* longestDecodable('raw', src.subarray(data, end), maxOutput - total, budget, {
      memberData: true,
      mends,
    });
    if (read === 'too_large' || read === 'unchecked') return read;
    if (read === undefined) break;
    if (member !== at) chained.add(member);
    outputs.push(read.bytes);
    total += read.bytes.length;
    if (total >= maxOutput) return 'too_large';
    pieces = {
      ...(read.pieceEnds && { pieceEnds: read.pieceEnds }),
      ...(read.storedPieces && { storedPieces: read.storedPieces }),
    };
    // The trailer (CRC-32, ISIZE) is skipped unchecked; the next member, if any, starts right after it or after zero
    // bytes there (Python's gzip.decompress skips them; they are not read as part of the stream).
    member = data + read.consumed + gzipTrailerBytes;
    readTo = Math.min(end, member);
    member = zerosEnd(src, readTo, end);
  }
  if (outputs.length === 0) return undefined;
  // Stored pieces (seams) are kept for one member's output (each piece lies in the view as it is), not for the joined
  // outputs of several: compressed data split across members is whole only in the join, so all of that is looked into.
  if (outputs.length === 1) {
    const one = { bytes: outputs[0]!, consumed: readTo - at, ...pieces };
    return yield* withPieces('raw', src.subarray(gzipDataAt(src, at, end)!, end), one, budget);
  }
  return { bytes: Buffer.concat(outputs), consumed: readTo - at };
}

const gzipMagic = Buffer.from([0x1f, 0x8b, 0x08]);
const zipMagic = Buffer.from('PK\x03\x04', 'latin1');
/** Formats node:zlib cannot decode here: zstd, xz, bzip2 (stream + first block), lz4 frame. */
const undecodableMagics = [
  Buffer.from([0x28, 0xb5, 0x2f, 0xfd]),
  Buffer.from([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00]),
  Buffer.from([0x31, 0x41, 0x59, 0x26, 0x53, 0x59]),
  Buffer.from([0x04, 0x22, 0x4d, 0x18]),
];

for (const magic of [gzipMagic, zipMagic, ...undecodableMagics]) signatureFirstBytes[magic[0]!] = 1;

function signatureStarts(src: Buffer, magic: Buffer): number[] {
  const found: number[] = [];
  for (let at = src.indexOf(magic); at >= 0; at = src.indexOf(magic, at + 1)) found.push(at);
  return found;
}

/**
 * RFC 1950 headers: CM 8, CINFO <= 7, (CMF*256 + FLG) % 31 == 0, no FDICT; and a first block that is not BTYPE 3 (a
 * lone stored block with disagreeing lengths is not decoded: its bytes are a place of their own, see tryPlace).
 */
function zlibStarts(src: Buffer): number[] {
  const found: number[] = [];
  for (let at = 0; at + 2 < src.length; at++) {
    const cmf = src[at]!;
    if ((cmf & 0x8f) !== 0x08) continue;
    const flg = src[at + 1]!;
    if ((cmf * 256 + flg) % 31 !== 0 || (flg & 0x20) !== 0) continue;
    if (((src[at + 2]! >> 1) & 3) !== 3) found.push(at);
  }
  return found;
}

/** Where a zip local entry's deflate data starts (method 8, not encrypted), or undefined. */
function zipDeflateData(src: Buffer, at: number): number | undefined {
  if (at + 30 > src.length) return undefined;
  const flags = src.readUInt16LE(at + 6);
  const method = src.readUInt16LE(at + 8);
  if (method !== 8 || (flags & 1) !== 0) return undefined;
  const data = at + 30 + src.readUInt16LE(at + 26) + src.readUInt16LE(at + 28);
  return data < src.length ? data : undefined;
}

/** Printable ASCII, tab and line breaks, or valid UTF-8 above ASCII, in the first bytes from `at`. */
function looksLikeText(src: Buffer, at: number): boolean {
  const probe = src.subarray(at, at + textProbeBytes);
  for (const b of probe) if ((b < 0x20 && b !== 0x09 && b !== 0x0a && b !== 0x0d) || b === 0x7f) return false;
  // A multi-byte character cut at the probe's end is still text: up to three bytes of it may be missing.
  for (let cut = 0; cut <= 3 && cut < probe.length; cut++)
    if (isUtf8(probe.subarray(0, probe.length - cut))) return true;
  return false;
}

interface Decoded {
  readonly bytes: Buffer;
  /** Encoded bytes the stream took. */
  readonly consumed: number;
  /**
   * Decoded from a copy whose stored blocks were mended, and only stored blocks produced it: where each block's bytes
   * end in it (Mended.pieceEnds).
   */
  readonly pieceEnds?: Uint32Array;
  /**
   * Its stored pieces, when Huffman blocks of a mended copy produced the rest, or a walk found them in a stream zlib read
   * as it is (`withPieces`): the view then has fresh ranges (see `freshOfViews`).
   */
  readonly storedPieces?: StoredPieces;
}

/** Where each stored piece of an output starts and ends in it. */
interface StoredPieces {
  readonly starts: Uint32Array;
  readonly ends: Uint32Array;
}

/**
 * What a streaming decoder gets out of `input`: all of it when it decodes (a truncated stream too: sync flush),
 * else the output of the longest prefix that decodes (exponential probe, then bisection). 'too_large' when the output
 * passes `maxOutput` (or the call budget runs out): then nothing past that point was checked. No prefix is decoded
 * twice: the longest good one so far is kept, and it is the answer. When zlib stops at a stored block whose lengths
 * disagree, the answer is what a decoder that ignores NLEN gets: the stream with its stored blocks mended (once), or
 * 'unchecked' when the walk that mends them is past its budget; when it refuses a dynamic block's codes a lenient
 * decoder reads (an incomplete code), what that decoder gets: the walk's output re-encoded (mendStoredLengthSteps), its
 * `consumed` the stream's own extent; unless `mends` is false (a stream in a view with seams): then it is what zlib
 * gives before that block. `memberData`: `input` is a gzip member's deflate data
 * (gzipMembers): not decoded at its head first (behind a signature it is seldom noise, and the probe would be a second
 * call for each member), and a lone stored block with a wrong NLEN is decoded too (its bytes lie in the view, but
 * joined to the next member's output they may make a secret that does not).
 */
function* longestDecodable(
  format: Exclude<Format, 'gzip'>,
  input: Buffer,
  maxOutput: number,
  budget: InflateBudget,
  options: LongestDecodableOptions = {},
  trace: DecodeTrace = { mended: false },
): Steps<Decoded | 'too_large' | 'unchecked' | undefined> {
  if (input.length > memoInputBytesMax)
    return yield* longestDecodableUnkept(format, input, maxOutput, budget, options, trace);
  const key = `${format}${options.memberData === true ? 'm' : ''}${options.mends === false ? 'n' : ''}:${maxOutput}:${input.toString('latin1')}`;
  // A copy: whoever reads a decoded answer may keep its bytes.
  const copy = (decoded: Decoded | undefined): Decoded | undefined =>
    decoded === undefined ? undefined : { ...decoded, bytes: Buffer.from(decoded.bytes) };
  // Met before in this input: already charged.
  if (budget.outcomes.has(key)) return copy(budget.outcomes.get(key));
  const kept = outcomeMemo.get(key);
  // Charged as the calls and the walk it stands for were: with too little budget left they are made, and fail as they
  // did before.
  if (
    kept !== undefined &&
    budget.callsLeft >= kept.calls &&
    budget.inputBytesLeft > kept.inputBytes &&
    (kept.walkUnits === 0 || (budget.walkUnitsLeft > 0 && budget.walkUnitsLeft >= kept.walkUnits))
  ) {
    budget.callsLeft -= kept.calls;
    budget.inputBytesLeft -= kept.inputBytes;
    budget.walkUnitsLeft -= kept.walkUnits;
    budget.outcomes.set(key, kept.decoded);
    return copy(kept.decoded);
  }
  const [callsLeft, inputBytesLeft, walkUnitsLeft] = [budget.callsLeft, budget.inputBytesLeft, budget.walkUnitsLeft];
  const got = yield* longestDecodableUnkept(format, input, maxOutput, budget, options, trace);
  // Kept only when the calls (and a walk's re-encoded copy, its units charged on a hit) decided it: no stored block's
  // NLEN mended, no budget run out ('too_large', 'unchecked'), and not too many decoded bytes to keep.
  const keep =
    !trace.mended &&
    (got === undefined ||
      (typeof got === 'object' && got.pieceEnds === undefined && got.bytes.length <= memoOutputBytesMax));
  if (keep) {
    const decoded = copy(got);
    if (outcomeMemo.size >= memoEntriesMax) outcomeMemo.delete(outcomeMemo.keys().next().value!);
    outcomeMemo.set(key, {
      decoded,
      calls: callsLeft - budget.callsLeft,
      inputBytes: inputBytesLeft - budget.inputBytesLeft,
      walkUnits: walkUnitsLeft - budget.walkUnitsLeft,
    });
    budget.outcomes.set(key, decoded);
  }
  return got;
}

interface LongestDecodableOptions {
  readonly memberData?: boolean;
  readonly mends?: boolean;
}

/**
 * What a decode met: `mended`, an answer not to keep (a stored block's NLEN mended, the walk's budget spent, or a
 * lenient decoder reading nothing but one stored block's data: `inPlace`, there).
 */
interface DecodeTrace {
  mended: boolean;
  inPlace?: readonly [at: number, end: number];
}

/**
 * longestDecodable's answers for short inputs (at most `memoInputBytesMax`), by format, options, output bound and
 * bytes, with the budget their calls took: a pure function of those while no stored block is mended, and most short
 * data tried is the same from answer to answer (a remote's words, `application/json`, a date: every place in a run is
 * tried). One lookup stands for the ~2 decoder calls a start makes (a probe, the whole, the bisection).
 */
const outcomeMemo = new Map<
  string,
  {
    readonly decoded: Decoded | undefined;
    readonly calls: number;
    readonly inputBytes: number;
    /** Walk units the walks took: one that found nothing to mend (noise meets zlib's code messages often), or one whose
     * output was re-encoded. */
    readonly walkUnits: number;
  }
>();

function* longestDecodableUnkept(
  format: Exclude<Format, 'gzip'>,
  input: Buffer,
  maxOutput: number,
  budget: InflateBudget,
  { memberData = false, mends = true }: LongestDecodableOptions,
  trace: DecodeTrace = { mended: false },
): Steps<Decoded | 'too_large' | 'unchecked' | undefined> {
  let src = input;
  /** The mended copy `src` is, once zlib stopped where a lenient decoder reads on. */
  let copyOf: Mended | undefined;
  // A decoder call on a long prefix is one step of its own (it can take a while); the short probes most starts make
  // take microseconds, and yielding after each cost more than they do: inflatedViewSteps yields once per start.
  const attempt = (length: number): Attempt => {
    if (budget.callsLeft <= 0 || budget.inputBytesLeft <= 0) return 'too_large';
    budget.callsLeft -= 1;
    // A short input's whole answer is kept (`outcomeMemo`), so its calls are not kept one by one; a long one's short
    // probes are.
    const got =
      input.length > memoInputBytesMax
        ? decodeOnceMemo(format, src.subarray(0, length), maxOutput)
        : decodeOnce(format, src.subarray(0, length), maxOutput);
    // A call that fails does not say how far it read (noise fails within bytes); one that succeeds does.
    if (isDecoded(got)) budget.inputBytesLeft -= got.consumed;
    return got;
  };
  /** After zlib stopped where a lenient decoder reads on: true when `src` is now the mended copy. */
  const mended = function* (got: Attempt): Steps<boolean | 'in_place' | 'unchecked'> {
    if ((got !== 'stored_lengths' && got !== 'lenient_codes') || format === 'br' || src !== input) return false;
    if (got === 'stored_lengths' && !mends) return false;
    // Noise meets zlib's code messages often: its answer is still the calls' alone (kept) when the walk finds nothing.
    if (got === 'stored_lengths') trace.mended = true;
    const copy = yield* mendStoredLengthSteps(format, input, budget, !memberData, maxOutput + 1);
    if (copy === undefined) return false;
    // A copy re-encoded from the walk's output (codes zlib refuses; wrong NLENs after them are in it too) is a function
    // of the bytes as the calls' answers are, and a hit charges the walk units it took: its answer may be kept. A copy
    // with only NLEN mended, one after zlib stopped at a stored block first, or one stored block's bytes in place
    // (`trace.inPlace`, which a kept `undefined` would lose) are not (helper-218 read it: no hit sees less).
    if (copy === 'unchecked' || !('copy' in copy) || copy.inputBytes === undefined) trace.mended = true;
    // A walk past its budget cannot say what a lenient decoder reads on to: unchecked, whether NLEN is mended here or
    // not (zlib's answer stood where it was not, and a token past zlib's stop went out: helper-217's review).
    if (copy === 'unchecked') return copy;
    // Where NLEN is not mended (`mends` false: a view's stored pieces, a stored block's own data) a code zlib refuses
    // is still read: only a re-encoded copy is taken there.
    if (!mends && (!('copy' in copy) || copy.inputBytes === undefined)) return false;
    if ('inPlace' in copy) {
      trace.inPlace = copy.inPlace;
      return 'in_place';
    }
    src = copy.copy;
    copyOf = copy;
    return true;
  };
  const answer = (decoded: Decoded): Decoded => mendedAnswer(decoded, copyOf);
  let good = 0;
  let goodDecoded: Decoded | undefined;
  // Without a signature most tries are noise: the first bytes are decoded first, and when they do not start a stream
  // no longer prefix does (a decoder that fails on some bytes fails on every input that starts with them).
  if ((format === 'raw' || format === 'br') && !memberData && input.length > probeBytesFirst) {
    let head = attempt(probeBytesFirst);
    const mend = yield* mended(head);
    if (mend === 'unchecked') return mend;
    // Nothing but one stored block's bytes, searched where they lie (`trace.inPlace`): no prefix holds more (noise
    // opens many such).
    if (mend === 'in_place') return undefined;
    if (mend) head = attempt(probeBytesFirst);
    if (!isDecoded(head)) return head === 'too_large' ? head : undefined;
    good = probeBytesFirst;
    goodDecoded = head;
  }
  let whole = attempt(src.length);
  if (src.length >= longCallBytes) yield;
  const mend = yield* mended(whole);
  if (mend === 'unchecked') return mend;
  if (mend === 'in_place') return undefined;
  if (mend) {
    whole = attempt(src.length);
    if (src.length >= longCallBytes) yield;
  }
  if (isDecoded(whole)) return answer(whole);
  if (whole === 'too_large') return whole;
  let bad = src.length;
  for (let probe = good === 0 ? probeBytesFirst : good * 8; probe < bad; probe *= 8) {
    const got = attempt(probe);
    if (probe >= longCallBytes) yield;
    if (got === 'too_large') return got;
    if (!isDecoded(got)) bad = probe;
    else [good, goodDecoded] = [probe, got];
  }
  while (bad - good > 1) {
    const mid = (good + bad) >> 1;
    const got = attempt(mid);
    if (mid >= longCallBytes) yield;
    if (got === 'too_large') return got;
    if (!isDecoded(got)) bad = mid;
    else [good, goodDecoded] = [mid, got];
  }
  // Two bytes decode to too little to hold a part (see `headlessBytesMin`).
  if (good <= 2 || goodDecoded === undefined) return undefined;
  return answer(goodDecoded);
}

/** An output at most this much longer than its stream may be mostly stored blocks: `withPieces` walks it. */
const storedLikeRatio = 1.125;
/** Outputs shorter than this are not walked for stored pieces: short views cost little to look into whole. */
const piecesWalkBytesMin = 4096;

/**
 * A stream zlib read as it is (no stored block mended) whose output is about as long as the stream: its stored pieces,
 * found by a walk (stored data costs nothing to walk), so its view has fresh ranges (`freshOfViews`; past
 * `freshRangesMax` pieces, none: it is looked into whole). Noise gzipped, a random binary in a zip: looking into the
 * pieces again decoded the same streams at each depth and spent the budget.
 */
function* withPieces(
  format: Exclude<Format, 'gzip'>,
  stream: Buffer,
  decoded: Decoded | 'too_large' | 'unchecked' | undefined,
  budget: InflateBudget,
): Steps<Decoded | 'too_large' | 'unchecked' | undefined> {
  if (format === 'br' || typeof decoded !== 'object' || decoded.pieceEnds !== undefined) return decoded;
  if (decoded.storedPieces !== undefined) return decoded;
  const length = decoded.bytes.length;
  if (length < piecesWalkBytesMin || length > decoded.consumed * storedLikeRatio) return decoded;
  const spans = yield* storedPieceSpansSteps(format, stream, budget);
  if (spans === 'unchecked' || spans.pieceStarts.length === 0) return decoded;
  return { ...decoded, storedPieces: piecesOf(spans.pieceStarts, spans.pieceEnds) };
}

/** Each stored piece's start and end in the output (`pieceEnds`: stored bytes up to and with each piece). */
function piecesOf(pieceStarts: Uint32Array, pieceEnds: Uint32Array): StoredPieces {
  const ends = pieceStarts.map((start, i) => start + pieceEnds[i]! - (i === 0 ? 0 : pieceEnds[i - 1]!));
  return { starts: pieceStarts, ends };
}

/**
 * A decoded answer of a mended copy: where its stored pieces end when only stored blocks gave it, and the stream's own
 * extent when the copy is re-encoded (Mended.inputBytes: the copy's length says nothing of the input then).
 */
function mendedAnswer(decoded: Decoded, copy: Mended | undefined): Decoded {
  if (copy === undefined) return decoded;
  const taken = copy.inputBytes === undefined ? decoded : { ...decoded, consumed: copy.inputBytes };
  if (copy.huffmanBytes === 0) return { ...taken, pieceEnds: copy.pieceEnds };
  // A re-encoded copy's pieces are not marked: its view is looked into whole.
  if (copy.inputBytes !== undefined || copy.pieceStarts.length === 0) return taken;
  return { ...taken, storedPieces: piecesOf(copy.pieceStarts, copy.pieceEnds) };
}

/**
 * One decoder call: the output, or why there is none ('stored_lengths': zlib refused a stored block's NLEN;
 * 'lenient_codes': a dynamic block's codes, which a lenient decoder may read).
 */
type Attempt = Decoded | 'too_large' | 'stored_lengths' | 'lenient_codes' | undefined;

function isDecoded(got: Attempt): got is Decoded {
  return typeof got === 'object';
}

/**
 * The output buffer a decoder call starts with. node:zlib's default (16 KiB) is allocated by every call, and most
 * calls here are probes of a few dozen bytes that fail: that allocation and its garbage were a third of a failed
 * probe's cost. A short input starts with 1 KiB (more is allocated as output grows); a long one keeps the default.
 */
function chunkSizeFor(inputBytes: number): number | undefined {
  return inputBytes < smallInputBytes ? smallChunkBytes : undefined;
}

/**
 * Decoder answers (`decodeOnce`) for the short probes of long inputs, by format, output bound and bytes: a decoder
 * call is a pure function of those, and a long input's probe is its first few bytes, often met again from answer to
 * answer (a remote's words, `application/json`, a date's year and month: every place in a run is tried), each costing a
 * decoder made and thrown away (~15-50 µs). An input of at most `memoInputBytesMax` bytes is not kept here: its whole
 * answer is (`outcomeMemo`), and its calls are made without this map. Only answers with at most `memoOutputBytesMax`
 * decoded bytes are kept (most are failures); `memoEntriesMax` bounds the map (~1-2 MiB at most).
 */
const memoInputBytesMax = 64;
const memoOutputBytesMax = 256;
const memoEntriesMax = 4096;
const decodeMemo = new Map<string, Attempt>();

/** Forgets every kept answer (tests that count decoder calls start from none). */
export function forgetDecodeMemo(): void {
  decodeMemo.clear();
  outcomeMemo.clear();
}

/** Kept answers now (at most memoEntriesMax). */
export function decodeMemoEntries(): number {
  return decodeMemo.size;
}

/** decodeOnce's answer for a short input, from the memo or the decoder (the same answer either way; exported for its test). */
export function decodeOnceMemo(format: Exclude<Format, 'gzip'>, input: Buffer, maxOutputLength: number): Attempt {
  if (input.length > memoInputBytesMax) return decodeOnce(format, input, maxOutputLength);
  const key = `${format}:${maxOutputLength}:${input.toString('latin1')}`;
  const kept = decodeMemo.get(key);
  // A copy: whoever reads a decoded answer may keep its bytes.
  if (kept !== undefined || decodeMemo.has(key))
    return isDecoded(kept) ? { ...kept, bytes: Buffer.from(kept.bytes) } : kept;
  const got = decodeOnce(format, input, maxOutputLength);
  if (!isDecoded(got) || got.bytes.length <= memoOutputBytesMax) {
    // The oldest entry goes first (a Map iterates in insertion order).
    if (decodeMemo.size >= memoEntriesMax) decodeMemo.delete(decodeMemo.keys().next().value!);
    decodeMemo.set(key, isDecoded(got) ? { ...got, bytes: Buffer.from(got.bytes) } : got);
  }
  return got;
}

export function decodeOnce(format: Exclude<Format, 'gzip'>, input: Buffer, maxOutputLength: number): Attempt {
  // `info: true` (not in the option types) returns the engine too: its bytesWritten is the input the stream took.
  const chunkSize = chunkSizeFor(input.length);
  const zlibOptions = { finishFlush: constants.Z_SYNC_FLUSH, maxOutputLength, chunkSize, info: true } as ZlibOptions;
  const brotliOptions = {
    finishFlush: constants.BROTLI_OPERATION_FLUSH,
    maxOutputLength,
    chunkSize,
    info: true,
  } as BrotliOptions;
  // Most tries fail (noise, a corrupt tail): node:zlib throws an Error each time, and capturing its stack trace is
  // most of a failed try's cost. Nothing reads it: the failure is the answer.
  const stackTraceLimit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    const result = (format === 'br'
      ? brotliDecompressSync(input, brotliOptions)
      : format === 'zlib'
        ? inflateSync(input, zlibOptions)
        : inflateRawSync(input, zlibOptions)) as unknown as { buffer: Buffer; engine: { bytesWritten: number } };
    return { bytes: result.buffer, consumed: Math.min(input.length, result.engine.bytesWritten) };
  } catch (error) {
    const { code, message } = error as { code?: string; message?: string };
    if (error instanceof RangeError || code === 'ERR_BUFFER_TOO_LARGE') return 'too_large';
    if (code !== 'Z_DATA_ERROR' || message === undefined) return undefined;
    return message === storedLengthsMessage
      ? 'stored_lengths'
      : lenientCodesMessages.has(message)
        ? 'lenient_codes'
        : undefined;
  } finally {
    Error.stackTraceLimit = stackTraceLimit;
  }
}
