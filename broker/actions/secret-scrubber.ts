import { isUtf8 } from 'node:buffer';
import type { SecretMaterial } from '../ports/index.js';
import {
  type DataStarts,
  headlessBytesMin,
  freshRangesMax,
  freshRangesOf,
  holdsNothingNew,
  setFreshRanges,
  inflateBudget,
  inflatedViewSteps,
  inflationsMax,
  setViewSeams,
  viewSeams,
} from './compressed-views.js';
import { runSteps, runStepsSliced, type Steps } from './sliced-work.js';

/*
 * The scrubber stands between a remote that may reflect what it received (THREAT-MODEL.md: "echo headers and
 * bodies, base64 them, pad headers") and the agent. It must find every secret *part* in every form a reflecting
 * remote produces in practice, so it searches decoded "views" of the input, each byte of a view mapped back to the
 * input bytes it came from, and redacts the input bytes behind every hit. A part matches in any ASCII case (a remote
 * that upper-cases what it echoes: hex tokens come back upper-cased), in every view (base64 of an upper-cased token
 * too); other bytes match exactly:
 *
 *   escape views   percent (%XX, either hex case, any subset of bytes encoded; plus a '+'-as-space variant when a
 *                  part holds a space), JSON/JS string escapes (\uXXXX incl. surrogate pairs -> UTF-8,
 *                  \" \\ \/ \b \f \n \r \t, \xHH), HTML character references (&#NN; &#xHH; &amp; &lt; &gt; &quot; &apos;);
 *                  and text that carries bytes one per character (latin1: `latin1Kinds`), raw UTF-8, in a JSON string or
 *                  as numeric references, each character up to U+00FF read as its byte, as an agent reads it back.
 *                  A hit maps back to exactly the escapes and bytes it came from.
 *   run views      base64 and base64url (one alphabet: -_ read as +/) and hex (any case). A run is a maximal stretch
 *                  of the alphabet; '=' and line breaks inside it are read past, so concatenated padded blobs and
 *                  wrapped output (`base64 -w N`, `xxd -p`) decode whole. Every run is decoded at each symbol offset
 *                  (4 for base64, 2 for hex), so a part at any byte alignment inside a larger blob is found. A hit
 *                  redacts the whole run: over-redacting a blob that carries a secret is fine. Runs too short to
 *                  hold the shortest part are decoded only to look for compressed data in (below).
 *   decimal arrays  comma-separated byte values 0-255 (Node's Buffer as JSON, `{"type":"Buffer","data":[57,102,...]}`,
 *                  and `[57, 102, ...]` with spaces or line breaks around the commas): a run of them decodes to bytes,
 *                  and a hit redacts the whole run, like base64's.
 *
 * Views nest up to `nestingMax` = 2 deep: every single form above, and every ordered pair (percent inside JSON,
 * base64 inside percent, JSON inside JSON, hex inside base64, base64 with JSON-escaped slashes, ...). Matching is
 * over the whole buffer given, so a match split across the caller's chunks is found once they are joined.
 *
 *   inflated views compressed streams the remote did not declare (compressed-views.ts): gzip, zlib and zip entries
 *                  wherever their signature is, raw deflate and brotli where non-text data starts (in a percent
 *                  or latin1 view also where each value that holds an escape starts: `q=%63%b4…`, `q=s%b4…`,
 *                  `escapeRunStarts`), in every view
 *                  above (so base64 of gzip, gzip of JSON-escaped text...). Compressed, a part can be shorter than
 *                  itself (brotli writes 40 hex digits in ~37 bytes): runs too short to hold a part as they are are
 *                  decoded too, cut at each '=' (`key=<base64>`), at their first symbol, every one of them (every
 *                  word of prose is one: a start met again in one input costs nothing, and raw deflate is walked
 *                  before it is decoded), and looked into for compressed data only; so is a view shorter than the
 *                  shortest part, and so is what a first decompression gives that is shorter than a part (raw
 *                  deflate of raw deflate of a 40-hex token: 38 bytes in the middle) when something could be read
 *                  out of it (`ShortOutputs`). Decompression is not counted as a layer (at most
 *                  `inflationsMax` of them on one path); what cannot be decoded within the bounds, or is a
 *                  format node:zlib lacks (zstd, xz, bzip2, lz4), is redacted from its start to the end of the view.
 *
 * What stays out, by design: three or more nested encodings; base64/hex split into groups shorter than the shortest
 * part (`c2Vj cmV0`), so also hex spaced or grouped by byte pairs (xxd / hexdump style, `9f 3a 7c`, `9f:3a:7c`) and a
 * part cut into pieces or reordered by any rule a hostile remote picks (every n-th character, reversed...); base32,
 * base85, quoted-printable (`=39=66`), uuencode, octal or decimal escapes other than the byte arrays above, and any
 * other encoding not listed; case changes other than ASCII letters' (a non-ASCII letter is matched byte for byte);
 * raw deflate or brotli whose first bytes read as text (fixed-Huffman deflate of digits can: it is not tried there),
 * behind a prefix inside binary data (no signature to find it by), or behind symbols glued before a short run (on the
 * same line: after a line break or a '=' inside a run is a place of its own, `hello\n<base64>`); past the call budget
 * (`inflateCallsMax` distinct places per input) the rest is redacted, not handed over; brotli made of uncompressed
 * meta-blocks only inside a stored block that a lenient decoder reaches other than where data starts (behind a zlib
 * header, after empty blocks: there brotli is tried where a compressed meta-block may write); percent-encoded
 * compressed data a remote cuts with a separator it leaves unescaped inside its own value (`q=%63%b4&%…`); a preset zlib
 * dictionary, an encrypted zip entry, encryption or any keyed transform; UTF-16 or other non-UTF-8 text
 * encodings; latin1 text whose stretch of valid UTF-8 is shorter than `textStretchBytesMin`, or that maps bytes past
 * U+00FF, or raw deflate or brotli in it behind a label (tried where a stretch or a JSON string starts, and where an
 * element's content starts only in a page of references, `&#NN;`: `<pre>` of raw characters is behind its tags;
 * `latin1Kinds`); a secret dealt out in slices over several answers (Range is refused at validation). Parts shorter than
 * `partBytesMin` are not searched: they would redact at random.
 *
 * Cost: an escape view copies plain stretches natively and is built only when its trigger byte occurs and decodes at
 * least one escape; in an escape view only runs that hold a decoded escape are decoded (the rest are the parent's).
 * A 1 MiB body takes ~10-60 ms on one core; random binary more (~0.4-0.5 s: decoder tries, mends). The search is written as
 * steps (sliced-work.ts): scrub() runs them at once, scrubAsync() in slices that give the event loop a turn every few
 * milliseconds (THREAT-MODEL 4: one agent's large answer must not stall the daemon), with exactly the same result.
 */

export const redactionMarker = '[REDACTED]';
const markerBytes = Buffer.from(redactionMarker);
const partBytesMin = 4;
const sshKeyLineCharsMin = 16;
const nestingMax = 2;
/** Worst bytes per byte of one form: an HTML reference with leading zeros, `&#x000041;`. */
const layerExpansionMax = 10;
/** Scrubbing again the scrubbed output proves no new match formed at a seam; a match that survives this is failed closed. */
const rescrubRoundsMax = 3;

/** Every secret part of one credential: what must never come back in any form. */
export function secretParts(secret: SecretMaterial): string[] {
  const parts: string[] = [];
  switch (secret.kind) {
    case 'bearer':
      parts.push(secret.token, `Bearer ${secret.token}`);
      break;
    case 'header':
      parts.push(secret.secret, secret.value);
      break;
    case 'basic': {
      // The user name alone is not secret and would redact every greeting that names the account.
      const userPass = `${secret.user}:${secret.password}`;
      const encoded = Buffer.from(userPass).toString('base64');
      parts.push(secret.password, userPass, encoded, `Basic ${encoded}`);
      break;
    }
    case 'query':
      parts.push(secret.value, `${secret.param}=${secret.value}`);
      break;
    case 'ssh_key':
      parts.push(...sshKeyBodyLines(secret.privateKey));
      break;
    case 'aws_sigv4':
      // The secret key never travels (it only keys the HMAC), but a part is searched wherever it could come from;
      // the session token is sent as a header. The access key id names the key, like a basic user: not secret.
      parts.push(secret.secretAccessKey, ...(secret.sessionToken === undefined ? [] : [secret.sessionToken]));
      break;
    case 'oauth2_client': {
      // Only the token endpoint sees these, as HTTP basic of the form-encoded pair (RFC 6749 §2.3.1). The client id
      // names the client, like a basic user: not secret. The access token's parts are the executor's (oauthTokenParts).
      const pair = `${formEncode(secret.clientId)}:${formEncode(secret.clientSecret)}`;
      const encoded = Buffer.from(pair).toString('base64');
      parts.push(secret.clientSecret, formEncode(secret.clientSecret), pair, encoded, `Basic ${encoded}`);
      break;
    }
  }
  return [...new Set(parts.filter((p) => Buffer.byteLength(p) >= partBytesMin))];
}

/** application/x-www-form-urlencoded, as RFC 6749 Appendix B asks of a client id and secret before basic auth. */
export function formEncode(text: string): string {
  return encodeURIComponent(text)
    .replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)
    .replace(/%20/g, '+');
}

/** The base64 body lines of a PEM / OpenSSH key: each one is key material; the armour lines and headers are not. */
function sshKeyBodyLines(privateKey: Buffer): string[] {
  return privateKey
    .toString('latin1')
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line.length >= sshKeyLineCharsMin && /^[A-Za-z0-9+/=]+$/.test(line));
}

export interface ScrubResult {
  readonly bytes: Buffer;
  readonly redacted: boolean;
  /** Input bytes the output stands for: the cut, or past it when a redaction straddles the cut. */
  readonly consumedBytes: number;
}

export interface SecretScrubber {
  /** Bytes that must be examined past a cut so that a match starting before the cut is seen whole (max encoded length of any part). */
  readonly lookaheadBytes: number;
  /** Redaction ranges [start, end) in input coordinates, sorted and merged. */
  ranges(input: Buffer): Array<readonly [number, number]>;
  /** ranges() in slices that give the event loop a turn every few milliseconds (sliced-work.ts): the same ranges. */
  rangesAsync(input: Buffer): Promise<Array<readonly [number, number]>>;
  /**
   * Scrub `input` and cut it at `limitBytes` input bytes (default: no cut). Every range that STARTS before the cut is replaced
   * whole by the marker even if it extends past the cut (then output stops after the marker). The caller passes
   * input that extends at least lookaheadBytes past the cut when it has that many bytes.
   */
  scrub(input: Buffer, limitBytes?: number): ScrubResult;
  /**
   * scrub() in slices: the same work in the same order, giving the event loop a turn every few milliseconds, so a
   * large input does not stall every other caller (THREAT-MODEL 4). Exactly the same result as scrub().
   */
  scrubAsync(input: Buffer, limitBytes?: number): Promise<ScrubResult>;
  /** Same for text (UTF-8 round trip); charsMax cuts the result after scrubbing (never before). */
  scrubText(text: string, charsMax?: number): { text: string; redacted: boolean };
}

interface Plan {
  readonly needles: readonly Buffer[];
  readonly needleBytesMin: number;
  readonly needleBytesMax: number;
  /** Shortest run that can hold the shortest part: shorter runs are decoded only to look for compressed data in. */
  readonly base64SymbolsMin: number;
  readonly hexSymbolsMin: number;
  readonly spaceInPart: boolean;
  /**
   * How each needle is searched ASCII case-insensitively (a remote that changes the case of what it echoes: hex tokens
   * come back upper-cased), in every view: see `caseFreeSearch`.
   */
  readonly searches: readonly CaseFreeSearch[];
}

export function secretScrubber(parts: readonly string[]): SecretScrubber {
  const needles = searchedNeedles(parts);
  const needleBytesMin = Math.min(...needles.map((b) => b.length));
  const plan: Plan = {
    needles,
    needleBytesMin,
    needleBytesMax: Math.max(0, ...needles.map((b) => b.length)),
    base64SymbolsMin: Math.ceil((needleBytesMin * 8) / 6),
    hexSymbolsMin: needleBytesMin * 2,
    spaceInPart: needles.some((b) => b.includes(0x20)),
    searches: needles.map(caseFreeSearch),
  };
  // Written once as steps (sliced-work.ts); the sync API runs them at once, the async one in slices.
  const rangeSteps = function* (input: Buffer): Steps<Array<readonly [number, number]>> {
    return needles.length === 0 ? [] : yield* collectRanges(input, plan);
  };
  const scrubSteps = function* (input: Buffer, limitBytes?: number): Steps<ScrubResult> {
    const limit = Math.max(0, Math.min(limitBytes ?? input.length, input.length));
    const first = replaceRanges(input, yield* rangeSteps(input), limit);
    if (!first.redacted) return first;
    let bytes = first.bytes;
    for (let round = 0; round < rescrubRoundsMax; round++) {
      const again = yield* rangeSteps(bytes);
      if (again.length === 0) return { bytes, redacted: true, consumedBytes: first.consumedBytes };
      bytes = replaceRanges(bytes, again, bytes.length).bytes;
    }
    return { bytes: Buffer.from(markerBytes), redacted: true, consumedBytes: first.consumedBytes };
  };
  const scrub = (input: Buffer, limitBytes?: number): ScrubResult => runSteps(scrubSteps(input, limitBytes));
  return {
    lookaheadBytes: plan.needleBytesMax * layerExpansionMax * layerExpansionMax,
    ranges: (input) => runSteps(rangeSteps(input)),
    rangesAsync: (input) => runStepsSliced(rangeSteps(input)),
    scrub,
    scrubAsync: (input, limitBytes) => runStepsSliced(scrubSteps(input, limitBytes)),
    scrubText(text, charsMax) {
      const out = scrub(Buffer.from(text));
      const whole = out.redacted ? out.bytes.toString('utf8') : text;
      return { text: charsMax === undefined ? whole : cutChars(whole, charsMax), redacted: out.redacted };
    },
  };
}

/** ASCII lower case of each byte (other bytes as they are). */
const asciiLower = Uint8Array.from({ length: 256 }, (_, b) => (b >= 0x41 && b <= 0x5a ? b + 0x20 : b));
const isAsciiLetter = (b: number): boolean => asciiLower[b]! >= 0x61 && asciiLower[b]! <= 0x7a;

/**
 * One needle's ASCII case-insensitive search. With an anchor (its longest stretch without a letter, the same in any
 * case): the anchor is found natively and the needle compared around each hit, so a view costs what an exact search
 * does. A needle of letters only has none: then a lower-cased copy of the view (made in steps) is searched.
 */
interface CaseFreeSearch {
  readonly needle: Buffer;
  readonly anchor: Buffer | undefined;
  /** Where the anchor starts in the needle. */
  readonly anchorAt: number;
}

function caseFreeSearch(needle: Buffer): CaseFreeSearch {
  let [bestAt, bestLength] = [0, 0];
  for (let i = 0; i < needle.length;) {
    if (isAsciiLetter(needle[i]!)) {
      i++;
      continue;
    }
    let end = i;
    while (end < needle.length && !isAsciiLetter(needle[end]!)) end++;
    if (end - i > bestLength) [bestAt, bestLength] = [i, end - i];
    i = end;
  }
  // A needle without a letter is matched exactly: its anchor is all of it.
  return {
    needle,
    anchor: bestLength === 0 ? undefined : needle.subarray(bestAt, bestAt + bestLength),
    anchorAt: bestAt,
  };
}

function equalsIgnoringAsciiCase(src: Buffer, at: number, needle: Buffer): boolean {
  if (at < 0 || at + needle.length > src.length) return false;
  for (let k = 0; k < needle.length; k++) if (asciiLower[src[at + k]!] !== asciiLower[needle[k]!]) return false;
  return true;
}

/**
 * Units of work (bytes lower-cased, anchor hits compared, decimal numbers read, bytes copied) between two yields of a
 * step that would otherwise run through a whole view in one go: a few milliseconds at most, so a view of repeated
 * anchor digits or a megabyte-long decimal array does not hold the loop (THREAT-MODEL 4).
 */
const stepUnits = 64 * 1024;

/** Where `search`'s needle starts in `src`, any ASCII case (see CaseFreeSearch): steps, yielding every `stepUnits`. */
function* caseFreeMatches(src: Buffer, search: CaseFreeSearch): Steps<number[]> {
  const { needle, anchor, anchorAt } = search;
  const found: number[] = [];
  let units = 0;
  if (anchor !== undefined) {
    for (let hit = src.indexOf(anchor); hit >= 0; hit = src.indexOf(anchor, hit + 1)) {
      if (equalsIgnoringAsciiCase(src, hit - anchorAt, needle)) found.push(hit - anchorAt);
      if (++units % stepUnits === 0) yield;
    }
    return found;
  }
  // Letters only: a lower-cased copy of the view, made in chunks, searched natively for the lower-cased needle.
  const lower = Buffer.allocUnsafe(src.length);
  for (let from = 0; from < src.length; from += stepUnits) {
    const to = Math.min(src.length, from + stepUnits);
    for (let i = from; i < to; i++) lower[i] = asciiLower[src[i]!]!;
    yield;
  }
  const wanted = Buffer.from(Uint8Array.from(needle, (b) => asciiLower[b]!));
  for (let at = lower.indexOf(wanted); at >= 0; at = lower.indexOf(wanted, at + 1)) {
    found.push(at);
    if (++units % stepUnits === 0) yield;
  }
  return found;
}

/**
 * The parts worth searching: a part that holds another part (`Bearer TOKEN` holds `TOKEN`) is found wherever that one
 * is, in every form, since every view decodes it to bytes that hold both; searching only the inner one halves the work.
 */
function searchedNeedles(parts: readonly string[]): Buffer[] {
  const all = [...new Set(parts)].map((p) => Buffer.from(p)).filter((b) => b.length >= partBytesMin);
  return all.filter((b, i) => !all.some((inner, j) => j !== i && inner.length < b.length && b.includes(inner)));
}

function cutChars(text: string, charsMax: number): string {
  if (text.length <= charsMax) return text;
  const last = text.charCodeAt(charsMax - 1);
  // Never leave half a surrogate pair behind.
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? charsMax - 1 : charsMax);
}

function replaceRanges(input: Buffer, ranges: ReadonlyArray<readonly [number, number]>, limit: number): ScrubResult {
  const pieces: Buffer[] = [];
  let at = 0;
  let redacted = false;
  for (const [start, end] of ranges) {
    if (start >= limit) break;
    pieces.push(input.subarray(at, start), markerBytes);
    redacted = true;
    at = end;
    if (end >= limit) return { bytes: Buffer.concat(pieces), redacted, consumedBytes: end };
  }
  if (!redacted)
    return { bytes: limit === input.length ? input : input.subarray(0, limit), redacted, consumedBytes: limit };
  pieces.push(input.subarray(at, limit));
  return { bytes: Buffer.concat(pieces), redacted, consumedBytes: limit };
}

// ---- Views: decoded bytes, each mapped back to the input bytes it came from ----

interface View {
  readonly bytes: Buffer;
  readonly depth: number;
  /** First input byte that view byte `i` came from. */
  inputStart(i: number): number;
  /** One past the last input byte that view byte `i` came from. */
  inputEnd(i: number): number;
}

function identityView(input: Buffer): View {
  return { bytes: input, depth: 0, inputStart: (i) => i, inputEnd: (i) => i + 1 };
}

/** Finds the last entry of a sorted array that is <= i. */
function lastAtOrBefore(sorted: Int32Array, i: number): number {
  let lo = 0;
  let hi = sorted.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (sorted[mid]! <= i) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/**
 * An escape-decoded view, as pieces: a plain piece is parent bytes copied as they are (mapped one to one); an escape
 * piece is the bytes one escape decoded to (each mapped to the whole escape). Copying plain stretches natively keeps
 * a 1 MiB body with a few escapes cheap.
 */
class EscapeView implements View {
  readonly depth: number;

  constructor(
    readonly bytes: Buffer,
    private readonly parent: View,
    /** Per piece: its first view byte, the parent span [from, to) and 1 for plain / 0 for an escape. */
    readonly pieces: {
      readonly at: Int32Array;
      readonly from: Int32Array;
      readonly to: Int32Array;
      readonly plain: Uint8Array;
    },
  ) {
    this.depth = parent.depth + 1;
  }

  inputStart(i: number): number {
    const { at, from, plain } = this.pieces;
    const p = lastAtOrBefore(at, i);
    return this.parent.inputStart(plain[p] ? from[p]! + i - at[p]! : from[p]!);
  }

  inputEnd(i: number): number {
    const { at, from, to, plain } = this.pieces;
    const p = lastAtOrBefore(at, i);
    return this.parent.inputEnd(plain[p] ? from[p]! + i - at[p]! : to[p]! - 1);
  }
}

/** Decoded base64 / hex runs laid end to end: each byte maps to the whole run it came from. */
class RunView implements View {
  constructor(
    readonly bytes: Buffer,
    readonly depth: number,
    /** Where each run's decoded bytes start. */
    readonly segmentAt: Int32Array,
    private readonly segmentStart: Int32Array,
    private readonly segmentEnd: Int32Array,
    /**
     * Where data starts (signature-less compression is tried there): each run's first byte, and the byte after a '='
     * inside a run where this alignment puts one (`key=<base64>` is one run); with where that run's bytes end.
     */
    readonly dataAt: Int32Array,
    readonly dataEnd: Int32Array,
  ) {}

  inputStart(i: number): number {
    return this.segmentStart[lastAtOrBefore(this.segmentAt, i)]!;
  }

  inputEnd(i: number): number {
    return this.segmentEnd[lastAtOrBefore(this.segmentAt, i)]!;
  }
}

// ---- Escape decoders ----

class EscapeSink {
  readonly out: Buffer;
  length = 0;
  escapes = 0;
  /** UTF-8 pairs read as one byte (latin1PairAt), and escapes that decoded to a byte text does not hold (`textByte`). */
  pairs = 0;
  binary = 0;
  pieces = 0;
  /** Per piece: its first view byte, the parent span [from, to) and 1 for plain / 0 for an escape. */
  pieceAt = new Int32Array(64);
  pieceFrom = new Int32Array(64);
  pieceTo = new Int32Array(64);
  piecePlain = new Uint8Array(64);

  /** Plain bytes not yet copied: adjacent plain stretches (a trigger that starts no escape) are copied in one go. */
  private pendingFrom = 0;
  private pendingTo = 0;

  /** Every escape decodes to at most as many bytes as it is long, so the view never outgrows the range it reads. */
  constructor(
    private readonly src: Buffer,
    capacity = src.length,
  ) {
    this.out = Buffer.allocUnsafe(capacity);
  }

  plain(from: number, to: number): void {
    if (to <= from) return;
    if (this.pendingTo !== from) this.flush();
    if (this.pendingTo === this.pendingFrom) this.pendingFrom = from;
    this.pendingTo = to;
  }

  escape(from: number, to: number, byte: number): void {
    this.flush();
    this.piece(from, to, 0);
    this.out[this.length++] = byte;
    this.escapes++;
    if (textByte[byte] !== 1) this.binary++;
  }

  /** UTF-8, as Buffer.from(string) would write it (a lone surrogate becomes U+FFFD). */
  escapeCodePoint(from: number, to: number, cp: number): void {
    const c = (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff ? 0xfffd : cp;
    this.flush();
    this.piece(from, to, 0);
    this.escapes++;
    const out = this.out;
    if (c < 0x80) out[this.length++] = c;
    else if (c < 0x800) {
      out[this.length++] = 0xc0 | (c >> 6);
      out[this.length++] = 0x80 | (c & 0x3f);
    } else if (c < 0x10000) {
      out[this.length++] = 0xe0 | (c >> 12);
      out[this.length++] = 0x80 | ((c >> 6) & 0x3f);
      out[this.length++] = 0x80 | (c & 0x3f);
    } else {
      out[this.length++] = 0xf0 | (c >> 18);
      out[this.length++] = 0x80 | ((c >> 12) & 0x3f);
      out[this.length++] = 0x80 | ((c >> 6) & 0x3f);
      out[this.length++] = 0x80 | (c & 0x3f);
    }
  }

  view(parent: View): EscapeView {
    this.flush();
    const n = this.pieces;
    const pieces = {
      at: this.pieceAt.subarray(0, n),
      from: this.pieceFrom.subarray(0, n),
      to: this.pieceTo.subarray(0, n),
      plain: this.piecePlain.subarray(0, n),
    };
    return new EscapeView(this.out.subarray(0, this.length), parent, pieces);
  }

  private flush(): void {
    const { pendingFrom: from, pendingTo: to } = this;
    if (to <= from) return;
    // A short stretch (a word between two accented letters of latin1 text) is copied faster here than by a native call.
    if (to - from < 64) for (let i = from, o = this.length; i < to; i++, o++) this.out[o] = this.src[i]!;
    else this.src.copy(this.out, this.length, from, to);
    this.piece(from, to, 1);
    this.length += to - from;
    this.pendingFrom = this.pendingTo = to;
  }

  private piece(from: number, to: number, plain: number): void {
    if (this.pieces === this.pieceAt.length) {
      const grow = <T extends Int32Array | Uint8Array>(a: T, b: T): T => (b.set(a), b);
      const size = this.pieces * 2;
      this.pieceAt = grow(this.pieceAt, new Int32Array(size));
      this.pieceFrom = grow(this.pieceFrom, new Int32Array(size));
      this.pieceTo = grow(this.pieceTo, new Int32Array(size));
      this.piecePlain = grow(this.piecePlain, new Uint8Array(size));
    }
    this.pieceAt[this.pieces] = this.length;
    this.pieceFrom[this.pieces] = from;
    this.pieceTo[this.pieces] = to;
    this.piecePlain[this.pieces] = plain;
    this.pieces++;
  }
}

interface EscapeKind {
  /** The bytes every escape of this kind starts with. */
  readonly triggers: readonly number[];
  /** Decodes the escape at `at` (a trigger byte) into the sink and returns where it ends, or -1 when there is none. */
  decodeAt(src: Buffer, at: number, sink: EscapeSink): number;
  /**
   * Its escapes stand for bytes (percent, form, the latin1 kinds): compressed data can hide behind them, and where a
   * value starts and ends in its views (escapeRunStarts).
   */
  readonly bytes?: ValueBounds;
  /**
   * A latin1 kind (text read back as bytes, one per character: `latin1Kinds`): a view is made only where an escape
   * decoded to a byte text does not hold (a control character, 0x7F and up: compressed data holds them in its first
   * bytes, or is not tried, `looksLikeText`), and for one that also reads escapes of its own ('escapes': JSON, HTML)
   * only where it decoded one of them (else its UTF-8 pairs alone, 'pairs', give the same view). Text with `\n` and
   * `&amp;` makes none; `\u001f` does even where no byte is past ASCII (raw deflate of a low-entropy token): the
   * views of characters are not looked into for compressed data.
   */
  readonly latin1?: 'pairs' | 'escapes';
}

/**
 * Where a value starts (after a byte of `after`) and ends (at a byte of `endsAt`; none: the view's end) in text; with
 * `every`, each separator since the value's start starts data (one an encoder leaves plain may lie inside it), else
 * only the last one before an escape.
 */
interface ValueBounds {
  readonly after: Uint8Array;
  readonly endsAt: Uint8Array | undefined;
  readonly every: boolean;
  /** Only a value that holds an escape of a byte text does not hold is a start (the latin1 kinds: see `latin1`). */
  readonly binaryOnly?: true;
}

/** Bytes text holds: printable ASCII, tab, line feed, carriage return. */
const textByte = Uint8Array.from({ length: 256 }, (_, b) =>
  (b >= 0x20 && b < 0x7f) || b === 0x09 || b === 0x0a || b === 0x0d ? 1 : 0,
);

function byteSet(chars: string): Uint8Array {
  return Uint8Array.from({ length: 256 }, (_, b) => (chars.includes(String.fromCharCode(b)) ? 1 : 0));
}

/**
 * Bytes that end a key or a word before a value in text: `=`, `:`, quotes, brackets, `/`, `?`, `#`, `&`, `,`, `;`,
 * `>` (an element's content), blanks.
 */
const textSeparators = `=:"'([{/?#&,;> \t\r\n`;
/**
 * A value in a query, a form, a path or a header: from a separator to a byte every percent encoder escapes in a value
 * (`&`, quotes, `;`, angle brackets, blanks); others (`/`, `'`, `(`, `)`) some encoders leave plain.
 */
const separatedValues: ValueBounds = {
  after: byteSet(textSeparators),
  endsAt: byteSet('&";<> \t\r\n'),
  every: true,
};

/** Whether decodeEscapes makes a view of what the sink holds. */
function escapesMakeView(kind: EscapeKind, sink: EscapeSink): boolean {
  if (sink.escapes === 0) return false;
  if (kind.latin1 === undefined) return true;
  return sink.binary > 0 && (kind.latin1 === 'pairs' || sink.escapes > sink.pairs);
}

/**
 * Trigger bytes looked at per step of an escape decode: an 8 MiB inflated view of HTML references (`&#37;41`…, ~1.2 M
 * escapes) took ~0.4-0.6 s decoded in one step, which a sliced scrub could not give the loop a turn in (THREAT-MODEL 4).
 */
const escapeDecodeStepTriggers = 32 * 1024;

/**
 * The views `kind` decodes of `view`: one of the whole view, or for a latin1 kind one of each stretch of text in it
 * (`textStretchesOf`): in noise a few stretches of ~16-30 bytes, not a copy of the megabyte around them.
 */
function* decodeEscapes(view: View, kind: EscapeKind): Steps<View[]> {
  const src = view.bytes;
  if (kind.triggers.every((t) => src.indexOf(t) < 0)) return [];
  const ranges = kind.latin1 === undefined ? [0, src.length] : textStretchesOf(view);
  const views: View[] = [];
  for (let k = 0; k < ranges.length; k += 2) {
    const child = yield* decodeRange(view, kind, ranges[k]!, ranges[k + 1]!);
    if (child) views.push(child);
  }
  return views;
}

/** The escapes of `kind` in [from, to) of `view` decoded, the rest copied: a view of that range, or none. */
function* decodeRange(view: View, kind: EscapeKind, from: number, to: number): Steps<View | undefined> {
  const src = view.bytes;
  const indexIn = (byte: number, at: number): number => {
    const i = src.indexOf(byte, at);
    return i < to ? i : -1;
  };
  const next = kind.triggers.map((t) => indexIn(t, from));
  if (next.every((n) => n < 0)) return undefined;
  const sink = new EscapeSink(src, to - from);
  let at = from;
  let stepLeft = escapeDecodeStepTriggers;
  for (;;) {
    if (--stepLeft === 0) {
      yield;
      stepLeft = escapeDecodeStepTriggers;
    }
    let p = -1;
    for (const n of next) if (n >= 0 && (p < 0 || n < p)) p = n;
    if (p < 0) break;
    sink.plain(at, p);
    const end = kind.decodeAt(src, p, sink);
    if (end < 0) sink.plain(p, p + 1);
    at = end < 0 ? p + 1 : end;
    for (let k = 0; k < next.length; k++) if (next[k]! >= 0 && next[k]! < at) next[k] = indexIn(kind.triggers[k]!, at);
  }
  sink.plain(at, to);
  return escapesMakeView(kind, sink) ? sink.view(view) : undefined;
}

const none = 255;
const hexValue = new Uint8Array(256).fill(none);
for (let i = 0; i < 10; i++) hexValue[0x30 + i] = i;
for (let i = 0; i < 6; i++) hexValue[0x41 + i] = hexValue[0x61 + i] = 10 + i;

function hexAt(src: Buffer, at: number, digits: number): number {
  if (at + digits > src.length) return -1;
  let v = 0;
  for (let i = at; i < at + digits; i++) {
    const h = hexValue[src[i]!]!;
    if (h === none) return -1;
    v = v * 16 + h;
  }
  return v;
}

function percentAt(src: Buffer, at: number, sink: EscapeSink): number {
  const v = hexAt(src, at + 1, 2);
  if (v < 0) return -1;
  sink.escape(at, at + 3, v);
  return at + 3;
}

const jsonSimpleEscapes: Record<number, number> = {
  0x22: 0x22,
  0x5c: 0x5c,
  0x2f: 0x2f,
  0x62: 8,
  0x66: 12,
  0x6e: 10,
  0x72: 13,
  0x74: 9,
};

/**
 * A JSON / JS string escape at `at`. `\uXXXX` decodes to the code point's UTF-8, as a JSON parser's string written as
 * text gives it; with `latin1`, to the byte an agent that reads the string as bytes gets (`Buffer.from(s, 'latin1')`,
 * Python's `s.encode('latin-1')`), and only up to U+00FF (above, the string does not carry bytes that way).
 */
function jsonAt(src: Buffer, at: number, sink: EscapeSink, latin1 = false): number {
  const next = src[at + 1];
  const simple = next === undefined ? undefined : jsonSimpleEscapes[next];
  if (simple !== undefined) {
    sink.escape(at, at + 2, simple);
    return at + 2;
  }
  if (next === 0x78) {
    const byte = hexAt(src, at + 2, 2);
    if (byte >= 0) sink.escape(at, at + 4, byte);
    return byte < 0 ? -1 : at + 4;
  }
  const unit = next === 0x75 ? hexAt(src, at + 2, 4) : -1;
  if (unit < 0 || (latin1 && unit > 0xff)) return -1;
  if (latin1) {
    sink.escape(at, at + 6, unit);
    return at + 6;
  }
  let end = at + 6;
  let cp = unit;
  const low =
    unit >= 0xd800 && unit <= 0xdbff && src[end] === 0x5c && src[end + 1] === 0x75 ? hexAt(src, end + 2, 4) : -1;
  if (low >= 0xdc00 && low <= 0xdfff) {
    cp = 0x10000 + ((unit - 0xd800) << 10) + (low - 0xdc00);
    end += 6;
  }
  sink.escapeCodePoint(at, end, cp);
  return end;
}

const htmlNamed: ReadonlyArray<readonly [Buffer, number]> = (
  [
    ['amp;', 0x26],
    ['lt;', 0x3c],
    ['gt;', 0x3e],
    ['quot;', 0x22],
    ['apos;', 0x27],
  ] as const
).map(([name, byte]) => [Buffer.from(name), byte] as const);

/** First bytes after '&' that can start a reference we decode: '#', 'a', 'l', 'g', 'q'. */
const htmlStarts = new Set([0x23, 0x61, 0x6c, 0x67, 0x71]);

/** An HTML character reference at `at`; with `latin1`, a numeric one decodes to a byte and only up to 255 (jsonAt). */
function htmlAt(src: Buffer, at: number, sink: EscapeSink, latin1 = false): number {
  if (!htmlStarts.has(src[at + 1] ?? -1)) return -1;
  if (src[at + 1] !== 0x23) {
    const named = htmlNamed.find(([name]) => name.every((b, k) => src[at + 1 + k] === b));
    if (named) sink.escape(at, at + 1 + named[0].length, named[1]);
    return named ? at + 1 + named[0].length : -1;
  }
  const hex = src[at + 2] === 0x78 || src[at + 2] === 0x58;
  const first = at + (hex ? 3 : 2);
  // Bounded digits keep a reference short (and lookaheadBytes honest).
  let i = first;
  while (
    i < src.length &&
    i - first < (hex ? 6 : 7) &&
    (hex ? hexValue[src[i]!] !== none : src[i]! >= 0x30 && src[i]! <= 0x39)
  )
    i++;
  if (i === first) return -1;
  const end = src[i] === 0x3b ? i + 1 : i;
  const cp = Number.parseInt(src.toString('latin1', first, i), hex ? 16 : 10);
  if (!latin1) sink.escapeCodePoint(at, end, cp);
  else if (cp <= 0xff) sink.escape(at, end, cp);
  return latin1 && cp > 0xff ? -1 : end;
}

/**
 * A character from U+0080 to U+00FF written as UTF-8 (C2 80 to C3 BF), read as the one byte it stands for in latin1:
 * binary a remote turned into text one byte per character (`buf.toString('latin1')`, Python's `decode('latin-1')`)
 * and then wrote as UTF-8, raw or inside a JSON string, which an agent reads back the same way.
 */
function latin1PairAt(src: Buffer, at: number, sink: EscapeSink): number {
  const lead = src[at]!;
  const next = src[at + 1];
  if ((lead !== 0xc2 && lead !== 0xc3) || next === undefined || (next & 0xc0) !== 0x80) return -1;
  sink.escape(at, at + 2, ((lead & 0x03) << 6) | (next & 0x3f));
  sink.pairs++;
  return at + 2;
}

const latin1Pairs = [0xc2, 0xc3];

/**
 * Text that carries bytes is UTF-8 throughout; random binary is so only in stretches of a few bytes (in a megabyte,
 * ~470 stretches of 12 bytes or more, ~50 of 16, none of 24). A latin1 kind reads stretches of valid UTF-8 this long
 * (or a view valid whole), each a view of its own: its views of a megabyte of noise, copied whole and looked into for
 * compressed data at depth after depth, made the scrub of random binary 2-4 times as slow. A stream that carries a
 * part is longer, and the text around it belongs to its stretch.
 */
const textStretchBytesMin = 16;

/** Where text lies in a view (utf8Stretches), found once per view for the three latin1 kinds. */
const textStretchesOfViews = new WeakMap<View, Int32Array>();

function textStretchesOf(view: View): Int32Array {
  let stretches = textStretchesOfViews.get(view);
  if (stretches === undefined) {
    // Latin1 text is not looked for again inside a view of latin1 text (JSON inside JSON is: a string of a string).
    const latin1Already = byteEscapeViews.get(view)?.binaryOnly === true;
    const src = view.bytes;
    stretches = latin1Already ? new Int32Array(0) : isUtf8(src) ? Int32Array.of(0, src.length) : utf8Stretches(src);
    textStretchesOfViews.set(view, stretches);
  }
  return stretches;
}

/**
 * The stretches of `src` that are valid UTF-8 and at least textStretchBytesMin long, as [start, end) pairs in order. A
 * lone 0xFD counts as valid: an agent's decoder turns an invalid byte into U+FFFD, whose latin1 byte is 0xFD, so a
 * remote can send that byte of a stream as it is.
 */
function utf8Stretches(src: Buffer): Int32Array {
  const out: number[] = [];
  let start = 0;
  const close = (end: number): void => {
    if (end - start >= textStretchBytesMin) out.push(start, end);
  };
  for (let i = 0; i < src.length;) {
    const b = src[i]!;
    const n =
      b < 0x80 || b === 0xfd
        ? 1
        : b >= 0xc2 && b <= 0xdf
          ? 2
          : b >= 0xe0 && b <= 0xef
            ? 3
            : b >= 0xf0 && b <= 0xf4
              ? 4
              : 0;
    let valid = n > 0 && i + n <= src.length;
    for (let k = 1; valid && k < n; k++) valid = (src[i + k]! & 0xc0) === 0x80;
    if (valid && n === 3) valid = !(b === 0xe0 && src[i + 1]! < 0xa0) && !(b === 0xed && src[i + 1]! >= 0xa0);
    if (valid && n === 4) valid = !(b === 0xf0 && src[i + 1]! < 0x90) && !(b === 0xf4 && src[i + 1]! >= 0x90);
    if (valid) {
      i += n;
      continue;
    }
    close(i);
    start = ++i;
  }
  close(src.length);
  return Int32Array.from(out);
}

/**
 * Text that carries bytes one per character (latin1): raw UTF-8 text, a JSON string (`JSON.stringify` writes control
 * characters as `\u00XX` and the rest as UTF-8; Python's `json.dumps` writes everything past ASCII as `\u00XX`), an
 * HTML or XML page of numeric references (`&#139;`, `xmlcharrefreplace`). Each is a view of bytes, looked into for
 * compressed data like percent-encoding, made only where it differs from the views of characters (`latin1`).
 */
const latin1Kinds: readonly EscapeKind[] = [
  // Raw text: data is tried where a stretch starts (`textStretchesOf`), not at each word: any accented letter made one
  // there, a space or `a` before it read as a stored block's header, and prose spent the decoded-bytes budget
  // (helper-219's review: French text redacted from its fifth byte). Signatures are found anywhere.
  {
    triggers: latin1Pairs,
    decodeAt: latin1PairAt,
    bytes: { after: byteSet(''), endsAt: undefined, every: false, binaryOnly: true },
    latin1: 'pairs',
  },
  {
    triggers: [0x5c, ...latin1Pairs],
    decodeAt: (src, at, sink) => (src[at] === 0x5c ? jsonAt(src, at, sink, true) : latin1PairAt(src, at, sink)),
    // A JSON string, from its opening quote to its closing one: one start a string (after a label inside it is not).
    bytes: { after: byteSet('"'), endsAt: byteSet('"'), every: false, binaryOnly: true },
    latin1: 'escapes',
  },
  {
    triggers: [0x26, ...latin1Pairs],
    decodeAt: (src, at, sink) => (src[at] === 0x26 ? htmlAt(src, at, sink, true) : latin1PairAt(src, at, sink)),
    // An element's content or an attribute's value, from its start to the next tag: one start a value.
    bytes: { after: byteSet(`>"'`), endsAt: byteSet('<'), every: false, binaryOnly: true },
    latin1: 'escapes',
  },
];

const formKind: EscapeKind = {
  triggers: [0x25, 0x2b],
  decodeAt: (src, at, sink) => (src[at] === 0x2b ? (sink.escape(at, at + 1, 0x20), at + 1) : percentAt(src, at, sink)),
  bytes: separatedValues,
};
const escapeKinds: readonly EscapeKind[] = [
  { triggers: [0x25], decodeAt: percentAt, bytes: separatedValues },
  formKind,
  { triggers: [0x5c], decodeAt: (src, at, sink) => jsonAt(src, at, sink) },
  { triggers: [0x26], decodeAt: (src, at, sink) => htmlAt(src, at, sink) },
  ...latin1Kinds,
];

// ---- Run decoders: base64 / base64url and hex, at every symbol offset ----

const pad = 64;
const skip = 65;
const base64Value = new Uint8Array(256).fill(none);
'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'
  .split('')
  .forEach((ch, i) => (base64Value[ch.charCodeAt(0)] = i));
base64Value[0x2d] = 62; // '-' base64url
base64Value[0x5f] = 63; // '_' base64url
base64Value[0x3d] = pad;
base64Value[0x0a] = base64Value[0x0d] = skip;
const hexRunValue = Uint8Array.from(hexValue);
hexRunValue[0x0a] = hexRunValue[0x0d] = skip;

interface Alphabet {
  readonly value: Uint8Array;
  /** Values below this are symbols; `pad` and `skip` are read past. */
  readonly symbols: number;
  readonly offsets: number;
  readonly encoding: 'base64' | 'hex';
  readonly bitsPerSymbol: number;
  /** Symbols of one whole group, and the bytes it decodes to. */
  readonly groupSymbols: number;
  readonly groupBytes: number;
  /** Bytes that `group` decodes to for this many symbols. */
  decodedBytes(symbolCount: number): number;
  /** The text Node decodes for one run from one offset: whole groups, so runs laid end to end decode independently. */
  group(symbols: string, offset: number): string;
}

const base64Alphabet: Alphabet = {
  value: base64Value,
  symbols: 64,
  offsets: 4,
  encoding: 'base64',
  bitsPerSymbol: 6,
  groupSymbols: 4,
  groupBytes: 3,
  decodedBytes: (n) => Math.floor(n / 4) * 3 + (n % 4 >= 2 ? 3 : 0),
  group(symbols, offset) {
    const rest = (symbols.length - offset) % 4;
    // 2 or 3 trailing symbols still carry 1 or 2 bytes: complete the group ('A' is zero bits) rather than lose them.
    if (rest < 2) return symbols.slice(offset, symbols.length - rest);
    return symbols.slice(offset) + (rest === 2 ? 'AA' : 'A');
  },
};

const hexAlphabet: Alphabet = {
  value: hexRunValue,
  symbols: 16,
  offsets: 2,
  encoding: 'hex',
  bitsPerSymbol: 4,
  groupSymbols: 2,
  groupBytes: 1,
  decodedBytes: (n) => Math.floor(n / 2),
  group: (symbols, offset) => symbols.slice(offset, symbols.length - ((symbols.length - offset) % 2)),
};

/** Bytes findRuns looks at between two steps (sliced-work.ts). */
const runScanStepBytes = 64 * 1024;
/**
 * Bytes of runs read into symbols, or runs laid out at one alignment, between two steps of decodeRuns: a megabyte of
 * the shortest runs a short credential allows is ~60-80k runs, ~60-80 ms per alignment in one step.
 */
const runDecodeStepBytes = 256 * 1024;
const runDecodeStepRuns = 4096;

/** Runs of each alphabet as flat [start, end, symbolCount] triples; short: too short to hold a part as they are. */
interface Runs {
  readonly base64: number[];
  readonly hex: number[];
  readonly base64Short: number[];
  readonly hexShort: number[];
}

/**
 * Shortest short run: one that decodes to `headlessBytesMin` bytes. A short run cannot hold a part, but compressed
 * data in it can (compressed-views.ts): short runs are decoded into views of their own, only looked into for that.
 */
const shortRunSymbolsMin = { base64: Math.ceil((headlessBytesMin * 8) / 6), hex: headlessBytesMin * 2 };

/**
 * Runs: maximal stretches of an alphabet, from the first symbol, without trailing line breaks, holding enough symbols
 * for the shortest part. Hex runs lie inside base64 stretches (its alphabet is a subset), so one pass finds both. In an
 * escape view only runs that hold a decoded escape are new (any other run is the parent's, decoded there already), so
 * only the stretches around escapes are looked at.
 */
function* findRuns(view: View, plan: Plan): Steps<Runs> {
  const src = view.bytes;
  // A step per this many bytes looked at: a megabyte is ~10-20 ms of this loop.
  let stepEnd = runScanStepBytes;
  const runs: Runs = { base64: [], hex: [], base64Short: [], hexShort: [] };
  const stretchEnd = (from: number): number => {
    let j = from;
    while (j < src.length && base64Value[src[j]!] !== none) j++;
    return j;
  };
  if (view instanceof EscapeView) {
    const { at, plain } = view.pieces;
    let covered = 0;
    for (let p = 0; p < at.length; p++) {
      if (plain[p]) continue;
      for (let i = Math.max(at[p]!, covered); i < (at[p + 1] ?? src.length); i++) {
        if (i >= stepEnd) {
          yield;
          stepEnd = i + runScanStepBytes;
        }
        if (base64Value[src[i]!] === none) continue;
        let start = i;
        while (start > covered && base64Value[src[start - 1]!] !== none) start--;
        covered = stretchEnd(i);
        stretchRuns(src, start, covered, plan, runs);
      }
    }
    return runs;
  }
  for (let i = 0; i < src.length; i++) {
    if (i >= stepEnd) {
      yield;
      stepEnd = i + runScanStepBytes;
    }
    if (base64Value[src[i]!] === none) continue;
    const end = stretchEnd(i);
    stretchRuns(src, i, end, plan, runs);
    i = end;
  }
  return runs;
}

function stretchRuns(src: Buffer, from: number, to: number, plan: Plan, runs: Runs): void {
  // No closure here: this runs once per stretch, and a megabyte of prose is ~150k of them.
  pushRun(src, from, to, base64Alphabet, plan.base64SymbolsMin, runs.base64, runs.base64Short);
  if (to - from < shortRunSymbolsMin.hex) return;
  for (let i = from; i < to; i++) {
    if (hexRunValue[src[i]!] === none) continue;
    let end = i;
    while (end < to && hexRunValue[src[end]!] !== none) end++;
    pushRun(src, i, end, hexAlphabet, plan.hexSymbolsMin, runs.hex, runs.hexShort);
    i = end;
  }
}

/**
 * Trims [from, to) (all of the alphabet) to start on a symbol and end without line breaks; keeps it in `into` if long
 * enough to hold a part, else in `short` if long enough to hold compressed data (`shortRunSymbolsMin`).
 */
function pushRun(
  src: Buffer,
  from: number,
  to: number,
  alphabet: Alphabet,
  minSymbols: number,
  into: number[],
  short: number[],
): void {
  const shortMin = alphabet === hexAlphabet ? shortRunSymbolsMin.hex : shortRunSymbolsMin.base64;
  if (to - from < shortMin) return;
  const { value, symbols } = alphabet;
  let start = from;
  while (start < to && value[src[start]!]! >= symbols) start++;
  let end = to;
  while (end > start && value[src[end - 1]!] === skip) end--;
  let count = 0;
  for (let i = start; i < end; i++) if (value[src[i]!]! < symbols) count++;
  if (count >= minSymbols) into.push(start, end, count);
  else if (count >= shortMin) pushShortRuns(src, start, end, alphabet, shortMin, short);
}

/**
 * A short run, cut at each '=' (`key=value`, or padded blobs one after another): each piece holds compressed data from
 * its first symbol if any, as an agent decodes a value (decoded at that alignment only: `decodeRuns`); so does what
 * follows a line break inside a piece (`hello\n<base64>`: an agent reads the line on its own), besides the whole piece
 * (wrapped base64).
 */
function pushShortRuns(
  src: Buffer,
  from: number,
  to: number,
  alphabet: Alphabet,
  shortMin: number,
  short: number[],
): void {
  const { value, symbols } = alphabet;
  let start = -1;
  let count = 0;
  let last = from;
  /** Per line break inside the piece: where the symbols after it start, and how many symbols came before. */
  const lines: number[] = [];
  let afterBreak = false;
  for (let i = from; i <= to; i++) {
    const v = i < to ? value[src[i]!]! : pad;
    if (v < symbols) {
      if (start < 0) [start, count, lines.length] = [i, 0, 0];
      else if (afterBreak) lines.push(i, count);
      afterBreak = false;
      count++;
      last = i + 1;
    } else if (v === skip) {
      afterBreak = start >= 0;
    } else if (v === pad && start >= 0) {
      if (count >= shortMin) short.push(start, last, count);
      for (let k = 0; k < lines.length; k += 2)
        if (count - lines[k + 1]! >= shortMin) short.push(lines[k]!, last, count - lines[k + 1]!);
      [start, afterBreak] = [-1, false];
    }
  }
}

/**
 * Decodes every run at each symbol offset of the alphabet (`offsets` of them: short runs at their first symbol only,
 * `pushShortRuns`): one view per offset, the runs laid end to end. A step per
 * offset, per `runDecodeStepRuns` runs and per `runDecodeStepBytes` of runs read: a megabyte of base64 text is ~20-30
 * ms of decoding, and a megabyte of short runs more, which one step would hold the loop for (THREAT-MODEL 4).
 */
function* decodeRuns(
  view: View,
  runs: readonly number[],
  alphabet: Alphabet,
  offsets = alphabet.offsets,
): Steps<View[]> {
  const count = runs.length / 3;
  // A view with fresh ranges gives its runs' views no seams: they are looked into whole (compressed-views.ts).
  const seams = freshRangesOf(view) !== undefined ? undefined : viewSeams(view);
  // In a view with seams (compressed-views.ts): per run that crosses one, its symbols before each seam inside it.
  const crossings = seams === undefined ? undefined : runCrossings(view.bytes, runs, alphabet, seams);
  const symbols: string[] = [];
  /** Per run with a '=' inside (base64): how many of its symbols come before each symbol that follows one. */
  const afterPads = new Map<number, number[]>();
  const inputStart = new Int32Array(count);
  const inputEnd = new Int32Array(count);
  let stepBytes = 0;
  for (let i = 0; i < count; i++) {
    const [start, end, symbolCount] = [runs[3 * i]!, runs[3 * i + 1]!, runs[3 * i + 2]!];
    const raw = view.bytes.toString('latin1', start, end);
    symbols.push(symbolCount === end - start ? raw : raw.replace(/[=\r\n]/g, ''));
    if (symbolCount !== end - start && /[=\r\n]/.test(raw)) afterPads.set(i, symbolsAfterBreaks(raw, alphabet));
    inputStart[i] = view.inputStart(start);
    inputEnd[i] = view.inputEnd(end - 1);
    stepBytes += end - start;
    if (stepBytes >= runDecodeStepBytes || (i + 1) % runDecodeStepRuns === 0) {
      yield;
      stepBytes = 0;
    }
  }
  const views: View[] = [];
  for (let offset = 0; offset < offsets; offset++) {
    yield;
    const texts: string[] = [];
    const segmentAt: number[] = [];
    const segmentStart: number[] = [];
    const segmentEnd: number[] = [];
    const dataAt: number[] = [];
    const dataEnd: number[] = [];
    const childSeams: number[] = [];
    let length = 0;
    for (let i = 0; i < count; i++) {
      if ((i + 1) % runDecodeStepRuns === 0) yield;
      const bytes = alphabet.decodedBytes(symbols[i]!.length - offset);
      if (bytes <= 0) continue;
      texts.push(alphabet.group(symbols[i]!, offset));
      segmentAt.push(length);
      segmentStart.push(inputStart[i]!);
      segmentEnd.push(inputEnd[i]!);
      dataAt.push(length);
      dataEnd.push(length + bytes);
      for (const symbolsBefore of afterPads.get(i) ?? []) {
        // Data after a '=' or a line break starts on a byte of this alignment's view when whole groups lie between.
        const groups = (symbolsBefore - offset) / alphabet.groupSymbols;
        if (groups > 0 && Number.isInteger(groups) && groups * alphabet.groupBytes < bytes) {
          dataAt.push(length + groups * alphabet.groupBytes);
          dataEnd.push(length + bytes);
        }
      }
      for (const symbolsBefore of crossings?.get(i) ?? []) {
        // The bits of the symbols past the seam start here: a byte made of bits from both sides is new on its own.
        const bit = (symbolsBefore - offset) * alphabet.bitsPerSymbol;
        const at = bit >> 3;
        if (at > 0 && at < bytes && length + at > (childSeams.at(-1) ?? 0)) childSeams.push(length + at);
        if (bit % 8 !== 0 && at + 1 > 0 && at + 1 < bytes && length + at + 1 > (childSeams.at(-1) ?? 0))
          childSeams.push(length + at + 1);
      }
      length += bytes;
    }
    if (length === 0) continue;
    const bytes = Buffer.from(texts.join(''), alphabet.encoding);
    const child = new RunView(
      bytes,
      view.depth + 1,
      Int32Array.from(segmentAt),
      Int32Array.from(segmentStart),
      Int32Array.from(segmentEnd),
      Int32Array.from(dataAt),
      Int32Array.from(dataEnd),
    );
    if (seams !== undefined) setViewSeams(child, Int32Array.from(childSeams));
    views.push(child);
  }
  return views;
}

/**
 * In a run as written: how many symbols come before each symbol that follows a '=' or a line break (`key=<base64>`,
 * `hello\n<base64>`: an agent may decode from there; wrapped base64 makes every line such a place).
 */
function symbolsAfterBreaks(raw: string, alphabet: Alphabet): number[] {
  const out: number[] = [];
  let symbols = 0;
  let afterPad = false;
  for (let k = 0; k < raw.length; k++) {
    const v = alphabet.value[raw.charCodeAt(k)]!;
    if (v === pad || v === skip) afterPad = true;
    else if (v < alphabet.symbols) {
      if (afterPad && symbols > 0) out.push(symbols);
      afterPad = false;
      symbols++;
    }
  }
  return out;
}

/**
 * For each run (flat [start, end, symbolCount] triples) that a seam of its view crosses: how many of its symbols lie
 * before each seam inside it, in order.
 */
function runCrossings(
  src: Buffer,
  runs: readonly number[],
  alphabet: Alphabet,
  seams: Int32Array,
): Map<number, number[]> {
  const crossings = new Map<number, number[]>();
  let s = 0;
  for (let i = 0; i < runs.length / 3; i++) {
    const [start, end] = [runs[3 * i]!, runs[3 * i + 1]!];
    while (s < seams.length && seams[s]! <= start) s++;
    let symbols = 0;
    let at = start;
    for (let k = s; k < seams.length && seams[k]! < end; k++) {
      for (; at < seams[k]!; at++) if (alphabet.value[src[at]!]! < alphabet.symbols) symbols++;
      const before = crossings.get(i);
      if (before === undefined) crossings.set(i, [symbols]);
      else before.push(symbols);
    }
  }
  return crossings;
}

// ---- Decimal byte arrays: `[57,102,51]`, `[57, 102, 51]` (Node's Buffer as JSON: {"type":"Buffer","data":[...]}) ----

const isDigit = (b: number | undefined): boolean => b !== undefined && b >= 0x30 && b <= 0x39;
/** Space, tab and line breaks: read past around the commas of an array. */
const isArraySpace = (b: number | undefined): boolean => b === 0x20 || b === 0x09 || b === 0x0a || b === 0x0d;

/** The decimal number 0-255 of 1-3 digits at `at` (none right before or after it, nor a '.'), and where it ends. */
function byteNumberAt(src: Buffer, at: number): readonly [number, number] | undefined {
  if (!isDigit(src[at]) || isDigit(src[at - 1]) || src[at - 1] === 0x2e) return undefined;
  let end = at;
  let value = 0;
  while (end < src.length && isDigit(src[end]) && end - at < 4) value = value * 10 + src[end++]! - 0x30;
  if (end - at > 3 || value > 255 || src[end] === 0x2e) return undefined;
  return [value, end];
}

/**
 * Runs of comma-separated decimal byte values (spaces and line breaks around the commas read past), decoded to bytes:
 * one run view of those that can hold a part, one (a short-run view) of those that can only hold compressed data.
 * Found from each comma, so a view without one costs a lookup. Each byte maps to its whole run, like base64's.
 */
function* decimalRunViews(view: View, plan: Plan): Steps<View[]> {
  const src = view.bytes;
  type Run = { start: number; end: number; bytes: number[] };
  const runs: Run[] = [];
  let covered = 0;
  let commas = 0;
  for (let comma = src.indexOf(0x2c); comma >= 0; comma = src.indexOf(0x2c, Math.max(comma + 1, covered))) {
    if (++commas % runDecodeStepRuns === 0) yield;
    let first = comma;
    while (first > covered && isArraySpace(src[first - 1])) first--;
    let start = first;
    while (start > covered && isDigit(src[start - 1])) start--;
    let number = start < first ? byteNumberAt(src, start) : undefined;
    if (number === undefined || number[1] !== first) continue;
    const run: Run = { start, end: number[1], bytes: [number[0]] };
    for (let at = number[1]; ;) {
      while (isArraySpace(src[at])) at++;
      if (src[at] !== 0x2c) break;
      at++;
      while (isArraySpace(src[at])) at++;
      number = byteNumberAt(src, at);
      if (number === undefined) break;
      run.bytes.push(number[0]);
      at = run.end = number[1];
      // A megabyte-long array is one run: read in steps too.
      if (run.bytes.length % stepUnits === 0) yield;
    }
    covered = run.end;
    if (run.bytes.length >= headlessBytesMin) runs.push(run);
  }
  const views: View[] = [];
  for (const short of [false, true]) {
    const chosen = runs.filter((r) => r.bytes.length < plan.needleBytesMin === short);
    if (chosen.length === 0) continue;
    const at: number[] = [];
    let length = 0;
    for (const run of chosen) {
      at.push(length);
      length += run.bytes.length;
    }
    const bytes = Buffer.allocUnsafe(length);
    let copied = 0;
    for (const run of chosen) {
      // Copied in steps: one run can be millions of bytes (and many short ones as many).
      for (let from = 0; from < run.bytes.length; from += stepUnits) {
        const to = Math.min(run.bytes.length, from + stepUnits);
        for (let k = from; k < to; k++) bytes[copied++] = run.bytes[k]!;
        yield;
      }
    }
    const segmentAt = Int32Array.from(at);
    const child = new RunView(
      bytes,
      view.depth + 1,
      segmentAt,
      Int32Array.from(chosen, (r) => view.inputStart(r.start)),
      Int32Array.from(chosen, (r) => view.inputEnd(r.end - 1)),
      segmentAt,
      Int32Array.from(chosen, (r, i) => at[i]! + r.bytes.length),
    );
    if (short) shortRunViews.add(child);
    views.push(child);
  }
  return views;
}

// ---- The search ----

/** The search, as steps: it yields after each view's own search, each child view decoded and each decoder call. */
function* collectRanges(input: Buffer, plan: Plan): Steps<Array<readonly [number, number]>> {
  const found: Array<readonly [number, number]> = [];
  const queue: View[] = [identityView(input)];
  // One budget for every stream found in this input; how many decompressions lie on each view's path.
  const budget = inflateBudget();
  const inflations = new Map<View, number>();
  for (let q = 0; q < queue.length; q++) {
    const view = queue[q]!;
    // A view of short runs is only looked into for compressed data (`shortRunSymbolsMin`); so is a view shorter than
    // the shortest part: compressed, a part can be shorter than itself.
    const shortRuns = shortRunViews.has(view);
    // A latin1 view is only looked into for compressed data: its ASCII is its parent's, searched there with its
    // escapes and runs, and a part (UTF-8) is not found in a character read back as one byte.
    const latin1 = byteEscapeViews.get(view)?.binaryOnly === true;
    if (view.bytes.length < headlessBytesMin) continue;
    for (const search of shortRuns || latin1 || view.bytes.length < plan.needleBytesMin ? [] : plan.searches)
      for (const [k, at] of (yield* caseFreeMatches(view.bytes, search)).entries()) {
        found.push([view.inputStart(at), view.inputEnd(at + search.needle.length - 1)]);
        if ((k + 1) % stepUnits === 0) yield;
      }
    yield;
    const level = inflations.get(view) ?? 0;
    const children = view.depth < nestingMax && !shortRuns && !latin1 ? yield* childViews(view, plan) : [];
    if (level > 0) for (const child of children) inflations.set(child, level);
    // JSON and HTML escapes decode to characters (UTF-8), not bytes: binary hides behind percent-encoding and behind
    // text read back one byte per character (the latin1 kinds). A view whose seams are none holds no compressed data
    // that was not looked for where it lies whole.
    const looksInto =
      level < inflationsMax && !(view instanceof EscapeView && !byteEscapeViews.has(view)) && !holdsNothingNew(view);
    // A view decoded from one with seams (compressed-views.ts: stored blocks' bytes laid end to end) has its own. An
    // escape view of one looked into below has its decoded escapes as fresh ranges: its plain bytes lie as they are
    // here, where they are looked into. Of one not looked into (a JSON escape view) whose own fresh ranges say what
    // is new since a view that was, its plain bytes that were fresh here are fresh there too; else it has none.
    const seams = freshRangesOf(view) !== undefined ? undefined : viewSeams(view);
    const freshHere = looksInto ? undefined : freshRangesOf(view);
    for (const child of children)
      if (child instanceof EscapeView)
        if (seams !== undefined) setViewSeams(child, escapeSeams(child, seams));
        else setFreshRanges(child, looksInto ? decodedEscapes(child) : freshHere && decodedEscapes(child, freshHere));
    for (const child of children) queue.push(child);
    if (!looksInto) continue;
    const starts =
      view instanceof RunView
        ? { at: view.dataAt, end: view.dataEnd }
        : view instanceof EscapeView
          ? escapeRunStarts(view, byteEscapeViews.get(view)!)
          : [0];
    // Output shorter than a part is kept while it can still be looked into for compressed data: compressed, a part
    // can be shorter than itself, so the stream around it too (raw deflate of raw deflate of a 40-hex token: 38 bytes).
    const shortBytesMin = level + 1 < inflationsMax ? headlessBytesMin : plan.needleBytesMin;
    const short = { bytesMin: shortBytesMin, readable: holdsEncodings };
    const inflated = yield* inflatedViewSteps(view, starts, budget, plan.needleBytesMin, short);
    for (const range of inflated.uncheckable) found.push(range);
    for (const child of inflated.views) {
      // Output shorter than a part that holds nothing an escape or a run is read from is only looked into for
      // compressed data, as a short run is.
      if (child.bytes.length < plan.needleBytesMin && !holdsEncodings(child.bytes)) shortRunViews.add(child);
      inflations.set(child, level + 1);
      queue.push(child);
    }
  }
  return mergeRanges(found);
}

/**
 * The seams (compressed-views.ts: where bytes that are not next to each other are joined, sorted) of `child`, an
 * escape view decoded from a view with `seams`: where its parent's are, and on both sides of an escape that straddles
 * one. None: every byte of `child` lies whole between two seams. (Run views get theirs in decodeRuns.)
 */
function escapeSeams(child: EscapeView, seams: Int32Array): Int32Array {
  const out: number[] = [];
  const push = (at: number): void => {
    if (at > 0 && at < child.bytes.length && (out.length === 0 || at > out.at(-1)!)) out.push(at);
  };
  const { at, from, to, plain } = child.pieces;
  let p = 0;
  for (const seam of seams) {
    while (p < to.length && to[p]! <= seam) p++;
    if (p === to.length) break;
    if (from[p]! >= seam) push(at[p]!);
    else if (plain[p]) push(at[p]! + seam - from[p]!);
    else {
      push(at[p]!);
      push(at[p + 1] ?? child.bytes.length);
    }
  }
  return Int32Array.from(out);
}

/**
 * Where an escape view's decoded escapes lie in it, and the bytes of its plain pieces that lie in `parentFresh` (its
 * parent's fresh ranges, when given): [start, end) pairs, sorted, adjacent ones joined.
 */
function decodedEscapes(view: EscapeView, parentFresh?: Int32Array): Int32Array | undefined {
  const { at, from, to, plain } = view.pieces;
  const ranges: number[] = [];
  const add = (start: number, end: number): void => {
    if (end <= start) return;
    if (ranges.at(-1) === start) ranges[ranges.length - 1] = end;
    else ranges.push(start, end);
  };
  let r = 0;
  for (let p = 0; p < at.length; p++) {
    // Past the bound the view is looked into whole (setFreshRanges): a bomb of escapes is not walked to its end here.
    if (ranges.length > 2 * freshRangesMax) return undefined;
    const start = at[p]!;
    if (!plain[p]) {
      add(start, at[p + 1] ?? view.bytes.length);
      continue;
    }
    if (parentFresh === undefined) continue;
    // The parent's fresh ranges that overlap this piece's span there, mapped here (both sorted: one pass).
    while (r < parentFresh.length && parentFresh[r + 1]! <= from[p]!) r += 2;
    for (let q = r; q < parentFresh.length && parentFresh[q]! < to[p]!; q += 2)
      add(
        start + Math.max(parentFresh[q]!, from[p]!) - from[p]!,
        start + Math.min(parentFresh[q + 1]!, to[p]!) - from[p]!,
      );
  }
  return Int32Array.from(ranges);
}

/**
 * Bytes an escape view, a decimal array or a run view could be decoded from: an escape's or a form's trigger (`%`,
 * `\`, `&`, `+`), a comma, or `shortRunSymbolsMin.base64` symbols of the base64 alphabets (hex's is inside it) in a
 * row, '=' and line breaks read past as runs read them.
 */
function holdsEncodings(bytes: Buffer): boolean {
  let run = 0;
  for (const b of bytes) {
    if (b === 0x25 || b === 0x5c || b === 0x26 || b === 0x2b || b === 0x2c) return true;
    run = runByte[b] === 1 ? run + 1 : 0;
    if (run >= shortRunSymbolsMin.base64) return true;
  }
  return false;
}

const runByte = Uint8Array.from({ length: 256 }, (_, b) =>
  /[A-Za-z0-9/_\-=\r\n]/.test(String.fromCharCode(b)) ? 1 : 0,
);

/**
 * Where data starts in a view of escapes: its first byte (to the view's end), and the first byte of each value that
 * holds an escape, a value being what follows a separator of text (`q=%63%b4…`, `"%1f%8b…`, `/%78%9c…`, and
 * `q=s%b4…`: encoders leave letters and digits plain, and raw deflate of `Bearer …` starts with `s`; the agent
 * decodes the value after the separator), to the end of the value (`&`, `"`…: a separator the encoder escapes inside
 * it). Which bytes start and end a value is the kind's (`ValueBounds`). Percent and form values (`separatedValues`):
 * where an encoder leaves some separators plain inside a value (Python's `quote` keeps `/`, `encodeURIComponent` keeps
 * `'()`), every separator since the value's start is a start (at most `valueStartsMax` before its first escape). The
 * latin1 kinds (`latin1Kinds`) have one start a value, and only where an escape decodes to a byte text does not hold
 * (`binaryOnly`): raw text none but the view's first byte (a stretch of its own), a JSON string its opening quote (to
 * the closing one), an element's content or an attribute's value its first byte (to the next tag). Not after any
 * byte, nor each to the view's end where values end: in a megabyte of random binary ~30 `%XX` decode, and `=%…`
 * repeated made each place decode the rest of the view (~5 s a MiB).
 */
function escapeRunStarts(view: EscapeView, bounds: ValueBounds): DataStarts {
  const { at, plain } = view.pieces;
  const bytes = view.bytes;
  const [starts, ends] = [[0], [bytes.length]];
  /** The starts from this index on have not ended yet (their end is the view's until their value ends). */
  let openFrom = 1;
  /** Where values start since the last end, not starts yet: they become starts when an escape follows. */
  const candidates: number[] = [];
  for (let p = 0; p < at.length; p++) {
    const from = at[p]!;
    if (plain[p] === 1) {
      const to = p + 1 < at.length ? at[p + 1]! : bytes.length;
      for (let i = from; i < to; i++) {
        const b = bytes[i]!;
        if (bounds.endsAt?.[b] === 1) {
          for (let k = openFrom; k < starts.length; k++) ends[k] = i;
          openFrom = starts.length;
          candidates.length = 0;
        }
        if (bounds.after[b] !== 1) continue;
        if (!bounds.every) candidates.length = 0;
        if (candidates.push(i + 1) > valueStartsMax) candidates.shift();
      }
    } else if (!bounds.binaryOnly || textByte[bytes[from]!] !== 1) startCandidates();
  }
  return { at: starts, end: ends };

  /** The candidates become starts at an escape (of a byte text does not hold, for the latin1 kinds). */
  function startCandidates(): void {
    for (const c of candidates) {
      starts.push(c);
      ends.push(bytes.length);
    }
    candidates.length = 0;
  }
}

/** Separators inside one value that start data of their own before its first escape (escapeRunStarts). */
const valueStartsMax = 64;

/**
 * Escape views whose escapes stand for bytes (percent, form, latin1): compressed data can hide behind them; with where
 * values start and end in them (escapeRunStarts).
 */
const byteEscapeViews = new WeakMap<View, ValueBounds>();
/** Run views of short runs (`shortRunSymbolsMin`). */
const shortRunViews = new WeakSet<View>();

function* childViews(view: View, plan: Plan): Steps<View[]> {
  const children: View[] = [];
  for (const kind of escapeKinds) {
    for (const child of kind === formKind && !plan.spaceInPart ? [] : yield* decodeEscapes(view, kind)) {
      if (kind.bytes) byteEscapeViews.set(child, kind.bytes);
      children.push(child);
    }
    yield;
  }
  children.push(...(yield* decimalRunViews(view, plan)));
  const runs = yield* findRuns(view, plan);
  yield;
  if (runs.base64.length > 0) children.push(...(yield* decodeRuns(view, runs.base64, base64Alphabet)));
  yield;
  if (runs.hex.length > 0) children.push(...(yield* decodeRuns(view, runs.hex, hexAlphabet)));
  for (const [short, alphabet] of [
    [runs.base64Short, base64Alphabet],
    [runs.hexShort, hexAlphabet],
  ] as const) {
    yield;
    if (short.length === 0) continue;
    const views = yield* decodeRuns(view, short, alphabet, 1);
    for (const child of views) shortRunViews.add(child);
    children.push(...views);
  }
  return children;
}

function mergeRanges(found: Array<readonly [number, number]>): Array<readonly [number, number]> {
  found.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const merged: Array<[number, number]> = [];
  for (const [start, end] of found) {
    const last = merged.at(-1);
    if (last && start <= last[1]) last[1] = Math.max(last[1], end);
    else merged.push([start, end]);
  }
  return merged;
}

// ---- The first API, kept for callers not yet moved to secretScrubber() ----

const scrubberOfForms = new WeakMap<readonly string[], SecretScrubber>();

function scrubberFor(forms: readonly string[]): SecretScrubber {
  let scrubber = scrubberOfForms.get(forms);
  if (!scrubber) {
    scrubber = secretScrubber(forms);
    scrubberOfForms.set(forms, scrubber);
  }
  return scrubber;
}

/** @deprecated use secretParts(). */
export function secretForms(secret: SecretMaterial): string[] {
  return secretParts(secret);
}

/** @deprecated use secretScrubber(parts).scrub(). */
export function scrubBytes(bytes: Buffer, forms: readonly string[]): { bytes: Buffer; redacted: boolean } {
  const { bytes: out, redacted } = scrubberFor(forms).scrub(bytes);
  return { bytes: out, redacted };
}

/** @deprecated use secretScrubber(parts).scrubText(). */
export function scrubText(text: string, forms: readonly string[]): { text: string; redacted: boolean } {
  return scrubberFor(forms).scrubText(text);
}
