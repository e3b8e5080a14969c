import { describe, expect, it } from 'vitest';
import { streamingDecoders } from '../testing/agent-decoders.js';
import { canary, canaryLeaks, localRouteConfig, type HttpActionHarness } from '../testing/http-action-harness.js';
import { harnessWithRemote } from '../testing/harness-with-remote.js';
import { lenientInflate } from '../testing/lenient-inflate.js';
import { ReflectingRemote, reflectModes, type ReflectMode } from '../testing/reflecting-remote.js';

/**
 * The attack: a hostile remote answers the echo of the request (bearer canary in it) compressed, but says nothing
 * about it (no Content-Encoding), as octet-stream or as base64/hex text. The channel decodes only declared codings,
 * so before the fix the scrubber compared compressed bytes and the agent decompressed the token out of the answer.
 */
let h: HttpActionHarness;
let remote: ReflectingRemote;
harnessWithRemote(
  () => ReflectingRemote.start(),
  (opened) => ({ h, remote } = opened),
);

/** The reflecting remote at its root (it routes no `/api`). */
const config = () => localRouteConfig(remote.port, '', { basePath: '' });

const decoders: ReadonlyArray<(b: Buffer) => Buffer> = [
  ...streamingDecoders,
  // As lenient as fflate: header CRC and trailers unchecked, reserved FLG bits ignored, members joined.
  (b) => lenientInflate('gzip', b),
];

/** Text read back one byte per character, as an agent reads bytes a remote wrote as latin1 text. */
const latin1Bytes = (text: string): Buffer => Buffer.from(text, 'latin1');

/**
 * Everything an agent could make of `body`, computed here, not by the broker: the bytes, their base64/hex decodings and
 * the base64 in a JSON field, the body's text, its JSON strings and its percent escapes read back one byte per
 * character (latin1), each decompressed by every decoder as a streaming decoder would (a truncated or corrupt tail
 * still yields what came before) at every offset up to 64 (noise before the stream is skipped).
 */
function agentViews(body: Buffer): string[] {
  const text = body.toString('latin1');
  const blobs = [body];
  const b64 = [text, ...[...text.matchAll(/[A-Za-z0-9+/=]{16,}/g)].map((m) => m[0])];
  for (const t of b64) blobs.push(Buffer.from(t, 'base64'));
  if (/^[0-9a-f]+$/i.test(text)) blobs.push(Buffer.from(text, 'hex'));
  const utf8 = body.toString('utf8');
  blobs.push(latin1Bytes(utf8));
  for (const [, inner] of utf8.matchAll(/"((?:[^"\\]|\\.)*)"/g))
    try {
      blobs.push(latin1Bytes(JSON.parse(`"${inner}"`) as string));
    } catch {
      // Not a JSON string.
    }
  blobs.push(latin1Bytes(text.replace(/%([0-9a-fA-F]{2})/g, (_, h: string) => String.fromCharCode(parseInt(h, 16)))));
  const views = blobs.map((b) => b.toString('latin1'));
  for (const blob of blobs)
    for (let offset = 0; offset < Math.min(64, blob.length); offset++)
      for (const decode of decoders) {
        try {
          views.push(decode(blob.subarray(offset)).toString('latin1'));
        } catch {
          // Not this coding here (a corrupt tail is read past by the sync flush on a shorter prefix below).
        }
        try {
          views.push(decode(blob.subarray(offset, blob.length - 8)).toString('latin1'));
        } catch {
          // Not this coding here.
        }
      }
  return views;
}

const undeclared = reflectModes.filter((m): m is Extract<ReflectMode, `undeclared-${string}`> =>
  m.startsWith('undeclared-'),
);

describe('when a remote compresses its echo of the credential and does not declare it (no Content-Encoding)', () => {
  it.each(undeclared)('%s: the agent cannot decompress the token out of the answer', async (mode) => {
    const { envelope, response } = await h.run(config(), { route: 'docs', method: 'GET', path: `/reflect/${mode}` });
    const got = remote.received.at(-1);
    // The attack happened: the remote saw the token and what it sent really gives it to an agent that decompresses.
    expect(got?.headers.authorization).toBe(`Bearer ${canary}`);
    expect(got?.sent.headers['content-encoding']).toBeUndefined();
    expect(agentViews(got?.sent.body ?? Buffer.alloc(0)).some((v) => v.includes(canary))).toBe(true);
    // The defence: the answer is delivered, redacted like any reflection, and nothing in it decompresses to the token.
    expect(envelope.error).toBeUndefined();
    expect(response?.status).toBe(200);
    expect(response?.redacted).toBe(true);
    expect(response?.body_withheld).toBeUndefined();
    expect(response?.body.toString()).toContain('[REDACTED]');
    expect(agentViews(response?.body ?? Buffer.alloc(0)).filter((v) => v.includes(canary))).toEqual([]);
  });

  it('leaves the token in no journal file, log line or answer', async () => {
    await h.temp.journal.close();
    h.results.close();
    expect(canaryLeaks(h)).toEqual([]);
  });
});
