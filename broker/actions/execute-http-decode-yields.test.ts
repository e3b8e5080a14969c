import { brotliCompressSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeContent, defaultHttpLimits } from '../channels/http/index.js';
import { localRouteConfig, openHttpActionHarness, type HttpActionHarness } from '../testing/http-action-harness.js';
import { startLoopbackServer, type LoopbackServer } from '../testing/loopback-server.js';
import { watchEventLoop } from '../testing/event-loop-gaps.js';

/**
 * THREAT-MODEL 4: one agent must not wedge the others. The attack: an allowed route whose remote ignores
 * `Accept-Encoding: identity` and answers 47 bytes of `Content-Encoding: br, br` that are the most decoding the broker
 * allows: the outer brotli stream decodes to the 8 MiB bound (`decodedBodyBytesMax`), a brotli bomb followed by zeros,
 * and the inner one, the bomb, decodes to the bound again before it is refused as too large. Decoded at once on the
 * event loop (the sync decodeContent), that is ~40-100 ms on this VM in which the daemon answers nobody, per answer,
 * as often as the agent asks. The defence: the broker decodes with node:zlib's async API (decodeContentAsync), on the
 * thread pool, 16 KiB of output per call, the loop free between calls. The body ends withheld, so no scrub runs after
 * the decode: every gap measured below is the decode's or the action's own.
 *
 * Why the numbers hold on a loaded 2-core CI box: the sync decode of the same body is measured here, in this process,
 * in each round right before the attack, under the same load, and must take more than 20 ms (the bound is 8 MiB of
 * output, twice, whatever the machine; ~40-250 ms on this VM under load). A round's attack holds the loop, with the sync
 * decode (the fix reverted), for at least that decode: median largest gaps of ~40-60 ms here. With the async decode,
 * the largest gap is the action's own steps plus a major GC (8 MiB buffers come and go) plus whatever the OS takes:
 * ~5-15 ms in most rounds here, but a box shared with other test workers can deschedule the loop, or a GC land, for
 * 20-80 ms in one round, not in most. So the median over five rounds is compared with the median sync decode: it must
 * stay under half of it, which a sync decode, present in every round, cannot.
 */
let h: HttpActionHarness;
let remote: LoopbackServer;
let body: Buffer;
const coding = 'br, br';
const rounds = 5;

beforeAll(async () => {
  h = await openHttpActionHarness();
  const bound = defaultHttpLimits.decodedBodyBytesMax;
  const bomb = brotliCompressSync(Buffer.alloc(bound + 1));
  body = brotliCompressSync(Buffer.concat([bomb, Buffer.alloc(bound - bomb.length)]));
  const small = brotliCompressSync(brotliCompressSync(Buffer.from('{"ok":true}')));
  remote = await startLoopbackServer((req, res) => {
    const answer = req.url === '/api/small' ? small : body;
    res.writeHead(200, {
      'content-type': 'application/json',
      'content-encoding': coding,
      'content-length': String(answer.length),
    });
    res.end(answer);
  });
});
afterAll(async () => {
  await remote.close();
  await h.dispose();
});

const config = () => localRouteConfig(remote.port);

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

describe('when a remote answers the most decoding a compressed body may cost (THREAT-MODEL 4)', () => {
  it('the decode gives the event loop turns: no gap comes near the sync decode’s own duration', async (ctx) => {
    expect(body.length).toBeLessThan(64);
    // A first action compiles what every action runs: it is the steady state of a stream of attacks that must not wedge.
    const warm = await h.run(config(), { route: 'docs', method: 'GET', path: '/small' });
    expect(warm.response?.content_decoded).toEqual(['br', 'br']);

    const syncMs: number[] = [];
    const gapMs: number[] = [];
    for (let round = 0; round < rounds; round++) {
      // What this body costs decoded at once, now, under this round's load.
      const sync = await watchEventLoop(() =>
        Promise.resolve(decodeContent(body, coding, true, { decodedBytesMax: defaultHttpLimits.decodedBodyBytesMax })),
      );
      expect(sync.value).toMatchObject({ kind: 'withheld', reason: 'decoded_body_too_large' });
      syncMs.push(sync.tookMs);

      const { value, maxGapMs } = await watchEventLoop(() =>
        h.run(config(), { route: 'docs', method: 'GET', path: '/bomb' }),
      );
      // The action decoded as far as the sync decode did: to the bound, twice, then withheld the body.
      expect(value.envelope.error).toBeUndefined();
      expect(value.response).toMatchObject({ status: 200, body_withheld: 'decoded_body_too_large', total_bytes: 0 });
      gapMs.push(maxGapMs);
    }
    const what = `sync decode ms ${syncMs.map((ms) => ms.toFixed(1)).join(', ')}; largest gaps ms ${gapMs
      .map((ms) => ms.toFixed(1))
      .join(', ')}`;
    if (median(syncMs) <= 20) {
      // A machine fast enough to decode the bomb in under 20 ms cannot tell a slice from the whole decode here.
      console.warn(`skipped: the sync decode is too fast on this machine to show a stall (${what})`);
      ctx.skip();
    }
    expect(median(gapMs), what).toBeLessThan(median(syncMs) / 2);
  });
});
