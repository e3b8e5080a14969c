import { pageSessionOf, type OperatorSession } from './page-session.js';

/**
 * The broker's change notices (broker/host/change-feed.ts): a journal position and the views that
 * may be stale, never data. The page re-reads those views through the operator API. Declared here
 * rather than imported: the renderer may import broker/contract only, and a notice from the wire
 * is checked (parseChangeNotice) before anything acts on it.
 */
export const changeTopics = ['approvals', 'sessions', 'activity', 'vault', 'credential_requests'] as const;
export type ChangeTopic = (typeof changeTopics)[number];
export interface ChangeNotice {
  readonly seq: number;
  readonly topics: readonly ChangeTopic[];
}

/** The desktop preload's bridge for notices main forwards (app/preload/preload.ts). */
export interface ChangeBridge {
  subscribe(listener: (notice: unknown) => void): () => void;
}

declare global {
  interface Window {
    /** Present only inside the Electron shell, beside `postern`. */
    readonly posternChanges?: ChangeBridge;
  }
}

/** A notice as sent, or undefined for anything else (an unknown topic is dropped, not trusted). */
export function parseChangeNotice(value: unknown): ChangeNotice | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const { seq, topics } = value as { seq?: unknown; topics?: unknown };
  if (typeof seq !== 'number' || !Number.isSafeInteger(seq) || seq < 0 || !Array.isArray(topics)) return undefined;
  return { seq, topics: changeTopics.filter((topic) => topics.includes(topic)) };
}

/**
 * The `data:` payloads of the complete Server-Sent Events in `buffer`, and what is left of it (an
 * event cut between two chunks). Comment lines (the host's heartbeats) carry nothing.
 */
export function splitServerSentEvents(buffer: string): { data: string[]; rest: string } {
  const blocks = buffer.replace(/\r\n?/g, '\n').split('\n\n');
  const rest = blocks.pop() ?? '';
  const data = blocks.flatMap((block) => {
    const lines = block.split('\n').filter((line) => line.startsWith('data:'));
    return lines.length === 0 ? [] : [lines.map((line) => line.slice(5).replace(/^ /, '')).join('\n')];
  });
  return { data, rest };
}

/** Unread text this client holds for one stream: the host's notices are ~80 bytes, so this is a broken stream. */
const streamBufferCharsMax = 16 * 1024;

/**
 * One GET /api/events with the session secret as a bearer token (EventSource cannot send that
 * header, so this reads the body itself). Calls `onOpen` once the host answered 200, then
 * `onNotice` per notice; resolves when the stream ends, rejects when it could not open.
 */
export async function readChangeStream(
  fetchFn: typeof fetch,
  session: Pick<OperatorSession, 'secret'> | undefined,
  handlers: { onOpen(): void; onNotice(notice: ChangeNotice): void },
  signal: AbortSignal,
): Promise<void> {
  const secret = session?.secret() ?? null;
  const headers: Record<string, string> = { Accept: 'text/event-stream' };
  if (secret !== null) headers['Authorization'] = `Bearer ${secret}`;
  const response = await fetchFn('/api/events', {
    method: 'GET',
    credentials: 'omit',
    cache: 'no-store',
    headers,
    signal,
  });
  if (!response.ok || response.body === null) {
    await response.body?.cancel();
    throw new Error(`GET /api/events answered ${response.status}`);
  }
  handlers.onOpen();
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    const split = splitServerSentEvents(buffer + value);
    buffer = split.rest;
    if (buffer.length > streamBufferCharsMax) throw new Error('the event stream sent an oversized event');
    for (const data of split.data) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(data) as unknown;
      } catch {
        continue;
      }
      const notice = parseChangeNotice(parsed);
      if (notice !== undefined) handlers.onNotice(notice);
    }
  }
}

/** Reconnect delays: quick for a blip (a daemon restart), capped so a stopped daemon is not hammered. */
export const reconnectDelayMs = { first: 250, max: 10_000 } as const;

export function nextReconnectDelayMs(previousMs: number | undefined): number {
  return previousMs === undefined ? reconnectDelayMs.first : Math.min(previousMs * 2, reconnectDelayMs.max);
}

/** What the shell sees of the push channel: notices, and whether it is up (polling speeds up while it is not). */
export interface ChangeHub {
  subscribe(listener: (notice: ChangeNotice) => void): () => void;
  live(): boolean;
  onLive(listener: () => void): () => void;
}

type Connect = (
  handlers: { onOpen(): void; onNotice(notice: ChangeNotice): void },
  signal: AbortSignal,
) => Promise<void>;

/**
 * One stream shared by every listener of the page, opened with the first listener and closed with
 * the last. A stream that ends or fails is reopened after a backoff; `live` stays true through
 * nothing but an open stream, so the callers' polling covers the gap and nothing alarming is shown.
 */
export function createChangeHub(
  connect: Connect,
  timers: Pick<Window, 'setTimeout' | 'clearTimeout'> = window,
): ChangeHub {
  const listeners = new Set<(notice: ChangeNotice) => void>();
  const liveListeners = new Set<() => void>();
  let isLive = false;
  let controller: AbortController | undefined;
  let retryTimer: number | undefined;
  let delayMs: number | undefined;
  const setLive = (next: boolean): void => {
    if (next === isLive) return;
    isLive = next;
    for (const listener of [...liveListeners]) listener();
  };
  const run = (): void => {
    const current = new AbortController();
    controller = current;
    const handlers = {
      onOpen: () => {
        delayMs = undefined;
        setLive(true);
      },
      onNotice: (notice: ChangeNotice) => {
        for (const listener of [...listeners]) listener(notice);
      },
    };
    connect(handlers, current.signal)
      .catch(() => undefined)
      .finally(() => {
        if (controller !== current) return;
        setLive(false);
        delayMs = nextReconnectDelayMs(delayMs);
        retryTimer = timers.setTimeout(() => {
          retryTimer = undefined;
          if (controller === current) run();
        }, delayMs);
      });
  };
  const stop = (): void => {
    controller?.abort();
    controller = undefined;
    if (retryTimer !== undefined) timers.clearTimeout(retryTimer);
    retryTimer = undefined;
    delayMs = undefined;
    setLive(false);
  };
  return {
    subscribe(listener) {
      listeners.add(listener);
      if (controller === undefined) run();
      return () => {
        listeners.delete(listener);
        if (listeners.size === 0) stop();
      };
    },
    live: () => isLive,
    onLive(listener) {
      liveListeners.add(listener);
      return () => liveListeners.delete(listener);
    },
  };
}

/** Inside Electron, main forwards the runtime's notices over IPC; the window is live whenever the bridge is there. */
function bridgeConnect(bridge: ChangeBridge): Connect {
  return (handlers, signal) =>
    new Promise<void>((resolve) => {
      const unsubscribe = bridge.subscribe((value) => {
        const notice = parseChangeNotice(value);
        if (notice !== undefined) handlers.onNotice(notice);
      });
      handlers.onOpen();
      signal.addEventListener('abort', () => {
        unsubscribe();
        resolve();
      });
    });
}

let pageHub: ChangeHub | undefined;

/** The page's one change hub: the preload's bridge inside Electron, GET /api/events in a browser on the headless host. */
export function changeHubOf(win: Window): ChangeHub {
  if (pageHub !== undefined) return pageHub;
  const bridge = win.posternChanges;
  const connect: Connect =
    bridge !== undefined
      ? bridgeConnect(bridge)
      : (handlers, signal) => readChangeStream(win.fetch.bind(win), pageSessionOf(win), handlers, signal);
  pageHub = createChangeHub(connect, win);
  return pageHub;
}

/** Calls `onNotice` for every change notice the broker pushes to this page until the returned function is called. */
export function subscribeChanges(onNotice: (notice: ChangeNotice) => void, win: Window = window): () => void {
  return changeHubOf(win).subscribe(onNotice);
}
