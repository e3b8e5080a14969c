import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ArrivalLogServer } from '../../testing/arrival-log-server.js';
import { localRouteConfig, openHttpActionHarness, type HttpActionHarness } from '../../testing/http-action-harness.js';

/** Well under any route's operation timeout: a cut request ends in this, an uncut one would still wait. */
const cutBoundMs = 3_000;

let h: HttpActionHarness;
let server: ArrivalLogServer;

beforeEach(async () => {
  h = await openHttpActionHarness();
  // The remote takes the request and holds its answer until the test releases it.
  server = await ArrivalLogServer.start({ behave: () => 'hold' });
});
afterEach(async () => {
  server.releaseHeld();
  await server.stop();
  await h.dispose();
});

describe('HttpChannel.cutInFlight (the broker stopped with a request in flight)', () => {
  it('destroys the connection of a dispatched request whose answer is held: the call ends at once, unknown', async () => {
    const run = h.run(localRouteConfig(server.port), {
      route: 'docs',
      method: 'POST',
      path: '/documents/7',
      body: JSON.stringify({ marker: 'held' }),
      headers: { 'content-type': 'application/json' },
    });
    expect(await server.waitForArrivals(1)).toEqual(['held']);
    const cutAt = Date.now();
    h.channel.cutInFlight();
    const ended = await Promise.race([run, sleep(cutBoundMs).then(() => 'still in flight' as const)]);
    expect(ended).not.toBe('still in flight');
    expect(Date.now() - cutAt).toBeLessThan(cutBoundMs);
    if (ended === 'still in flight') return;
    // Sent and never answered: the record cannot know what the remote did.
    expect(ended.response).toBeUndefined();
    expect(ended.envelope.error).toMatchObject({ outcome: 'unknown' });
    expect(ended.envelope.evidence.dispatch_started).toBe(true);
  });

  it('with nothing in flight it does nothing, and the channel still sends', async () => {
    h.channel.cutInFlight();
    await server.stop();
    server = await ArrivalLogServer.start();
    const { envelope, response } = await h.run(localRouteConfig(server.port), {
      route: 'docs',
      method: 'GET',
      path: '/documents/7',
    });
    expect(envelope.error).toBeUndefined();
    expect(response?.status).toBe(200);
  });
});
