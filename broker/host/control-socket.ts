import { createServer, type Socket } from 'node:net';
import {
  controlSocketFileName,
  controlSocketPath,
  sendControlRequest,
  type ControlApiReply,
  type ControlReply,
} from './control-client.js';
import { requestSchema } from './control-request.js';
import { CodedError, isCodedError, type BrokerApiMethod } from '../contract/index.js';
import { systemClock, type Clock } from '../ports/index.js';
import type { Vault } from '../vault/index.js';
import { replaceStaleSocket, servePrivately } from '../agent/private-socket.js';
import {
  createControlProof,
  type UnattendedDecisions,
  errorReply,
  type ControlProof,
  type PassphraseSource,
} from './control-proof.js';
import type { OperatorCaller, OperatorHandlers } from './operator-handlers.js';

// The client half lives in control-client.ts (light: the CLI loads it without the broker); importers of this file keep working.
export {
  controlAttemptsMax,
  controlRequestTimeoutMs,
  controlSocketFileName,
  controlSocketPath,
  sendControlRequest,
  type ControlApiReply,
  type ControlReply,
  type ControlRequest,
  type ControlValue,
} from './control-client.js';

/**
 * The daemon's local control socket: how `postern vault unlock` / `lock` reach the vault that lives
 * in the daemon's memory. A Unix domain socket `<dataDir>/control.sock`, mode 0600 inside the 0700
 * data directory, speaking one JSON object per line. Every process of the user can reach it, an
 * agent's detached children included, so decisions (lock and unlock among them) need a person's
 * proof (control-proof.ts); status says nothing secret.
 */
/** A request line (the largest is an unlock with a 1 KiB passphrase, JSON-escaped). */
export const controlLineBytesMax = 8 * 1024;
export const controlConnectionsMax = 16;
/** A connection that sends nothing for this long is closed. */
export const controlIdleMs = 30_000;
/**
 * How long a connection whose reply is still being written (not yet all handed to the kernel: its reader is slower
 * than the page, or does not read) keeps its place at the cap; past that it may be closed to admit another.
 */
export const controlReplyFlushGraceMs = 2_000;
/** Unix socket paths are limited to ~108 bytes (sun_path); refuse early with a clear message. */
export const socketPathBytesMax = 100;

export interface ControlSocket {
  readonly path: string;
  close(): Promise<void>;
}

/**
 * Listens on `<dataDir>/control.sock`. A socket file left by a crashed daemon is replaced; one a
 * live daemon answers on means this data directory is in use, and we refuse to start a second.
 */
export interface ControlSocketOptions {
  dataDir: string;
  vault: Vault;
  /** The operator API for `op: "api"` requests (the CLI's approvals, sessions, actions, activity). */
  handlers?: OperatorHandlers;
  /** Refuses an operator caller (e.g. a process descended from an agent); undefined admits it. */
  refuseApiPeer?: (socket: Socket) => CodedError | undefined;
  /**
   * `operator.unattended_decisions`: decisions without a person's proof, journaled as the process (control-proof.ts). A
   * boolean is fixed; a function is asked per decision (the runtime's answer depends on the configuration's seal).
   */
  unattendedDecisions?: boolean | (() => UnattendedDecisions);
  /** The vault was unlocked at start from a passphrase file: its passphrase proves no person here (control-proof.ts). */
  passphraseFromFile?: boolean;
  /** The from-file latch shared with the operator UI (control-proof.ts); it wins over passphraseFromFile. */
  passphraseSource?: PassphraseSource;
  /** The passphrase backoff's and the reply flush grace's clock (tests); default the system clock. */
  clock?: Clock;
}

export async function startControlSocket(options: ControlSocketOptions): Promise<ControlSocket> {
  const socketPath = controlSocketPath(options.dataDir);
  if (Buffer.byteLength(socketPath) > socketPathBytesMax) {
    throw new CodedError(
      'INVALID_ARGUMENT',
      `the data directory path is too long for its control socket (max ${socketPathBytesMax} bytes for ${controlSocketFileName})`,
      {
        field: '--data-dir',
      },
    );
  }
  await removeStaleSocket(socketPath);
  const clock = options.clock ?? systemClock;
  const proof = createControlProof({
    vault: options.vault,
    clock,
    unattendedDecisions: unattendedOf(options.unattendedDecisions),
    passphraseFromFile: options.passphraseFromFile === true,
    ...(options.passphraseSource === undefined ? {} : { passphraseSource: options.passphraseSource }),
  });
  const connections = new Set<Socket>();
  const activity = new WeakMap<Socket, ConnectionActivity>();
  let tick = 0;
  const server = createServer({ allowHalfOpen: false }, (socket) => {
    // At the cap, the least recently active connection with no request in progress and no reply still being written
    // makes room: a same-user process holding every connection open (idle, or with half a line) cannot lock the
    // person's CLI out. It is told so with CONTROL_SOCKET_BUSY before it closes, and nothing it sends is read any more:
    // a client whose line the broker never read knows it may send it again (control-client.ts). A connection whose
    // reply is still being written (a page larger than the socket's send buffer, its reader not done yet) was read: it
    // is never told BUSY. It keeps its place for controlReplyFlushGraceMs; past that, with no idle connection left, it
    // is closed without a line (its reply is cut: the client reports a connection closed without a reply and never
    // sends the request again), so a process that never reads its replies cannot hold the cap. Only when no
    // connection can make room is the newcomer refused, with CONTROL_SOCKET_BUSY.
    if (connections.size >= controlConnectionsMax) {
      const nowMs = clock.nowMs();
      const byAge = (a: Socket, b: Socket): number => (activity.get(a)?.last ?? 0) - (activity.get(b)?.last ?? 0);
      const open = [...connections].filter((c) => activity.get(c)?.busy !== true);
      const idle = open.filter((c) => activity.get(c)?.writingSinceMs === undefined).sort(byAge)[0];
      const stalled = open
        .filter((c) => nowMs - (activity.get(c)?.writingSinceMs ?? nowMs) >= controlReplyFlushGraceMs)
        .sort(byAge)[0];
      const evict = idle ?? stalled;
      if (evict === undefined) {
        closeUnread(
          socket,
          `the control socket holds ${controlConnectionsMax} connections and every one has a request in progress or a reply being written; nothing was read from this one`,
        );
        return;
      }
      connections.delete(evict);
      const evicted = activity.get(evict);
      if (evicted !== undefined) evicted.closed = true;
      if (evict === idle) {
        closeUnread(
          evict,
          `this idle control connection was closed to make room for another (at most ${controlConnectionsMax}); every request it sent was answered, nothing it sent since was read`,
        );
      } else {
        evict.destroy();
      }
    }
    const state: ConnectionActivity = {
      busy: false,
      writingSinceMs: undefined,
      closed: false,
      last: (tick += 1),
      touch: () => (state.last = tick += 1),
    };
    activity.set(socket, state);
    connections.add(socket);
    socket.once('close', () => connections.delete(socket));
    serveConnection(socket, options, proof, state, clock);
  });
  const served = await servePrivately(server, socketPath, connections);
  return { path: socketPath, close: served.close };
}

/**
 * Refuses when a broker answers on this data directory's control socket. Called before the journal
 * opens (its recovery must never run under a live broker). Two brokers starting in the same
 * instant can both pass; the socket's listen then still lets only one of them bind.
 */
export async function refuseIfBrokerRunning(dataDir: string): Promise<void> {
  await removeStaleSocket(controlSocketPath(dataDir));
}

/** A broker that answers `vault_status` on it is live (one too busy to read it, too): the data directory is in use. */
async function removeStaleSocket(socketPath: string): Promise<void> {
  const answers = async (path: string): Promise<boolean> =>
    (await sendControlRequest(path, { op: 'vault_status' }).catch((error: unknown) =>
      isCodedError(error) && error.code === 'CONTROL_SOCKET_BUSY' ? 'busy' : undefined,
    )) !== undefined;
  await replaceStaleSocket(socketPath, answers, 'another Postern broker is already running with this data directory');
}

/** Whether a connection has a request in progress or a reply being written, and when (in arrival order) it last had one. */
interface ConnectionActivity {
  busy: boolean;
  /**
   * Since when (the clock's ms) a reply of it has been only partly handed to the kernel; undefined once every reply
   * is. Bytes in the kernel are the peer's already (a Unix socket queues them at the reader): closing loses none.
   */
  writingSinceMs: number | undefined;
  /** Closed at the cap (closeUnread): whatever it sends from now on is dropped unread. */
  closed: boolean;
  last: number;
  touch(): void;
}

/**
 * Closes a connection none of whose requests is in progress or unanswered, telling it so first: one CONTROL_SOCKET_BUSY line, then
 * the socket is destroyed at once (the line is already in the peer's receive queue; a peer that does not read is not
 * waited for). The caller makes sure nothing it sent is read after this.
 */
function closeUnread(socket: Socket, message: string): void {
  if (socket.writable) socket.end(`${JSON.stringify(errorReply(new CodedError('CONTROL_SOCKET_BUSY', message)))}\n`);
  socket.destroy();
}

/**
 * One request at a time: the next line is read only after the previous reply was written (handed to the socket;
 * `writingSinceMs` says until when part of it still waits for the kernel).
 */
function serveConnection(
  socket: Socket,
  options: ControlSocketOptions,
  proof: ControlProof,
  activity: ConnectionActivity,
  clock: Clock,
): void {
  socket.setTimeout(controlIdleMs, () => socket.destroy());
  let buffered = Buffer.alloc(0);

  const drain = async (): Promise<void> => {
    if (activity.busy) return;
    activity.busy = true;
    activity.touch();
    try {
      for (;;) {
        const newline = buffered.indexOf(0x0a);
        if (newline < 0) break;
        const reply = await handleLine(buffered.subarray(0, newline), socket, options, proof);
        // Data that arrived meanwhile was appended after the line; keep it, and overwrite the line
        // (it may have held a passphrase) before dropping it.
        const rest = Buffer.from(buffered.subarray(newline + 1));
        buffered.fill(0);
        buffered = rest;
        if (socket.destroyed) return;
        activity.writingSinceMs ??= clock.nowMs();
        socket.write(`${JSON.stringify(reply)}\n`, () => {
          if (socket.writableLength === 0) activity.writingSinceMs = undefined;
        });
      }
    } finally {
      activity.busy = false;
    }
  };

  socket.on('data', (chunk: Buffer) => {
    if (activity.closed) {
      chunk.fill(0);
      return;
    }
    const next = Buffer.concat([buffered, chunk]);
    buffered.fill(0);
    chunk.fill(0);
    buffered = next;
    if (buffered.indexOf(0x0a) < 0 && buffered.length > controlLineBytesMax) {
      buffered.fill(0);
      buffered = Buffer.alloc(0);
      socket.end(
        `${JSON.stringify(errorReply(new CodedError('PAYLOAD_LIMIT', `a request line is at most ${controlLineBytesMax} bytes`)))}\n`,
      );
      return;
    }
    void drain();
  });
  socket.on('error', () => socket.destroy());
  socket.on('close', () => buffered.fill(0));
}

async function handleLine(
  line: Buffer,
  socket: Socket,
  options: ControlSocketOptions,
  proof: ControlProof,
): Promise<ControlReply | ControlApiReply> {
  if (line.length > controlLineBytesMax)
    return errorReply(new CodedError('PAYLOAD_LIMIT', `a request line is at most ${controlLineBytesMax} bytes`));
  let parsed: unknown;
  try {
    parsed = JSON.parse(line.toString('utf8'));
  } catch {
    return errorReply(
      new CodedError('INVALID_ARGUMENT', 'a request is one JSON object per line', { field: 'request' }),
    );
  }
  const request = requestSchema.safeParse(parsed);
  if (!request.success) {
    // zod issues can quote input values (a passphrase); name only the path.
    const field = request.error.issues[0]?.path.join('.') || 'op';
    return errorReply(
      new CodedError('INVALID_ARGUMENT', 'not a valid control request (ops: unlock, lock, vault_status, api)', {
        field,
      }),
    );
  }
  const call = request.data;
  // Liveness and lock state for anyone of this user (the stale-socket check and `vault list` ask it).
  if (call.op === 'vault_status')
    return { ok: true, value: { state: options.vault.state(), credentials: options.vault.list().length } };
  if (call.op === 'api' && options.handlers === undefined) {
    return errorReply(
      new CodedError('UNSUPPORTED_ACTION', 'this broker serves no operator API on its control socket', { field: 'op' }),
    );
  }
  // Agents never reach the operator side, not even unlock/lock: their process trees are refused first.
  const refused = options.refuseApiPeer?.(socket);
  if (refused !== undefined) return errorReply(refused);
  // unlock and lock are the vault methods of the operator API under their older names.
  const { method, input, passphrase } =
    call.op === 'api'
      ? { method: call.method, input: call.input ?? {}, passphrase: call.proof?.passphrase }
      : call.op === 'unlock'
        ? { method: 'vault.unlock' as const, input: { passphrase: call.passphrase }, passphrase: undefined }
        : { method: 'vault.lock' as const, input: {}, passphrase: call.proof?.passphrase };
  const reply = await proof.decide(socket, method, input, passphrase, (caller) =>
    execute(options, method, input, caller),
  );
  // An unlock from a passphrase file (the client says so): that passphrase proves no person from now on.
  if (call.op === 'unlock' && call.source === 'file' && reply.ok) proof.passphraseReadFromFile();
  return reply;
}

/** The operator method, or with no operator API (a vault-only control socket) the vault's own two decisions. */
async function execute(
  options: ControlSocketOptions,
  method: BrokerApiMethod,
  input: unknown,
  caller: OperatorCaller | undefined,
): Promise<ControlApiReply> {
  if (options.handlers !== undefined) return options.handlers[method](input, caller);
  const { vault } = options;
  try {
    if (method === 'vault.unlock') {
      const passphrase = Buffer.from((input as { passphrase: string }).passphrase, 'utf8');
      try {
        await vault.unlock(passphrase);
      } finally {
        passphrase.fill(0);
      }
      return { ok: true, value: { state: vault.state() } };
    }
    if (method === 'vault.lock') {
      vault.lock('operator');
      return { ok: true, value: { state: vault.state() } };
    }
  } catch (error) {
    return errorReply(error);
  }
  return errorReply(
    new CodedError('UNSUPPORTED_ACTION', 'this broker serves no operator API on its control socket', { field: 'op' }),
  );
}

function unattendedOf(setting: boolean | (() => UnattendedDecisions) | undefined): () => UnattendedDecisions {
  if (typeof setting === 'function') return setting;
  const fixed: UnattendedDecisions = setting === true ? 'on' : 'off';
  return () => fixed;
}
