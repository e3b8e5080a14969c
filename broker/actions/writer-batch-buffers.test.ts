import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { WriterThread } from '../journal/writer-thread.js';
import { localRouteConfig, openHttpActionHarness, type HttpActionHarness } from '../testing/http-action-harness.js';
import { startLoopbackServer, type LoopbackServer } from '../testing/loopback-server.js';

/**
 * What the loop posts to the journal's writer thread is copied by postMessage's structured clone, which copies the
 * whole ArrayBuffer behind every typed array it meets, not only the view's bytes. A 24-byte nonce that is a view into
 * a pool of random bytes (or a body chunk into a socket's read buffer) costs the loop a copy of the whole pool per
 * view, and sends it. Every typed array in a posted batch must therefore own its buffer exactly. Real parts: a
 * journal whose every batch goes to its writer thread, HTTP actions with results against a loopback remote.
 */
let h: HttpActionHarness;
let remote: LoopbackServer;

beforeAll(async () => {
  h = await openHttpActionHarness({ writerThread: true, threadBatchEventsMin: 1 });
  remote = await startLoopbackServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ ok: true, path: req.url }));
    });
  });
});
afterAll(async () => {
  await remote.close();
  await h.dispose();
});

/** Every typed array reachable from `value`, with its path. */
function views(value: unknown, path = 'batch', found: Array<{ path: string; view: ArrayBufferView }> = []) {
  if (value === null || typeof value !== 'object') return found;
  if (ArrayBuffer.isView(value)) {
    found.push({ path, view: value });
    return found;
  }
  for (const [key, item] of Object.entries(value as Record<string, unknown>)) views(item, `${path}.${key}`, found);
  return found;
}

describe('the batches the loop posts to the writer thread', () => {
  it('hold no typed array that is a view into a larger buffer (structured clone would copy all of it)', async () => {
    const posted: unknown[] = [];
    const commit = WriterThread.prototype.commit;
    vi.spyOn(WriterThread.prototype, 'commit').mockImplementation(function (this: WriterThread, batch, base, done) {
      posted.push(batch);
      commit.call(this, batch, base, done);
    });
    const config = localRouteConfig(remote.port);
    const runs = await Promise.all(
      Array.from({ length: 8 }, (_, i) => h.run(config, { route: 'docs', method: 'POST', path: `/n${i}`, body: '{}' })),
    );
    for (const run of runs) expect(run.envelope.error).toBeUndefined();

    const found = views(posted);
    // Not vacuous: the results' sealed rows crossed, each with its nonce and ciphertext.
    expect(found.filter((f) => f.path.endsWith('.nonce')).length).toBeGreaterThanOrEqual(16);
    const shared = found
      .filter(({ view }) => view.byteOffset !== 0 || view.byteLength !== view.buffer.byteLength)
      .map(({ path, view }) => `${path}: ${view.byteLength} of ${view.buffer.byteLength}`);
    expect(shared).toEqual([]);
  });
});
