import { describe, expect, it } from 'vitest';
import { pollFloorMs, pollIntervalMs } from '../views/use-polling.js';
import {
  createChangeHub,
  nextReconnectDelayMs,
  parseChangeNotice,
  readChangeStream,
  reconnectDelayMs,
  splitServerSentEvents,
  type ChangeNotice,
} from './change-feed.js';

/** A Response whose body arrives in the given chunks (a real ReadableStream, as fetch gives). */
function streamed(chunks: string[], status = 200): Response {
  const encoder = new TextEncoder();
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(encoder.encode(chunk));
      controller.close();
    },
  });
  return new Response(body, { status, headers: { 'Content-Type': 'text/event-stream' } });
}

/** Timers a test fires by hand. */
function manualTimers() {
  const due = new Map<number, { run: () => void; ms: number }>();
  let next = 1;
  return {
    due,
    setTimeout: ((run: () => void, ms: number) => {
      due.set(next, { run, ms });
      return next++;
    }) as unknown as Window['setTimeout'],
    clearTimeout: ((id: number) => due.delete(id)) as Window['clearTimeout'],
    fireAll(): number[] {
      const entries = [...due.entries()];
      due.clear();
      for (const [, entry] of entries) entry.run();
      return entries.map(([, entry]) => entry.ms);
    },
  };
}

async function settled(): Promise<void> {
  for (let i = 0; i < 10; i += 1) await Promise.resolve();
}

describe('change notices from the wire', () => {
  it.each<[string, unknown, ChangeNotice | undefined]>([
    ['a notice', { seq: 4, topics: ['approvals', 'vault'] }, { seq: 4, topics: ['approvals', 'vault'] }],
    [
      'unknown topics dropped, order canonical',
      { seq: 4, topics: ['vault', 'secrets', 'approvals'] },
      { seq: 4, topics: ['approvals', 'vault'] },
    ],
    ['no seq', { topics: ['approvals'] }, undefined],
    ['a negative seq', { seq: -1, topics: [] }, undefined],
    ['topics not a list', { seq: 1, topics: 'approvals' }, undefined],
    ['null', null, undefined],
  ])('%s', (_what, value, parsed) => {
    expect(parseChangeNotice(value)).toEqual(parsed);
  });

  it('splits complete events, skips comment lines (heartbeats), and keeps a cut event for the next chunk', () => {
    expect(splitServerSentEvents(': ready\n\ndata: {"seq":1}\n\n: \n\ndata: {"se')).toEqual({
      data: ['{"seq":1}'],
      rest: 'data: {"se',
    });
    expect(splitServerSentEvents('data: a\r\n\r\n')).toEqual({ data: ['a'], rest: '' });
  });
});

describe('reading GET /api/events', () => {
  it('sends the session secret as a bearer token, opens, and hands over each notice even when cut across chunks', async () => {
    const requests: Array<{ url: string; init: RequestInit | undefined }> = [];
    const fetchFn = ((url: string, init?: RequestInit) => {
      requests.push({ url, init });
      return Promise.resolve(
        streamed([
          ': ready\n\n',
          'data: {"seq":3,"topics":["approvals"]}\n',
          '\ndata: {"seq":5,',
          '"topics":["vault"]}\n\n',
          'data: not json\n\n',
        ]),
      );
    }) as typeof fetch;
    const heard: ChangeNotice[] = [];
    let opened = 0;
    await readChangeStream(
      fetchFn,
      { secret: () => 'SECRET' },
      { onOpen: () => (opened += 1), onNotice: (n) => heard.push(n) },
      new AbortController().signal,
    );
    expect(opened).toBe(1);
    expect(heard).toEqual([
      { seq: 3, topics: ['approvals'] },
      { seq: 5, topics: ['vault'] },
    ]);
    expect(requests[0]?.url).toBe('/api/events');
    expect(requests[0]?.init).toMatchObject({
      method: 'GET',
      credentials: 'omit',
      headers: { Authorization: 'Bearer SECRET' },
    });
  });

  it('rejects without opening when the host refuses (401)', async () => {
    const fetchFn = (() =>
      Promise.resolve(
        Response.json({ ok: false, error: { code: 'UNAUTHENTICATED', message: 'x' } }, { status: 401 }),
      )) as typeof fetch;
    let opened = false;
    await expect(
      readChangeStream(
        fetchFn,
        undefined,
        { onOpen: () => (opened = true), onNotice: () => undefined },
        new AbortController().signal,
      ),
    ).rejects.toThrow('401');
    expect(opened).toBe(false);
  });
});

describe('the change hub', () => {
  it('opens one stream for all listeners, is live while it is open, reconnects with backoff when it drops, and closes with the last listener', async () => {
    const timers = manualTimers();
    const connections: Array<{
      open: () => void;
      notice: (n: ChangeNotice) => void;
      end: () => void;
      signal: AbortSignal;
    }> = [];
    const hub = createChangeHub(
      (handlers, signal) =>
        new Promise<void>((resolve) => {
          connections.push({ open: handlers.onOpen, notice: handlers.onNotice, end: resolve, signal });
        }),
      timers,
    );
    const a: ChangeNotice[] = [];
    const b: ChangeNotice[] = [];
    const stopA = hub.subscribe((n) => a.push(n));
    const stopB = hub.subscribe((n) => b.push(n));
    expect(connections).toHaveLength(1);
    expect(hub.live()).toBe(false);
    connections[0]?.open();
    expect(hub.live()).toBe(true);
    connections[0]?.notice({ seq: 1, topics: ['approvals'] });
    expect([a, b]).toEqual([[{ seq: 1, topics: ['approvals'] }], [{ seq: 1, topics: ['approvals'] }]]);

    // The daemon goes away: not live, and two failed reconnects back off.
    connections[0]?.end();
    await settled();
    expect(hub.live()).toBe(false);
    expect(timers.fireAll()).toEqual([reconnectDelayMs.first]);
    connections[1]?.end();
    await settled();
    expect(timers.fireAll()).toEqual([reconnectDelayMs.first * 2]);
    connections[2]?.open();
    expect(hub.live()).toBe(true);

    stopA();
    expect(connections[2]?.signal.aborted).toBe(false);
    stopB();
    expect(connections[2]?.signal.aborted).toBe(true);
    connections[2]?.end();
    await settled();
    expect(hub.live()).toBe(false);
    expect(timers.due.size).toBe(0);
  });

  it('caps the reconnect delay', () => {
    let delay: number | undefined;
    for (let i = 0; i < 20; i += 1) delay = nextReconnectDelayMs(delay);
    expect(delay).toBe(reconnectDelayMs.max);
  });
});

describe('the fallback poll', () => {
  it.each<[string, number, boolean, number, number]>([
    ['down: the view own pace', 500, false, 0, 500],
    ['live: the slow fallback', 500, true, 0, 10_000],
    ['live, a view already slower than the fallback', 30_000, true, 0, 30_000],
    ['a floor only slows', 500, false, 60_000, 60_000],
  ])('%s', (_when, everyMs, live, floor, interval) => {
    expect(pollIntervalMs(everyMs, live, floor)).toBe(interval);
  });

  it.each([
    ['?pollFloorMs=60000', 60_000],
    ['?pollFloorMs=-5', 0],
    ['?pollFloorMs=abc', 0],
    ['', 0],
  ])('reads %s as a floor of %i ms', (search, floor) => {
    expect(pollFloorMs(search)).toBe(floor);
  });
});
