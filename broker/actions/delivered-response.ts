import {
  decodeContentAsync,
  representationHeaderNames,
  type BodyWithheldReason,
  type DecodedContent,
  type HttpLimits,
  type HttpResponseReport,
} from '../channels/http/index.js';
import { sha256Hex } from './http-action-request.js';
import { redactionMarker, type SecretScrubber } from './secret-scrubber.js';

/** A response header value as delivered: scrubbed whole first, then cut to this many characters. */
export const headerValueCharsMax = 2048;

/**
 * The response as the caller receives it (and as the result store keeps it): decoded, scrubbed of every form of
 * every secret part, then capped. Everything computed from bytes — digest, byte counts — is computed from these
 * bytes, never from what the remote sent: a digest of the unscrubbed body would let an agent test guesses of the
 * redacted tail (the wire digest stays in the journal's REMOTE_RESPONSE_COMPLETE, sealed, for audit only).
 */
export interface HttpActionResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
  readonly truncated: boolean;
  /** Bytes of the delivered body before the cap: the scrubbed length of what was examined, plus any bytes past it. */
  readonly total_bytes: number;
  /** sha256 of `body` exactly as delivered. */
  readonly digest: string;
  readonly redacted: boolean;
  /** Set when the body is not delivered because the broker could not read its plain bytes to scrub them. */
  readonly body_withheld?: BodyWithheldReason;
  /** The content codings the broker undid (a remote that compressed although asked for identity). */
  readonly content_decoded?: readonly string[];
}

export type DeliveryLimits = Pick<HttpLimits, 'resultBodyBytesMax' | 'decodedBodyBytesMax'>;

/**
 * Decode → scrub → cap, in that order (issue: truncate-then-scrub showed a secret minus its last character).
 * The channel keeps `scrubLookaheadBytes` past the cap so a secret that starts before the cut is seen whole.
 * The body is scrubbed in slices (scrubAsync) that give the event loop a turn every few milliseconds: a megabyte of
 * hostile binary costs the scrubber hundreds of milliseconds, and no other caller waits that long (THREAT-MODEL 4).
 * It is decoded off the loop for the same reason (decodeContentAsync): 8 MiB decoded from a tiny `br, br` body is
 * tens of milliseconds of inflating. Headers that describe the body's bytes reach the caller only when the body is
 * delivered as received (deliveredHeaders).
 */
export async function deliveredResponse(
  response: HttpResponseReport,
  scrubber: SecretScrubber,
  limits: DeliveryLimits,
): Promise<HttpActionResponse> {
  const keptAll = response.body.length >= response.totalBytes;
  const decoded = await decodeContentAsync(response.body, response.headers['content-encoding'], keptAll, {
    decodedBytesMax: limits.decodedBodyBytesMax,
  });
  const body = await deliveredBody(response, decoded, scrubber, limits);
  const headers = await deliveredHeaders(response, scrubber, {
    decoded: decoded.kind === 'decoded',
    asReceived: bodyAsReceived(response, decoded, body),
  });
  return {
    status: response.status,
    headers: headers.values,
    ...body,
    redacted: headers.redacted || body.redacted,
  };
}

type DeliveredBody = Omit<HttpActionResponse, 'status' | 'headers'>;

async function deliveredBody(
  response: HttpResponseReport,
  decoded: DecodedContent,
  scrubber: SecretScrubber,
  limits: DeliveryLimits,
): Promise<DeliveredBody> {
  if (decoded.kind === 'withheld') {
    const body = Buffer.alloc(0);
    return {
      body,
      truncated: false,
      total_bytes: 0,
      digest: digestOf(body),
      redacted: false,
      body_withheld: decoded.reason,
    };
  }
  const examined = decoded.bytes;
  const cut = await scrubber.scrubAsync(examined, limits.resultBodyBytesMax);
  const unexamined = decoded.kind === 'identity' ? response.totalBytes - examined.length : 0;
  const truncated = examined.length > limits.resultBodyBytesMax || unexamined > 0;
  const totalBytes = (truncated ? await scrubbedLength(scrubber, examined) : cut.bytes.length) + unexamined;
  return {
    body: cut.bytes,
    truncated,
    total_bytes: totalBytes,
    digest: digestOf(cut.bytes),
    redacted: cut.redacted,
    ...(decoded.kind === 'decoded' ? { content_decoded: decoded.codings } : {}),
  };
}

/**
 * Whether the agent's body is, byte for byte, the body the remote's representation headers describe: received with
 * no coding, whole, nothing redacted, and as long as the remote's Content-Length says. Without a Content-Length an
 * empty body proves nothing: a HEAD answer (or a 304) carries the validators of a body that was never sent, and an
 * express-style echo sets the ETag of the reflection it would have sent (an offline guess checker for the secret).
 */
function bodyAsReceived(response: HttpResponseReport, decoded: DecodedContent, body: DeliveredBody): boolean {
  // A redaction, a cut or a decode changes the bytes; bytes the channel did not keep were not delivered.
  if (decoded.kind !== 'identity' || !body.body.equals(response.body)) return false;
  if (response.body.length !== response.totalBytes) return false;
  const length = response.headers['content-length'];
  return length === undefined ? body.body.length > 0 : length === String(body.body.length);
}

/**
 * The kept headers as the agent receives them. The representation headers (response-headers.ts: Content-Length,
 * ETag, Last-Modified, digests) only when the body is delivered as received: a Content-Length of a redacted or
 * withheld body is a length oracle (the secret's exact length; per guessed character of a compressed reflection, a
 * CRIME-style one), an ETag of it a digest oracle. They are dropped rather than rewritten to the delivered body: the
 * answer carries that body and its length already (`total_bytes`), and a HEAD answer's or a cut body's has no honest
 * value. The coding's Content-Encoding goes when the broker decoded it (the body is plain).
 *
 * Every value is scrubbed in slices (scrubAsync), as bodies are: a header holding base64 of a decompression bomb costs
 * the scrubber most of its inflate budget, ~0.5-2 s per value run at once (THREAT-MODEL 4). In slices the loop waits
 * at most for the scrubber's longest unit of work (an escape decode is cut into steps too: 8 MiB of HTML references
 * inflated from one header, `&#37;41`…, held the loop ~0.5 s as one).
 */
async function deliveredHeaders(
  response: HttpResponseReport,
  scrubber: SecretScrubber,
  body: { readonly decoded: boolean; readonly asReceived: boolean },
): Promise<{ values: Record<string, string>; redacted: boolean }> {
  const values: Record<string, string> = {};
  let redacted = false;
  for (const [name, value] of Object.entries(response.headers)) {
    if (representationHeaderNames.has(name) && !body.asReceived) continue;
    if (name === 'content-encoding' && body.decoded) continue;
    const clean = await scrubbedHeader(scrubber, response.headerLines?.[name] ?? [value]);
    values[name] = cutChars(clean.text, headerValueCharsMax);
    redacted ||= clean.redacted;
  }
  return { values, redacted };
}

/**
 * One header's value, scrubbed whole first (cut after, by the caller). A header the remote sent as several lines is
 * delivered joined with ", ", and the scrubber matches whole parts only (none at an input's edge): a token cut in two
 * over two lines is in neither line, and in the joined value the separator stands between its halves, which an agent
 * simply removes. So each line is searched on its own (what is whole in it, read from its own start: raw deflate and
 * brotli, which have no signature, are tried only where a value starts) and the lines laid end to end, without
 * separator, from each line's start (a part cut across them); what any finds is redacted in the lines, and the joined value is scrubbed
 * again (what the agent receives, with the scrubber's own seam checks).
 * Out of reach, by design: a part a remote slices with anything between the slices (a character, another header, the
 * body), or in another order — a remote computing on the secret, which no scrubber stops.
 *
 * The bytes searched are the wire's: undici hands a header value over as latin1 (one character per byte received),
 * and the agent gets those characters back as they are (latin1 of them: the remote's bytes). Searched as UTF-8, a
 * byte 0x80-0xFF would be two others, so a compressed stream of bytes that are all legal in a header (a remote can
 * search for one) or a non-ASCII secret echoed as its UTF-8 bytes would pass unseen. A value that still holds
 * non-ASCII characters is searched again as the text it reads as (UTF-8 of its characters): a secret whose characters
 * the remote sent as latin1 bytes is itself there.
 */
async function scrubbedHeader(
  scrubber: SecretScrubber,
  lines: readonly string[],
): Promise<{ text: string; redacted: boolean }> {
  // A value from elsewhere than undici with a character past 0xFF is searched as the text it is.
  const wire: BufferEncoding = lines.every((line) => !beyondLatin1.test(line)) ? 'latin1' : 'utf8';
  // More lines than are searched from each one's start: not checked, so not handed over (as the scrubber redacts what
  // it cannot read). No honest remote repeats one of the kept headers that often.
  if (lines.length > headerLinesSearchedMax) return { text: redactionMarker, redacted: true };
  const texts: Buffer[] = lines.map((line) => Buffer.from(line, wire));
  let preRedacted = false;
  if (texts.length > 1) {
    const ranges: Array<Array<readonly [number, number]>> = [];
    for (const text of texts) ranges.push(await scrubber.rangesAsync(text));
    const starts: number[] = [];
    texts.reduce((at, text) => (starts.push(at), at + text.length), 0);
    // From each line's start to the end: compressed data without a signature is tried where data starts, and data
    // a remote starts on a later line and cuts across the next starts nowhere in the lines joined from the first.
    for (let first = 0; first < texts.length - 1; first++)
      for (const [start, end] of await scrubber.rangesAsync(Buffer.concat(texts.slice(first))))
        texts.forEach((text, i) => {
          const at = starts[i]! - starts[first]!;
          const from = Math.max(start, at) - at;
          const to = Math.min(end, at + text.length) - at;
          if (i >= first && from < to) ranges[i]!.push([from, to]);
        });
    texts.forEach((text, i) => (texts[i] = redactRanges(text, ranges[i]!)));
    preRedacted = ranges.some((r) => r.length > 0);
  }
  const joined = texts.map((t) => t.toString(wire)).join(', ');
  const out = await scrubber.scrubAsync(Buffer.from(joined, wire));
  const text = out.redacted ? out.bytes.toString(wire) : joined;
  const redacted = out.redacted || preRedacted;
  if (wire === 'utf8' || !nonAscii.test(text)) return { text, redacted };
  const asText = await scrubber.scrubAsync(Buffer.from(text, 'utf8'));
  return asText.redacted ? { text: asText.bytes.toString('utf8'), redacted: true } : { text, redacted };
}

/** Lines of one header searched from each one's start (a scrub each); a header sent in more is withheld whole. */
export const headerLinesSearchedMax = 16;
const nonAscii = /[\u0080-\uffff]/;
const beyondLatin1 = /[\u0100-\uffff]/;

/** `bytes` with each range (unsorted, perhaps overlapping) replaced by the marker, overlapping ones by one. */
function redactRanges(bytes: Buffer, ranges: Array<readonly [number, number]>): Buffer {
  if (ranges.length === 0) return bytes;
  ranges.sort((a, b) => a[0] - b[0]);
  const pieces: Buffer[] = [];
  let at = 0;
  for (const [start, end] of ranges) {
    if (pieces.length === 0 || start > at) pieces.push(bytes.subarray(at, start), Buffer.from(redactionMarker));
    at = Math.max(at, end);
  }
  pieces.push(bytes.subarray(at));
  return Buffer.concat(pieces);
}

function cutChars(text: string, charsMax: number): string {
  if (text.length <= charsMax) return text;
  const last = text.charCodeAt(charsMax - 1);
  // Never leave half a surrogate pair behind (as the scrubber's scrubText cuts).
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? charsMax - 1 : charsMax);
}

/** The first bytes of an incomplete response, as a marked diagnostic: scrubbed before the cut, like a result. */
export async function diagnosticBody(
  response: HttpResponseReport,
  scrubber: SecretScrubber,
  diagnosticBytesMax: number,
): Promise<Buffer> {
  const keptAll = response.body.length >= response.totalBytes;
  const decoded = await decodeContentAsync(response.body, response.headers['content-encoding'], keptAll, {
    decodedBytesMax: diagnosticBytesMax * 16,
  });
  if (decoded.kind === 'withheld') return Buffer.alloc(0);
  return (await scrubber.scrubAsync(decoded.bytes, diagnosticBytesMax)).bytes;
}

/** The length `bytes` has once every redaction range is replaced by the marker (only needed past the cap). */
async function scrubbedLength(scrubber: SecretScrubber, bytes: Buffer): Promise<number> {
  let length = bytes.length;
  for (const [start, end] of await scrubber.rangesAsync(bytes))
    length += Buffer.byteLength(redactionMarker) - (end - start);
  return length;
}

function digestOf(bytes: Buffer): string {
  return `sha256:${sha256Hex(bytes)}`;
}
