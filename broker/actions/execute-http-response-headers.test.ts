import { constants, inflateRawSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { canary, canaryLeaks, localRouteConfig, type HttpActionHarness } from '../testing/http-action-harness.js';
import { watchEventLoop, watchEventLoopQuietest } from '../testing/event-loop-gaps.js';
import { expressEtag, startHeaderOracleRemote, type HeaderOracleRemote } from '../testing/header-oracle-remote.js';
import { harnessWithRemote } from '../testing/harness-with-remote.js';
import { secretParts, secretScrubber } from './secret-scrubber.js';

/**
 * The attacks of the review of fab8e46 (items 1, 3, 4, 5) through the real executor, channel and sockets: a remote
 * whose response headers carry what the scrubbed body hides. Each test shows the attack works on what the remote really
 * sent (the control), then that nothing the agent receives carries it. The canary never appears in a message: a
 * failing expectation compares booleans or the canary-free parts only.
 */
let h: HttpActionHarness;
let remote: HeaderOracleRemote;
harnessWithRemote(startHeaderOracleRemote, (opened) => ({ h, remote } = opened));

const config = () => localRouteConfig(remote.port);
const run = (path: string, method = 'GET', query?: Record<string, string>) =>
  h.run(config(), { route: 'docs', method, path, ...(query === undefined ? {} : { query }) });
const holdsCanary = (text: string | undefined): boolean => (text ?? '').includes(canary);

describe('when an express-style remote echoes the request and computes Content-Length and ETag over the echo', () => {
  it('the redacted body comes back without the echo’s Content-Length: no length oracle', async () => {
    const { response } = await run('/echo');
    const sent = remote.sent.at(-1)!;
    expect(holdsCanary(sent.body.toString())).toBe(true);
    expect(response?.redacted).toBe(true);
    expect(holdsCanary(response?.body.toString())).toBe(false);
    // The remote's Content-Length is the unscrubbed echo's: it tells the secret's length (redacted body + the rest).
    expect(sent.headers['content-length']).toBe(String(sent.body.length));
    expect(response?.headers['content-length']).toBeUndefined();
    expect(Object.values(response?.headers ?? {})).not.toContain(String(sent.body.length));
  });

  it('its ETag of the unscrubbed echo does not come back: no offline guess checker', async () => {
    const { response } = await run('/echo');
    const sent = remote.sent.at(-1)!;
    const delivered = response?.body.toString() ?? '';
    // The attack: put a guess where [REDACTED] is, hash, compare with the ETag. The right guess matches.
    const guessed = (guess: string) => expressEtag(Buffer.from(delivered.replace('[REDACTED]', guess)));
    expect(guessed(canary) === sent.headers.etag).toBe(true);
    expect(guessed('wrong-guess') === sent.headers.etag).toBe(false);
    // The defence: no ETag (nor Last-Modified or any digest) is delivered with a body that differs from the remote's.
    expect(response?.headers.etag).toBeUndefined();
    expect(Object.values(response?.headers ?? {})).not.toContain(sent.headers.etag);
  });

  it('a HEAD answer carries neither the Content-Length nor the ETag of the echo it did not send', async () => {
    const { response } = await run('/echo', 'HEAD');
    const sent = remote.sent.at(-1)!;
    expect(sent.method).toBe('HEAD');
    expect(response?.body.length).toBe(0);
    expect(Number(sent.headers['content-length'])).toBeGreaterThan(canary.length);
    expect(response?.headers['content-length']).toBeUndefined();
    expect(response?.headers.etag).toBeUndefined();
    expect(response?.headers['content-type']).toBe('application/json');
  });

  it('an answer delivered exactly as received keeps its Content-Length and ETag', async () => {
    const { response } = await run('/plain');
    const sent = remote.sent.at(-1)!;
    expect(response?.redacted).toBe(false);
    expect(response?.body.equals(sent.body)).toBe(true);
    expect(response?.headers['content-length']).toBe(String(sent.body.length));
    expect(response?.headers.etag).toBe(sent.headers.etag);
  });
});

describe('when a remote compresses a reflection of the token beside a guess, in a coding the broker cannot decode', () => {
  it('the withheld body carries no Content-Length: the compressed length is no per-character oracle', async () => {
    // Guesses of one length: 8 characters of the token right, 7, none.
    const guesses = [canary.slice(0, 8), `${canary.slice(0, 7)}#`, '########'];
    const answers = [];
    for (const guess of guesses) answers.push(await run('/crime', 'GET', { guess }));
    const sentLengths = remote.sent.slice(-guesses.length).map((s) => s.body.length);
    // The attack works on what the remote sent: the more of the token the guess holds, the shorter the body.
    expect(sentLengths[0]!).toBeLessThan(sentLengths[1]!);
    expect(sentLengths[1]!).toBeLessThan(sentLengths[2]!);
    for (const { response } of answers) {
      expect(response?.body_withheld).toBe('unsupported_content_encoding');
      expect(response?.headers['content-length']).toBeUndefined();
    }
    // Every guess gets the same answer: nothing in it depends on the compressed length (Date is the second it came).
    const seen = answers.map(({ response }) =>
      JSON.stringify({ ...response, headers: { ...response?.headers, date: undefined } }),
    );
    expect(new Set(seen).size).toBe(1);
  });
});

describe('when a remote sends the token cut in two, one half per line of a repeated header', () => {
  it('the halves are redacted: the joined value holds neither, and with the separator removed no token', async () => {
    const { response } = await run('/split');
    const sent = remote.sent.at(-1)!;
    const lines = sent.headers['x-request-id'] as readonly string[];
    expect(lines.length).toBe(2);
    expect(holdsCanary(lines.join(''))).toBe(true);
    expect(lines.some(holdsCanary)).toBe(false);
    const value = response?.headers['x-request-id'] ?? '';
    expect(holdsCanary(value.replaceAll(', ', ''))).toBe(false);
    expect(lines.some((line) => value.includes(line))).toBe(false);
    expect(response?.redacted).toBe(true);
  });
});

describe('when a remote sends raw deflate of the token as a header of bytes past ASCII (undici reads them as latin1)', () => {
  it('the bytes the remote sent are searched: the value the agent gets inflates to no token', async () => {
    const { response } = await run('/deflated');
    const sent = Buffer.from(remote.sent.at(-1)!.headers['x-request-id'] as string, 'latin1');
    expect(holdsCanary(inflateRawSync(sent).toString('latin1'))).toBe(true);
    const got = Buffer.from(response?.headers['x-request-id'] ?? '', 'latin1');
    let inflated = '';
    try {
      inflated = inflateRawSync(got, { finishFlush: constants.Z_SYNC_FLUSH }).toString('latin1');
    } catch {
      // Not a stream any more: nothing to recover.
    }
    expect(holdsCanary(inflated)).toBe(false);
    expect(response?.redacted).toBe(true);
  });
});

describe('when headers hold base64 of decompression bombs (THREAT-MODEL 4: the agent cannot wedge others)', () => {
  it('their scrub gives the event loop turns: no gap of 250 ms, where the sync scrub holds it far longer', async () => {
    await run('/plain');
    const warm = await run('/header-bomb');
    const sent = remote.sent.at(-1)!;
    const values = ['x-request-id', 'request-id', 'x-correlation-id'].map((name) => sent.headers[name] as string);
    // What the three cost the scrubber run at once, as the headers were before: well over the bound (the premise).
    const scrubber = secretScrubber(secretParts({ kind: 'bearer', token: canary }));
    const sync = await watchEventLoop(() => Promise.resolve(values.map((v) => scrubber.scrubText(v))));
    expect(sync.maxGapMs).toBeGreaterThan(300);

    // Up to three runs until one is under the bound (a loaded box can stop the process once; the sync scrub never is).
    const { value: answer, maxGapMs, tookMs } = await watchEventLoopQuietest(() => run('/header-bomb'), 250);
    expect(answer.envelope.error).toBeUndefined();
    const kept = (r: typeof answer) => ({ ...r.response?.headers, date: undefined });
    expect(kept(answer)).toEqual(kept(warm));
    // The whole scrub was done (the action took at least half the sync scrub's time), in slices.
    expect(tookMs).toBeGreaterThan(sync.tookMs / 2);
    expect(maxGapMs).toBeLessThan(250);
  }, 90_000);

  it('a bomb of HTML references (the review’s: one escape view of 8 MiB) is decoded in slices too', async () => {
    await run('/plain');
    const warm = await run('/header-bomb', 'GET', { unit: 'html' });
    const value = remote.sent.at(-1)!.headers['x-request-id'] as string;
    const scrubber = secretScrubber(secretParts({ kind: 'bearer', token: canary }));
    const sync = await watchEventLoop(() => Promise.resolve(scrubber.scrubText(value)));
    expect(sync.maxGapMs).toBeGreaterThan(300);

    const {
      value: answer,
      maxGapMs,
      tookMs,
    } = await watchEventLoopQuietest(() => run('/header-bomb', 'GET', { unit: 'html' }), 250);
    expect(answer.envelope.error).toBeUndefined();
    const kept = (r: typeof answer) => ({ ...r.response?.headers, date: undefined });
    expect(kept(answer)).toEqual(kept(warm));
    expect(tookMs).toBeGreaterThan(sync.tookMs / 2);
    expect(maxGapMs).toBeLessThan(250);
  }, 90_000);
});

describe('after every attack above', () => {
  it('the token is in no journal file, log line or answer', async () => {
    await h.temp.journal.close();
    h.results.close();
    expect(canaryLeaks(h)).toEqual([]);
  });
});
