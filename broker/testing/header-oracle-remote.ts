import { createHash } from 'node:crypto';
import { deflateRawSync, gzipSync } from 'node:zlib';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { headerLegalDeflate } from './header-legal-deflate.js';
import { startLoopbackServer, type LoopbackServer } from './loopback-server.js';

/**
 * A hostile remote whose response HEADERS carry what the scrubbed body hides (review of fab8e46, items 1, 3-5). The
 * agent steers it by path, as an agent that picked this remote would:
 *  - `/echo`: the request's headers as JSON, with the headers an express app computes over any body it sends:
 *    Content-Length and a weak ETag `W/"<length hex>-<sha1 base64, 27 chars>"` (the `etag` package). Answered to HEAD
 *    too, as express does: the same headers, no body.
 *  - `/crime?guess=G`: `x=G&auth=<token>&y=G` raw-deflated, sent with `Content-Encoding: x-custom` (a coding the
 *    broker cannot decode) and its Content-Length: the length shrinks as G shares more of the token (CRIME).
 *  - `/split`: the token cut in the middle, one half per `x-request-id` line (two header lines).
 *  - `/deflated`: `x-request-id` holding raw deflate of the token made of bytes legal in a header, some past 0x7F
 *    (header-legal-deflate.ts): undici reads it as latin1, an agent inflates those bytes.
 *  - `/header-bomb`: `x-request-id`, `request-id` and `x-correlation-id` each holding base64 of gzip of 3.5 MiB of
 *    `A`: no secret, but ~0.1-0.3 s of scrubbing each, ~0.4-0.8 s for the three run at once. `?unit=html`: one
 *    `x-request-id` of base64 of gzip of 7.4 MiB of `&#37;41` (an HTML reference of a percent escape: the review's).
 *  - anything else: a fixed JSON body with its Content-Length and ETag (an honest answer).
 * `sent` keeps each answer exactly as sent: a test's control that the attack works on what the remote really sent.
 * Only 127.0.0.1.
 */
export interface HeaderOracleRemote {
  readonly port: number;
  readonly sent: SentAnswer[];
  close(): Promise<void>;
}

export interface SentAnswer {
  readonly path: string;
  readonly method: string;
  readonly headers: Readonly<Record<string, string | readonly string[]>>;
  readonly body: Buffer;
}

/** The `etag` package's weak ETag of a body, as express sets it on every answer it sends. */
export function expressEtag(body: Buffer): string {
  const hash = createHash('sha1').update(body).digest('base64').substring(0, 27);
  return `W/"${body.length.toString(16)}-${hash}"`;
}

/** Base64 of gzip of `mib` MiB of `unit` repeated: the headers of one answer stay within undici's 16 KiB block. */
function headerBomb(unit: string, mib: number): string {
  const plain = Buffer.from(unit.repeat(Math.floor((mib * 1024 * 1024) / unit.length)));
  return gzipSync(plain, { level: 9 }).toString('base64');
}

interface Bombs {
  readonly A: string;
  readonly html: string;
}

export async function startHeaderOracleRemote(): Promise<HeaderOracleRemote> {
  const sent: SentAnswer[] = [];
  const bombs: Bombs = { A: headerBomb('A', 3.5), html: headerBomb('&#37;41', 7.4) };
  const server: LoopbackServer = await startLoopbackServer((req, res) => {
    req.resume();
    req.on('end', () => sent.push(answer(req, res, bombs)));
  });
  return { port: server.port, sent, close: () => server.close() };
}

function answer(req: IncomingMessage, res: ServerResponse, bombs: Bombs): SentAnswer {
  const url = new URL(req.url ?? '/', 'http://remote.invalid');
  const path = url.pathname.replace(/^\/api/, '');
  const token = (req.headers.authorization ?? '').replace(/^Bearer /, '');
  let headers: Record<string, string | string[]>;
  let body: Buffer;
  switch (path) {
    case '/echo':
      body = Buffer.from(JSON.stringify({ headers: req.headers }));
      headers = { 'content-type': 'application/json', etag: expressEtag(body) };
      break;
    case '/crime': {
      const guess = url.searchParams.get('guess') ?? '';
      body = deflateRawSync(`x=${guess}&auth=${token}&y=${guess}`);
      headers = { 'content-type': 'text/plain', 'content-encoding': 'x-custom' };
      break;
    }
    case '/split': {
      const half = token.length >> 1;
      body = Buffer.from('ok\n');
      headers = { 'content-type': 'text/plain', 'x-request-id': [token.slice(0, half), token.slice(half)] };
      break;
    }
    case '/deflated':
      body = Buffer.from('ok\n');
      headers = { 'content-type': 'text/plain', 'x-request-id': headerLegalDeflate(token).toString('latin1') };
      break;
    case '/header-bomb':
      body = Buffer.from('ok\n');
      headers =
        url.searchParams.get('unit') === 'html'
          ? { 'content-type': 'text/plain', 'x-request-id': bombs.html }
          : {
              'content-type': 'text/plain',
              'x-request-id': bombs.A,
              'request-id': bombs.A,
              'x-correlation-id': bombs.A,
            };
      break;
    default:
      body = Buffer.from('{"id":42,"name":"plain"}');
      headers = { 'content-type': 'application/json', etag: expressEtag(body) };
  }
  headers['content-length'] = String(body.length);
  res.writeHead(200, headers);
  // Node sends no body to a HEAD request, whatever end() is given: the headers still describe it, as express's do.
  res.end(body);
  return { path, method: req.method ?? '', headers, body: req.method === 'HEAD' ? Buffer.alloc(0) : body };
}
