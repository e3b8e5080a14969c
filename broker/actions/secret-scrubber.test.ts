import { isUtf8 } from 'node:buffer';
import { createHash, randomBytes } from 'node:crypto';
import {
  brotliCompressSync,
  brotliDecompressSync,
  constants,
  crc32,
  deflateRawSync,
  deflateSync,
  gunzipSync,
  gzipSync,
  inflateRawSync,
} from 'node:zlib';
import fc from 'fast-check';
import { gunzipSync as fflateGunzip, inflateSync as fflateInflate, unzlibSync as fflateUnzlib } from 'fflate';
import { describe, expect, it } from 'vitest';
import { streamingDecoders } from '../testing/agent-decoders.js';
import {
  dynamicBlock,
  fflateStreaming,
  fixedBlock,
  incompleteCodeDeflate,
  mixedStream,
  tailGapBlock,
  type MixedBlock,
} from '../testing/incomplete-code-deflate.js';
import { lenientInflate } from '../testing/lenient-inflate.js';
import { redactionMarker, scrubBytes, scrubText, secretForms, secretParts, secretScrubber } from './secret-scrubber.js';

// Canary values only: none of these is a real credential.
const token = 'canary-Tok3n-7f2e9a';

// ---- Encoders, as a reflecting remote would apply them ----

const hex2 = (b: number) => b.toString(16).padStart(2, '0');
const pctAll = (b: Buffer, upper = false) => [...b].map((x) => `%${upper ? hex2(x).toUpperCase() : hex2(x)}`).join('');
const unitEscape = (s: string, i: number, upper = false) => {
  const h = s.charCodeAt(i).toString(16).padStart(4, '0');
  return `\\u${upper ? h.toUpperCase() : h}`;
};
const jsonAll = (s: string, upper = false) => [...Array(s.length).keys()].map((i) => unitEscape(s, i, upper)).join('');
/** Every other UTF-16 unit \u-escaped, the rest as JSON.stringify writes it. */
const jsonSome = (s: string) =>
  [...Array(s.length).keys()].map((i) => (i % 2 === 0 ? unitEscape(s, i) : JSON.stringify(s[i]).slice(1, -1))).join('');

/**
 * Each form turns (prefix + part + suffix) into what the remote sends back. `glue` symbols of the same alphabet stuck
 * to the front of an encoded blob shift it inside the run the scrubber sees (base64 by 0..3, hex by 0..1 symbols).
 */
const forms: ReadonlyArray<readonly [string, (whole: Buffer, text: string, glue: number) => string | Buffer]> = [
  ['raw', (whole) => whole],
  ['base64', (whole, _text, glue) => `dump: ${'Q'.repeat(glue)}${whole.toString('base64')};`],
  ['base64url', (whole, _text, glue) => `dump: ${'_'.repeat(glue)}${whole.toString('base64url')};`],
  ['base64, JSON-escaped slashes', (whole) => `{"dump":"${whole.toString('base64').replace(/\//g, '\\/')}"}`],
  ['hex lower', (whole, _text, glue) => `<${'f'.repeat(glue % 2)}${whole.toString('hex')}>`],
  ['hex upper', (whole, _text, glue) => `<${'F'.repeat(glue % 2)}${whole.toString('hex').toUpperCase()}>`],
  ['percent, every byte', (whole) => `q=${pctAll(whole, true)}&`],
  ['percent, some bytes', (_whole, text) => `q=${encodeURIComponent(text)}&`],
  ['JSON, every char \\u-escaped', (_whole, text) => `{"echo":"${jsonAll(text)}"}`],
  ['JSON, some chars escaped', (_whole, text) => `{"echo":"${jsonSome(text)}"}`],
  ['percent inside JSON', (whole) => `{"url":"${jsonSome(pctAll(whole))}"}`],
  ['JSON inside JSON', (_whole, text) => JSON.stringify({ body: JSON.stringify({ echo: text }) })],
  [
    'base64 inside percent',
    (whole, _text, glue) => `q=${'A'.repeat(glue)}${encodeURIComponent(whole.toString('base64'))}`,
  ],
  [
    'hex inside base64',
    (whole, _text, glue) => Buffer.from(`0x${'0'.repeat(glue % 2)}${whole.toString('hex')}`).toString('base64'),
  ],
  ['HTML references', (_whole, text) => [...text].map((c) => `&#x${c.codePointAt(0)!.toString(16)};`).join('')],
];

/** The first form in which `part` can still be read from `out`, or undefined. Independent of the scrubber's code. */
function leak(out: Buffer, part: string): string | undefined {
  const p = Buffer.from(part);
  const text = out.toString('latin1');
  const utf8 = out.toString('utf8');
  const lower = text.toLowerCase();
  const strip = (s: string) => s.replace(/=+$/, '');
  const runsOf = (s: string, re: RegExp) => [...s.matchAll(re)].map(([run]) => run);
  const decodes = (run: string, encoding: 'base64' | 'hex' = 'base64') => Buffer.from(run, encoding).includes(p);
  const fromHex = (h: string) => String.fromCharCode(parseInt(h, 16));
  const checks: Array<[string, () => boolean]> = [
    ['raw', () => out.includes(p)],
    ['base64', () => text.includes(strip(p.toString('base64'))) || text.includes(p.toString('base64url'))],
    ['hex', () => lower.includes(p.toString('hex'))],
    ['percent', () => lower.includes(pctAll(p)) || utf8.includes(encodeURIComponent(part))],
    ['JSON', () => utf8.includes(jsonAll(part)) || utf8.includes(jsonAll(part, true)) || utf8.includes(jsonSome(part))],
    [
      'decoded base64 run',
      () => runsOf(text, /[A-Za-z0-9+/_-]{2,}/g).some((run) => [0, 1, 2, 3].some((k) => decodes(run.slice(k)))),
    ],
    [
      'decoded hex run',
      () => runsOf(text, /[0-9a-fA-F]{2,}/g).some((run) => [0, 1].some((k) => decodes(run.slice(k), 'hex'))),
    ],
    [
      'decoded percent',
      () =>
        Buffer.from(
          text.replace(/%([0-9a-fA-F]{2})/g, (_m, h: string) => fromHex(h)),
          'latin1',
        ).includes(p),
    ],
    [
      'decoded JSON',
      () => Buffer.from(utf8.replace(/\\u([0-9a-fA-F]{4})/g, (_m, h: string) => fromHex(h))).includes(p),
    ],
  ];
  return checks.find(([, found]) => found())?.[0];
}

const char = fc.oneof(
  { weight: 12, arbitrary: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)) },
  { weight: 1, arbitrary: fc.constantFrom('é', 'ß', '€', '日', '😀') },
);
const partArb = fc.string({ unit: char, minLength: 4, maxLength: 64 });
const aroundArb = fc.string({ unit: char, maxLength: 40 });
const runs = { numRuns: 200 };

/** What `read` says, false when it throws (the agent's decoder refusing what it was given). */
function orFalse(read: () => boolean): boolean {
  try {
    return read();
  } catch {
    return false;
  }
}

describe('the secret parts of each credential kind', () => {
  const basic64 = Buffer.from('ops:canary-pw-03').toString('base64');
  const line = (c: string) => c.repeat(70);
  const armour = (body: string) => `-----BEGIN OPENSSH PRIVATE KEY-----\n${body}\n-----END OPENSSH PRIVATE KEY-----\n`;
  const pem = armour(`${line('A')}\n${line('b')}\r\n${line('+')}\nc2hvcnQ=`);
  it.each([
    ['bearer: the token and the header value', { kind: 'bearer', token }, [token, `Bearer ${token}`]],
    [
      'header: the bare secret and the rendered template',
      { kind: 'header', header: 'Authorization', value: 'token canary-hdr-02', secret: 'canary-hdr-02' },
      ['canary-hdr-02', 'token canary-hdr-02'],
    ],
    [
      'basic: the password, user:password, its base64 and the header value',
      { kind: 'basic', user: 'ops', password: 'canary-pw-03' },
      ['canary-pw-03', 'ops:canary-pw-03', basic64, `Basic ${basic64}`],
    ],
    [
      'query: the value and param=value',
      { kind: 'query', param: 'key', value: 'canary-q-04' },
      ['canary-q-04', 'key=canary-q-04'],
    ],
    [
      'ssh_key: each base64 body line of 16+ chars',
      { kind: 'ssh_key', privateKey: Buffer.from(pem) },
      [line('A'), line('b'), line('+')],
    ],
    [
      'parts under 4 bytes are dropped, duplicates once',
      { kind: 'header', header: 'X-K', value: 'abc', secret: 'abc' },
      [],
    ],
    ['4 bytes of UTF-8 are enough', { kind: 'header', header: 'X-K', value: 'éé', secret: 'éé' }, ['éé']],
  ] as const)('%s', (_what, secret, parts) => {
    expect(secretParts(secret)).toEqual(parts);
  });

  it('does not count the basic user name alone as a part', () => {
    expect(secretParts({ kind: 'basic', user: 'operator', password: 'canary-pw-05' })).not.toContain('operator');
  });
});

describe('when a remote reflects a part in some form', () => {
  it.each(forms)('redacts it in form: %s, at every alignment, anywhere in the input', (_name, encode) => {
    fc.assert(
      fc.property(partArb, aroundArb, aroundArb, fc.nat(2), fc.nat(3), (part, prefix, suffix, align, glue) => {
        // Pad the prefix so the part starts at byte offset `align` mod 3 of the encoded whole.
        const padded = 'x'.repeat((align - (Buffer.byteLength(prefix) % 3) + 3) % 3) + prefix;
        const text = padded + part + suffix;
        const reflected = encode(Buffer.from(text), text, glue);
        const out = secretScrubber([part]).scrub(Buffer.isBuffer(reflected) ? reflected : Buffer.from(reflected));
        expect(out.redacted).toBe(true);
        expect(leak(out.bytes, part)).toBeUndefined();
      }),
      runs,
    );
  });

  it('redacts a base64-encoded request-header dump at each byte offset', () => {
    const scrubber = secretScrubber(secretParts({ kind: 'bearer', token }));
    for (let offset = 0; offset < 3; offset++) {
      const dump = `${'h'.repeat(offset)}GET / HTTP/1.1\r\nAuthorization: Bearer ${token}\r\nAccept: */*\r\n`;
      const out = scrubber.scrub(Buffer.from(JSON.stringify({ headers: Buffer.from(dump).toString('base64') })));
      expect(out.bytes.toString()).toBe(`{"headers":"${redactionMarker}"}`);
    }
  });

  it('redacts base64 wrapped at any line length (base64 -w)', () => {
    const body = Buffer.from(`x${token}y`).toString('base64');
    const wrapped = body.match(/.{1,7}/g)!.join('\n');
    const out = secretScrubber([token]).scrub(Buffer.from(`${wrapped}\n`));
    expect(out.bytes.toString()).toBe(`${redactionMarker}\n`);
  });

  it('redacts the bare secret of a header template and an SSH key line in base64', () => {
    const parts = secretParts({
      kind: 'header',
      header: 'Authorization',
      value: 'token canary-hdr-06',
      secret: 'canary-hdr-06',
    });
    expect(secretScrubber(parts).scrub(Buffer.from('got canary-hdr-06!')).bytes.toString()).toBe(
      `got ${redactionMarker}!`,
    );
    const keyLine = 'b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW';
    const pem = `-----BEGIN OPENSSH PRIVATE KEY-----\n${keyLine}\n-----END OPENSSH PRIVATE KEY-----\n`;
    const sshParts = secretParts({ kind: 'ssh_key', privateKey: Buffer.from(pem) });
    const out = secretScrubber(sshParts).scrub(Buffer.from(`stdout: ${Buffer.from(keyLine).toString('base64')}`));
    expect(leak(out.bytes, keyLine)).toBeUndefined();
  });

  it('finds a match split across chunk boundaries once the chunks are joined', () => {
    const body = Buffer.from(Buffer.from(`Authorization: Bearer ${token}`).toString('base64'));
    const chunks = [body.subarray(0, 33), body.subarray(33, 37), body.subarray(37)];
    expect(chunks.some((c) => leak(c, token) !== undefined)).toBe(false); // no chunk holds the token on its own
    const out = secretScrubber([token]).scrub(Buffer.concat(chunks));
    expect(out.bytes.toString()).toBe(redactionMarker);
  });
});

describe('when the output is cut', () => {
  const scrubber = secretScrubber([token]);

  it('replaces a part that straddles the cut by the marker, never a prefix of it', () => {
    for (let into = 1; into < token.length; into++) {
      const out = scrubber.scrub(Buffer.from(`${'x'.repeat(100)}${token}${'y'.repeat(100)}`), 100 + into);
      expect(out.bytes.toString()).toBe(`${'x'.repeat(100)}${redactionMarker}`);
      expect(out).toMatchObject({ redacted: true, consumedBytes: 100 + token.length });
    }
  });

  it('replaces a whole base64 run that starts before the cut', () => {
    const input = Buffer.from(`id: ${Buffer.from(`....${token}....`).toString('base64')} end`);
    const out = scrubber.scrub(input, 10);
    expect(out.bytes.toString()).toBe(`id: ${redactionMarker}`);
  });

  it('cuts plainly when no range starts before the cut', () => {
    const input = Buffer.from(`${'x'.repeat(50)} ${token}`);
    expect(scrubber.scrub(input, 50)).toEqual({
      bytes: Buffer.from('x'.repeat(50)),
      redacted: false,
      consumedBytes: 50,
    });
  });

  it('cuts text after scrubbing: a padded header never shows the secret minus its last char', () => {
    const secret = 'canary-query-secret-42';
    const query = secretScrubber(secretParts({ kind: 'query', param: 'key', value: secret }));
    for (let missing = 1; missing < secret.length; missing++) {
      const value = 'p'.repeat(2048 - (secret.length - missing)) + secret;
      const out = query.scrubText(value, 2048);
      expect(out.redacted).toBe(true);
      expect(out.text.length).toBeLessThanOrEqual(2048);
      expect(out.text).not.toContain(secret.slice(0, 4));
    }
  });
});

describe('when no part is present', () => {
  it('returns the input itself and says nothing was redacted', () => {
    const scrubber = secretScrubber([token, 'canary-pw-0007']);
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 400 }), aroundArb, (bytes, text) => {
        const input = Buffer.from(bytes);
        const out = scrubber.scrub(input);
        expect(out.bytes).toBe(input);
        expect(out.redacted).toBe(false);
        const t = scrubber.scrubText(text);
        expect(t).toEqual({ text, redacted: false });
      }),
      runs,
    );
  });

  it('ignores parts shorter than 4 bytes', () => {
    const scrubber = secretScrubber(['abc', 'é', '']);
    const input = Buffer.from('abc é YWJj 616263 %61bc');
    expect(scrubber.scrub(input)).toEqual({ bytes: input, redacted: false, consumedBytes: input.length });
    expect(scrubber.lookaheadBytes).toBe(0);
  });
});

describe('the redaction ranges', () => {
  it('are sorted and merged, in input coordinates', () => {
    const scrubber = secretScrubber(['SECRET']);
    expect(scrubber.ranges(Buffer.from('a SECRETSECRET b %53ECRET'))).toEqual([
      [2, 14],
      [17, 25],
    ]);
  });

  it('cover enough lookahead for a part escaped twice', () => {
    const scrubber = secretScrubber([token]);
    const twice = JSON.stringify(JSON.stringify(jsonAll(token))).slice(1, -1);
    expect(twice.length).toBeLessThanOrEqual(scrubber.lookaheadBytes);
  });
});

describe('the first API (kept until callers move)', () => {
  it('scrubs every form of a basic credential with secretForms / scrubBytes / scrubText', () => {
    const parts = secretForms({ kind: 'basic', user: 'u', password: 'hunter22' });
    const basic = Buffer.from('u:hunter22').toString('base64');
    expect(scrubBytes(Buffer.from(`a hunter22 b ${basic} c ${encodeURIComponent('u:hunter22')}`), parts)).toEqual({
      bytes: Buffer.from(`a ${redactionMarker} b ${redactionMarker} c u%3A${redactionMarker}`),
      redacted: true,
    });
    expect(scrubText('x aHVudGVyMjI= y', parts)).toEqual({ text: `x ${redactionMarker} y`, redacted: true });
  });
});

describe('on a 1 MiB body', () => {
  it('scrubs mixed text, JSON escapes, percent and base64 in bounded time', () => {
    const scrubber = secretScrubber(secretParts({ kind: 'bearer', token }));
    const filler = 'lorem "ipsum" dolor \\n sit %20 amet &amp; 0xdeadbeef aGVsbG8gd29ybGQ= a+b\n';
    const hidden = `{"dump":"${Buffer.from(`Authorization: Bearer ${token}`).toString('base64')}"}`;
    const body = Buffer.from(filler.repeat(Math.ceil((1 << 20) / filler.length)) + hidden);
    const started = performance.now();
    const out = scrubber.scrub(body);
    const elapsedMs = performance.now() - started;
    expect(out.redacted).toBe(true);
    expect(leak(out.bytes.subarray(-200), token)).toBeUndefined();
    // ~0.9-1.5 s on the 2-core AMD VM (2026-12-05; every line's runs and escapes are looked into for compressed data,
    // docs/benchmarks.md "Scrubbing answers"), so a bound of 1.5 s failed under load. A quadratic regression on a megabyte takes
    // minutes: the bound catches that, not a slow box.
    expect(elapsedMs).toBeLessThan(10_000);
  });
});

describe('scrubAsync and rangesAsync (the same scrub in slices that give the event loop turns)', () => {
  /** What the remote wraps a reflected form in: nothing, or compression it does not declare (compressed-views.ts). */
  const wrappers: ReadonlyArray<readonly [string, (b: Buffer) => Buffer]> = [
    ['as is', (b) => b],
    ['gzip', (b) => gzipSync(b)],
    ['zlib', (b) => deflateSync(b)],
    ['raw deflate', (b) => deflateRawSync(b)],
    ['brotli', (b) => brotliCompressSync(b)],
    ['base64 of gzip', (b) => Buffer.from(gzipSync(b).toString('base64'))],
    ['gzip after noise, tail cut', (b) => Buffer.concat([Buffer.from([7, 0, 200]), gzipSync(b).subarray(0, -6)])],
    ['zstd magic (uncheckable)', (b) => Buffer.concat([Buffer.from([0x28, 0xb5, 0x2f, 0xfd]), b])],
  ];
  const same = async (parts: readonly string[], input: Buffer, limit: number | undefined): Promise<void> => {
    const scrubber = secretScrubber(parts);
    const sync = scrubber.scrub(input, limit);
    const sliced = await scrubber.scrubAsync(input, limit);
    expect(sliced.bytes.equals(sync.bytes)).toBe(true);
    expect({ redacted: sliced.redacted, consumed: sliced.consumedBytes }).toEqual({
      redacted: sync.redacted,
      consumed: sync.consumedBytes,
    });
    expect(await scrubber.rangesAsync(input)).toEqual(scrubber.ranges(input));
  };

  it('give exactly what scrub and ranges give, for every form of a part, wrapped or not, at any cut', async () => {
    await fc.assert(
      fc.asyncProperty(
        partArb,
        aroundArb,
        aroundArb,
        fc.constantFrom(...forms),
        fc.constantFrom(...wrappers),
        fc.nat(3),
        fc.option(fc.nat(600), { nil: undefined }),
        async (part, prefix, suffix, [, encode], [, wrap], glue, limit) => {
          const text = prefix + part + suffix;
          const reflected = encode(Buffer.from(text), text, glue);
          const input = wrap(Buffer.isBuffer(reflected) ? reflected : Buffer.from(reflected));
          await same([part, `Bearer ${part}`], input, limit);
        },
      ),
      runs,
    );
  });

  it('give exactly what scrub gives on random bytes (noise the decoders are tried on)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.uint8Array({ maxLength: 2000 }),
        partArb,
        fc.option(fc.nat(2000), { nil: undefined }),
        (bytes, part, limit) => same([part], Buffer.from(bytes), limit),
      ),
      runs,
    );
  });

  it('give the same result when large scrubs run at once and their slices interleave', async () => {
    const scrubber = secretScrubber(secretParts({ kind: 'bearer', token }));
    const echo = Buffer.from(`Authorization: Bearer ${token}\r\n`);
    const inputs = [0, 1, 2, 3].map((k) => {
      // Random binary with zlib look-alikes (decoder calls) and the token raw, in base64 and gzipped, at k's offsets.
      const noise = randomBytes(192 * 1024);
      for (let i = k; i + 1 < noise.length; i += 97) [noise[i], noise[i + 1]] = [0x78, 0x9c];
      return Buffer.concat([
        noise.subarray(0, 5000 * k),
        echo,
        Buffer.from(echo.toString('base64')),
        gzipSync(echo),
        noise,
      ]);
    });
    let turns = 0;
    const ticker = setInterval(() => (turns += 1), 1);
    const sliced = await Promise.all(inputs.map((input) => scrubber.scrubAsync(input, 150 * 1024)));
    clearInterval(ticker);
    // The loop had turns while they ran (they did run in slices), and each result is the one-go result.
    expect(turns).toBeGreaterThan(0);
    inputs.forEach((input, k) => {
      const sync = scrubber.scrub(input, 150 * 1024);
      expect(sliced[k]!.bytes.equals(sync.bytes)).toBe(true);
      expect([sliced[k]!.redacted, sliced[k]!.consumedBytes]).toEqual([sync.redacted, sync.consumedBytes]);
      expect(leak(sliced[k]!.bytes, token)).toBeUndefined();
    });
  });
});

/** Data whose first bytes read as text is not tried without a signature (docs/http-channel.md, what stays out). */
const startsLikeText = (b: Buffer): boolean => {
  const probe = b.subarray(0, 32);
  if (probe.some((c) => (c < 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) || c === 0x7f)) return false;
  return [0, 1, 2, 3].some((cut) => isUtf8(probe.subarray(0, probe.length - cut)));
};

describe('forms security review #206 found missed', () => {
  /** A random hex token (canary: random bytes, never a credential), lower-case as most APIs issue them. */
  const hexToken = fc.uint8Array({ minLength: 10, maxLength: 40 }).map((b) => Buffer.from(b).toString('hex'));
  const streaming = {
    br: (b: Buffer) => brotliDecompressSync(b, { finishFlush: constants.BROTLI_OPERATION_FLUSH }),
    raw: (b: Buffer) => inflateRawSync(b, { finishFlush: constants.Z_SYNC_FLUSH }),
  };
  /** Whether an agent gets `part` back by decoding a base64 or hex value of `out` and decompressing it (not the scrubber's code). */
  const decompresses = (out: Buffer, part: string): boolean => {
    const text = out.toString('latin1');
    const blobs = [
      ...[...text.matchAll(/[A-Za-z0-9+/]{4,}={0,2}/g)].map(([v]) => Buffer.from(v, 'base64')),
      ...[...text.matchAll(/(?:[0-9a-fA-F]{2}){3,}/g)].map(([v]) => Buffer.from(v, 'hex')),
    ];
    return blobs.some((blob) =>
      Object.values(streaming).some((decode) => {
        try {
          return decode(blob).includes(part);
        } catch {
          return false;
        }
      }),
    );
  };
  const compressors = [
    ['brotli', (t: string) => brotliCompressSync(t)],
    ['brotli, quality 5', (t: string) => brotliCompressSync(t, { params: { [constants.BROTLI_PARAM_QUALITY]: 5 } })],
    ['raw deflate', (t: string) => deflateRawSync(t, { level: 9 })],
  ] as const;
  const wrappers = [
    ['alone', (v: string) => v],
    ['in JSON', (v: string) => JSON.stringify({ kind: 'blob', data: v })],
    ['after key= in a form', (v: string) => `id=7&auth=${v}&ok=1`],
  ] as const;

  /**
   * The attack for tokens compressed by `compress`, sent as base64 or hex inside one of `wraps`: an agent decompresses
   * the token out of what the remote sent, and not out of what the scrubber delivers; `kept(wrap)` is delivered too.
   */
  const redactsCompressed = (
    compress: (token: string) => Buffer,
    wraps: ReadonlyArray<readonly [string, (v: string) => string]>,
    numRuns: number,
    kept?: (wrap: (v: string) => string) => string,
  ): void =>
    fc.assert(
      fc.property(
        hexToken,
        fc.constantFrom(...wraps),
        fc.constantFrom('base64', 'hex'),
        (token, [, wrap], encoding) => {
          const stream = compress(token);
          // Data whose first bytes read as text is not tried without a signature (compressed-views.ts): fixed-Huffman
          // deflate of digits can (~1 in 1,000 here); said so in the scrubber's "What stays out".
          fc.pre(!startsLikeText(stream));
          const body = Buffer.from(wrap(stream.toString(encoding)));
          expect(decompresses(body, token)).toBe(true);
          const out = secretScrubber(secretParts({ kind: 'bearer', token })).scrub(body);
          expect(out.redacted).toBe(true);
          expect(decompresses(out.bytes, token)).toBe(false);
          if (kept !== undefined) expect(out.bytes.toString()).toContain(kept(wrap));
        },
      ),
      { numRuns },
    );

  it.each(compressors)(
    'redacts base64 and hex of %s of a hex token (compressed shorter than itself), alone, in JSON, after key=',
    (_name, compress) => redactsCompressed(compress, wrappers, 100),
  );

  /** A stored deflate block holding `data` with a wrong NLEN (a lenient decoder reads it, zlib refuses it). */
  const storedWrongNlen = (data: Buffer, final: boolean): Buffer =>
    Buffer.concat([Buffer.from([final ? 1 : 0, data.length & 0xff, data.length >> 8, 0x12, 0x34]), data]);
  /** zlib's header and a trailer nobody checks around raw deflate data. */
  const zlibAround = (deflate: Buffer): Buffer => Buffer.concat([Buffer.from([0x78, 0x01]), deflate, Buffer.alloc(4)]);
  /** What the agent gets: the outer stream decoded leniently (or as brotli), then raw deflate or brotli in its output. */
  const twiceDecoded = (blob: Buffer, part: string): boolean => {
    const decode = (fn: () => Buffer): Buffer | undefined => {
      try {
        return fn();
      } catch {
        return undefined;
      }
    };
    const outers = [
      decode(() => lenientInflate('raw', blob)),
      decode(() => lenientInflate('zlib', blob)),
      decode(() => streaming.br(blob)),
    ];
    return outers.some(
      (outer) =>
        outer !== undefined &&
        [...outer.keys()].some((at) =>
          Object.values(streaming).some((inner) => decode(() => inner(outer.subarray(at)))?.includes(part) === true),
        ),
    );
  };
  /** The blobs an agent reads out of what it received: the bytes, and each base64 or hex value in them. */
  const blobsIn = (out: Buffer): Buffer[] => {
    const text = out.toString('latin1');
    return [
      out,
      ...[...text.matchAll(/[A-Za-z0-9+/]{4,}={0,2}/g)].map(([v]) => Buffer.from(v, 'base64')),
      ...[...text.matchAll(/(?:[0-9a-fA-F]{2}){3,}/g)].map(([v]) => Buffer.from(v, 'hex')),
    ];
  };
  // Compressed twice, the stream in the middle can be shorter than the token (raw deflate of a 40-hex token is ~38
  // bytes): output shorter than a part was once not looked into. And a stored block a lenient decoder reads (its NLEN
  // wrong) holds its data as it is, but starting where no data starts: raw deflate there was never tried. Behind a
  // zlib header or after empty blocks brotli is tried there where a compressed meta-block may write (compressed-
  // views.ts, tryPlace: noise opens many such blocks, and uncompressed meta-blocks copy the whole of it).
  const raw = ['raw deflate', (t: string) => deflateRawSync(t, { level: 9 })] as const;
  const brotli = ['brotli', (t: string) => brotliCompressSync(t)] as const;
  const inners = [raw, brotli] as const;
  const outers = [
    ['raw deflate', (b: Buffer) => deflateRawSync(b, { level: 9 }), [raw, brotli]],
    ['brotli', (b: Buffer) => brotliCompressSync(b), [raw, brotli]],
    ['a final stored block with a wrong NLEN', (b: Buffer) => storedWrongNlen(b, true), [raw, brotli]],
    [
      'a stored block with a wrong NLEN, then an empty one',
      (b: Buffer) => Buffer.concat([storedWrongNlen(b, false), Buffer.from([0x03, 0x00])]),
      [raw, brotli],
    ],
    [
      'zlib of a final stored block with a wrong NLEN',
      (b: Buffer) => zlibAround(storedWrongNlen(b, true)),
      [raw, brotli],
    ],
    [
      'zlib of two stored blocks, the second one this',
      (b: Buffer) =>
        zlibAround(
          Buffer.concat([storedWrongNlen(Buffer.from('a few words first '), false), storedWrongNlen(b, true)]),
        ),
      [raw, brotli],
    ],
  ] as const;
  it.each(
    outers.flatMap(([outer, wrap, inners]) =>
      inners.map(([inner, compress]) => [`${inner} inside ${outer}`, wrap, compress] as const),
    ),
  )('redacts a hex token in %s, as bytes, base64 or hex', (_name, wrap, compress) =>
    fc.assert(
      fc.property(hexToken, fc.constantFrom('bytes', 'base64', 'hex'), (token, encoding) => {
        const inner = compress(token);
        // Data whose first bytes read as text is not tried without a signature (see redactsCompressed).
        fc.pre(!startsLikeText(inner));
        const stream = wrap(inner);
        const body = encoding === 'bytes' ? stream : Buffer.from(JSON.stringify({ data: stream.toString(encoding) }));
        // The attack is real: the agent decodes the token out of what the remote sent.
        expect(blobsIn(body).some((blob) => twiceDecoded(blob, token))).toBe(true);
        const out = secretScrubber(secretParts({ kind: 'bearer', token })).scrub(body);
        expect(out.redacted).toBe(true);
        expect(blobsIn(out.bytes).some((blob) => twiceDecoded(blob, token))).toBe(false);
      }),
      { numRuns: 25 },
    ),
  );

  // Percent-encoded, compressed data was tried only where the decoded view starts: after `q=` in a query string or a
  // form it went through (helper-213's review). Each run of escapes after plain bytes is a place of its own now.
  const behindKey = [
    ['a query string', (v: string) => `{"next":"https://api.example/items?page=2&q=${v}"}`],
    ['a form body', (v: string) => `id=7&q=${v}&ok=1`],
  ] as const;
  it.each(
    inners.flatMap(([inner, compress]) => behindKey.map(([where, put]) => [inner, where, compress, put] as const)),
  )('redacts %s of a hex token, percent-encoded after `q=` in %s', (_inner, _where, compress, put) =>
    fc.assert(
      fc.property(hexToken, fc.boolean(), (token, upper) => {
        const stream = compress(token);
        fc.pre(!startsLikeText(stream));
        const body = Buffer.from(put(pctAll(stream, upper)));
        /** The agent: the value after `q=`, percent-decoded as bytes, decompressed. */
        const agentGets = (out: Buffer): boolean => {
          const value = /q=([^&"]*)/.exec(out.toString('latin1'))?.[1] ?? '';
          const bytes = Buffer.from(
            value.replace(/%([0-9a-fA-F]{2})/g, (_, h: string) => String.fromCharCode(parseInt(h, 16))),
            'latin1',
          );
          return Object.values(streaming).some((decode) => {
            try {
              return decode(bytes).includes(token);
            } catch {
              return false;
            }
          });
        };
        expect(agentGets(body)).toBe(true);
        const out = secretScrubber(secretParts({ kind: 'bearer', token })).scrub(body);
        expect(out.redacted).toBe(true);
        expect(agentGets(out.bytes)).toBe(false);
      }),
      { numRuns: 25 },
    ),
  );

  /** Deterministic ids (sha256 of a counter): a page of an honest JSON API's items, each a UUID, a hex etag and a cursor. */
  const idHex = (seed: string, bytes: number) =>
    createHash('sha256')
      .update(seed)
      .digest('hex')
      .slice(0, bytes * 2);
  const pageOfIds = Array.from({ length: 50 }, (_, i) => ({
    id: idHex(`id${i}`, 16).replace(/^(.{8})(.{4})(.{4})(.{4})/, '$1-$2-$3-$4-'),
    etag: idHex(`etag${i}`, 16),
    cursor: Buffer.from(idHex(`cursor${i}`, 18), 'hex').toString('base64'),
  }));
  const prose = Array.from({ length: 70 }, (_, i) => `word${i}`).join(' ');
  const behind = [
    ['after a JSON page of 50 items of ids', (v: string) => JSON.stringify({ data: pageOfIds, next: v })],
    ['after 70 words of prose', (v: string) => `${prose} ${v}`],
    // `hello` and the value make one run (a line break is read past, as in wrapped base64): an agent reads the line.
    ['on the line after a word', (v: string) => `status: ok\nhello\n${v}`],
  ] as const;

  // Places tried without a signature were once bounded per answer (256 runs, 64 short ones): the ids or words before
  // the stream spent the bound and it went through. Every place is tried now; distinct places are what the budget counts.
  it.each(compressors)(
    'redacts base64 and hex of %s of a hex token behind many ids or words, or a line',
    (_name, compress) =>
      // Only the run that holds the stream: the ids and words before it are delivered as they are (a line break is
      // read past inside a run, so there the run starts on the line before).
      redactsCompressed(compress, behind, 15, (wrap) => wrap('').slice(0, wrap === behind[2][1] ? 8 : 200)),
  );

  it('redacts a part whose ASCII letters the remote changed the case of, at random, anywhere in text', () => {
    fc.assert(
      fc.property(
        fc.oneof(hexToken, partArb),
        aroundArb,
        aroundArb,
        fc.infiniteStream(fc.boolean()),
        (part, prefix, suffix, flips) => {
          const flip = (c: string) =>
            flips.next().value ? (c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase()) : c;
          // ASCII letters only: a non-ASCII character's case is the remote's business, not a byte-for-byte echo.
          const echoed = [...part].map((c) => (/[A-Za-z]/.test(c) ? flip(c) : c)).join('');
          const out = secretScrubber([part]).scrub(Buffer.from(`${prefix}${echoed}${suffix}`));
          expect(out.redacted).toBe(true);
          expect(
            out.bytes.toString('latin1').toLowerCase().includes(Buffer.from(part).toString('latin1').toLowerCase()),
          ).toBe(false);
        },
      ),
      runs,
    );
  });

  it('redacts an upper-cased hex token inside base64 and percent-encoding too', () => {
    const token = 'f3a7c21d4e8b6a0f1c2d3e4f5a6b7c8d9e0f1a2b'; // canary
    const scrubber = secretScrubber(secretParts({ kind: 'bearer', token }));
    for (const body of [
      `auth=${token.toUpperCase()}`,
      Buffer.from(`Authorization: Bearer ${token.toUpperCase()}`).toString('base64'),
      `q=${pctAll(Buffer.from(token.toUpperCase()))}`,
    ]) {
      const out = scrubber.scrub(Buffer.from(body));
      expect(out.redacted).toBe(true);
      expect(leak(out.bytes, token.toUpperCase())).toBeUndefined();
    }
  });

  /** Node's Buffer as JSON, and the same array written with spaces, or wrapped. */
  const decimalForms = [
    ['Buffer JSON', (b: Buffer) => JSON.stringify(b)],
    ['an array with spaces', (b: Buffer) => `bytes: [${[...b].join(', ')}]`],
    ['an array wrapped over lines', (b: Buffer) => `[\n  ${[...b].join(',\n  ')}\n]`],
  ] as const;
  /** Whether an agent reading every decimal array of `out` as bytes gets `part` (not the scrubber's code). */
  const inDecimalArrays = (out: Buffer, part: string): boolean =>
    [...out.toString('latin1').matchAll(/\d{1,3}(?:\s*,\s*\d{1,3})+/g)].some(([run]) =>
      Buffer.from(run.split(',').map((n) => Number(n.trim()))).includes(Buffer.from(part)),
    );

  it.each(decimalForms)('redacts a part written as decimal bytes: %s', (_name, write) => {
    fc.assert(
      fc.property(partArb, aroundArb, aroundArb, (part, prefix, suffix) => {
        const body = Buffer.from(`{"echo":${write(Buffer.from(prefix + part + suffix))}}`);
        expect(inDecimalArrays(body, part)).toBe(true);
        const out = secretScrubber([part]).scrub(body);
        expect(out.redacted).toBe(true);
        expect(inDecimalArrays(out.bytes, part)).toBe(false);
      }),
      runs,
    );
  });

  it('redacts brotli of a hex token written as Buffer JSON (decimal bytes, compressed)', () => {
    fc.assert(
      fc.property(hexToken, (token) => {
        const body = Buffer.from(JSON.stringify({ blob: brotliCompressSync(token) }));
        const out = secretScrubber(secretParts({ kind: 'bearer', token })).scrub(body);
        expect(out.redacted).toBe(true);
        const arrays = [...out.bytes.toString().matchAll(/\[[\d,]+\]/g)].map(([a]) =>
          Buffer.from(JSON.parse(a) as number[]),
        );
        expect(arrays.some((a) => streaming.br(a).includes(token))).toBe(false);
      }),
      { numRuns: 100 },
    );
  });

  it('reads no other numbers as bytes: values past 255 (not wrapped), decimals, fewer values, no commas', () => {
    const scrubber = secretScrubber(['9f3a']);
    // '9f3a' is 57, 102, 51, 97 (353 is 97 plus 256); none of these is that array.
    for (const body of ['[57, 102, 51, 353]', '[57, 102, 51, 97.5]', '[57, 102, 51]', '57 102 51 97']) {
      expect(scrubber.scrub(Buffer.from(body)).redacted, body).toBe(false);
    }
    expect(scrubber.scrub(Buffer.from('[7, 57, 102, 51, 97, 300]')).redacted).toBe(true);
  });
});

// fflate builds a Huffman code whatever its gaps and decodes every code that is there; zlib refuses an incomplete code
// ("invalid literal/lengths set"). A remote that compresses the token with such a code (broker/testing/incomplete-code-
// deflate.ts) gave it to an agent using fflate while the scrubber, which asked zlib, saw nothing.
describe('a Huffman code zlib refuses and fflate reads', () => {
  /** One block of `data`, every byte and end-of-block coded in 4 or more bits, the header saying 288 and 32 codes. */
  const tooManyCodes = (data: Buffer): Buffer => {
    const symbols = [...new Set(data), 256];
    const length = Math.max(4, Math.ceil(Math.log2(symbols.length)));
    const literalCode = Object.fromEntries(symbols.map((symbol) => [symbol, length]));
    return dynamicBlock({
      literalCodes: 288,
      distanceCodes: 32,
      lengthsCode: { 0: 1, [length]: 1 },
      lengths: Array.from({ length: 320 }, (_, symbol) => literalCode[symbol] ?? 0),
      literalCode,
      data: [...data, 256],
    });
  };
  /** A final stored block holding `data` with a wrong NLEN (fflate reads it, zlib refuses it). */
  const storedWrongNlen = (data: Buffer): Buffer =>
    Buffer.concat([Buffer.from([1, data.length & 0xff, data.length >> 8, 0x12, 0x34]), data]);
  const hexToken = fc.uint8Array({ minLength: 10, maxLength: 40 }).map((b) => Buffer.from(b).toString('hex'));
  const gzipAround = (deflate: Buffer, output: Buffer): Buffer => {
    const trailer = Buffer.alloc(8);
    trailer.writeUInt32LE(crc32(output), 0);
    trailer.writeUInt32LE(output.length, 4);
    return Buffer.concat([Buffer.from([0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 0xff]), deflate, trailer]);
  };
  const innerDeflate = (t: string): Buffer => deflateRawSync(t, { level: 9 });
  const ofRawDeflate = (t: string): Buffer => incompleteCodeDeflate(innerDeflate(t));
  const shapes: ReadonlyArray<readonly [string, (token: string) => Buffer]> = [
    ['raw deflate', (t) => incompleteCodeDeflate(Buffer.from(t))],
    [
      'raw deflate after a block zlib reads',
      (t) =>
        Buffer.concat([
          deflateRawSync('{"page":1,"items":', { finishFlush: constants.Z_FULL_FLUSH }),
          incompleteCodeDeflate(Buffer.from(t)),
        ]),
    ],
    ['zlib', (t) => Buffer.concat([Buffer.from([0x78, 0x01]), incompleteCodeDeflate(Buffer.from(t)), Buffer.alloc(4)])],
    ['a gzip member', (t) => gzipAround(incompleteCodeDeflate(Buffer.from(t)), Buffer.from(t))],
    ['raw deflate of raw deflate', ofRawDeflate],
    ['raw deflate inside raw deflate', (t) => deflateRawSync(incompleteCodeDeflate(Buffer.from(t)), { level: 9 })],
    ['raw deflate without an end-of-block code', (t) => incompleteCodeDeflate(Buffer.from(t), { endOfBlock: false })],
    ['raw deflate declaring 288 literal/length and 32 distance codes', (t) => tooManyCodes(Buffer.from(t))],
    [
      // fflate reads the last block's gap in the code lengths' code from bits past the input's end, as zeros.
      'raw deflate whose last character comes from a gap in the last bits',
      (t) =>
        Buffer.concat([
          deflateRawSync(t.slice(0, -1), { finishFlush: constants.Z_FULL_FLUSH }),
          tailGapBlock(t.charCodeAt(t.length - 1)),
        ]),
    ],
    // Its bytes lie where no data starts: a place of its own, decoded without mending NLEN, but the code still read.
    [
      'a final stored block with a wrong NLEN holding it',
      (t) => storedWrongNlen(incompleteCodeDeflate(Buffer.from(t))),
    ],
    [
      'a stored block with a wrong NLEN holding it, after an empty stored block',
      (t) =>
        Buffer.concat([Buffer.from([0, 0, 0, 0xff, 0xff]), storedWrongNlen(incompleteCodeDeflate(Buffer.from(t)))]),
    ],
    [
      'zlib of a final stored block with a wrong NLEN holding it',
      (t) =>
        Buffer.concat([
          Buffer.from([0x78, 0x01]),
          storedWrongNlen(incompleteCodeDeflate(Buffer.from(t))),
          Buffer.alloc(4),
        ]),
    ],
  ];
  /** The agent: each blob it reads out of the answer, decoded by fflate, once or twice (raw deflate inside). */
  const agentGets = (out: Buffer, token: string): boolean => {
    const text = out.toString('latin1');
    const blobs = [
      out,
      ...[...text.matchAll(/[A-Za-z0-9+/]{4,}={0,2}/g)].map(([v]) => Buffer.from(v, 'base64')),
      ...[...text.matchAll(/(?:[0-9a-fA-F]{2}){3,}/g)].map(([v]) => Buffer.from(v, 'hex')),
    ];
    const decoded = (blob: Uint8Array): Buffer[] =>
      [fflateInflate, fflateUnzlib, fflateGunzip, fflateStreaming].flatMap((decode) => {
        try {
          return [Buffer.from(decode(blob))];
        } catch {
          return [];
        }
      });
    return blobs.some((blob) =>
      decoded(blob).some((once) => once.includes(token) || decoded(once).some((twice) => twice.includes(token))),
    );
  };
  it.each(shapes)('redacts a hex token in %s, as bytes, base64 or hex', (_name, compress) =>
    fc.assert(
      fc.property(hexToken, fc.constantFrom('bytes', 'base64', 'hex'), (token, encoding) => {
        const stream = compress(token);
        // Data whose first bytes read as text is not tried (see startsLikeText): a stream so stays out, and an inner
        // one (a hex token's raw deflate with fixed codes is often printable: ~1 in 2,000 of the gap shape's runs).
        fc.pre(!startsLikeText(stream) && (compress !== ofRawDeflate || !startsLikeText(innerDeflate(token))));
        const body = encoding === 'bytes' ? stream : Buffer.from(JSON.stringify({ data: stream.toString(encoding) }));
        // The attack is real: fflate gives the token out of what the remote sent.
        expect(agentGets(body, token)).toBe(true);
        const out = secretScrubber(secretParts({ kind: 'bearer', token })).scrub(body);
        expect(out.redacted).toBe(true);
        expect(agentGets(out.bytes, token)).toBe(false);
      }),
      { numRuns: 25 },
    ),
  );

  const literals = (text: string): number[] => [...Buffer.from(text)];
  /** `stream` raw at the start of a body and as zlib inside text: fflate gets the token out of each, not once scrubbed. */
  const expectStoppedRawAndInText = (stream: Buffer, token: string): void => {
    const zlibInText = Buffer.concat([Buffer.from('hello '), Buffer.from([0x78, 0x01]), stream, Buffer.from(' bye')]);
    for (const body of [stream, zlibInText]) {
      const agentGets = (bytes: Buffer): boolean =>
        [...bytes.keys()].some((at) => orFalse(() => fflateStreaming(bytes.subarray(at)).includes(token)));
      expect(agentGets(body)).toBe(true);
      const out = secretScrubber(secretParts({ kind: 'bearer', token })).scrub(body);
      expect(out.redacted).toBe(true);
      expect(agentGets(out.bytes)).toBe(false);
    }
  };

  // Length symbols 286 and 287 in a fixed Huffman block: zlib stops ("invalid literal/length code"), fflate copies 260
  // or 261 bytes and reads on (helper-216's review; they leaked before).
  it.each([286, 287])('redacts a token behind length symbol %i, raw at the start and zlib inside text', (symbol) => {
    const token = randomBytes(16).toString('hex');
    // Fixed codes: a literal below 144 is 8 bits from 0x30, 280-287 are 8 bits from 0xc0; distance code 0 (1 back).
    const stream = fixedBlock([...literals('{"a":"xyz'), symbol, ...literals(`","token":"${token}"}`)]);
    expect(() => inflateRawSync(stream)).toThrow('invalid literal/length code');
    expectStoppedRawAndInText(stream, token);
  });

  // Distance symbols 30 and 31 in a fixed Huffman block: zlib stops ("invalid distance code"), fflate copies from 32,769
  // back (30, once that much was produced) or from index NaN, which reads as zeros (31), and reads on.
  it.each([30, 31])('redacts a token behind distance symbol %i, raw at the start and zlib inside text', (distance) => {
    const token = randomBytes(16).toString('hex');
    // 130 copies of 258 bytes (symbol 285, one back) put 33,547 bytes behind the copy from 32,769 back.
    const far = distance === 30 ? new Array<number>(130).fill(285) : [];
    const stream = fixedBlock([
      ...literals('{"a":"xyz'),
      ...far,
      { length: 257, distance },
      ...literals(`","token":"${token}"}`),
    ]);
    expect(() => inflateRawSync(stream)).toThrow('invalid distance code');
    expectStoppedRawAndInText(stream, token);
  });

  // Where NLEN is not mended (a stored block's own data), a stream zlib refuses the codes of is still walked; a walk that
  // runs out of its budget (here: 400 empty dynamic blocks zlib reads, each with a 15-bit literal code, ~33k walk units
  // each) says nothing of what fflate reads on to, so it is redacted to the end; zlib's answer, which stops before the
  // token, stood (helper-217's review: the token went out behind distance symbol 31, 30 or length symbol 286).
  it.each([
    ['distance symbol 31', { length: 285, distance: 31 }],
    ['length symbol 286', 286],
  ] as const)('redacts a stream behind %s that spends the walk budget where NLEN is not mended', (_name, symbol) => {
    const token = randomBytes(16).toString('hex');
    const lengths = [...Array.from({ length: 14 }, (_, s) => s + 1), 15, ...new Array<number>(241).fill(0), 15, 0];
    const costly = dynamicBlock({
      final: false,
      emptyStoredAfter: true,
      literalCodes: 257,
      distanceCodes: 1,
      lengthsCode: Object.fromEntries(Array.from({ length: 16 }, (_, s) => [s, 4])),
      lengths,
      literalCode: Object.fromEntries(lengths.slice(0, 257).flatMap((l, s) => (l > 0 ? [[s, l]] : []))),
      data: [256],
    });
    const inner = Buffer.concat([
      ...new Array<Buffer>(400).fill(costly),
      fixedBlock([...Buffer.from('ab'), symbol, ...Buffer.from(token)]),
    ]);
    expect(() => inflateRawSync(inner)).toThrow(/invalid (distance|literal\/length) code/);
    // Text first (no raw deflate is tried at the start), then zlib whose one stored block (a wrong NLEN) holds `inner`.
    const zlibHeader = Buffer.from([0x78, 0x9c]);
    const body = Buffer.concat([
      Buffer.from('{"status":"ok","note":"binary attachment follows","data":"'),
      zlibHeader,
      mixedStream([{ stored: inner }]),
      Buffer.from(' bye'),
    ]);
    const agentGets = (bytes: Buffer): boolean => {
      const at = bytes.indexOf(zlibHeader);
      return at >= 0 && orFalse(() => fflateStreaming(fflateStreaming(bytes.subarray(at + 2))).includes(token));
    };
    expect(agentGets(body)).toBe(true);
    const out = secretScrubber(secretParts({ kind: 'bearer', token })).scrub(body);
    expect(out.redacted).toBe(true);
    expect(agentGets(out.bytes)).toBe(false);
  });

  // A short stream's answer is kept for the next answer (`outcomeMemo`), a re-encoded one too; but where a lenient decoder
  // reads nothing but one stored block's data, that data is a place of its own, tried each time: the answer is kept as
  // nothing only if no place is lost with it. Here the block before it has a code lengths' code zlib refuses.
  it('redacts a token in the stored block after a refused empty block, seen a second time', () => {
    const token = randomBytes(6).toString('hex');
    const refused = dynamicBlock({
      final: false,
      emptyStoredAfter: true,
      literalCodes: 257,
      distanceCodes: 1,
      // Three codes of two bits: incomplete (zlib: "invalid code lengths set").
      lengthsCode: { 0: 2, 1: 2, 18: 2 },
      lengths: [[18, 127], [18, 107], 1, 0],
      literalCode: { 256: 1 },
      data: [256],
    });
    const inner = deflateRawSync(token);
    const body = Buffer.concat([refused, Buffer.from([1, inner.length, 0, 0x12, 0x34]), inner]);
    expect(body.length).toBeLessThanOrEqual(64);
    const agentGets = (bytes: Buffer): boolean =>
      orFalse(() => fflateStreaming(fflateStreaming(bytes)).includes(token));
    for (const seen of ['first', 'again']) {
      expect(agentGets(body), seen).toBe(true);
      const out = secretScrubber(secretParts({ kind: 'bearer', token })).scrub(body);
      expect(out.redacted, seen).toBe(true);
      expect(agentGets(out.bytes), seen).toBe(false);
    }
  });

  // The copy zlib is given is the stream's output as stored blocks, shorter or longer than the stream: what is redacted
  // is the stream's own bytes, and what follows it is delivered.
  it('redacts the stream’s own bytes, whatever the length of what it decodes to', () => {
    const tail = Buffer.from(' and the rest of the answer');
    for (const repeats of [1, 3]) {
      const token = randomBytes(20).toString('hex');
      const stream = incompleteCodeDeflate(Buffer.from(token.repeat(repeats)));
      const out = secretScrubber(secretParts({ kind: 'bearer', token })).scrub(Buffer.concat([stream, tail]));
      expect(out.bytes.equals(Buffer.concat([Buffer.from(redactionMarker), tail]))).toBe(true);
    }
  });
});

// A mended stream that Huffman blocks produced in part (compressed-views.ts, `freshOfViews`): what lies whole in one of
// its stored pieces is not tried again, what the Huffman blocks produced is tried as anywhere.
describe('views whose bytes lie in part as they are in the view they came from (stored pieces, plain bytes)', () => {
  /** The attack is real (the agent gets the token out of the body) and the scrubber's answer stops it. */
  const expectStopped = (body: Buffer, token: string, agentGets: (bytes: Buffer) => boolean): void => {
    expect(agentGets(body)).toBe(true);
    const out = secretScrubber(secretParts({ kind: 'bearer', token })).scrub(body);
    expect(out.redacted).toBe(true);
    expect(agentGets(out.bytes)).toBe(false);
  };
  const noise = (seed: string, length: number): Buffer => {
    const out = Buffer.alloc(length + 32);
    let block = Buffer.from(seed);
    for (let at = 0; at < length; at += 32) {
      block = createHash('sha256').update(block).digest();
      block.copy(out, at);
    }
    return out.subarray(0, length);
  };
  const hideIn = (stream: Buffer, encoding: 'bytes' | 'base64' | 'hex'): Buffer =>
    encoding === 'bytes' ? stream : Buffer.from(`{"data":"${stream.toString(encoding)}"}`);
  /** The agent: fflate reads the mended stream, then each zlib stream it finds in that (as it is, base64 or hex). */
  const agentGets = (body: Buffer, token: string): boolean =>
    orFalse(() => {
      const output = fflateStreaming(body).toString('latin1');
      const blobs = [
        Buffer.from(output, 'latin1'),
        ...[...output.matchAll(/[A-Za-z0-9+/]{8,}={0,2}/g)].map(([v]) => Buffer.from(v, 'base64')),
        ...[...output.matchAll(/(?:[0-9a-f]{2}){8,}/g)].map(([v]) => Buffer.from(v, 'hex')),
      ];
      return blobs.some((blob) => findsZlibToken(blob, token, false));
    });
  const placements: ReadonlyArray<readonly [string, (secret: Buffer) => MixedBlock[]]> = [
    [
      'in the first block, before a piece',
      (secret) => [{ literals: Buffer.concat([Buffer.from([0x90, 0x91]), secret]) }, { stored: noise('a', 3000) }],
    ],
    [
      'in a block between two pieces',
      (secret) => [
        { literals: Buffer.from([0x90, 0x91]) },
        { stored: noise('b', 3000) },
        // 0x06 starts no raw deflate (a reserved block type) where the piece before ends: only the signature leads in.
        { literals: Buffer.concat([Buffer.from([0x06]), secret, Buffer.from([1, 2, 3])]) },
        { stored: noise('c', 2000) },
      ],
    ],
  ];
  const encodings = ['bytes', 'base64', 'hex'] as const;
  it.each(placements.flatMap(([name, blocks]) => encodings.map((encoding) => [name, encoding, blocks] as const)))(
    'redacts a token compressed %s, as %s',
    (_name, encoding, blocks) => {
      const token = randomBytes(16).toString('hex');
      const inner = hideIn(deflateSync(Buffer.from(`{"token":"${token}"}`)), encoding);
      const body = mixedStream(blocks(inner));
      // The attack is real: zlib refuses the stream, fflate gives the token out of it.
      expect(() => inflateRawSync(body)).toThrow('invalid stored block lengths');
      expectStopped(body, token, (bytes) => agentGets(bytes, token));
    },
  );

  const percentDecoded = (bytes: Buffer): Buffer =>
    Buffer.from(
      bytes
        .toString('latin1')
        .replace(/%([0-9a-fA-F]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16))),
      'latin1',
    );
  /** Whether a zlib stream somewhere in `bytes` (behind a 0x78 header byte, or anywhere) decodes to the token. */
  function findsZlibToken(bytes: Buffer, token: string, at0x78 = true): boolean {
    return [...bytes.keys()].some(
      (at) =>
        (!at0x78 || bytes[at] === 0x78) && orFalse(() => Buffer.from(fflateUnzlib(bytes.subarray(at))).includes(token)),
    );
  }

  // A gzip member zlib reads as it is, of stored blocks (incompressible data): its output's pieces lie as they are in the
  // answer, and what crosses from one to the next is whole only in the output (compressed-views.ts, `withPieces`).
  it('redacts a token compressed across two stored blocks of a gzip member zlib reads as it is', () => {
    const token = randomBytes(16).toString('hex');
    const inner = deflateSync(Buffer.from(`{"token":"${token}"}`));
    const data = Buffer.concat([noise('p', 6000), inner, noise('q', 6000)]);
    const cut = 6010;
    const stored = (part: Buffer, final: boolean): Buffer => {
      const header = Buffer.from([final ? 1 : 0, 0, 0, 0, 0]);
      header.writeUInt16LE(part.length, 1);
      header.writeUInt16LE(part.length ^ 0xffff, 3);
      return Buffer.concat([header, part]);
    };
    const gzip = gzipSync(data);
    const body = Buffer.concat([
      gzip.subarray(0, 10),
      stored(data.subarray(0, cut), false),
      stored(data.subarray(cut), true),
      gzip.subarray(-8),
    ]);
    const agentGetsGzip = (bytes: Buffer): boolean =>
      orFalse(() => findsZlibToken(Buffer.from(fflateGunzip(bytes)), token));
    expect(gunzipSync(body).equals(data)).toBe(true);
    expectStopped(body, token, agentGetsGzip);
  });

  // An escape view's plain bytes lie as they are in the answer; its decoded escapes are new (`setFreshRanges`).
  it('redacts a token compressed in binary with one of its bytes percent-encoded', () => {
    const token = randomBytes(16).toString('hex');
    const inner = deflateSync(Buffer.from(`{"token":"${token}"}`));
    const escaped = Buffer.concat([
      inner.subarray(0, 5),
      Buffer.from(`%${inner[5]!.toString(16).padStart(2, '0')}`),
      inner.subarray(6),
    ]);
    const body = Buffer.concat([noise('x', 5000), escaped, noise('y', 5000)]);
    expectStopped(body, token, (bytes) => findsZlibToken(percentDecoded(bytes), token));
  });

  // A view of escapes only is new whole: its one fresh range leaves it no seam inside (helper-216's review).
  it.each([
    ['zlib', deflateSync],
    ['gzip', gzipSync],
  ] as const)('redacts a token in %s percent-encoded end to end', (_name, compress) => {
    const token = randomBytes(16).toString('hex');
    const stream = compress(Buffer.from(`{"token":"${token}"}`));
    const body = Buffer.from([...stream].map((b) => `%${b.toString(16).padStart(2, '0')}`).join(''));
    const agentGets = (bytes: Buffer): boolean =>
      findsZlibToken(percentDecoded(bytes), token) ||
      orFalse(() => Buffer.from(fflateGunzip(percentDecoded(bytes))).includes(token));
    expectStopped(body, token, agentGets);
  });

  // A JSON escape view is not looked into for compressed data (its escapes decode to characters): a percent view of it
  // holds its decoded escapes as they are, new too (helper-216's review).
  it('redacts a token compressed with one byte as a JSON \\u escape and a percent escape elsewhere', () => {
    const token = randomBytes(16).toString('hex');
    const inner = deflateSync(Buffer.from(`{"token":"${token}","pad":"${randomBytes(8).toString('hex')}"}`));
    const k = [...inner.keys()].find((j) => j >= 2 && inner[j]! < 0x80)!;
    const escaped = Buffer.concat([
      inner.subarray(0, k),
      Buffer.from(`\\u00${inner[k]!.toString(16).padStart(2, '0')}`),
      inner.subarray(k + 1),
    ]);
    const body = Buffer.concat([Buffer.from('{"a":"'), escaped, Buffer.from(`","b":"${'x'.repeat(50)}%41 end"}`)]);
    const jsonDecoded = (bytes: Buffer): Buffer =>
      Buffer.from(
        bytes
          .toString('latin1')
          .replace(/\\u([0-9a-fA-F]{4})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16))),
        'latin1',
      );
    const agentGets = (bytes: Buffer): boolean => findsZlibToken(percentDecoded(jsonDecoded(bytes)), token);
    expectStopped(body, token, agentGets);
  });

  // A stream that opens in a stored piece and reads on into what the Huffman blocks produced is whole only here: it is
  // tried, mended (helper-215's review of a first version, which read it as zlib reads it: attacks C and E).
  const halves = (token: string): Buffer =>
    mixedStream([{ stored: Buffer.from(token.slice(0, 16)) }, { stored: Buffer.from(token.slice(16)) }]);
  const opensInPiece: ReadonlyArray<readonly [string, (token: string) => readonly [Buffer, Buffer, number]]> = [
    // [what the piece holds, what the Huffman block gives, where in the output the inner stream starts]
    ['raw deflate', (token) => [halves(token).subarray(0, 12), halves(token).subarray(12), 0]],
    [
      'gzip',
      (token) => {
        const head = Buffer.from([0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 0xff]);
        return [
          Buffer.concat([Buffer.from([0x01, 0x02, 0xfe, 0x81]), head]),
          Buffer.concat([halves(token), Buffer.alloc(8)]),
          14,
        ];
      },
    ],
  ];
  it.each(opensInPiece)('redacts a token split by wrong NLENs in %s that opens in a stored piece', (_name, parts) => {
    const token = randomBytes(16).toString('hex');
    const [piece, literals, innerAt] = parts(token);
    const zlibHeader = Buffer.from([0x78, 0x01]);
    const body = Buffer.concat([zlibHeader, mixedStream([{ stored: piece }, { literals }]), Buffer.alloc(4)]);
    const agentGets = (bytes: Buffer): boolean =>
      orFalse(() => fflateStreaming(fflateStreaming(bytes.subarray(2)).subarray(innerAt)).includes(token));
    expectStopped(body, token, agentGets);
  });

  // In a view of stored pieces only, whether a stream crosses from one to the next is told as fflate reads it: zlib
  // stops at an incomplete code inside the first piece (helper-215's review; it leaked before).
  it.each([3, 10])('redacts a token behind an incomplete code split across two stored pieces (at %i)', (split) => {
    const token = randomBytes(16).toString('hex');
    const zlibHeader = Buffer.from([0x78, 0x01]);
    const inner = Buffer.concat([zlibHeader, incompleteCodeDeflate(Buffer.from(token)), Buffer.alloc(4)]);
    const first = Buffer.concat([Buffer.from([0x01, 0x02, 0xfe, 0x81]), inner.subarray(0, split)]);
    const outer = mixedStream([{ stored: first }, { stored: inner.subarray(split) }]);
    const body = Buffer.concat([zlibHeader, outer, Buffer.alloc(4)]);
    const agentGets = (bytes: Buffer): boolean =>
      orFalse(() => {
        const output = fflateStreaming(bytes.subarray(2));
        return fflateStreaming(output.subarray(output.indexOf(zlibHeader) + 2)).includes(token);
      });
    expectStopped(body, token, agentGets);
  });

  // random2 and random5 were redacted in part (from ~250 KB and ~870 KB on) while the pieces were looked into again at
  // each depth; random14 and random15 are the two of twenty seeds that spend the most of the decoded-bytes budget (9.2
  // and 8.9 MiB of 12 since distance symbols 30 and 31 are read: random15 was past 8 MiB before, at 8.4).
  it.each(['random2', 'random5', 'random14', 'random15'])(
    'delivers a megabyte of random binary whole (seed %s)',
    (seed) => {
      const body = noise(seed, 1 << 20);
      const out = secretScrubber(secretParts({ kind: 'bearer', token: randomBytes(16).toString('hex') })).scrub(body);
      expect(out.redacted).toBe(false);
      expect(out.bytes.equals(body)).toBe(true);
    },
  );
});

// A remote that turns bytes into text one byte per character (`buf.toString('latin1')`, Python's `decode('latin-1')`)
// and writes that text out: the agent reads each character back as its byte. Compressed, the token went out whole
// (JSON and HTML escapes decoded to characters, not bytes; raw deflate behind a plain first byte was never tried).
describe('binary a remote carries as text, one byte per character (latin1)', () => {
  const hexToken = fc.uint8Array({ minLength: 10, maxLength: 40 }).map((b) => Buffer.from(b).toString('hex'));
  const latin1 = (b: Buffer) => b.toString('latin1');
  const asciiJson = (s: string) =>
    JSON.stringify(s).replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  const xmlRefs = (b: Buffer) =>
    [...b]
      .map((x) =>
        x >= 0x20 && x < 0x7f && !`<>&"'`.includes(String.fromCharCode(x)) ? String.fromCharCode(x) : `&#${x};`,
      )
      .join('');
  const quote = (b: Buffer, plain: RegExp) =>
    [...b]
      .map((x) => (plain.test(String.fromCharCode(x)) ? String.fromCharCode(x) : `%${hex2(x).toUpperCase()}`))
      .join('');
  const asBytes = (text: string) => Buffer.from(text, 'latin1');

  // The agent's reading, written here (not the scrubber's code): every JSON string, the text, the references or the
  // percent escapes decoded, each character taken as its byte.
  const jsonStringsOf = (text: string): string[] =>
    [...text.matchAll(/"((?:[^"\\]|\\.)*)"/g)].flatMap(([, inner]) => {
      try {
        return [JSON.parse(`"${inner}"`) as string];
      } catch {
        return [];
      }
    });
  const jsonStrings = (body: Buffer): Buffer[] => jsonStringsOf(body.toString('utf8')).map(asBytes);
  const jsonInJson = (body: Buffer): Buffer[] =>
    jsonStringsOf(body.toString('utf8')).flatMap(jsonStringsOf).map(asBytes);
  const textBytes = (body: Buffer): Buffer[] => [asBytes(body.toString('utf8'))];
  const xmlBytes = (body: Buffer): Buffer[] => [
    asBytes(body.toString('utf8').replace(/&#(\d+);/g, (_, d: string) => String.fromCharCode(Number(d)))),
  ];
  const percentBytes = (body: Buffer): Buffer[] => [
    asBytes(latin1(body).replace(/%([0-9a-fA-F]{2})/g, (_, h: string) => String.fromCharCode(parseInt(h, 16)))),
  ];
  interface Carrier {
    readonly name: string;
    readonly carry: (stream: Buffer) => Buffer;
    readonly read: (body: Buffer) => Buffer[];
    /** Which streams it carries as the scrubber reads them (default: every one). */
    readonly carries?: (stream: Buffer) => boolean;
  }
  const carriers: readonly Carrier[] = [
    {
      name: 'a JSON string (JSON.stringify: control characters escaped, the rest UTF-8)',
      carry: (stream) => Buffer.from(JSON.stringify({ ok: true, data: latin1(stream) })),
      read: jsonStrings,
    },
    {
      name: 'an ASCII-only JSON string (Python json.dumps: \\u00XX)',
      carry: (stream) => Buffer.from(`{"ok": true, "data": ${asciiJson(latin1(stream))}}`),
      read: jsonStrings,
    },
    {
      name: 'a JSON string inside a JSON string (a proxy event body, an echo of a JSON request)',
      carry: (stream) => Buffer.from(JSON.stringify({ body: JSON.stringify({ data: latin1(stream) }) })),
      read: jsonInJson,
    },
    {
      name: 'an ASCII-only JSON string inside one (json.dumps twice)',
      carry: (stream) => Buffer.from(asciiJson(`{"data": ${asciiJson(latin1(stream))}}`)),
      read: jsonInJson,
    },
    {
      name: 'UTF-8 text',
      carry: (stream) => Buffer.from(latin1(stream)),
      read: textBytes,
      // Without a byte past ASCII such text is the stream's own bytes: plain binary, not a latin1 view (and after a
      // label raw deflate and brotli are not tried: docs/http-channel.md, "What a remote can still do").
      carries: (stream) => stream.some((b) => b >= 0x80),
    },
    {
      name: 'XML character references',
      carry: (stream) => Buffer.from(`<r><data>${xmlRefs(stream)}</data></r>`),
      read: xmlBytes,
    },
    {
      name: 'a URL fragment percent-encoded (Python quote)',
      carry: (stream) => Buffer.from(`<a href="https://x.example/cb#${quote(stream, /[A-Za-z0-9_.~/-]/)}">x</a>`),
      // The agent takes the fragment (past the first 24 bytes the reading tries).
      read: (body) => percentBytes(Buffer.from(/#([^"]*)/.exec(latin1(body))?.[1] ?? '')),
    },
    {
      name: 'a table cell percent-encoded (Python quote)',
      carry: (stream) => Buffer.from(`<td>${quote(stream, /[A-Za-z0-9_.~/-]/)}</td>`),
      read: percentBytes,
    },
    {
      name: 'a query value percent-encoded with letters, digits and / plain (Python quote)',
      carry: (stream) => Buffer.from(`id=7&q=${quote(stream, /[A-Za-z0-9_.~/-]/)}&ok=1`),
      read: percentBytes,
    },
    {
      name: "a query value percent-encoded with ' ( ) plain (encodeURIComponent's set)",
      carry: (stream) => Buffer.from(`id=7&q=${quote(stream, /[A-Za-z0-9_.!~*'()-]/)}&ok=1`),
      read: percentBytes,
    },
  ];
  const compressors: ReadonlyArray<readonly [string, (b: Buffer) => Buffer]> = [
    ['gzip', (b) => gzipSync(b)],
    ['zlib', (b) => deflateSync(b)],
    ['raw deflate', (b) => deflateRawSync(b)],
    ['brotli', (b) => brotliCompressSync(b)],
  ];
  /** Whether the agent decompresses `token` out of what it reads of `body`, from any of its first 24 bytes on. */
  const agentGets = (body: Buffer, read: (body: Buffer) => Buffer[], token: string): boolean =>
    read(body).some((blob) =>
      [...Array(Math.min(24, blob.length)).keys()].some((at) =>
        streamingDecoders.some((decode) => orFalse(() => decode(blob.subarray(at)).includes(token))),
      ),
    );

  it.each(carriers.map((c) => [c.name, c] as const))(
    'redacts a token compressed, carried as %s',
    (_name, { carry, read, carries = () => true }) =>
      fc.assert(
        fc.property(hexToken, fc.constantFrom(...compressors), (token, [, compress]) => {
          const stream = compress(Buffer.from(`Bearer ${token}`));
          fc.pre(!startsLikeText(stream) && carries(stream));
          const body = carry(stream);
          expect(agentGets(body, read, token)).toBe(true);
          const out = secretScrubber(secretParts({ kind: 'bearer', token })).scrub(body);
          expect(out.redacted).toBe(true);
          expect(agentGets(out.bytes, read, token)).toBe(false);
        }),
        { numRuns: 80 },
      ),
  );

  // An agent's UTF-8 decoder reads an invalid byte as U+FFFD, whose latin1 byte is 0xFD: a remote can send that byte
  // of a stream raw, and the text around it is still one stretch to read.
  it('redacts a token brotli-compressed, carried as UTF-8 text with the stream’s 0xFD bytes sent raw', () => {
    // A token whose brotli holds 0xFD before its last bytes (deflate's fixed codes for ASCII never make 0xFD).
    const token = [...Array(2000).keys()]
      .map(() => randomBytes(16).toString('hex'))
      .find((t) => {
        const br = brotliCompressSync(Buffer.from(`Bearer ${t}`));
        const at = br.indexOf(0xfd);
        return at > 0 && at < br.length - 4;
      });
    if (token === undefined) throw new Error('no token of 2000 has 0xFD inside its brotli stream');
    const stream = brotliCompressSync(Buffer.from(`Bearer ${token}`));
    const body = Buffer.concat(
      [...stream].map((b) => (b === 0xfd ? Buffer.from([0xfd]) : Buffer.from(String.fromCharCode(b)))),
    );
    expect(body.includes(Buffer.from([0xc3, 0xbd]))).toBe(false);
    expect(agentGets(body, textBytes, token)).toBe(true);
    const out = secretScrubber(secretParts({ kind: 'bearer', token })).scrub(body);
    expect(out.redacted).toBe(true);
    expect(agentGets(out.bytes, textBytes, token)).toBe(false);
  });

  // Half a megabyte of prose in languages written with Latin-1 letters (helper-219's review: any accented letter made
  // a latin1 view, every word before one a place to try raw deflate, a space a stored block's header; the budget ran
  // out and French text was redacted from its fifth byte on).
  it('leaves large text in other languages, raw and in JSON, as it is', () => {
    const token = randomBytes(16).toString('hex');
    const scrubber = secretScrubber(secretParts({ kind: 'bearer', token }));
    const words = (
      'déjà vu le garçon a mangé la crème brûlée à côté de l’église où ça coûte cher « naïve » señor año mañana ' +
      'über straße grüße größer fähig mädchen coração ação não informações é à ç œuvre ½ 30° £5 ©'
    ).split(' ');
    let prose = '';
    for (let i = 0; prose.length < 512 * 1024; i++) {
      const pick = createHash('sha256').update(`${i}`).digest();
      prose += words[pick[0]! % words.length] + (pick[1]! % 13 === 0 ? '.\n' : ' ');
    }
    for (const body of [Buffer.from(prose), Buffer.from(asciiJson(prose)), Buffer.from(JSON.stringify({ prose }))]) {
      const out = scrubber.scrub(body);
      expect(out.redacted).toBe(false);
      expect(out.bytes.equals(body)).toBe(true);
    }
  });
});
