import { EventEmitter, once } from 'node:events';
import { createServer as createNetServer, type Server, type Socket } from 'node:net';
import { createServer as createTlsServer } from 'node:tls';
import Database from 'better-sqlite3';

/**
 * A scripted, misbehaving HTTP/1.1 server on 127.0.0.1 built on raw sockets, for the channel's
 * adversarial tests. It is the ground truth: its log says what it REALLY received (bytes, request
 * heads) and did (effect applied or not, what it sent, when it closed), and tests compare the
 * broker's record with it.
 *
 * If `journalPath` is given, at the first byte of every request it reads the journal file with its
 * own SQLite connection and records how many DISPATCH_STARTED rows are visible: a broker that sent
 * a byte before its DISPATCH_STARTED was durable shows up as fewer rows than requests.
 */
export type Behavior =
  /** A complete response; `applyEffect` appends to the effect log before answering. */
  | {
      kind: 'respond';
      status: number;
      headers?: Record<string, string>;
      body?: string;
      applyEffect?: boolean;
      chunked?: boolean;
      close?: boolean;
      earlyHints?: boolean;
    }
  /** Close the connection as soon as it is accepted, reading nothing. */
  | { kind: 'close_on_accept' }
  /** Read the request head, then close without reading the body or answering. */
  | { kind: 'close_after_headers' }
  /** Read the whole request, apply the effect, then close without a response. */
  | { kind: 'apply_then_close' }
  /** Apply, send a status line and headers announcing `announced` bytes, send a few, then close. */
  | { kind: 'apply_then_close_mid_body'; status: number; announced: number; sent: string }
  /** Apply, then answer with chunked framing that is invalid (a non-hex chunk size). */
  | { kind: 'apply_then_bad_chunked'; status: number }
  /** Read the whole request, apply the effect, never answer (the caller's deadline ends it). */
  | { kind: 'apply_then_hang' }
  /** Apply, send only an informational 103 (Early Hints), then close: no final response. */
  | { kind: 'apply_then_informational_then_close' };

export interface ReceivedRequest {
  readonly conn: number;
  /** Index of this request on its connection (0 = first; > 0 = the connection was reused). */
  readonly onConnection: number;
  readonly method: string;
  readonly path: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
  readonly complete: boolean;
}

export type LogEntry =
  | { event: 'accepted'; conn: number }
  | { event: 'first_byte'; conn: number; dispatchRowsVisible: number | undefined; requestsStarted: number }
  | { event: 'request'; request: ReceivedRequest }
  | { event: 'effect_applied'; conn: number; path: string; body: string }
  | { event: 'responded'; conn: number; status: number; complete: boolean }
  | { event: 'closed_by_server'; conn: number; why: string }
  | { event: 'closed_by_peer'; conn: number };

export interface AdversarialServerOptions {
  readonly tls?: { key: string; cert: string };
  readonly journalPath?: string;
  /** Decides what to do with each request; the default answers 200 "ok" and applies the effect. */
  readonly script?: (request: ReceivedRequest) => Behavior;
  /** For connection-level behaviour before any request (close_on_accept). */
  readonly onAccept?: (conn: number) => 'close' | 'serve';
}

export class AdversarialHttpServer extends EventEmitter {
  readonly log: LogEntry[] = [];
  /** The effect log: what the remote application actually did, in order. */
  readonly effects: string[] = [];
  private readonly sockets = new Map<number, Socket>();
  private connections = 0;
  private requestsStarted = 0;
  private readonly db: Database.Database | undefined;
  /** DISPATCH_STARTED rows already in the journal when the server started (earlier tests' actions). */
  private readonly baselineDispatchRows: number;

  private constructor(
    private readonly server: Server,
    private readonly options: AdversarialServerOptions,
    readonly port: number,
  ) {
    super();
    this.db =
      options.journalPath === undefined
        ? undefined
        : new Database(options.journalPath, { readonly: true, fileMustExist: true });
    this.baselineDispatchRows = this.dispatchRows() ?? 0;
  }

  static async start(options: AdversarialServerOptions = {}): Promise<AdversarialHttpServer> {
    // The handler exists before the instance (the port is known only after listen).
    const holder: { self?: AdversarialHttpServer } = {};
    const handler = (socket: Socket): void => holder.self?.serve(socket);
    const server =
      options.tls === undefined
        ? createNetServer(handler)
        : createTlsServer({ key: options.tls.key, cert: options.tls.cert }, handler);
    // A client that refuses our certificate closes mid-handshake: expected here, not an error.
    server.on('tlsClientError', () => undefined);
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    holder.self = new AdversarialHttpServer(server, options, address.port);
    return holder.self;
  }

  get requests(): ReceivedRequest[] {
    return this.log.flatMap((e) => (e.event === 'request' ? [e.request] : []));
  }

  /** Resolves when a log entry matching `test` exists (already or later): tests wait on events, never sleep. */
  waitFor(test: (entry: LogEntry) => boolean): Promise<LogEntry> {
    const found = this.log.find(test);
    if (found !== undefined) return Promise.resolve(found);
    return new Promise((resolve) => {
      const listener = (entry: LogEntry): void => {
        if (!test(entry)) return;
        this.off('entry', listener);
        resolve(entry);
      };
      this.on('entry', listener);
    });
  }

  /** Closes every open connection from the server side (e.g. an idle keep-alive socket). */
  closeConnections(why: string): void {
    for (const [conn, socket] of this.sockets) {
      this.record({ event: 'closed_by_server', conn, why });
      socket.destroy();
    }
  }

  async stop(): Promise<void> {
    for (const socket of this.sockets.values()) socket.destroy();
    this.server.close();
    await once(this.server, 'close');
    this.db?.close();
  }

  private record(entry: LogEntry): void {
    this.log.push(entry);
    this.emit('entry', entry);
  }

  private serve(socket: Socket): void {
    const conn = ++this.connections;
    this.sockets.set(conn, socket);
    this.record({ event: 'accepted', conn });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      if (this.sockets.delete(conn)) this.record({ event: 'closed_by_peer', conn });
    });
    if (this.options.onAccept?.(conn) === 'close') {
      this.closeSocket(conn, socket, 'close_on_accept');
      return;
    }
    let buffer = Buffer.alloc(0);
    let onConnection = 0;
    let head: { method: string; path: string; headers: Record<string, string>; bodyLength: number } | undefined;
    let behavior: Behavior | undefined;
    socket.on('data', (chunk: Buffer) => {
      if (buffer.length === 0 && head === undefined) this.firstByte(conn);
      buffer = Buffer.concat([buffer, chunk]);
      for (;;) {
        if (head === undefined) {
          const end = buffer.indexOf('\r\n\r\n');
          if (end < 0) return;
          head = parseHead(buffer.subarray(0, end).toString('latin1'));
          buffer = buffer.subarray(end + 4);
          behavior = this.options.script?.({
            conn,
            onConnection,
            method: head.method,
            path: head.path,
            headers: head.headers,
            body: '',
            complete: false,
          }) ?? {
            kind: 'respond',
            status: 200,
            body: 'ok',
            applyEffect: true,
          };
          if (behavior.kind === 'close_after_headers') {
            this.record({
              event: 'request',
              request: {
                conn,
                onConnection,
                method: head.method,
                path: head.path,
                headers: head.headers,
                body: '',
                complete: false,
              },
            });
            this.closeSocket(conn, socket, 'close_after_headers');
            return;
          }
        }
        if (buffer.length < head.bodyLength) return;
        const body = buffer.subarray(0, head.bodyLength).toString('utf8');
        buffer = buffer.subarray(head.bodyLength);
        const request: ReceivedRequest = {
          conn,
          onConnection,
          method: head.method,
          path: head.path,
          headers: head.headers,
          body,
          complete: true,
        };
        this.record({ event: 'request', request });
        this.act(conn, socket, request, behavior as Behavior);
        head = undefined;
        onConnection += 1;
        if (buffer.length > 0) this.firstByte(conn);
        else return;
      }
    });
  }

  private firstByte(conn: number): void {
    this.requestsStarted += 1;
    const rows = this.dispatchRows();
    this.record({
      event: 'first_byte',
      conn,
      dispatchRowsVisible: rows === undefined ? undefined : rows - this.baselineDispatchRows,
      requestsStarted: this.requestsStarted,
    });
  }

  /** Read through this server's own SQLite connection: only what is committed is visible. */
  private dispatchRows(): number | undefined {
    const row = this.db?.prepare(`SELECT count(*) AS n FROM events WHERE kind = 'DISPATCH_STARTED'`).get() as
      { n: number } | undefined;
    return row?.n;
  }

  private apply(conn: number, request: ReceivedRequest): void {
    this.effects.push(`${request.method} ${request.path} ${request.body}`);
    this.record({ event: 'effect_applied', conn, path: request.path, body: request.body });
  }

  private act(conn: number, socket: Socket, request: ReceivedRequest, behavior: Behavior): void {
    switch (behavior.kind) {
      case 'respond': {
        if (behavior.applyEffect === true) this.apply(conn, request);
        const body = Buffer.from(behavior.body ?? '');
        const headers = { ...behavior.headers };
        let payload: Buffer;
        if (behavior.chunked === true) {
          headers['transfer-encoding'] = 'chunked';
          payload = Buffer.concat([Buffer.from(`${body.length.toString(16)}\r\n`), body, Buffer.from('\r\n0\r\n\r\n')]);
        } else {
          headers['content-length'] = String(body.length);
          payload = body;
        }
        if (behavior.close === true) headers.connection = 'close';
        const hints =
          behavior.earlyHints === true ? statusHead(103, { link: '</style.css>; rel=preload' }) : Buffer.alloc(0);
        socket.write(Buffer.concat([hints, statusHead(behavior.status, headers), payload]));
        this.record({ event: 'responded', conn, status: behavior.status, complete: true });
        if (behavior.close === true) this.closeSocket(conn, socket, 'connection_close_after_response', true);
        return;
      }
      case 'apply_then_informational_then_close':
        this.apply(conn, request);
        socket.write(statusHead(103, { link: '</style.css>; rel=preload' }));
        this.record({ event: 'responded', conn, status: 103, complete: false });
        this.closeSocket(conn, socket, 'informational_then_close', true);
        return;
      case 'apply_then_hang':
        this.apply(conn, request);
        return;
      case 'apply_then_close':
        this.apply(conn, request);
        this.closeSocket(conn, socket, 'apply_then_close');
        return;
      case 'apply_then_close_mid_body':
        this.apply(conn, request);
        socket.write(
          Buffer.concat([
            statusHead(behavior.status, {
              'content-length': String(behavior.announced),
              'content-type': 'application/json',
            }),
            Buffer.from(behavior.sent),
          ]),
        );
        this.record({ event: 'responded', conn, status: behavior.status, complete: false });
        this.closeSocket(conn, socket, 'close_mid_body', true);
        return;
      case 'apply_then_bad_chunked':
        this.apply(conn, request);
        socket.write(
          Buffer.concat([
            statusHead(behavior.status, { 'transfer-encoding': 'chunked' }),
            Buffer.from('5\r\nhello\r\nzz\r\n'),
          ]),
        );
        this.record({ event: 'responded', conn, status: behavior.status, complete: false });
        this.closeSocket(conn, socket, 'bad_chunked', true);
        return;
      case 'close_on_accept':
      case 'close_after_headers':
        this.closeSocket(conn, socket, behavior.kind);
        return;
    }
  }

  private closeSocket(conn: number, socket: Socket, why: string, graceful = false): void {
    if (this.sockets.delete(conn)) this.record({ event: 'closed_by_server', conn, why });
    if (graceful) socket.end();
    else socket.destroy();
  }
}

function statusHead(status: number, headers: Record<string, string>): Buffer {
  const lines = [
    `HTTP/1.1 ${status} ${status === 200 ? 'OK' : 'Status'}`,
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
  ];
  return Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1');
}

function parseHead(text: string): {
  method: string;
  path: string;
  headers: Record<string, string>;
  bodyLength: number;
} {
  const [requestLine = '', ...lines] = text.split('\r\n');
  const [method = '', path = ''] = requestLine.split(' ');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { method, path, headers, bodyLength: Number(headers['content-length'] ?? '0') };
}
