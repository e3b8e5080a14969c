import { AsyncLocalStorage } from 'node:async_hooks';
import { Client, fetch as undiciFetch } from 'undici';
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import { openPinnedSocket, type ConnectionTarget, type OpenedSocket } from '../http/open-pinned-socket.js';
import { forgetSocket, observeSocket } from '../http/undici-observer.js';
import type { Clock } from '../../ports/index.js';
import { meteredResponse, StreamMeter, type StreamOverBound } from './stream-bound.js';

/** What one tools/call POST reports, from undici's diagnostics channels and the reply body. */
export interface CallWireObserver {
  headersSent(): void;
  bodySent(): void;
  responseStarted(status: number): void;
  bodyEnded(how: 'complete' | 'broken' | 'too_large'): void;
}

/**
 * The connection one call may use: opened and verified before the dispatch boundary, taken by the first fetch
 * made inside `withCallWire` (the POST carrying the call). Every later fetch in that context (a redirect, an SSE
 * resumption) finds it taken and fails: after DISPATCH_STARTED no new TCP connection may be opened, or a refused
 * connect there could no longer be told from one before the boundary.
 */
export interface CallWire {
  socket: OpenedSocket | undefined;
  readonly observer: CallWireObserver;
}

const callContext = new AsyncLocalStorage<CallWire>();

export function withCallWire<T>(wire: CallWire, run: () => Promise<T>): Promise<T> {
  return callContext.run(wire, run);
}

export interface PinnedFetchOptions {
  readonly url: URL;
  /** Injected on every request to this server; never seen by the agent. A function: read per request (OAuth). */
  readonly headers: Readonly<Record<string, string>> | (() => Readonly<Record<string, string>>);
  readonly connectTimeoutMs: number;
  readonly dnsAddressesMax: number;
  readonly replyBytesMax: number;
  /** Replies outside a call (initialize, tools/list, the GET stream): each message and the rate bounded. */
  readonly serverStream?: ServerStreamBound;
}

export interface ServerStreamBound {
  readonly bytesPerSecond: number;
  readonly clock: Clock;
  /** A reply broke a bound; its connection is already closed. */
  readonly overBound: (why: StreamOverBound) => void;
}

const nullBodyStatuses = new Set([101, 103, 204, 205, 304]);

/** Where a streamable_http server's URL connects: the checks of a route's base_url (network guard, TLS identity). */
export function connectionTarget(url: URL): ConnectionTarget {
  const https = url.protocol === 'https:';
  return {
    protocol: https ? 'https:' : 'http:',
    hostname: url.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: url.port === '' ? (https ? 443 : 80) : Number(url.port),
    caPem: undefined,
    pins: undefined,
  };
}

/**
 * The fetch the SDK's StreamableHTTPClientTransport is given for one server: every request on a socket the broker
 * opened itself (DNS once, every address through the network guard, TLS with the URL's host name), one request per
 * connection, the server's secret headers added here; never another origin, never a redirect followed by undici.
 */
export function createPinnedFetch(options: PinnedFetchOptions): FetchLike & { closeAll(): void } {
  const target = connectionTarget(options.url);
  const clients = new Set<Client>();
  const fetchOnce = async (input: string | URL, init?: RequestInit): Promise<Response> => {
    const url = new URL(input);
    if (url.origin !== options.url.origin) throw new TypeError('fetch refused: another origin than the server URL');
    const wire = callContext.getStore();
    let opened: OpenedSocket;
    if (wire === undefined) {
      opened = await openPinnedSocket(target, {
        signal: init?.signal ?? new AbortController().signal,
        connectTimeoutMs: options.connectTimeoutMs,
        dnsAddressesMax: options.dnsAddressesMax,
      });
    } else {
      if (wire.socket === undefined) throw new TypeError('fetch refused: the call’s connection was already used');
      opened = wire.socket;
      wire.socket = undefined;
      observeSocket(opened.socket, {
        headersSent: () => wire.observer.headersSent(),
        bodySent: () => wire.observer.bodySent(),
      });
    }
    const client = oneShotClient(options.url.origin, opened);
    clients.add(client);
    opened.socket.once('close', () => {
      clients.delete(client);
      forgetSocket(opened.socket);
      void client.destroy().catch(() => undefined);
    });
    const headers: Record<string, string> = {};
    new Headers(init?.headers).forEach((value, name) => {
      headers[name] = value;
    });
    const injected = typeof options.headers === 'function' ? options.headers() : options.headers;
    for (const [name, value] of Object.entries(injected)) headers[name.toLowerCase()] = value;
    headers['connection'] = 'close';
    const request = { ...(init as object), headers, redirect: 'manual', dispatcher: client };
    const response = (await undiciFetch(
      url,
      request as unknown as Parameters<typeof undiciFetch>[1],
    )) as unknown as Response;
    if (wire === undefined) return meterOutsideCall(response, options, () => opened.socket.destroy());
    wire.observer.responseStarted(response.status);
    return boundedResponse(response, wire.observer, options.replyBytesMax, () => opened.socket.destroy());
  };
  return Object.assign(fetchOnce, {
    closeAll: () => {
      for (const client of clients) void client.destroy().catch(() => undefined);
      clients.clear();
    },
  });
}

/** A reply outside a call, bounded like a call's (replyBytesMax per message) and in rate when the session asks. */
function meterOutsideCall(response: Response, options: PinnedFetchOptions, drop: () => void): Response {
  const bound = options.serverStream;
  if (bound === undefined || nullBodyStatuses.has(response.status)) return response;
  const eventStream = (response.headers.get('content-type') ?? '').toLowerCase().includes('text/event-stream');
  const meter = new StreamMeter({
    messageBytesMax: options.replyBytesMax,
    bytesPerSecond: bound.bytesPerSecond,
    clock: bound.clock,
    eventStream,
  });
  return meteredResponse(response, meter, drop, bound.overBound);
}

/** Where an OAuth client may send its requests: https anywhere the network guard allows, http only to loopback. */
const loopbackHosts = new Set(['127.0.0.1', '[::1]', 'localhost']);

/**
 * The fetch of the OAuth flow (discovery, registration, token requests): each request on its own pinned socket to
 * its own origin (an authorization server is often another host than the MCP server), the network guard applied
 * as for the server itself, never a redirect followed, each reply body bounded. No headers are injected: the
 * grant's secrets travel in the bodies the SDK's helpers build.
 */
export function createGuardedFetch(options: Omit<PinnedFetchOptions, 'url' | 'headers'>): FetchLike {
  return async (input, init) => {
    const url = new URL(input);
    if (url.protocol !== 'https:' && !(url.protocol === 'http:' && loopbackHosts.has(url.hostname)))
      throw new TypeError('fetch refused: OAuth endpoints must be https (http only on loopback)');
    const once = createPinnedFetch({ ...options, url: new URL(url.origin), headers: {} });
    const response = await once(url, init);
    return boundedResponse(response, ignoredObserver, options.replyBytesMax, () => once.closeAll());
  };
}

const ignoredObserver: CallWireObserver = {
  headersSent: () => undefined,
  bodySent: () => undefined,
  responseStarted: () => undefined,
  bodyEnded: () => undefined,
};

/** An undici Client over one socket the broker opened; it can never connect on its own (see http-connection.ts). */
function oneShotClient(origin: string, opened: OpenedSocket): Client {
  let handedOver = false;
  const client = new Client(origin, {
    pipelining: 1,
    // Our own deadlines decide (the call's operation deadline, the SDK's per-request timeouts); SSE streams idle.
    headersTimeout: 0,
    bodyTimeout: 0,
    connect: (_options, callback) => {
      if (handedOver || opened.socket.destroyed) {
        process.nextTick(() => callback(new Error('no reconnect: this connection was handed over once'), null));
        return;
      }
      handedOver = true;
      process.nextTick(() => callback(null, opened.socket));
    },
  });
  client.on('connectionError', () => undefined);
  opened.socket.on('error', () => undefined);
  return client;
}

/** The call's reply body, counted as the SDK reads it: over the bound the connection is closed (the flood case). */
function boundedResponse(response: Response, observer: CallWireObserver, bytesMax: number, drop: () => void): Response {
  const init = { status: response.status, statusText: response.statusText, headers: response.headers };
  if (response.body === null || nullBodyStatuses.has(response.status)) {
    observer.bodyEnded('complete');
    return new Response(null, init);
  }
  const reader = response.body.getReader();
  let bytes = 0;
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done, value } = await reader.read();
        if (done) {
          observer.bodyEnded('complete');
          controller.close();
          return;
        }
        bytes += value.byteLength;
        if (bytes > bytesMax) {
          observer.bodyEnded('too_large');
          drop();
          controller.error(new Error('reply over its bound'));
          return;
        }
        controller.enqueue(value);
      } catch {
        observer.bodyEnded('broken');
        controller.error(new Error('connection lost while reading the reply'));
      }
    },
    cancel: (reason) => reader.cancel(reason),
  });
  return new Response(body, init);
}
