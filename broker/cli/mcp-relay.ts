import { createConnection, type Socket } from 'node:net';
import type { Readable, Writable } from 'node:stream';
import { agentLimitsDefault } from '../agent/agent-limits.js';
import { actionRecordedCapability, actionRecordedNotification } from '../contract/agent-notifications.js';
import { CodedError } from '../contract/coded-error.js';
import type { ReconnectPolicy } from './mcp-reconnect-policy.js';

/** A client line longer than the broker's frame bound is streamed through untracked (the broker answers PAYLOAD_LIMIT). */
const lineBytesMax = agentLimitsDefault.frameBytesMax + 1;
/** What the client may send while the broker is away; beyond this its requests are answered at once. */
const pendingLinesMax = 256;
const pendingBytesMax = 16 * 1024 * 1024;
/** The replayed initialize's id: a string no MCP client uses, so its answer is never mistaken for the client's. */
const replayIdPrefix = 'postern-shim-replay-';
/** JSON-RPC's "server error" range; data.code carries Postern's code (as the broker's own refusals do). */
const lostPrefix =
  'the connection to the Postern broker was lost before it answered (broker restarted or stopped); the shim is reconnecting. ';
/** No action named: the broker names each one once recorded (agent-api.ts actionRecordedNotification), before its dispatch at the latest. */
const lostAnswer = `${lostPrefix}The broker had named no action for this call before the connection was lost.`;
/** The lost call's action, named: the agent asks about it instead of resending. */
function lostAction(actionId: string): string {
  return (
    `${lostPrefix}This call's action ${actionId} was recorded before the connection was lost: do not send it again. ` +
    `Once the broker is back, action_status {"action_id":"${actionId}"} says what is known, fetch_result reads its result once settled.`
  );
}
const shimErrorCode = -32_000;

type JsonRpcId = string | number;
interface Message {
  readonly id?: unknown;
  readonly method?: unknown;
  readonly params?: unknown;
  readonly error?: { code?: unknown; message?: unknown; data?: { code?: unknown } };
}

/**
 * The refusals that are about this process itself (docs/error-codes.md): the broker refuses it the same way however often
 * it comes back, so the shim stops at once instead of reconnecting. RATE_LIMITED and CONNECTION_EVICTED are about the
 * connection pool at that moment and pass: the shim reconnects after them.
 */
const finalRefusalCodes: ReadonlySet<string> = new Set(['PEER_REFUSED']);

/** The broker's refusal of the connection itself (agent-socket.ts, mcp-connection.ts evict): said once, then it closes. */
interface Refusal {
  readonly code: string;
  readonly message: string;
}

/** Why the last reconnection failed, for the coded line the shim gives up with. */
interface Failure {
  readonly code: string;
  readonly field?: string | undefined;
  readonly message: string;
  /** The broker was there and refused the reconnection (RATE_LIMITED…): its code answers what waited. */
  readonly refusal?: Refusal | undefined;
}

/**
 * One absence of the broker, from the connection it lost until the broker answers on a new one (the replayed
 * initialize answered; without one to replay, any answer). A reconnection it refuses (RATE_LIMITED,
 * CONNECTION_EVICTED), accepts and closes unanswered, or accepts and leaves unanswered is part of the same absence:
 * the window and the backoff go on, so --reconnect-for bounds the whole of it.
 */
interface Absence {
  readonly untilMs: number;
  /** The wait before the next try. */
  delayMs: number;
  failure: Failure | undefined;
  /** Gives up at untilMs on a reconnection the broker accepted and has not answered (windowOver). */
  readonly timer: NodeJS.Timeout;
}

/** The broker accepted a reconnection and closed it before answering (no refusal said): the absence goes on. */
const closedUnanswered: Failure = {
  code: 'CONNECTION_FAILED',
  message: 'the broker accepted the reconnection and closed it without answering',
};
/** The broker accepted a reconnection and had not answered it when the window ran out. */
const leftUnanswered: Failure = {
  code: 'CONNECTION_FAILED',
  message: 'the broker accepted the reconnection and had not answered it when the window ran out',
};

export interface McpRelayOptions {
  readonly dataDir: string;
  readonly socketPath: string;
  readonly stdin: Readable;
  readonly stdout: Writable;
  readonly err: (line: string) => void;
  readonly reconnect: ReconnectPolicy;
}

/**
 * The shim's two byte streams, one JSON-RPC message per line each way. It reads only what it needs to
 * outlive a broker restart: the client's `initialize` (replayed on a new connection, its answer kept
 * from the client, which already has one; it declares the `postern.action_recorded` capability in it),
 * `notifications/initialized`, which request ids are still unanswered — those are answered here with
 * BROKER_RESTARTED when the connection drops, never dropped silently — the broker's
 * `notifications/postern/action_recorded` (kept, not relayed), so that answer names the action the lost
 * call recorded, and the broker's refusal of the connection itself (an id-null line with a Postern code, such
 * as CONNECTION_EVICTED: said on stderr, not relayed, its code answering the unanswered requests; after PEER_REFUSED,
 * a refusal of the process itself, the shim stops instead of reconnecting). Every other byte passes through unchanged.
 */
export class McpRelay {
  private socket: Socket | undefined;
  private state: 'live' | 'replaying' | 'down' | 'closed' = 'down';
  private initRequest: Record<string, unknown> | undefined;
  private initializedLine: string | undefined;
  private readonly inFlight = new Map<string, JsonRpcId>();
  /** The action each in-flight request admitted, as the broker named it (notifications/postern/action_recorded). */
  private readonly recorded = new Map<string, string>();
  private pending: string[] = [];
  private pendingBytes = 0;
  private clientTail: Buffer[] = [];
  private clientTailBytes = 0;
  /** The current client line is over lineBytesMax: 'stream' passes it on as it comes, 'drop' skips it. */
  private oversized: 'no' | 'stream' | 'drop' = 'no';
  private brokerTail: Buffer[] = [];
  private clientEnded = false;
  private replays = 0;
  private awaitingDrain = false;
  /** Why the broker is closing the current connection, when it said so (CONNECTION_EVICTED, RATE_LIMITED…). */
  private refusal: Refusal | undefined;
  /** Set while the broker is away: from the lost connection until it answers on a new one. */
  private absence: Absence | undefined;
  private resolveDone: (code: number) => void = () => undefined;

  constructor(private readonly options: McpRelayOptions) {}

  /**
   * Resolves 0 when the client ends (or the broker goes away with giveUpMs 0), 1 when the broker cannot be reached
   * again within the reconnect window, refuses this process itself (PEER_REFUSED) or refuses the replayed initialize
   * (this agent's session). Throws NOT_FOUND (field --data-dir) when no broker listens at start: nothing was written
   * to stdout, and the CLI prints its one coded line on stderr.
   */
  async run(): Promise<number> {
    const { options } = this;
    let socket: Socket;
    try {
      socket = await connect(options.socketPath);
    } catch (error) {
      throw notListening(options.dataDir, options.socketPath, errorCode(error));
    }
    const done = new Promise<number>((resolve) => (this.resolveDone = resolve));
    this.attach(socket);
    this.state = 'live';
    options.stdin.on('data', (chunk: Buffer) => this.fromClient(chunk));
    options.stdin.once('end', () => this.clientGone());
    options.stdin.once('error', () => this.clientGone());
    options.stdout.once('error', () => this.finish(0));
    return done;
  }

  private attach(socket: Socket): void {
    this.socket = socket;
    this.brokerTail = [];
    socket.on('data', (chunk: Buffer) => this.fromBroker(chunk));
    socket.on('drain', () => this.options.stdin.resume());
    socket.once('close', () => {
      if (this.socket === socket) this.brokerLost();
    });
    socket.on('error', () => undefined); // 'close' follows and decides
  }

  private fromClient(chunk: Buffer): void {
    let rest = chunk;
    for (let newline = rest.indexOf(0x0a); newline >= 0; newline = rest.indexOf(0x0a)) {
      const head = rest.subarray(0, newline);
      rest = rest.subarray(newline + 1);
      if (this.oversized !== 'no') {
        if (this.oversized === 'stream') this.toBroker(Buffer.concat([head, Buffer.from('\n')]));
        this.oversized = 'no';
        continue;
      }
      const line = Buffer.concat([...this.clientTail, head]);
      this.clientTail = [];
      this.clientTailBytes = 0;
      this.clientLine(line);
    }
    if (rest.length === 0) return;
    if (this.oversized === 'stream') this.toBroker(rest);
    if (this.oversized !== 'no') return;
    this.clientTail.push(rest);
    this.clientTailBytes += rest.length;
    if (this.clientTailBytes <= lineBytesMax) return;
    // Too long to track: the broker refuses it with PAYLOAD_LIMIT where it can read the id.
    if (this.state === 'live') {
      this.oversized = 'stream';
      this.toBroker(Buffer.concat(this.clientTail));
    } else {
      this.oversized = 'drop';
      this.toClient(
        errorLine(null, 'PAYLOAD_LIMIT', 'a message longer than the broker accepts came while it was away; not sent'),
      );
    }
    this.clientTail = [];
    this.clientTailBytes = 0;
  }

  private clientLine(clientBytes: Buffer): void {
    let line = clientBytes;
    let text = line.toString('utf8');
    const message = parseMessage(text);
    const id = requestId(message);
    if (message?.method === 'initialize' && id !== undefined) {
      // The shim asks to be told each call's action id, for the answer it owes the client if the broker goes away.
      this.initRequest = declaringActionIds(message);
      text = JSON.stringify(this.initRequest);
      line = Buffer.from(text, 'utf8');
    }
    if (message?.method === 'notifications/initialized') this.initializedLine = text;
    if (this.state === 'live') {
      if (id !== undefined) this.inFlight.set(idKey(id), id);
      this.toBroker(Buffer.concat([line, Buffer.from('\n')]));
      return;
    }
    if (this.pending.length >= pendingLinesMax || this.pendingBytes + line.length > pendingBytesMax) {
      // Not BROKER_RESTARTED: that code says the broker held the action when it went away. This request never left the shim.
      const full = `the Postern broker is away and ${pendingLinesMax} requests or ${pendingBytesMax / 2 ** 20} MiB already wait in postern mcp, so this one was not kept: it never reached the broker and nothing was recorded for it; send it again once earlier requests are answered`;
      if (id !== undefined) this.toClient(errorLine(id, 'RATE_LIMITED', full));
      return;
    }
    this.pending.push(text);
    this.pendingBytes += line.length;
  }

  private fromBroker(chunk: Buffer): void {
    let rest = chunk;
    for (let newline = rest.indexOf(0x0a); newline >= 0; newline = rest.indexOf(0x0a)) {
      const line = Buffer.concat([...this.brokerTail, rest.subarray(0, newline + 1)]);
      rest = rest.subarray(newline + 1);
      this.brokerTail = [];
      this.brokerLine(line);
    }
    if (rest.length > 0) this.brokerTail.push(rest);
  }

  private brokerLine(line: Buffer): void {
    const message = parseMessage(line.toString('utf8'));
    const answeredId = typeof message?.id === 'string' || typeof message?.id === 'number';
    const isResponse = message !== undefined && message.method === undefined && answeredId;
    if (this.state === 'replaying' && isResponse && message.id === this.replayId()) {
      this.replayAnswered(message);
      return;
    }
    // A refusal of the connection itself (id null, no request named) is the shim's business, not the client's: an MCP
    // client cannot take an error without an id (its SDK reports a parse error), and the shim reconnects by itself.
    // The requests it leaves unanswered are answered with its code when the connection closes (failInFlight).
    const refusal = connectionRefusal(message);
    if (refusal !== undefined) {
      this.refusal = refusal;
      // A final refusal is said once, as the shim's coded exit line, when the connection closes (stopRefused).
      if (finalRefusalCodes.has(refusal.code)) return;
      const what = this.state === 'replaying' ? 'refused the reconnection' : 'is closing this connection';
      this.options.err(`postern mcp: the broker ${what}: ${refusal.code}: ${refusal.message}`);
      return;
    }
    // The broker answered on this connection: it is back, and a later loss is a new absence with a new window. While
    // replaying, only the replayed initialize's answer says so (replayAnswered): any other line answers nothing.
    if (this.state === 'live') this.endAbsence();
    // Any other id-null line while replaying answers nothing the client sent.
    if (this.state === 'replaying' && message?.id === null) return;
    if (message?.method === actionRecordedNotification) {
      this.noteRecorded(message.params);
      return;
    }
    if (isResponse) {
      this.inFlight.delete(idKey(message.id as JsonRpcId));
      this.recorded.delete(idKey(message.id as JsonRpcId));
    }
    this.toClient(line);
  }

  private replayAnswered(message: Message): void {
    if (message.error !== undefined) {
      this.stopSessionRefused(sessionRefusal(message.error));
      return;
    }
    this.endAbsence();
    this.options.err('postern mcp: reconnected to the broker; the session continues');
    this.goLive();
  }

  private goLive(): void {
    this.state = 'live';
    if (this.initializedLine !== undefined) this.toBroker(Buffer.from(`${this.initializedLine}\n`));
    const queued = this.pending;
    this.pending = [];
    this.pendingBytes = 0;
    for (const text of queued) this.clientLine(Buffer.from(text, 'utf8'));
  }

  private brokerLost(): void {
    if (this.state === 'closed') return;
    this.socket = undefined;
    this.state = 'down';
    // Paused for the old connection's backpressure: what the client sends now waits in `pending`.
    this.options.stdin.resume();
    // A line half-written to the old connection cannot be finished on the next one.
    if (this.oversized === 'stream') this.oversized = 'drop';
    const { refusal } = this;
    this.failInFlight();
    this.refusal = undefined;
    if (refusal !== undefined && finalRefusalCodes.has(refusal.code)) {
      this.stopRefused(refusal);
      return;
    }
    if (this.clientEnded || this.options.reconnect.giveUpMs === 0) {
      this.finish(0);
      return;
    }
    const policy = this.options.reconnect;
    if (this.absence === undefined) {
      const untilMs = Date.now() + policy.giveUpMs;
      const timer = setTimeout(() => this.windowOver(absence), policy.giveUpMs).unref();
      const absence: Absence = { untilMs, delayMs: policy.delayMsMin, failure: undefined, timer };
      this.absence = absence;
      const seconds = Math.round(policy.giveUpMs / 1000);
      this.options.err(`postern mcp: the broker closed the connection; reconnecting for up to ${seconds} s`);
    } else {
      // A reconnection refused, or accepted and closed unanswered: the same absence goes on, and may be over.
      this.absence.failure =
        refusal === undefined
          ? closedUnanswered
          : { code: refusal.code, message: `the broker refused the reconnection: ${refusal.message}`, refusal };
      if (Date.now() + this.absence.delayMs > this.absence.untilMs) {
        this.giveUp(this.absence);
        return;
      }
    }
    void this.reconnect(this.absence);
  }

  /**
   * The window ran out with the broker still away. Tries that fail are bounded by reconnect and brokerLost; this bounds
   * a reconnection the broker accepted and leaves unanswered (the replayed initialize awaiting its answer).
   */
  private windowOver(absence: Absence): void {
    if (this.absence !== absence || this.state !== 'replaying') return;
    // Refused before and only slow to answer this last try (a loaded machine): the broker is there and was refusing,
    // so its word answers what waited, not "did not come back".
    if (absence.failure?.refusal === undefined) absence.failure = leftUnanswered;
    this.giveUp(absence);
  }

  private endAbsence(): void {
    if (this.absence === undefined) return;
    clearTimeout(this.absence.timer);
    this.absence = undefined;
  }

  private async reconnect(absence: Absence): Promise<void> {
    const { socketPath, dataDir } = this.options;
    while (this.state === 'down') {
      const delayMs = absence.delayMs;
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      if (this.state !== 'down') return;
      absence.delayMs = Math.min(delayMs * 2, this.options.reconnect.delayMsMax);
      try {
        const socket = await connect(socketPath);
        if (this.state !== 'down') {
          socket.destroy();
          return;
        }
        this.attach(socket);
        if (this.awaitingDrain) socket.pause();
        this.replay();
        return;
      } catch (error) {
        // Coded as the same failure at start is (run): no broker listens (NOT_FOUND --data-dir), or another.
        absence.failure = notListening(dataDir, socketPath, errorCode(error));
      }
      if (Date.now() + delayMs > absence.untilMs) break;
    }
    if (this.state === 'down') this.giveUp(absence);
  }

  private giveUp(absence: Absence): void {
    const seconds = Math.round(this.options.reconnect.giveUpMs / 1000);
    const why: Failure =
      absence.failure ?? notListening(this.options.dataDir, this.options.socketPath, 'cannot connect');
    const field = why.field === undefined || why.field === '' ? '' : ` ${why.field}`;
    this.options.err(`postern: ${why.code}${field}: gave up reconnecting after ${seconds} s: ${why.message}`);
    this.endAbsence();
    // The broker was there at the last try and refused it: what waited is answered with its word, not "did not come back".
    const answer =
      why.refusal === undefined
        ? {
            code: 'BROKER_RESTARTED',
            message: `the Postern broker went away and did not come back within ${seconds} s`,
          }
        : { code: why.refusal.code, message: refusedUntilGaveUp(why.refusal, seconds) };
    this.failPending(answer.code, `${answer.message}; ${neverSent}`);
    this.finish(1);
  }

  /**
   * The broker came back but answered the replayed initialize with an error: this agent's session is refused, and
   * reconnecting would replay the same initialize, so the shim stops. What waited for it was never sent.
   */
  private stopSessionRefused(refusal: Refusal): void {
    const { dataDir } = this.options;
    this.options.err(
      `postern: ${refusal.code}: the broker for ${dataDir} refused this agent's session after reconnecting ` +
        `(${refusal.message}); postern mcp is not reconnecting`,
    );
    this.failPending(
      refusal.code,
      `the Postern broker came back but refused this agent's session (${refusal.code}: ${refusal.message}), ` +
        `so postern mcp stopped; ${neverSent}`,
    );
    this.finish(1);
  }

  /** The broker refused this process itself: reconnecting would be refused the same way, so the shim stops. */
  private stopRefused(refusal: Refusal): void {
    const { dataDir } = this.options;
    this.options.err(
      `postern: ${refusal.code}: the broker for ${dataDir} refused this process's connection (${refusal.message}); ` +
        'it refuses it the same way every time, so postern mcp is not reconnecting',
    );
    this.failPending(refusal.code, refusedAnswer(refusal));
    this.finish(1);
  }

  /** On a new connection: the client's initialize again (same params, the shim's own id), unless it never sent one. */
  private replay(): void {
    if (this.initRequest === undefined || this.pending.some((text) => parseMessage(text)?.method === 'initialize')) {
      this.goLive();
      return;
    }
    this.replays += 1;
    this.state = 'replaying';
    this.toBroker(Buffer.from(`${JSON.stringify({ ...this.initRequest, id: this.replayId() })}\n`));
  }

  private replayId(): string {
    return `${replayIdPrefix}${this.replays}`;
  }

  /** The shim's own notification: kept for the request it names while that request is unanswered, never relayed. */
  private noteRecorded(params: unknown): void {
    const { request_id: id, action_id: actionId } = (params ?? {}) as { request_id?: unknown; action_id?: unknown };
    if ((typeof id !== 'string' && typeof id !== 'number') || typeof actionId !== 'string') return;
    if (this.inFlight.has(idKey(id))) this.recorded.set(idKey(id), actionId);
  }

  private failInFlight(): void {
    const { refusal } = this;
    for (const [key, id] of this.inFlight) {
      const actionId = this.recorded.get(key);
      this.toClient(
        actionId !== undefined
          ? errorLine(id, 'BROKER_RESTARTED', lostAction(actionId), { action_id: actionId })
          : refusal !== undefined
            ? errorLine(id, refusal.code, refusedAnswer(refusal))
            : errorLine(id, 'BROKER_RESTARTED', lostAnswer),
      );
    }
    this.inFlight.clear();
    this.recorded.clear();
  }

  private failPending(code: string, message: string): void {
    for (const text of this.pending) {
      const id = requestId(parseMessage(text));
      if (id !== undefined) this.toClient(errorLine(id, code, message));
    }
    this.pending = [];
    this.pendingBytes = 0;
  }

  private clientGone(): void {
    this.clientEnded = true;
    // Half-close: the broker finishes what it owes and closes; 'close' then ends the shim.
    if (this.socket !== undefined && this.state !== 'closed') this.socket.end();
    else this.finish(0);
  }

  private toBroker(bytes: Buffer): void {
    if (this.socket === undefined || this.socket.destroyed) return;
    if (!this.socket.write(bytes)) this.options.stdin.pause();
  }

  private toClient(bytes: Buffer | string): void {
    if (this.state === 'closed') return;
    if (this.options.stdout.write(bytes) || this.awaitingDrain) return;
    this.awaitingDrain = true;
    this.socket?.pause();
    this.options.stdout.once('drain', () => {
      this.awaitingDrain = false;
      this.socket?.resume();
    });
  }

  private finish(code: number): void {
    if (this.state === 'closed') return;
    this.state = 'closed';
    this.endAbsence();
    const { stdin, stdout } = this.options;
    // stdin would keep the process alive; the shim has nothing more to read.
    stdin.pause();
    stdin.destroy();
    this.socket?.destroy();
    stdout.write('', () => this.resolveDone(code));
  }
}

function connect(socketPath: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = createConnection(socketPath);
    socket.once('error', reject);
    socket.once('connect', () => {
      socket.off('error', reject);
      resolve(socket);
    });
  });
}

function parseMessage(text: string): Message | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Message) : undefined;
  } catch {
    return undefined;
  }
}

/** The id of a request (a message with a method and a string or number id); undefined for notifications and answers. */
function requestId(message: Message | undefined): JsonRpcId | undefined {
  if (message === undefined || typeof message.method !== 'string') return undefined;
  return typeof message.id === 'string' || typeof message.id === 'number' ? message.id : undefined;
}

/** 1 and "1" are different ids. */
function idKey(id: JsonRpcId): string {
  return JSON.stringify(id);
}

function errorLine(id: JsonRpcId | null, code: string, message: string, more: Record<string, string> = {}): string {
  return `${JSON.stringify({ jsonrpc: '2.0', id, error: { code: shimErrorCode, message, data: { code, ...more } } })}\n`;
}

/** The client's initialize with the shim's experimental capability added (the client's own capabilities kept). */
function declaringActionIds(message: Message): Record<string, unknown> {
  const params = typeof message.params === 'object' && message.params !== null ? message.params : {};
  const { capabilities } = params as { capabilities?: unknown };
  const declared = typeof capabilities === 'object' && capabilities !== null ? capabilities : {};
  const { experimental } = declared as { experimental?: unknown };
  const extra = typeof experimental === 'object' && experimental !== null ? experimental : {};
  return {
    ...message,
    params: {
      ...params,
      capabilities: { ...declared, experimental: { ...extra, [actionRecordedCapability]: {} } },
    },
  };
}

/**
 * The broker's id-null `-32000` line with a Postern code: its refusal of the connection (peer, cap) or its eviction
 * notice, the last line before it closes. The socket's other id-null lines (a parse error for the client's garbage,
 * -32700 without a code) answer what the client sent and pass through.
 */
function connectionRefusal(message: Message | undefined): Refusal | undefined {
  if (message === undefined || message.id !== null || message.method !== undefined) return undefined;
  const { error } = message;
  if (error?.code !== shimErrorCode || typeof error.data?.code !== 'string') return undefined;
  return { code: error.data.code, message: String(error.message ?? 'no reason given') };
}

/**
 * A request left unanswered on a connection the broker refused or evicted (or waiting for one it refused): it handles
 * nothing after saying so. After a final refusal the shim has stopped, and sending it again would be refused alike.
 */
function refusedAnswer(refusal: Refusal): string {
  const closed =
    `the Postern broker closed the connection before handling this request (${refusal.code}: ${refusal.message}); ` +
    'it recorded no action for it';
  return finalRefusalCodes.has(refusal.code)
    ? `${closed}. It refuses this process itself, so postern mcp stopped: sent again, it would be refused the same way.`
    : `${closed}: send it again.`;
}

/** What waited in the shim while the broker was away was never written to any connection (failPending). */
const neverSent = 'this request waited in postern mcp and never reached the broker, so nothing was recorded for it';

/** The answer to what waited when the broker was there at the last reconnection and refused it (giveUp). */
function refusedUntilGaveUp(refusal: Refusal, seconds: number): string {
  return (
    `the Postern broker refused postern mcp's reconnection (${refusal.code}: ${refusal.message}) until its ` +
    `${seconds} s reconnect window ran out, so postern mcp gave up and stopped`
  );
}

/**
 * The broker's error answer to the replayed initialize, with its Postern code. Every refusal the broker writes carries
 * one (jsonrpc-error.ts); an error without one is no refusal it means to make, so it is said as INTERNAL.
 */
function sessionRefusal(error: NonNullable<Message['error']>): Refusal {
  const message = String(error.message ?? 'no reason given');
  if (typeof error.data?.code === 'string') return { code: error.data.code, message };
  return { code: 'INTERNAL', message: `${message} (JSON-RPC error ${String(error.code)}, without a Postern code)` };
}

function notListening(dataDir: string, socketPath: string, why: string): CodedError {
  if (why === 'ENOENT' || why === 'ECONNREFUSED') {
    return new CodedError(
      'NOT_FOUND',
      `no broker is running for ${dataDir} (nothing listens on ${socketPath}: ${why}; start one with: postern daemon --data-dir ${dataDir})`,
      { field: '--data-dir' },
    );
  }
  return new CodedError('INTERNAL', `could not connect to the broker's agent socket ${socketPath}: ${why}`, {
    field: '--data-dir',
  });
}

function errorCode(error: unknown): string {
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' ? code : 'cannot connect';
}
