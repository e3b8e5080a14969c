/**
 * AWS Signature Version 4 over the final request (the `aws_sigv4` injection, docs/http-channel.md). Written on
 * node:crypto rather than @smithy/signature-v4: the SDK signer is async (its hash is a promise), and the steps from
 * authorize to the channel's hand-over must stay synchronous (http-steps.ts); the algorithm is ~60 lines of HMAC and
 * hashing. Its tests recompute every signature with `aws4`, an implementation that is not ours
 * (aws-sigv4-signer.test.ts, execute-http-aws-sigv4.test.ts).
 *
 * The canonical request follows the AWS reference: the path as sent is URI-encoded once more (S3: decoded, then
 * encoded once, `/` kept), and outside S3 normalized (`//`, `.`, `..`); query pairs are RFC 3986-encoded and sorted;
 * every header sent is signed except those a proxy may rewrite (user-agent); values are trimmed with inner runs of
 * whitespace collapsed, and repeated names joined with `,`; the payload hash is sha256 of the body bytes as sent.
 */
import { createHmac } from 'node:crypto';
import { sha256Hex } from './http-action-request.js';

export interface SigV4Request {
  readonly method: string;
  /** The Host header the HTTP client sends (URL.host of the route's origin: the port only when not the default). */
  readonly host: string;
  /** The path as sent, percent-encoded, without the query. */
  readonly path: string;
  /** Query pairs as sent, decoded (the wire encodes them with encodeURIComponent). */
  readonly query: ReadonlyArray<readonly [string, string]>;
  /** Every header as sent except host and framing the client adds (content-length). */
  readonly headers: ReadonlyArray<readonly [string, string]>;
  readonly body: Uint8Array | undefined;
}

export interface SigV4Scope {
  readonly region: string;
  readonly service: string;
}

export interface SigV4Key {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken: string | undefined;
}

const algorithm = 'AWS4-HMAC-SHA256';
/** Headers a proxy or the client may change or add: signing them would only make a valid request fail. */
const unsignedHeaders: ReadonlySet<string> = new Set(['authorization', 'user-agent', 'x-amzn-trace-id', 'expect']);
/** Headers this signer owns: an agent may not set them on an aws_sigv4 route (http-steps.ts validate). */
export const sigV4OwnedHeaders: readonly string[] = ['x-amz-date', 'x-amz-security-token', 'x-amz-content-sha256'];

/** The headers to add to the request: x-amz-date, the session token, the S3 payload hash, then Authorization. */
export function signAwsV4(
  request: SigV4Request,
  scope: SigV4Scope,
  key: SigV4Key,
  nowMs: number,
): Array<[string, string]> {
  const amzDate = new Date(nowMs).toISOString().replace(/[-:]|\.\d{3}/g, '');
  const payloadHash = sha256Hex(request.body ?? new Uint8Array());
  const added: Array<[string, string]> = [['x-amz-date', amzDate]];
  if (key.sessionToken !== undefined) added.push(['x-amz-security-token', key.sessionToken]);
  // S3 needs the payload hash as a header (and refuses a request without it); other services take it from the body.
  if (scope.service === 's3') added.push(['x-amz-content-sha256', payloadHash]);
  const headers = canonicalHeaders([['host', request.host], ...request.headers, ...added]);
  const canonicalRequest = [
    request.method,
    canonicalPath(request.path, scope.service === 's3'),
    canonicalQuery(request.query),
    headers.lines,
    headers.signed,
    payloadHash,
  ].join('\n');
  const credentialScope = `${amzDate.slice(0, 8)}/${scope.region}/${scope.service}/aws4_request`;
  const stringToSign = [algorithm, amzDate, credentialScope, sha256Hex(Buffer.from(canonicalRequest))].join('\n');
  let signingKey = hmac(`AWS4${key.secretAccessKey}`, amzDate.slice(0, 8));
  for (const part of [scope.region, scope.service, 'aws4_request']) signingKey = hmac(signingKey, part);
  const signature = createHmac('sha256', signingKey).update(stringToSign).digest('hex');
  const authorization = `${algorithm} Credential=${key.accessKeyId}/${credentialScope}, SignedHeaders=${headers.signed}, Signature=${signature}`;
  return [...added, ['authorization', authorization]];
}

function canonicalPath(path: string, s3: boolean): string {
  if (path === '/') return path;
  const pieces: string[] = [];
  const segments = s3 ? path.split('/') : path.replace(/\/{2,}/g, '/').split('/');
  for (const segment of segments) {
    if (!s3 && segment === '..') pieces.pop();
    else if (s3 || segment !== '.') pieces.push(encodeRfc3986(s3 ? decodeSegment(segment) : segment));
  }
  const joined = pieces.join('/');
  return joined.startsWith('/') ? joined : `/${joined}`;
}

/** A segment of a path the broker normalized is valid percent-encoding; anything else is signed as it stands. */
function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

function canonicalQuery(query: ReadonlyArray<readonly [string, string]>): string {
  return query
    .map(([name, value]) => [encodeRfc3986(name), encodeRfc3986(value)] as const)
    .sort(([an, av], [bn, bv]) => compare(an, bn) || compare(av, bv))
    .map(([name, value]) => `${name}=${value}`)
    .join('&');
}

function canonicalHeaders(all: ReadonlyArray<readonly [string, string]>): { lines: string; signed: string } {
  const byName = new Map<string, string[]>();
  for (const [name, value] of all) {
    const lower = name.toLowerCase();
    if (unsignedHeaders.has(lower)) continue;
    const values = byName.get(lower) ?? [];
    values.push(value.trim().replace(/\s+/g, ' '));
    byName.set(lower, values);
  }
  const names = [...byName.keys()].sort(compare);
  const lines = names.map((name) => `${name}:${(byName.get(name) ?? []).join(',')}\n`).join('');
  return { lines, signed: names.join(';') };
}

/** encodeURIComponent plus the four sub-delimiters it leaves alone: only A-Z a-z 0-9 - _ . ~ stay bare. */
function encodeRfc3986(text: string): string {
  return encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function hmac(key: string | Buffer, data: string): Buffer {
  return createHmac('sha256', key).update(data).digest();
}
