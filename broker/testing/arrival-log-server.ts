import { appendFileSync } from 'node:fs';
import { EventEmitter, once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * The race drill's disposable endpoint (DESIGN §6, article 001): a plain HTTP server on 127.0.0.1
 * that appends a marker for every request it receives to an arrival log — in memory, and to a file
 * when `file` is given (one line per arrival, so a second process can read it) — and answers with
 * the marker. The arrival log is the ground truth of what reached the remote, in order.
 *
 * Marker: the JSON body's `marker` (or `value`, or `ticket`) field when the body is JSON with one,
 * else the body text, else `METHOD path`. Behaviour per request, from `behave(request)` (default
 * `respond`): `respond` answers 200 with `{"received": marker}`; `apply_then_drop` records the
 * arrival (the effect happened) and then destroys the connection without a response — the
 * "unknown outcome" case; `hold` records the arrival and answers only once `releaseHeld()` is called (a request
 * in flight for as long as the test needs); `not_found` records the arrival and answers 404 (a lookup of an operation the
 * remote has no record of).
 *
 * Wait on `waitForArrivals(n)` (an event, not a sleep).
 */
export type ArrivalBehavior = 'respond' | 'apply_then_drop' | 'hold' | 'not_found';

export interface Arrival {
  readonly marker: string;
  readonly method: string;
  readonly path: string;
  /** Header names only (values may carry injected credentials; tests check names, not secrets). */
  readonly headerNames: readonly string[];
  readonly behavior: ArrivalBehavior;
}

export interface ArrivalLogServerOptions {
  /** Append each arrival's marker as a line to this file too (for drills across processes). */
  readonly file?: string;
  readonly behave?: (request: { method: string; path: string; marker: string }) => ArrivalBehavior;
  /** Request body cap; beyond it the request is answered 413 and not logged. */
  readonly bodyBytesMax?: number;
}

const bodyBytesMaxDefault = 1024 * 1024;
const waitMsMaxDefault = 5_000;

export class ArrivalLogServer extends EventEmitter {
  readonly arrivals: Arrival[] = [];
  /** Answers of `hold` arrivals, sent by releaseHeld. */
  private readonly held: Array<() => void> = [];

  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {
    super();
  }

  static async start(options: ArrivalLogServerOptions = {}): Promise<ArrivalLogServer> {
    const holder: { self?: ArrivalLogServer } = {};
    const server = createServer((request, response) => {
      // Requests arrive only after listen resolved, so the holder is always filled by then.
      holder.self?.handle(request, response, options);
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const self = new ArrivalLogServer(server, (server.address() as AddressInfo).port);
    holder.self = self;
    return self;
  }

  /** The markers in arrival order. */
  markers(): string[] {
    return this.arrivals.map((a) => a.marker);
  }

  /** Resolves once at least `n` requests arrived; rejects after `waitMsMax` listing what did. */
  waitForArrivals(n: number, waitMsMax = waitMsMaxDefault): Promise<string[]> {
    if (this.arrivals.length >= n) return Promise.resolve(this.markers());
    return new Promise((resolve, reject) => {
      const onArrival = (): void => {
        if (this.arrivals.length < n) return;
        clearTimeout(timer);
        this.off('arrival', onArrival);
        resolve(this.markers());
      };
      const timer = setTimeout(() => {
        this.off('arrival', onArrival);
        reject(new Error(`expected ${n} arrivals, got ${JSON.stringify(this.markers())}`));
      }, waitMsMax);
      this.on('arrival', onArrival);
    });
  }

  /** Answers every request held so far (behaviour `hold`); returns how many. */
  releaseHeld(): number {
    const answers = this.held.splice(0);
    for (const answer of answers) answer();
    return answers.length;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private handle(request: IncomingMessage, response: ServerResponse, options: ArrivalLogServerOptions): void {
    const chunks: Buffer[] = [];
    let bytes = 0;
    const cap = options.bodyBytesMax ?? bodyBytesMaxDefault;
    request.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
      if (bytes <= cap) chunks.push(chunk);
    });
    request.on('end', () => {
      if (bytes > cap) {
        response.writeHead(413).end();
        return;
      }
      const method = request.method ?? 'GET';
      const path = request.url ?? '/';
      const marker = markerOf(Buffer.concat(chunks).toString('utf8'), method, path);
      const behavior = options.behave?.({ method, path, marker }) ?? 'respond';
      const arrival: Arrival = { marker, method, path, headerNames: Object.keys(request.headers).sort(), behavior };
      this.arrivals.push(arrival);
      if (options.file !== undefined) appendFileSync(options.file, `${marker}\n`);
      this.emit('arrival', arrival);
      if (behavior === 'apply_then_drop') {
        // The effect is applied (logged); the connection dies before any response byte.
        request.socket.destroy();
        return;
      }
      if (behavior === 'not_found') {
        response.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'not found' }));
        return;
      }
      const body = JSON.stringify({ received: marker });
      const answer = (): void => {
        response.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
        response.end(body);
      };
      if (behavior === 'hold') this.held.push(answer);
      else answer();
    });
  }
}

function markerOf(body: string, method: string, path: string): string {
  if (body !== '') {
    try {
      const parsed = JSON.parse(body) as Record<string, unknown>;
      for (const key of ['marker', 'value', 'ticket']) {
        const v = parsed[key];
        if (typeof v === 'string' || typeof v === 'number') return String(v);
      }
    } catch {
      // Not JSON: the body is the marker.
    }
    return body.slice(0, 200);
  }
  return `${method} ${path}`;
}
