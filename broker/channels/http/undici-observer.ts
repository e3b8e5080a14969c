import { subscribe } from 'node:diagnostics_channel';

/**
 * Request-side facts from undici's diagnostics channels. They are process-global (Node's own fetch
 * publishes to them too), so each message is correlated by object identity: a socket we opened maps
 * to the observer of the one attempt currently using it (pipelining 1, and only we hand requests to
 * our connections); `sendHeaders` then binds undici's request object to that observer, and
 * `bodySent`, which carries only the request, finds it through that binding. Messages about sockets
 * or requests we do not know are ignored.
 */
export interface RequestObserver {
  /** undici is about to write the request head to the socket (published just before the write). */
  headersSent(): void;
  /** The whole request (head and body) was written to the socket — not proof that the peer read it. */
  bodySent(): void;
}

const bySocket = new WeakMap<object, RequestObserver>();
const byRequest = new WeakMap<object, RequestObserver>();
let subscribed = false;

export function observeSocket(socket: object, observer: RequestObserver): void {
  ensureSubscribed();
  bySocket.set(socket, observer);
}

export function forgetSocket(socket: object): void {
  bySocket.delete(socket);
}

function ensureSubscribed(): void {
  if (subscribed) return;
  subscribed = true;
  subscribe('undici:client:sendHeaders', (message) => {
    const { request, socket } = message as { request: object; socket: object };
    const observer = bySocket.get(socket);
    if (observer === undefined) return;
    byRequest.set(request, observer);
    observer.headersSent();
  });
  subscribe('undici:request:bodySent', (message) => {
    const { request } = message as { request: object };
    byRequest.get(request)?.bodySent();
  });
}
