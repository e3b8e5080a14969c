import { createConnection, type Socket } from 'node:net';
import fc from 'fast-check';
import { agentToolNames } from '../contract/index.js';

/**
 * Hostile and malformed MCP traffic for the agent socket (and, in tests/agent-fuzz.test.ts, for the whole
 * daemon): fast-check arbitraries of frames a broken or malicious client might send, and a raw
 * line client to send them and read what comes back. A frame is the bytes of one line, without
 * the newline (the sender adds it), except `garbageBytes` which may contain newlines itself.
 */

const jsonValue = fc.jsonValue({ maxDepth: 4 });
const requestId = fc.oneof(
  fc.integer(),
  fc.string({ maxLength: 40 }),
  fc.constant(null),
  fc.double(),
  fc.constantFrom(Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER, 1e308),
  fc.constantFrom('1e400', '123456789012345678901234567890', '-0'),
);

/** Random bytes, including newlines, NULs and invalid UTF-8. */
export const garbageBytes = fc.uint8Array({ minLength: 1, maxLength: 512 }).map((bytes) => Buffer.from(bytes));

/** A valid request cut off at a random point (and never finished). */
export const truncatedJson = fc
  .record({ method: fc.constantFrom('tools/list', 'tools/call', 'initialize'), id: fc.integer() })
  .chain(({ method, id }) => {
    const text = JSON.stringify({
      jsonrpc: '2.0',
      id,
      method,
      params: { name: 'http_request', arguments: { route: 'x' } },
    });
    return fc.integer({ min: 1, max: text.length - 1 }).map((cut) => text.slice(0, cut));
  });

/** Right shape, wrong protocol version (or none). */
export const wrongJsonRpcVersion = fc
  .record({
    jsonrpc: fc.oneof(fc.constant('1.0'), fc.constant(2), fc.constant(null), fc.string({ maxLength: 8 })),
    id: fc.integer(),
    method: fc.constant('tools/list'),
  })
  .map((message) => JSON.stringify(message));

/** Ids a JSON-RPC id may not be (huge numbers, floats, objects) on an otherwise normal request. */
export const hugeIds = fc
  .oneof(
    fc.constantFrom('1e400', '123456789012345678901234567890123456789', '1.5', '-1e308', '{"a":1}', '[1]', 'true'),
    fc.string({ minLength: 1, maxLength: 2048 }).map((s) => JSON.stringify(s)),
  )
  .map((idText) => `{"jsonrpc":"2.0","id":${idText},"method":"tools/list"}`);

/** Params nested far deeper than any real message. */
export const deeplyNested = fc.integer({ min: 65, max: 2_000 }).chain((depth) =>
  fc.constantFrom('[', '{"a":').map((open) => {
    const close = open === '[' ? ']' : '}';
    return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_routes","arguments":${open.repeat(depth)}1${close.repeat(depth)}}}`;
  }),
);

/** Requests and notifications with random method names (operator-looking ones included). */
export const randomMethods = fc
  .record({
    method: fc.oneof(
      fc.string({ maxLength: 40 }),
      fc.constantFrom(
        'approvals.approve',
        'status',
        'approve',
        'vault.unlock',
        'prompts/list',
        'resources/read',
        'notifications/cancelled',
        'logging/setLevel',
        'ping',
      ),
    ),
    id: fc.option(fc.integer(), { nil: undefined }),
    params: fc.option(jsonValue, { nil: undefined }),
  })
  .map(({ method, id, params }) =>
    JSON.stringify({
      jsonrpc: '2.0',
      ...(id === undefined ? {} : { id }),
      method,
      ...(params === undefined ? {} : { params }),
    }),
  );

/** tools/call with real and made-up tool names and random arguments (objects or not). */
export const randomToolCalls = fc
  .record({
    name: fc.oneof(
      fc.constantFrom(...agentToolNames, 'approve', 'reject_action', 'rm -rf'),
      fc.string({ maxLength: 30 }),
    ),
    args: fc.oneof(fc.dictionary(fc.string({ maxLength: 12 }), jsonValue, { maxKeys: 6 }), jsonValue),
    id: requestId,
  })
  .map(
    ({ name, args, id }) =>
      `{"jsonrpc":"2.0","id":${JSON.stringify(id) ?? 'null'},"method":"tools/call","params":{"name":${JSON.stringify(name)},"arguments":${JSON.stringify(args) ?? 'null'}}}`,
  );

/** Responses and errors a client should never send to a server, plus odd JSON values. */
export const strayMessages = fc.oneof(
  fc.integer().map((id) => JSON.stringify({ jsonrpc: '2.0', id, result: {} })),
  fc.integer().map((id) => JSON.stringify({ jsonrpc: '2.0', id, error: { code: 1, message: 'x' } })),
  jsonValue.map((value) => JSON.stringify(value)),
  fc.constantFrom('[]', '[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]', 'null', '""', '{}', '\r', ' '),
);

/** Any hostile frame. */
export const hostileFrame: fc.Arbitrary<string | Buffer> = fc.oneof(
  garbageBytes,
  truncatedJson,
  wrongJsonRpcVersion,
  hugeIds,
  deeplyNested,
  randomMethods,
  randomToolCalls,
  strayMessages,
);

/** A line-oriented raw client: write frames, read answers line by line. */
export interface RawLineClient {
  readonly socket: Socket;
  send(frame: string | Buffer): void;
  /** The next line parsed as JSON; rejects when the connection closes first. */
  nextMessage(): Promise<unknown>;
  /** Resolves when the server closed the connection. */
  readonly closed: Promise<void>;
  destroy(): void;
}

export function connectRawLines(socketPath: string): Promise<RawLineClient> {
  return new Promise((resolve, reject) => {
    const socket = createConnection(socketPath);
    const lines: string[] = [];
    const waiters: { resolve: (line: string) => void; reject: (error: Error) => void }[] = [];
    let buffered = '';
    let ended = false;
    const closed = new Promise<void>((done) => socket.once('close', () => done()));
    socket.setEncoding('utf8');
    socket.on('data', (text: string) => {
      buffered += text;
      for (let newline = buffered.indexOf('\n'); newline >= 0; newline = buffered.indexOf('\n')) {
        const line = buffered.slice(0, newline);
        buffered = buffered.slice(newline + 1);
        const waiter = waiters.shift();
        if (waiter) waiter.resolve(line);
        else lines.push(line);
      }
    });
    socket.on('error', () => undefined);
    socket.once('close', () => {
      ended = true;
      for (const waiter of waiters.splice(0)) waiter.reject(new Error('connection closed'));
    });
    socket.once('connect', () =>
      resolve({
        socket,
        send: (frame) => {
          if (!socket.destroyed)
            socket.write(typeof frame === 'string' ? `${frame}\n` : Buffer.concat([frame, Buffer.from('\n')]));
        },
        nextMessage: () => {
          const line = lines.shift();
          if (line !== undefined) return Promise.resolve(JSON.parse(line) as unknown);
          if (ended) return Promise.reject(new Error('connection closed'));
          return new Promise<string>((res, rej) => waiters.push({ resolve: res, reject: rej })).then(
            (l) => JSON.parse(l) as unknown,
          );
        },
        closed,
        destroy: () => socket.destroy(),
      }),
    );
    socket.once('error', reject);
  });
}

/** The initialize request a well-behaved client sends first. */
export function initializeFrame(id: number | string = 0, clientName = 'raw-test'): string {
  return JSON.stringify({
    jsonrpc: '2.0',
    id,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: clientName, version: '1' } },
  });
}

/** One line of at least `bytesMin` bytes (a valid-looking request with a huge argument): for frame limits. */
export function oversizedFrame(bytesMin: number): fc.Arbitrary<string> {
  return fc.integer({ min: bytesMin, max: bytesMin * 2 }).map((size) =>
    JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'http_request', arguments: { body: 'x'.repeat(size) } },
    }),
  );
}
