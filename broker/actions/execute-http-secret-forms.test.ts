import { brotliDecompressSync, constants } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { canary, canaryLeaks, localRouteConfig, type HttpActionHarness } from '../testing/http-action-harness.js';
import { harnessWithRemote } from '../testing/harness-with-remote.js';
import { ReflectingRemote, type ReflectMode } from '../testing/reflecting-remote.js';

/**
 * The attacks of security review #206 (items 1 and 2), through a real executor and a real remote on 127.0.0.1: the
 * remote echoes the bearer canary in a form the scrubber did not search before, and the agent reads it back out.
 */
let h: HttpActionHarness;
let remote: ReflectingRemote;
harnessWithRemote(
  () => ReflectingRemote.start(),
  (opened) => ({ h, remote } = opened),
);

/** The reflecting remote at its root (it routes no `/api`). */
const config = () => localRouteConfig(remote.port, '', { basePath: '' });

/** What an agent makes of a body, computed here, not by the broker: does any of it hold the canary? */
function agentReads(body: Buffer): boolean {
  const text = body.toString('latin1');
  const views = [text.toLowerCase()];
  // Every base64 value of a form body, brotli-decompressed as a streaming decoder would.
  for (const [, value] of text.matchAll(/=([A-Za-z0-9+/]+={0,2})/g)) {
    try {
      const flush = { finishFlush: constants.BROTLI_OPERATION_FLUSH };
      views.push(brotliDecompressSync(Buffer.from(value!, 'base64'), flush).toString('latin1').toLowerCase());
    } catch {
      // Not brotli.
    }
  }
  // A Buffer written as JSON, read back as bytes.
  for (const [array] of text.matchAll(/\[\s*\d{1,3}(?:\s*,\s*\d{1,3})*\s*\]/g))
    views.push(
      Buffer.from(JSON.parse(array) as number[])
        .toString('latin1')
        .toLowerCase(),
    );
  return views.some((v) => v.includes(canary.toLowerCase()));
}

const modes: readonly ReflectMode[] = ['case-flipped', 'buffer-json', 'form-base64-br-token'];

describe('when a remote echoes the credential in a form the review found missed', () => {
  it.each(modes)('%s: the agent cannot read the token out of the answer', async (mode) => {
    const { envelope, response } = await h.run(config(), { route: 'docs', method: 'GET', path: `/reflect/${mode}` });
    const got = remote.received.at(-1);
    // The attack happened: the remote saw the token, and what it sent gives it to an agent (and is not it verbatim).
    expect(got?.headers.authorization).toBe(`Bearer ${canary}`);
    const sent = got?.sent.body ?? Buffer.alloc(0);
    expect(sent.includes(canary)).toBe(false);
    expect(agentReads(sent)).toBe(true);
    // The defence: delivered, redacted, and nothing in it gives the token back.
    expect(envelope.error).toBeUndefined();
    expect(response?.status).toBe(200);
    expect(response?.redacted).toBe(true);
    expect(response?.body.toString()).toContain('[REDACTED]');
    expect(agentReads(response?.body ?? Buffer.alloc(0))).toBe(false);
  });

  it('leaves the token in no journal file, log line or answer', async () => {
    await h.temp.journal.close();
    h.results.close();
    expect(canaryLeaks(h)).toEqual([]);
  });
});
