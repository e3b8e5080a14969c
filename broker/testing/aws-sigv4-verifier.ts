import { createHash } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';

/**
 * A local AWS endpoint that checks every request's Signature V4 the way a service does, with `aws4` (a signer that
 * is not ours): it reads the scope and signed header names from Authorization, recomputes the signature from the
 * method, path, query, those headers and the body it received, and answers 403 on any difference. S3-style requests
 * must also carry the body's real sha256 in x-amz-content-sha256.
 */
interface Aws4Signer {
  datetime?: string;
  sign(): { headers: Record<string, string> };
}
interface Aws4 {
  RequestSigner: new (
    request: Record<string, unknown>,
    credentials: { accessKeyId: string; secretAccessKey: string; sessionToken?: string },
  ) => Aws4Signer;
}
const aws4 = createRequire(import.meta.url)('aws4') as Aws4;

export interface SigV4Keys {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string;
}

export interface ReceivedRequest {
  readonly method: string;
  /** The request target as received: path and query. */
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
}

export type Verdict = { readonly ok: true } | { readonly ok: false; readonly why: string };

const authorizationPattern =
  /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})$/;

/** The verdict a service would give: the signature aws4 computes must equal the one received, byte for byte. */
export function verifySigV4(request: ReceivedRequest, keys: SigV4Keys): Verdict {
  const authorization = request.headers.authorization ?? '';
  const match = authorizationPattern.exec(authorization);
  if (match === null) return { ok: false, why: 'no AWS4-HMAC-SHA256 Authorization header' };
  const [, accessKeyId, date, region, service, signedNames = ''] = match;
  if (accessKeyId !== keys.accessKeyId) return { ok: false, why: 'unknown access key id' };
  const amzDate = String(request.headers['x-amz-date'] ?? '');
  if (!amzDate.startsWith(date ?? '-')) return { ok: false, why: 'x-amz-date is not the credential scope date' };
  const names = signedNames.split(';');
  if (!names.includes('host') || !names.includes('x-amz-date')) return { ok: false, why: 'host or date unsigned' };
  if (keys.sessionToken !== undefined && request.headers['x-amz-security-token'] !== keys.sessionToken)
    return { ok: false, why: 'the session token is missing or wrong' };
  const declaredHash = request.headers['x-amz-content-sha256'];
  if (declaredHash !== undefined && declaredHash !== createHash('sha256').update(request.body).digest('hex'))
    return { ok: false, why: 'x-amz-content-sha256 is not the hash of the body received' };
  const headers: Record<string, string> = {};
  for (const name of names) headers[name] = String(request.headers[name] ?? '');
  const signer = new aws4.RequestSigner(
    {
      method: request.method,
      path: request.url,
      headers,
      body: request.body,
      region,
      service,
      doNotModifyHeaders: true,
    },
    keys,
  );
  // doNotModifyHeaders keeps aws4 from adding headers the client never sent; it then needs the date set directly.
  signer.datetime = amzDate;
  const expected = signer.sign().headers['Authorization'];
  return expected === authorization ? { ok: true } : { ok: false, why: 'the signature does not match' };
}

export interface SigV4Endpoint {
  readonly port: number;
  /** Every request received, with its verdict, in order. */
  readonly received: Array<ReceivedRequest & { verdict: Verdict }>;
  stop(): Promise<void>;
}

/**
 * Answers 200 with `reply(request)` (default: a JSON echo of the method, url and every header received, as a
 * reflecting remote would) when the signature verifies, else 403 with the reason.
 */
export async function startSigV4Endpoint(
  keys: SigV4Keys,
  reply: (request: ReceivedRequest) => string = (r) =>
    JSON.stringify({ method: r.method, url: r.url, headers: r.headers }),
): Promise<SigV4Endpoint> {
  const received: SigV4Endpoint['received'] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const request = {
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks),
      };
      const verdict = verifySigV4(request, keys);
      received.push({ ...request, verdict });
      res.writeHead(verdict.ok ? 200 : 403, { 'content-type': 'application/json' });
      res.end(verdict.ok ? reply(request) : JSON.stringify({ refused: verdict.why }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    received,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
