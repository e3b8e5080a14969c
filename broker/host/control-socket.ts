import { createConnection, createServer, type Socket } from 'node:net';
import path from 'node:path';
import { z } from 'zod';
import { brokerApiMethods, CodedError, isCodedError, type ErrorCode, type Reply } from '../contract/index.js';
import type { VaultState } from '../ports/index.js';
import type { Vault } from '../vault/index.js';
import { replaceStaleSocket, servePrivately } from '../agent/private-socket.js';
import type { OperatorHandlers } from './operator-handlers.js';

/**
 * The daemon's local control socket: how `postern vault unlock` / `lock` reach the vault that lives
 * in the daemon's memory. A Unix domain socket `<dataDir>/control.sock`, mode 0600 inside the 0700
 * data directory, speaking one JSON object per line. Unlock is authorized by the passphrase itself;
 * lock needs nothing (it only takes capability away); status says nothing secret.
 */
export const controlSocketFileName = 'control.sock';
/** A request line (the largest is an unlock with a 1 KiB passphrase, JSON-escaped). */
export const controlLineBytesMax = 8 * 1024;
export const controlConnectionsMax = 16;
/** A connection that sends nothing for this long is closed. */
export const controlIdleMs = 30_000;
/** Unix socket paths are limited to ~108 bytes (sun_path); refuse early with a clear message. */
export const socketPathBytesMax = 100;

const requestSchema = z.discriminatedUnion('op', [
  z.strictObject({ op: z.literal('unlock'), passphrase: z.string().min(1).max(1_024) }),
  z.strictObject({ op: z.literal('lock') }),
  z.strictObject({ op: z.literal('vault_status') }),
  // The operator API (approvals, sessions, actions, activity) for the CLI; the handler parses input.
  z.strictObject({ op: z.literal('api'), method: z.enum(brokerApiMethods), input: z.unknown().optional() }),
]);
export type ControlRequest = z.infer<typeof requestSchema>;

export interface ControlValue {
  state: VaultState;
  credentials?: number;
}
export type ControlReply = { ok: true; value: ControlValue } | { ok: false; error: { code: string; message: string; field?: string } };
/** What an `api` request answers: the operator method's own Reply. */
export type ControlApiReply = Reply<unknown>;

export interface ControlSocket {
  readonly path: string;
  close(): Promise<void>;
}

export function controlSocketPath(dataDir: string): string {
  return path.join(dataDir, controlSocketFileName);
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
  /** Refuses an operator API caller (e.g. a process descended from an agent); undefined admits it. */
  refuseApiPeer?: (socket: Socket) => CodedError | undefined;
}

export async function startControlSocket(options: ControlSocketOptions): Promise<ControlSocket> {
  const socketPath = controlSocketPath(options.dataDir);
  if (Buffer.byteLength(socketPath) > socketPathBytesMax) {
    throw new CodedError('INVALID_ARGUMENT', `the data directory path is too long for its control socket (max ${socketPathBytesMax} bytes for ${controlSocketFileName})`, {
      field: '--data-dir',
    });
  }
  await removeStaleSocket(socketPath);
  const connections = new Set<Socket>();
  const server = createServer({ allowHalfOpen: false }, (socket) => {
    if (connections.size >= controlConnectionsMax) {
      socket.destroy();
      return;
    }
    connections.add(socket);
    socket.once('close', () => connections.delete(socket));
    serveConnection(socket, options);
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

/** A broker that answers `vault_status` on it is live: the data directory is in use. */
async function removeStaleSocket(socketPath: string): Promise<void> {
  const answers = async (path: string): Promise<boolean> => (await sendControlRequest(path, { op: 'vault_status' }).catch(() => undefined)) !== undefined;
  await replaceStaleSocket(socketPath, answers, 'another Postern broker is already running with this data directory');
}

/** One request at a time: the next line is read only after the previous reply was written. */
function serveConnection(socket: Socket, options: ControlSocketOptions): void {
  socket.setTimeout(controlIdleMs, () => socket.destroy());
  let buffered = Buffer.alloc(0);
  let busy = false;

  const drain = async (): Promise<void> => {
    if (busy) return;
    busy = true;
    try {
      for (;;) {
        const newline = buffered.indexOf(0x0a);
        if (newline < 0) break;
        const reply = await handleLine(buffered.subarray(0, newline), socket, options);
        // Data that arrived meanwhile was appended after the line; keep it, and overwrite the line
        // (it may have held a passphrase) before dropping it.
        const rest = Buffer.from(buffered.subarray(newline + 1));
        buffered.fill(0);
        buffered = rest;
        if (socket.destroyed) return;
        socket.write(`${JSON.stringify(reply)}\n`);
      }
    } finally {
      busy = false;
    }
  };

  socket.on('data', (chunk: Buffer) => {
    const next = Buffer.concat([buffered, chunk]);
    buffered.fill(0);
    chunk.fill(0);
    buffered = next;
    if (buffered.indexOf(0x0a) < 0 && buffered.length > controlLineBytesMax) {
      buffered.fill(0);
      buffered = Buffer.alloc(0);
      socket.end(`${JSON.stringify(errorReply(new CodedError('PAYLOAD_LIMIT', `a request line is at most ${controlLineBytesMax} bytes`)))}\n`);
      return;
    }
    void drain();
  });
  socket.on('error', () => socket.destroy());
  socket.on('close', () => buffered.fill(0));
}

async function handleLine(line: Buffer, socket: Socket, options: ControlSocketOptions): Promise<ControlReply | ControlApiReply> {
  const { vault, handlers } = options;
  if (line.length > controlLineBytesMax) return errorReply(new CodedError('PAYLOAD_LIMIT', `a request line is at most ${controlLineBytesMax} bytes`));
  let parsed: unknown;
  try {
    parsed = JSON.parse(line.toString('utf8'));
  } catch {
    return errorReply(new CodedError('INVALID_ARGUMENT', 'a request is one JSON object per line', { field: 'request' }));
  }
  const request = requestSchema.safeParse(parsed);
  if (!request.success) {
    // zod issues can quote input values (a passphrase); name only the path.
    const field = request.error.issues[0]?.path.join('.') || 'op';
    return errorReply(new CodedError('INVALID_ARGUMENT', 'not a valid control request (ops: unlock, lock, vault_status, api)', { field }));
  }
  if (request.data.op === 'api') {
    if (handlers === undefined) return errorReply(new CodedError('UNSUPPORTED_ACTION', 'this broker serves no operator API on its control socket', { field: 'op' }));
    const refused = options.refuseApiPeer?.(socket);
    if (refused !== undefined) return errorReply(refused);
    return handlers[request.data.method](request.data.input ?? {});
  }
  try {
    return { ok: true, value: await perform(request.data, vault) };
  } catch (error) {
    return errorReply(error);
  }
}

async function perform(request: Exclude<ControlRequest, { op: 'api' }>, vault: Vault): Promise<ControlValue> {
  switch (request.op) {
    case 'unlock': {
      const passphrase = Buffer.from(request.passphrase, 'utf8');
      try {
        await vault.unlock(passphrase);
      } finally {
        passphrase.fill(0);
      }
      return { state: vault.state() };
    }
    case 'lock':
      vault.lock('operator');
      return { state: vault.state() };
    case 'vault_status':
      return { state: vault.state(), credentials: vault.list().length };
  }
}

function errorReply(error: unknown): ControlReply {
  if (isCodedError(error)) {
    return { ok: false, error: { code: error.code, message: error.message, ...(error.field === undefined ? {} : { field: error.field }) } };
  }
  // Not a coded error: a bug. Say so without passing on a message that could carry anything.
  const code: ErrorCode = 'INTERNAL';
  return { ok: false, error: { code, message: 'the control request failed unexpectedly' } };
}

/** Vault replies are small; operator API replies (cards, activity pages) are bounded pages. */
const replyBytesMax = 32 * 1024 * 1024;
/** A local daemon answers within milliseconds; an unlock waits for Argon2id (~1 s at moderate). */
export const controlRequestTimeoutMs = 15_000;

/**
 * The client side (used by `postern vault unlock|lock`): one request, one reply. Rejects with the
 * socket error (ENOENT / ECONNREFUSED mean "no daemon is running here").
 */
export function sendControlRequest(socketPath: string, request: Exclude<ControlRequest, { op: 'api' }>, timeoutMs?: number): Promise<ControlReply>;
export function sendControlRequest(socketPath: string, request: Extract<ControlRequest, { op: 'api' }>, timeoutMs?: number): Promise<ControlApiReply>;
export function sendControlRequest(socketPath: string, request: ControlRequest, timeoutMs = controlRequestTimeoutMs): Promise<ControlReply | ControlApiReply> {
  return new Promise((resolve, reject) => {
    const socket = createConnection(socketPath);
    let received = Buffer.alloc(0);
    const finish = (settle: () => void): void => {
      clearTimeout(timer);
      socket.destroy();
      settle();
    };
    const timer = setTimeout(() => finish(() => reject(new CodedError('INTERNAL', `the daemon did not answer within ${timeoutMs} ms`))), timeoutMs);
    socket.once('error', (error) => finish(() => reject(error)));
    socket.once('connect', () => socket.write(`${JSON.stringify(request)}\n`));
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      const newline = received.indexOf(0x0a);
      if (newline >= 0) {
        const text = received.subarray(0, newline).toString('utf8');
        finish(() => {
          try {
            resolve(JSON.parse(text) as ControlReply | ControlApiReply);
          } catch {
            reject(new CodedError('INTERNAL', 'the daemon sent a malformed reply'));
          }
        });
      } else if (received.length > replyBytesMax) {
        finish(() => reject(new CodedError('INTERNAL', 'the daemon sent an oversized reply')));
      }
    });
    socket.once('close', () => finish(() => reject(new CodedError('INTERNAL', 'the daemon closed the control connection without a reply'))));
  });
}
