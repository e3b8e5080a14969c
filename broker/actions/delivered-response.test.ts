import { createHash } from 'node:crypto';
import { brotliCompressSync, constants, deflateRawSync, deflateSync, gzipSync, inflateRawSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import type { HttpResponseReport } from '../channels/http/index.js';
import {
  deliveredResponse,
  diagnosticBody,
  headerLinesSearchedMax,
  headerValueCharsMax,
} from './delivered-response.js';
import { headerLegalDeflate } from '../testing/header-legal-deflate.js';
import { secretParts, secretScrubber } from './secret-scrubber.js';

const canary = 'canary-Secret-7f3a9c01d2';
const scrubber = secretScrubber(secretParts({ kind: 'bearer', token: canary }));
const limits = { resultBodyBytesMax: 1024, decodedBodyBytesMax: 64 * 1024 };
const lookaheadBytes = 512;

/** What the channel reports: the bytes it kept (cap + lookahead at most) and how many arrived. */
function report(body: Buffer, headers: Record<string, string> = {}, totalBytes = body.length): HttpResponseReport {
  const kept = body.subarray(0, limits.resultBodyBytesMax + lookaheadBytes);
  return {
    status: 200,
    headers,
    framingComplete: true,
    body: kept,
    truncated: kept.length < totalBytes,
    totalBytes,
    digest: 'sha256:wire',
  };
}

const sha256 = (b: Buffer): string => `sha256:${createHash('sha256').update(b).digest('hex')}`;

describe('deliveredResponse', () => {
  describe('when the remote compresses a reflection of the credential although the broker asked for identity', () => {
    const dump = Buffer.from(JSON.stringify({ headers: { authorization: `Bearer ${canary}` } }));
    it.each([
      ['gzip', gzipSync(dump)],
      ['deflate', deflateSync(dump)],
      ['br', brotliCompressSync(dump)],
    ])('%s is decoded and the plain bytes are scrubbed', async (coding, body) => {
      const r = await deliveredResponse(
        report(body, {
          'content-encoding': coding,
          'content-length': String(body.length),
          'content-type': 'application/json',
        }),
        scrubber,
        limits,
      );
      expect(r.body.toString()).not.toContain(canary);
      expect(r.body.toString()).toContain('[REDACTED]');
      expect(r.redacted).toBe(true);
      expect(r.content_decoded).toEqual([coding]);
      // The delivered body is plain: headers describing the compressed one would lie about it.
      expect(r.headers['content-encoding']).toBeUndefined();
      expect(r.headers['content-length']).toBeUndefined();
      expect(r.headers['content-type']).toBe('application/json');
    });

    it('an encoding the broker cannot decode is withheld, never passed through', async () => {
      const r = await deliveredResponse(report(gzipSync(dump), { 'content-encoding': 'zstd' }), scrubber, limits);
      expect(r).toMatchObject({ body_withheld: 'unsupported_content_encoding', total_bytes: 0, truncated: false });
      expect(r.body.length).toBe(0);
      expect(r.digest).toBe(sha256(Buffer.alloc(0)));
    });

    it('a compressed body the channel kept only in part is withheld', async () => {
      const big = gzipSync(Buffer.from(`${canary}${'x'.repeat(10)}`.repeat(1)));
      const r = await deliveredResponse(
        report(big, { 'content-encoding': 'gzip' }, big.length + 5000),
        scrubber,
        limits,
      );
      expect(r.body_withheld).toBe('compressed_body_truncated');
    });
  });

  describe('when the remote sends compressed bytes without declaring them (no Content-Encoding)', () => {
    it('a gzip stream holding no secret is delivered byte for byte, unredacted', async () => {
      const body = gzipSync(Buffer.from(JSON.stringify({ rows: Array.from({ length: 200 }, (_, i) => `row ${i}`) })));
      const r = await deliveredResponse(report(body, { 'content-type': 'application/octet-stream' }), scrubber, limits);
      expect(r.redacted).toBe(false);
      expect(r.body.equals(body)).toBe(true);
    });

    it('a decompression bomb is not inflated past the bound: it is redacted, quickly, not delivered', async () => {
      // 64 MiB of zeros in ~64 KiB: past the 8 MiB budget nothing was checked, so nothing of it is handed over.
      const bomb = gzipSync(Buffer.alloc(64 * 1024 * 1024));
      const started = performance.now();
      const whole = { ...report(bomb, { 'content-type': 'application/octet-stream' }), body: bomb, truncated: false };
      const r = await deliveredResponse(whole, scrubber, { ...limits, resultBodyBytesMax: 1024 * 1024 });
      expect(performance.now() - started).toBeLessThan(5_000);
      expect(r.redacted).toBe(true);
      expect(r.body.toString()).toBe('[REDACTED]');
    });
  });

  describe('when a reflected secret straddles the result cap (truncate-then-scrub attack)', () => {
    it('the secret is redacted whole, never shown minus its tail, and the digest is of what is delivered', async () => {
      for (let shift = 1; shift < canary.length; shift += 1) {
        const body = Buffer.from(`${'p'.repeat(limits.resultBodyBytesMax - shift)}${canary}${'q'.repeat(200)}`);
        const r = await deliveredResponse(report(body), scrubber, limits);
        const text = r.body.toString();
        expect(text).not.toContain(canary.slice(0, canary.length - 1));
        expect(text).not.toContain(canary.slice(0, 8));
        expect(r.truncated).toBe(true);
        expect(r.digest).toBe(sha256(r.body));
      }
    });

    it('the digest never covers the unscrubbed bytes (no guessing oracle for a redacted tail)', async () => {
      const body = Buffer.from(`{"echo":"${canary}"}`);
      const r = await deliveredResponse(report(body), scrubber, limits);
      expect(r.digest).not.toBe(sha256(body));
      expect(r.digest).toBe(sha256(r.body));
      expect(r.total_bytes).toBe(r.body.length);
    });
  });

  describe('when a padded header reflects the secret past the header cap', () => {
    it('the header is scrubbed whole first and cut after', async () => {
      for (const pad of [headerValueCharsMax - 1, headerValueCharsMax - 5, headerValueCharsMax - canary.length + 1]) {
        const r = await deliveredResponse(
          report(Buffer.from('ok'), { 'x-request-id': `${'a'.repeat(pad)}${canary}` }),
          scrubber,
          limits,
        );
        const value = r.headers['x-request-id'] ?? '';
        expect(value.length).toBeLessThanOrEqual(headerValueCharsMax);
        expect(value).not.toContain(canary.slice(0, 4));
        expect(r.redacted).toBe(true);
      }
    });
  });

  describe('when the delivered body differs from the received one (length and digest oracles, review item 3-4)', () => {
    const oracles = { 'content-length': '', etag: 'W/"28-abc"', 'last-modified': 'Fri, 04 Dec 2026 20:00:00 GMT' };
    const withOracles = (body: Buffer, extra: Record<string, string> = {}) => ({
      ...oracles,
      'content-length': String(body.length),
      'content-type': 'text/plain',
      ...extra,
    });
    it.each([
      ['redacted', Buffer.from(`{"echo":"${canary}"}`), {}, undefined],
      ['decoded', gzipSync('{"id":42}'), { 'content-encoding': 'gzip' }, undefined],
      ['withheld (unsupported coding)', deflateSync('{"id":42}'), { 'content-encoding': 'x-custom' }, undefined],
      ['cut at the cap', Buffer.alloc(limits.resultBodyBytesMax + 10, 'z'), {}, undefined],
      ['received in part', Buffer.alloc(100, 'z'), {}, 5000],
    ])('%s: no Content-Length, ETag or Last-Modified reaches the agent', async (_, body, extra, totalBytes) => {
      const r = await deliveredResponse(report(body, withOracles(body, extra), totalBytes), scrubber, limits);
      expect(r.headers['content-length']).toBeUndefined();
      expect(r.headers.etag).toBeUndefined();
      expect(r.headers['last-modified']).toBeUndefined();
      expect(r.headers['content-type']).toBe('text/plain');
    });

    it('a redacted body sent without Content-Length (chunked) keeps no ETag or Last-Modified', async () => {
      const body = Buffer.from(`{"echo":"${canary}"}`);
      const { etag, 'last-modified': lastModified } = oracles;
      const r = await deliveredResponse(report(body, { etag, 'last-modified': lastModified }), scrubber, limits);
      expect(r.redacted).toBe(true);
      expect(r.headers).toEqual({});
    });

    it('an empty body (a HEAD answer) keeps no validator of the body it did not carry', async () => {
      const empty = Buffer.alloc(0);
      const head = await deliveredResponse(
        report(empty, withOracles(empty, { 'content-length': '1234' })),
        scrubber,
        limits,
      );
      expect(head.headers).toEqual({ 'content-type': 'text/plain' });
      const noLength = await deliveredResponse(report(empty, { etag: '"x"' }), scrubber, limits);
      expect(noLength.headers).toEqual({});
      // An empty body that says it is empty is delivered as received: its headers describe it.
      const zero = await deliveredResponse(report(empty, withOracles(empty)), scrubber, limits);
      expect(zero.headers).toEqual(withOracles(empty));
    });

    it('a body delivered byte for byte keeps them', async () => {
      const body = Buffer.from('{"id":42}');
      const r = await deliveredResponse(report(body, withOracles(body)), scrubber, limits);
      expect(r.headers).toEqual(withOracles(body));
    });
  });

  describe('when a remote splits the token over the lines of a repeated header (review item 1)', () => {
    const lines = (...values: string[]) => ({ 'x-request-id': values });
    const split = (value: string, at: number) => [value.slice(0, at), value.slice(at)];
    it.each([
      ['raw', canary],
      ['percent-encoded', [...canary].map((c) => `%${c.charCodeAt(0).toString(16)}`).join('')],
      ['base64', Buffer.from(canary).toString('base64')],
    ])(
      '%s halves are redacted, and the joined value with its separator removed holds no form of it',
      async (_, form) => {
        for (let at = 1; at < form.length; at += 3) {
          const values = split(form, at);
          const r = await deliveredResponse(
            { ...report(Buffer.from('ok'), { 'x-request-id': values.join(', ') }), headerLines: lines(...values) },
            scrubber,
            limits,
          );
          const value = r.headers['x-request-id'] ?? '';
          expect(value.replaceAll(', ', '').includes(form)).toBe(false);
          expect(scrubber.scrubText(value.replaceAll(', ', '')).redacted).toBe(false);
          expect(r.redacted).toBe(true);
        }
      },
    );

    it('a token whole in one line is redacted even where neither the joined value nor the lines end to end show it', async () => {
      // Raw deflate has no signature: the scrubber tries it where a value (or a decoded view of it) starts. Behind
      // `zed` it is not tried, in the joined value nor in the lines laid end to end; in the second line alone it is.
      // The stream is sent as its own bytes (legal in a header), as undici hands them over: latin1. (Percent-encoded,
      // each run of escapes is a place of its own, behind `zed, ` too; `abc` would start a stored block whose data a
      // lenient decoder reads: `a` is its header byte.)
      const stream = headerLegalDeflate(`auth=${canary}`);
      expect(inflateRawSync(stream).includes(canary)).toBe(true);
      const values = ['zed', stream.toString('latin1')];
      const wire = (text: string) => Buffer.from(text, 'latin1');
      expect(scrubber.scrub(wire(values.join(', '))).redacted || scrubber.scrub(wire(values.join(''))).redacted).toBe(
        false,
      );
      const r = await deliveredResponse(
        { ...report(Buffer.from('ok'), { 'x-request-id': values.join(', ') }), headerLines: lines(...values) },
        scrubber,
        limits,
      );
      // Compared, not printed: a failure must not show the deflated canary.
      expect(r.headers['x-request-id'] === 'zed, [REDACTED]').toBe(true);
    });

    it('compressed data a remote starts on a later line and cuts across the next is redacted', async () => {
      const stream = deflateRawSync(`x=${canary}`).toString('base64');
      // What the agent does: drop the separators, base64-decode from the second line, inflate.
      const values = ['hello', stream.slice(0, 24), stream.slice(24)];
      expect(inflateRawSync(Buffer.from(values.slice(1).join(''), 'base64')).includes(canary)).toBe(true);
      const r = await deliveredResponse(
        { ...report(Buffer.from('ok'), { 'x-request-id': values.join(', ') }), headerLines: lines(...values) },
        scrubber,
        limits,
      );
      const got = (r.headers['x-request-id'] ?? '').split(', ');
      let inflated = Buffer.alloc(0);
      try {
        inflated = inflateRawSync(Buffer.from(got.slice(1).join(''), 'base64'), {
          finishFlush: constants.Z_SYNC_FLUSH,
        });
      } catch {
        // Not a stream any more: nothing to recover.
      }
      expect(inflated.includes(canary)).toBe(false);
      expect(r.redacted).toBe(true);
    });

    it(`a header sent in more than ${headerLinesSearchedMax} lines is withheld whole`, async () => {
      const values = Array.from({ length: headerLinesSearchedMax + 1 }, (_, i) => `req-${i}`);
      const r = await deliveredResponse(
        { ...report(Buffer.from('ok'), { 'x-request-id': values.join(', ') }), headerLines: lines(...values) },
        scrubber,
        limits,
      );
      expect(r).toMatchObject({ headers: { 'x-request-id': '[REDACTED]' }, redacted: true });
      const fewer = values.slice(0, headerLinesSearchedMax);
      const ok = await deliveredResponse(
        { ...report(Buffer.from('ok'), { 'x-request-id': fewer.join(', ') }), headerLines: lines(...fewer) },
        scrubber,
        limits,
      );
      expect(ok).toMatchObject({ headers: { 'x-request-id': fewer.join(', ') }, redacted: false });
    });

    it('lines that hold nothing secret are joined as received', async () => {
      const values = ['req-1', 'req-2'];
      const r = await deliveredResponse(
        { ...report(Buffer.from('ok'), { 'x-request-id': values.join(', ') }), headerLines: lines(...values) },
        scrubber,
        limits,
      );
      expect(r).toMatchObject({ headers: { 'x-request-id': 'req-1, req-2' }, redacted: false });
    });
  });

  describe("when a header's bytes are not ASCII (undici hands a value over as latin1: a character per byte)", () => {
    const withHeader = (value: string) => report(Buffer.from('ok'), { 'x-request-id': value });
    it('a compressed stream of legal header bytes is searched as the bytes the remote sent', async () => {
      const stream = headerLegalDeflate(canary);
      const value = stream.toString('latin1');
      // What the agent does with the value it gets: its characters as bytes (latin1), inflated.
      expect(inflateRawSync(Buffer.from(value, 'latin1')).includes(canary)).toBe(true);
      const r = await deliveredResponse(withHeader(value), scrubber, limits);
      const got = Buffer.from(r.headers['x-request-id'] ?? '', 'latin1');
      let inflated = Buffer.alloc(0);
      try {
        inflated = inflateRawSync(got, { finishFlush: constants.Z_SYNC_FLUSH });
      } catch {
        // Not a stream any more: nothing to recover.
      }
      expect(inflated.includes(canary)).toBe(false);
      expect(r.redacted).toBe(true);
    });

    describe('a secret with a character past ASCII', () => {
      const token = 'canary-S\u00e9cret-7f3a9c01d2';
      const wide = secretScrubber(secretParts({ kind: 'bearer', token }));
      it.each([
        ['its UTF-8 bytes (the header undici reads is their latin1)', Buffer.from(token, 'utf8').toString('latin1')],
        ['its latin1 bytes (the header undici reads is the secret itself)', token],
      ])('echoed as %s is redacted', async (_, value) => {
        const r = await deliveredResponse(withHeader(`id=${value};`), wide, limits);
        const got = r.headers['x-request-id'] ?? '';
        // Compared, not printed: neither reading of the value the agent gets holds the secret.
        expect(Buffer.from(got, 'latin1').includes(Buffer.from(token, 'utf8'))).toBe(false);
        expect(got.includes(token)).toBe(false);
        expect(got === 'id=[REDACTED];').toBe(true);
        expect(r.redacted).toBe(true);
      });
    });
  });

  describe('when nothing secret comes back', () => {
    it("the body, headers and counts are the remote's own, and the digest equals the wire digest of the same bytes", async () => {
      const body = Buffer.from('{"id":42}');
      const r = await deliveredResponse(report(body, { etag: '"v1"' }), scrubber, limits);
      expect(r.body.equals(body)).toBe(true);
      expect(r.headers).toEqual({ etag: '"v1"' });
      expect(r).toMatchObject({ truncated: false, total_bytes: body.length, redacted: false, digest: sha256(body) });
      expect(r.body_withheld).toBeUndefined();
    });

    it('a body over the cap is cut at the cap and counted in full', async () => {
      const body = Buffer.alloc(limits.resultBodyBytesMax + 3000, 'z');
      const r = await deliveredResponse(report(body), scrubber, limits);
      expect(r.body.length).toBe(limits.resultBodyBytesMax);
      expect(r).toMatchObject({ truncated: true, total_bytes: body.length });
    });
  });
});

describe('diagnosticBody', () => {
  it('scrubs the first bytes of an incomplete response before cutting them', async () => {
    const body = Buffer.from(`${'d'.repeat(90)}${canary}`);
    const out = await diagnosticBody({ ...report(body), framingComplete: false }, scrubber, 100);
    expect(out.toString()).not.toContain(canary.slice(0, 8));
  });
});
