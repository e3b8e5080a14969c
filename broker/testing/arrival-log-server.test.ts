import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { ArrivalLogServer } from './arrival-log-server.js';
import { createTempDir, type TempDir } from './temp-dir.js';

let server: ArrivalLogServer | undefined;
let dir: TempDir | undefined;
afterEach(async () => {
  await server?.stop();
  dir?.remove();
});

describe('the arrival-log server (the race drill endpoint)', () => {
  it('logs each arrival in order, in memory and as lines in a file, and answers with the marker', async () => {
    dir = createTempDir('postern-arrivals-');
    const file = join(dir.path, 'arrival.log');
    server = await ArrivalLogServer.start({ file });
    const post = (body: string) =>
      request(`http://127.0.0.1:${server?.port ?? 0}/write`, {
        method: 'POST',
        body,
        headers: { 'content-type': 'application/json' },
      });
    const first = await post(JSON.stringify({ ticket: 42, marker: 'A' }));
    expect(await first.body.json()).toEqual({ received: 'A' });
    await (await post('plain text B')).body.text();
    await (await request(`http://127.0.0.1:${server.port}/status`)).body.text();
    expect(server.markers()).toEqual(['A', 'plain text B', 'GET /status']);
    expect(readFileSync(file, 'utf8')).toBe('A\nplain text B\nGET /status\n');
    expect(await server.waitForArrivals(3)).toHaveLength(3);
  });

  it('apply_then_drop records the arrival (the effect) and closes without any response', async () => {
    server = await ArrivalLogServer.start({ behave: ({ marker }) => (marker === 'A' ? 'apply_then_drop' : 'respond') });
    await expect(
      request(`http://127.0.0.1:${server.port}/write`, { method: 'POST', body: '{"marker":"A"}' }),
    ).rejects.toThrow();
    expect(server.arrivals).toEqual([
      expect.objectContaining({ marker: 'A', behavior: 'apply_then_drop', method: 'POST', path: '/write' }),
    ]);
  });

  it('waitForArrivals rejects, naming what arrived, when too few come', async () => {
    server = await ArrivalLogServer.start();
    await expect(server.waitForArrivals(1, 20)).rejects.toThrow('expected 1 arrivals, got []');
  });
});
