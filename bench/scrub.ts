/**
 * What scrubbing an answer costs the event loop (issue #18: the broker must not be the bottleneck of a real API).
 * Every delivered header value and body goes through the secret scrubber (broker/actions/secret-scrubber.ts), which
 * also looks inside compressed data a remote did not declare (compressed-views.ts): raw deflate and brotli, which have
 * no signature, are tried where each base64/hex run starts, at every alignment. An honest API's answer is full of such
 * runs (request ids, etags, trace ids, cursors), so it costs far more than the durable bench's `{"ok":true}`.
 *
 *   node --import tsx bench/scrub.ts
 *
 * Not part of the test run; about 30 s. The answers are deterministic (ids are sha256 of a counter); each row is the
 * median of repeated scrubs of one answer, with the node:zlib decoder calls one scrub makes (counted by wrapping
 * node:zlib's sync decoders before the scrubber loads; the calls still run). The scrubber keeps the decoder's answers
 * for short inputs (compressed-views.ts, decodeOnceMemo): "first seen" forgets them before each scrub (an answer
 * whose every word is new), "seen before" keeps them (the same answer again: a remote's fixed words).
 */
import { createHash } from 'node:crypto';
import { createRequire, syncBuiltinESMExports } from 'node:module';
import { availableParallelism, cpus, loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';

const zlib = createRequire(import.meta.url)('node:zlib') as Record<string, unknown>;
let decoderCalls = 0;
for (const name of ['inflateRawSync', 'inflateSync', 'gunzipSync', 'brotliDecompressSync']) {
  const decode = zlib[name] as (...args: unknown[]) => unknown;
  zlib[name] = (...args: unknown[]): unknown => {
    decoderCalls += 1;
    return decode(...args);
  };
}
syncBuiltinESMExports();
const { secretParts, secretScrubber } = await import('../broker/actions/secret-scrubber.js');
const { forgetDecodeMemo } = await import('../broker/actions/compressed-views.js');

/** Scrubs of one answer timed per row, after warm-up; and at most this long. */
const scrubsMax = 200;
const rowMsMax = 2_000;

function idBytes(seed: string, length: number): Buffer {
  const out: Buffer[] = [];
  for (let i = 0; out.length * 32 < length; i++) out.push(createHash('sha256').update(`${seed}/${i}`).digest());
  return Buffer.concat(out).subarray(0, length);
}

function uuid(seed: string): string {
  const hex = idBytes(seed, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** A page of items as a typical JSON API answers it: a UUID, a hex etag and a base64 cursor each. */
function pageOfIds(items: number): Buffer {
  const data = Array.from({ length: items }, (_, i) => ({
    id: uuid(`id${i}`),
    etag: idBytes(`etag${i}`, 16).toString('hex'),
    cursor: idBytes(`cursor${i}`, 18).toString('base64'),
    name: `item ${i}`,
  }));
  return Buffer.from(JSON.stringify({ data }));
}

/** Header values a cloud API typically answers with, besides the usual content-type, date and length. */
const idHeaders = [
  uuid('request-id'),
  `"${idBytes('etag', 16).toString('hex')}"`,
  `00-${idBytes('trace', 16).toString('hex')}-${idBytes('span', 8).toString('hex')}-01`,
  idBytes('amz-id-2', 48).toString('base64'),
];
const plainHeaders = ['application/json', 'Fri, 04 Dec 2026 05:00:00 GMT', '11', 'keep-alive', 'timeout=5'];

type Scrubber = ReturnType<typeof secretScrubber>;
interface Answer {
  readonly name: string;
  readonly bytes: number;
  readonly scrub: (scrubber: Scrubber) => void;
}

const headersAnswer = (name: string, values: readonly string[]): Answer => ({
  name,
  bytes: values.reduce((sum, v) => sum + Buffer.byteLength(v), 0),
  scrub: (scrubber) => {
    for (const value of values) scrubber.scrubText(value, 2048);
  },
});
const bodyAnswer = (name: string, body: Buffer): Answer => ({
  name,
  bytes: body.length,
  scrub: (scrubber) => scrubber.scrub(body),
});

/**
 * A hostile megabyte for the stored-block mending (compressed-views.ts): 16-byte units, each a zlib header whose first
 * block is stored with a wrong NLEN, laid so that from every header a chain of such blocks runs to the end.
 */
function storedChains(bytes: number): Buffer {
  const unit = Buffer.from([0x78, 0x01, 0x00, 9, 0, 0x58, 0x00, 5, 0, 0x41, 0x41, 0x61, 0x62, 0x63, 0x64, 0x65]);
  return Buffer.concat(Array.from({ length: bytes / unit.length }, () => unit));
}

/** An answer of many small gzip members one after another (a multi-member file): each an item of the page. */
function gzipMembers(bytes: number): Buffer {
  const { gzipSync } = zlib as { gzipSync: (data: Buffer) => Buffer };
  const members: Buffer[] = [];
  for (let i = 0, total = 0; total < bytes; i++) {
    members.push(gzipSync(Buffer.from(`{"id":"${uuid(`member${i}`)}","name":"item ${i}"}\n`)));
    total += members.at(-1)!.length;
  }
  return Buffer.concat(members).subarray(0, bytes);
}

/**
 * A hostile megabyte for the lenient gzip reading: a gzip header every 64 bytes, FLG with reserved bits and FHCRC set
 * (zlib refuses both at once; they are read now), each followed by noise that raw deflate reads for a while.
 */
function gzipHeaders(bytes: number): Buffer {
  const noise = idBytes('gzip-noise', bytes);
  for (let at = 0; at + 16 <= bytes; at += 64) noise.set([0x1f, 0x8b, 0x08, 0xe2, 0, 0, 0, 0, 0, 3, 0x12, 0x34], at);
  return noise;
}

const gzipPage = (zlib as { gzipSync: (data: Buffer) => Buffer }).gzipSync(pageOfIds(50));

/**
 * A JSON page of 50 items whose text is French (accented letters, written as UTF-8 or, as Python's json.dumps writes
 * it, as \u00XX): the latin1 views (secret-scrubber.ts) read such text back a byte per character.
 */
function frenchPage(asciiOnly: boolean): Buffer {
  const words = 'déjà été garçon crème brûlée côté église où ça coûte naïve fenêtre hôtel forêt élève château'.split(
    ' ',
  );
  const items = Array.from({ length: 50 }, (_, i) => {
    const pick = idBytes(`fr${i}`, 12);
    return { id: uuid(`fr${i}`), title: [...pick].map((b) => words[b % words.length]).join(' ') };
  });
  const json = JSON.stringify({ items });
  return Buffer.from(
    asciiOnly ? json.replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`) : json,
  );
}

const answers: Answer[] = [
  headersAnswer('the durable bench target: 5 plain header values', plainHeaders),
  bodyAnswer('the durable bench target: body {"ok":true}', Buffer.from('{"ok":true}')),
  headersAnswer('4 id header values (request id, etag, traceparent, x-amz-id-2)', idHeaders),
  bodyAnswer('JSON page of 10 items (UUID, hex etag, base64 cursor)', pageOfIds(10)),
  bodyAnswer('JSON page of 50 items', pageOfIds(50)),
  bodyAnswer('JSON page of 50 items, gzip (undeclared: octet-stream)', gzipPage),
  bodyAnswer(
    'JSON page of 50 items, gzip, base64 in a JSON field',
    Buffer.from(`{"data":"${gzipPage.toString('base64')}"}`),
  ),
  bodyAnswer('JSON page of 50 items with French titles (UTF-8)', frenchPage(false)),
  bodyAnswer('JSON page of 50 items with French titles (\\u00XX, as json.dumps writes them)', frenchPage(true)),
  bodyAnswer('64 KiB of small gzip members one after another (~80 B each)', gzipMembers(64 * 1024)),
  bodyAnswer('hostile: 1 MiB of random binary', idBytes('random', 1024 * 1024)),
  bodyAnswer('hostile: 1 MiB with a gzip header (reserved FLG bits, FHCRC) every 64 bytes', gzipHeaders(1 << 20)),
  bodyAnswer('hostile: 1 MiB of zlib headers, each a chain of stored blocks with a wrong NLEN', storedChains(1 << 20)),
];
// Canary values only. A bearer token's parts are the token and `Bearer <token>`; the shortest sets how short a
// base64/hex run is still decoded and tried.
const tokens = [
  { name: '12-char token', token: 'canary-c4n4r' },
  { name: '40-char token', token: 'canary-0b5e9f2d7a614c389e0f51d2b7c8a4e6f' },
];

function measure(answer: Answer, scrubber: Scrubber, firstSeen: boolean): { ms: number; calls: number } {
  const scrub = (): void => {
    if (firstSeen) forgetDecodeMemo();
    answer.scrub(scrubber);
  };
  for (let i = 0; i < 3; i++) scrub();
  if (firstSeen) forgetDecodeMemo();
  decoderCalls = 0;
  answer.scrub(scrubber);
  const calls = decoderCalls;
  const times: number[] = [];
  const started = performance.now();
  while (times.length < scrubsMax && performance.now() - started < rowMsMax) {
    if (firstSeen) forgetDecodeMemo();
    const t = performance.now();
    answer.scrub(scrubber);
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  return { ms: times[Math.floor(times.length / 2)] ?? Number.NaN, calls };
}

const cpu = cpus()[0]?.model.trim() ?? 'unknown CPU';
console.log(
  `machine: ${cpu}, ${availableParallelism()} vCPU, Node ${process.version}, ` +
    `load average ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}\n`,
);
console.log(
  '### Scrubbing one answer on the event loop (median ms; node:zlib decoder calls per scrub; ' +
    "first seen / seen before: the short inputs' decoder answers forgotten / kept)\n",
);
console.log(
  `| answer | bytes | ${tokens.map((t) => `${t.name}: ms, first seen | calls | ms, seen before | calls`).join(' | ')} |`,
);
console.log(`| --- | ---: | ${tokens.map(() => '---: | ---: | ---: | ---:').join(' | ')} |`);
for (const answer of answers) {
  const cells = tokens.map(({ token }) => {
    const first = measure(answer, secretScrubber(secretParts({ kind: 'bearer', token })), true);
    const again = measure(answer, secretScrubber(secretParts({ kind: 'bearer', token })), false);
    return `${first.ms.toFixed(3)} | ${first.calls} | ${again.ms.toFixed(3)} | ${again.calls}`;
  });
  console.log(`| ${answer.name} | ${answer.bytes} | ${cells.join(' | ')} |`);
}
