import { once } from 'node:events';
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { brotliCompressSync, constants, crc32, deflateRawSync, deflateSync, gzipSync } from 'node:zlib';

/**
 * A hostile remote for the secret-reflection suite (issue 13): it reflects what it receives, in the
 * forms a scrubber comparing plain bytes would miss. The agent steers it by path, as an agent that
 * picked this remote would: `/reflect/<mode>[/<anything>]`. It is the ground truth: `received` keeps
 * every request exactly as it arrived and the dump it reflected, so a test can prove the secret
 * really reached it (and so the test could fail).
 *
 * The dump is JSON of {remote (the marker), method, headers, body, url}, with `url` last and the
 * `range` header left out, so a secret carried in a header sits at the same offset in every request
 * of a case (successive Range slices and the padding computed for a header cut depend on it). Modes:
 *  - plain, gzip, deflate, br: the dump, compressed with Content-Encoding set whatever the request's
 *    Accept-Encoding said;
 *  - base64, base64url (`?prefix=N`, N in 0..2 bytes before the dump, so every alignment happens),
 *    hex, percent (encodeURIComponent), json-escaped (every UTF-16 unit as \uXXXX);
 *  - range: honours `Range: bytes=a-b` with a 206 slice of the dump, else 200 with all of it;
 *  - pad-header: the dump, left-padded with `?pad=N` characters, in `x-request-id` (allow-listed);
 *  - redirect: 302, Location `/landing?d=<dump percent-encoded>`;
 *  - query-echo: only the raw query string, left-padded with `?pad=N`, in `x-request-id` and the body;
 *  - undeclared-*: the dump compressed WITHOUT Content-Encoding, as application/octet-stream (gzip, zlib,
 *    raw deflate, br, gzip behind 37 bytes of noise, gzip whose trailer is corrupt: a streaming decoder
 *    still yields the dump), or as text: base64 of gzip / of raw deflate, hex of zlib, JSON with base64
 *    of gzip in a field; gzip that zlib refuses and a lenient decoder (fflate) reads: a wrong header CRC
 *    (FHCRC), reserved FLG bits set, the dump split inside the authorization value across two members whose first
 *    has a wrong trailer (as bytes and as base64); bytes as text one per character (latin1): gzip in a JSON string
 *    (JSON.stringify), raw deflate in an ASCII-only one (Python's json.dumps: \u00XX), zlib as UTF-8 text after a
 *    label, raw deflate percent-encoded in a query value with letters, digits and `/` plain (Python's quote). The agent
 *    decompresses what the broker saw as opaque bytes.
 *  - form-base64-br-token: the bearer token alone, brotli-compressed, as base64 after `auth=` in a form body;
 *  - case-flipped: the dump with the case of every ASCII letter swapped (a remote that upper-cases what it echoes);
 *  - buffer-json: the dump as Node writes a Buffer in JSON, {"type":"Buffer","data":[123,34,...]}.
 * Only 127.0.0.1.
 */
export const reflectModes = [
  'plain',
  'gzip',
  'deflate',
  'br',
  'base64',
  'base64url',
  'hex',
  'percent',
  'json-escaped',
  'range',
  'pad-header',
  'redirect',
  'query-echo',
  'case-flipped',
  'buffer-json',
  'form-base64-br-token',
  ...undeclaredModes(),
] as const;

/** Compressed reflections without Content-Encoding (see the class comment). */
function undeclaredModes() {
  return [
    'undeclared-gzip',
    'undeclared-zlib',
    'undeclared-raw-deflate',
    'undeclared-br',
    'undeclared-gzip-after-noise',
    'undeclared-gzip-corrupt-trailer',
    'undeclared-base64-gzip',
    'undeclared-base64-raw-deflate',
    'undeclared-hex-zlib',
    'undeclared-json-base64-gzip',
    'undeclared-gzip-bad-header-crc',
    'undeclared-gzip-reserved-flags',
    'undeclared-gzip-split-members',
    'undeclared-base64-gzip-split-members',
    'undeclared-json-latin1-gzip',
    'undeclared-json-ascii-latin1-raw-deflate',
    'undeclared-text-latin1-zlib',
    'undeclared-query-raw-deflate',
  ] as const;
}
export type ReflectMode = (typeof reflectModes)[number];

/** A padding request larger than this is refused (a header block stays within what clients accept). */
export const padCharsMax = 8_192;
/** Request bodies larger than this are cut in the record and the dump (the suite sends none). */
export const requestBodyBytesMax = 64 * 1024;

export interface ReflectedRequest {
  /** Arrival order, from 1. */
  readonly seq: number;
  readonly mode: ReflectMode | undefined;
  /** The path segment after the mode (a test's case tag), or ''. */
  readonly tag: string;
  readonly method: string;
  readonly url: string;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly body: string;
  /** The text this request's reflection was computed from (before compression or encoding). */
  readonly dump: string;
  /** What the remote answered, exactly: a test's control that its detector would see the raw reflection. */
  readonly sent: { readonly status: number; readonly headers: Readonly<Record<string, string>>; readonly body: Buffer };
}

export class ReflectingRemote {
  readonly received: ReflectedRequest[] = [];
  /**
   * A random word in every dump and no request: found in plain text in a file, it shows response
   * bytes were stored unsealed (the secret itself may be scrubbed and still the results readable).
   */
  readonly marker = `reflected-${randomBytes(12).toString('hex')}`;

  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  static async start(): Promise<ReflectingRemote> {
    const handlers: { handle?: (req: IncomingMessage, res: ServerResponse) => void } = {};
    // It runs in the test's own process: a test that blocks the loop for seconds (checking every decompression an agent
    // could try) would otherwise let Node's 5 s keep-alive close the idle socket just as the next call reuses it, before
    // undici's own idle timer could run — an honest unknown, but not what these tests are about.
    const server = createServer({ keepAliveTimeout: 60_000 }, (req, res) => handlers.handle?.(req, res));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const remote = new ReflectingRemote(server, (server.address() as AddressInfo).port);
    handlers.handle = (req, res) => remote.handle(req, res);
    return remote;
  }

  get origin(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Requests whose path carried this tag, in arrival order. */
  byTag(tag: string): ReflectedRequest[] {
    return this.received.filter((r) => r.tag === tag);
  }

  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections();
    await closed;
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    let bytes = 0;
    req.on('data', (chunk: Buffer) => {
      if (bytes < requestBodyBytesMax) chunks.push(chunk);
      bytes += chunk.length;
    });
    req.on('end', () => {
      const body = Buffer.concat(chunks).subarray(0, requestBodyBytesMax).toString('utf8');
      const url = req.url ?? '/';
      const [, first, mode, tag] = /^\/([^/?]*)\/?([^/?]*)\/?([^?]*)/.exec(url) ?? [];
      const known =
        first === 'reflect' && (reflectModes as readonly string[]).includes(mode ?? '')
          ? (mode as ReflectMode)
          : undefined;
      const dump = dumpOf(this.marker, req, body);
      const answer =
        known === undefined
          ? { status: 404, headers: {}, body: Buffer.from('unknown mode\n') }
          : reflect(known, req, dump);
      const headers = { 'content-length': String(answer.body.length), ...answer.headers };
      const seq = this.received.length + 1;
      const sent = { ...answer, headers };
      const headersIn = { ...req.headers };
      this.received.push({
        seq,
        mode: known,
        tag: tag ?? '',
        method: req.method ?? '',
        url,
        headers: headersIn,
        body,
        dump,
        sent,
      });
      res.writeHead(answer.status, headers);
      res.end(answer.body);
    });
  }
}

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/** The marker, every request header but `range` (see the class comment), then the body, then the url. */
function dumpOf(marker: string, req: IncomingMessage, body: string): string {
  const headers = Object.fromEntries(Object.entries(req.headers).filter(([name]) => name !== 'range'));
  return JSON.stringify({ remote: marker, method: req.method, headers, body, url: req.url });
}

function reflect(mode: ReflectMode, req: IncomingMessage, dump: string): Answer {
  const query = new URL(req.url ?? '/', 'http://remote.invalid').searchParams;
  const text = (body: string, headers: Record<string, string> = {}): Answer => ({
    status: 200,
    headers: { 'content-type': 'text/plain; charset=utf-8', ...headers },
    body: Buffer.from(body),
  });
  const coded = (coding: string, body: Buffer): Answer => ({
    status: 200,
    headers: { 'content-type': 'application/json', 'content-encoding': coding },
    body,
  });
  switch (mode) {
    case 'plain':
      return { status: 200, headers: { 'content-type': 'application/json' }, body: Buffer.from(dump) };
    case 'gzip':
      return coded('gzip', gzipSync(dump));
    case 'deflate':
      return coded('deflate', deflateSync(dump));
    case 'br':
      return coded('br', brotliCompressSync(dump));
    case 'base64':
    case 'base64url':
      return text(Buffer.concat([Buffer.from('PP'.slice(0, prefixOf(query))), Buffer.from(dump)]).toString(mode));
    case 'hex':
      return text(Buffer.from(dump).toString('hex'));
    case 'percent':
      return text(encodeURIComponent(dump));
    case 'json-escaped':
      return text(unicodeEscaped(dump));
    case 'range':
      return ranged(req.headers.range, Buffer.from(dump));
    case 'pad-header':
      return text('reflected in x-request-id\n', { 'x-request-id': padOf(query) + dump });
    case 'redirect':
      return {
        status: 302,
        headers: { location: `/landing?d=${encodeURIComponent(dump)}` },
        body: Buffer.from('moved\n'),
      };
    case 'undeclared-gzip':
    case 'undeclared-zlib':
    case 'undeclared-raw-deflate':
    case 'undeclared-br':
    case 'undeclared-gzip-after-noise':
    case 'undeclared-gzip-corrupt-trailer':
    case 'undeclared-base64-gzip':
    case 'undeclared-base64-raw-deflate':
    case 'undeclared-hex-zlib':
    case 'undeclared-json-base64-gzip':
    case 'undeclared-gzip-bad-header-crc':
    case 'undeclared-gzip-reserved-flags':
    case 'undeclared-gzip-split-members':
    case 'undeclared-base64-gzip-split-members':
    case 'undeclared-json-latin1-gzip':
    case 'undeclared-json-ascii-latin1-raw-deflate':
    case 'undeclared-text-latin1-zlib':
    case 'undeclared-query-raw-deflate':
      return undeclared(mode, dump);
    case 'form-base64-br-token': {
      // The token alone: brotli writes it in about its own length, in a run that starts at `auth`, not at the stream.
      // Quality 5: the scrubber before review #206 happened to catch the harness canary at brotli's default quality
      // (random tokens it missed at any: secret-scrubber.test.ts), and not at this one.
      const token = /"authorization":"Bearer ([^"]*)"/.exec(dump)?.[1] ?? '';
      const quality = { params: { [constants.BROTLI_PARAM_QUALITY]: 5 } };
      return text(`auth=${brotliCompressSync(token, quality).toString('base64')}&ok=1`);
    }
    case 'case-flipped':
      return text(dump.replace(/[A-Za-z]/g, (c) => (c === c.toUpperCase() ? c.toLowerCase() : c.toUpperCase())));
    case 'buffer-json':
      return {
        status: 200,
        headers: { 'content-type': 'application/json' },
        body: Buffer.from(JSON.stringify(Buffer.from(dump))),
      };
    case 'query-echo': {
      const raw = (req.url ?? '').split('?').slice(1).join('?');
      const echoed = padOf(query) + raw;
      return text(echoed, { 'x-request-id': echoed });
    }
  }
}

/** The dump compressed and sent as if it were opaque data: no Content-Encoding tells the broker to decode it. */
function undeclared(mode: ReturnType<typeof undeclaredModes>[number], dump: string): Answer {
  const binary = (body: Buffer): Answer => ({
    status: 200,
    headers: { 'content-type': 'application/octet-stream' },
    body,
  });
  const text = (body: string): Answer => ({
    status: 200,
    headers: { 'content-type': 'text/plain' },
    body: Buffer.from(body),
  });
  const json = (value: unknown): Answer => ({
    status: 200,
    headers: { 'content-type': 'application/json' },
    body: Buffer.from(JSON.stringify(value)),
  });
  switch (mode) {
    case 'undeclared-gzip':
      return binary(gzipSync(dump));
    case 'undeclared-zlib':
      return binary(deflateSync(dump));
    case 'undeclared-raw-deflate':
      return binary(deflateRawSync(dump));
    case 'undeclared-br':
      return binary(brotliCompressSync(dump));
    case 'undeclared-gzip-after-noise':
      return binary(Buffer.concat([randomBytes(37), gzipSync(dump), randomBytes(11)]));
    case 'undeclared-gzip-corrupt-trailer': {
      const gz = gzipSync(dump);
      // The CRC-32 and length are wrong: a whole-buffer gunzip throws, a streaming one has the dump first.
      return binary(Buffer.concat([gz.subarray(0, gz.length - 8), Buffer.from('corrupt!')]));
    }
    case 'undeclared-base64-gzip':
      return text(gzipSync(dump).toString('base64'));
    case 'undeclared-base64-raw-deflate':
      return text(deflateRawSync(dump).toString('base64'));
    case 'undeclared-hex-zlib':
      return text(deflateSync(dump).toString('hex'));
    case 'undeclared-json-base64-gzip':
      return json({ kind: 'archive', data: gzipSync(dump).toString('base64') });
    case 'undeclared-gzip-bad-header-crc': {
      // FHCRC set, and the CRC-16 after the header is not the header's: zlib refuses the member, fflate skips it.
      const gz = gzipSync(dump);
      const header = Buffer.from(gz.subarray(0, 10));
      header[3]! |= 0x02;
      const crc16 = Buffer.alloc(2);
      crc16.writeUInt16LE((crc32(header) & 0xffff) ^ 0x5a5a);
      return binary(Buffer.concat([header, crc16, gz.subarray(10)]));
    }
    case 'undeclared-gzip-reserved-flags': {
      // FLG bits 5-7 are reserved: zlib refuses a member with any set, fflate ignores them.
      const gz = gzipSync(dump);
      gz[3]! |= 0xe0;
      return binary(gz);
    }
    case 'undeclared-gzip-split-members':
      return binary(splitMembers(dump));
    case 'undeclared-base64-gzip-split-members':
      return text(splitMembers(dump).toString('base64'));
    // Bytes as text, one per character (latin1), written as UTF-8 or escaped: the agent reads each back as its byte.
    case 'undeclared-json-latin1-gzip':
      return json({ kind: 'archive', data: gzipSync(dump).toString('latin1') });
    case 'undeclared-json-ascii-latin1-raw-deflate': {
      // As Python's json.dumps writes it: everything past ASCII as \u00XX.
      const data = JSON.stringify(deflateRawSync(dump).toString('latin1')).replace(
        /[\u0080-\uffff]/g,
        (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
      );
      return { ...json({}), body: Buffer.from(`{"kind": "archive", "data": ${data}}`) };
    }
    case 'undeclared-text-latin1-zlib':
      return text(`data: ${deflateSync(dump).toString('latin1')}`);
    case 'undeclared-query-raw-deflate': {
      // As Python's urllib.parse.quote writes bytes: letters, digits, `_.-~` and `/` plain, the rest %XX.
      const quoted = [...deflateRawSync(dump)]
        .map((b) =>
          /[A-Za-z0-9_.~/-]/.test(String.fromCharCode(b))
            ? String.fromCharCode(b)
            : `%${b.toString(16).toUpperCase().padStart(2, '0')}`,
        )
        .join('');
      return text(`id=7&q=${quoted}&ok=1`);
    }
  }
}

/**
 * gzip of the dump as two members, cut in the middle of the authorization value's last word (the credential), the
 * first member's CRC-32 wrong: zlib stops at that trailer; a lenient decoder reads on and joins the two.
 */
function splitMembers(dump: string): Buffer {
  const key = '"authorization":"';
  const from = dump.indexOf(key);
  const valueEnd = from < 0 ? dump.length : dump.indexOf('"', from + key.length);
  const wordStart = from < 0 ? 0 : Math.max(from + key.length, dump.lastIndexOf(' ', valueEnd) + 1);
  const cut = (wordStart + valueEnd) >> 1;
  const first = gzipSync(dump.slice(0, cut));
  first.writeUInt32LE(~first.readUInt32LE(first.length - 8) >>> 0, first.length - 8);
  return Buffer.concat([first, gzipSync(dump.slice(cut))]);
}

function prefixOf(query: URLSearchParams): number {
  const n = Number(query.get('prefix') ?? '0');
  return Number.isInteger(n) && n >= 0 && n <= 2 ? n : 0;
}

function padOf(query: URLSearchParams): string {
  const n = Number(query.get('pad') ?? '0');
  return 'x'.repeat(Number.isInteger(n) && n >= 0 && n <= padCharsMax ? n : 0);
}

/** Every UTF-16 unit as \uXXXX (lower-case hex), as a JSON encoder told to escape everything would. */
export function unicodeEscaped(text: string): string {
  let out = '';
  for (let i = 0; i < text.length; i += 1) out += `\\u${text.charCodeAt(i).toString(16).padStart(4, '0')}`;
  return out;
}

/** RFC 9110 single byte range (`bytes=a-b`, `bytes=a-`); anything else gets the whole dump with 200. */
function ranged(header: string | undefined, dump: Buffer): Answer {
  const match = /^bytes=(\d+)-(\d*)$/.exec(header ?? '');
  if (match === null)
    return { status: 200, headers: { 'content-type': 'application/json', 'accept-ranges': 'bytes' }, body: dump };
  const start = Number(match[1]);
  const end = Math.min(match[2] === '' ? dump.length - 1 : Number(match[2]), dump.length - 1);
  if (start > end)
    return { status: 416, headers: { 'content-range': `bytes */${dump.length}` }, body: Buffer.alloc(0) };
  return {
    status: 206,
    headers: { 'content-type': 'application/octet-stream', 'content-range': `bytes ${start}-${end}/${dump.length}` },
    body: dump.subarray(start, end + 1),
  };
}
