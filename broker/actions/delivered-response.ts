import {
  decodeContentAsync,
  type BodyWithheldReason,
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
 * tens of milliseconds of inflating.
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
  const headers: Record<string, string> = {};
  let redacted = false;
  for (const [name, value] of Object.entries(response.headers)) {
    // Decoded bytes no longer match the remote's coding or length: those two headers would describe another body.
    if (decoded.kind === 'decoded' && (name === 'content-encoding' || name === 'content-length')) continue;
    const clean = scrubber.scrubText(value, headerValueCharsMax);
    headers[name] = clean.text;
    redacted ||= clean.redacted;
  }
  if (decoded.kind === 'withheld') {
    const body = Buffer.alloc(0);
    return {
      status: response.status,
      headers,
      body,
      truncated: false,
      total_bytes: 0,
      digest: digestOf(body),
      redacted,
      body_withheld: decoded.reason,
    };
  }
  const examined = decoded.bytes;
  const cut = await scrubber.scrubAsync(examined, limits.resultBodyBytesMax);
  const unexamined = decoded.kind === 'identity' ? response.totalBytes - examined.length : 0;
  const truncated = examined.length > limits.resultBodyBytesMax || unexamined > 0;
  const totalBytes = (truncated ? await scrubbedLength(scrubber, examined) : cut.bytes.length) + unexamined;
  return {
    status: response.status,
    headers,
    body: cut.bytes,
    truncated,
    total_bytes: totalBytes,
    digest: digestOf(cut.bytes),
    redacted: redacted || cut.redacted,
    ...(decoded.kind === 'decoded' ? { content_decoded: decoded.codings } : {}),
  };
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
