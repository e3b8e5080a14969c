import { createConnection } from 'node:net';
import path from 'node:path';
import { z } from 'zod';
import { brokerApiMethods, CodedError, type Reply, type ReplyError } from '../contract/index.js';
import type { VaultState } from '../ports/index.js';
import { verifyControlListener } from './control-listener.js';

/**
 * The client half of the control socket (control-socket.ts serves it): the socket's name, the request shapes and one
 * request → one reply. Kept apart from the server so the CLI can talk to a running broker without loading the broker.
 */
export const controlSocketFileName = 'control.sock';

const proofSchema = z.strictObject({ passphrase: z.string().min(1).max(1_024) });
export const requestSchema = z.discriminatedUnion('op', [
  // `source: 'file'`: the client read the passphrase from a file (--passphrase-file, POSTERN_PASSPHRASE_FILE); the
  // broker then takes no passphrase as a person's proof for the rest of its run (control-proof.ts).
  z.strictObject({
    op: z.literal('unlock'),
    passphrase: z.string().min(1).max(1_024),
    source: z.literal('file').optional(),
  }),
  // Locking is a decision too (an agent must not stop every dispatch at will): it carries a proof.
  z.strictObject({ op: z.literal('lock'), proof: proofSchema.optional() }),
  z.strictObject({ op: z.literal('vault_status') }),
  // The operator API (approvals, sessions, actions, activity) for the CLI; the handler parses input.
  // A decision (contract operatorMethodClass) carries the person's proof: the vault passphrase typed on a terminal.
  z.strictObject({
    op: z.literal('api'),
    method: z.enum(brokerApiMethods),
    input: z.unknown().optional(),
    proof: proofSchema.optional(),
  }),
]);
export type ControlRequest = z.infer<typeof requestSchema>;

export interface ControlValue {
  state: VaultState;
  credentials?: number;
}
export type ControlReply = { ok: true; value: ControlValue } | { ok: false; error: ReplyError };
/** What an `api` request answers: the operator method's own Reply. */
export type ControlApiReply = Reply<unknown>;

export function controlSocketPath(dataDir: string): string {
  return path.join(dataDir, controlSocketFileName);
}

/** Vault replies are small; operator API replies (cards, activity pages) are bounded pages. */
const replyBytesMax = 32 * 1024 * 1024;
/** A local daemon answers within milliseconds; an unlock waits for Argon2id (~1 s at moderate). */
export const controlRequestTimeoutMs = 15_000;

/**
 * The client side (used by `postern vault unlock|lock`): one request, one reply. Rejects with the
 * socket error (ENOENT / ECONNREFUSED mean "no daemon is running here"), or CONTROL_SOCKET_UNVERIFIED
 * before writing anything when the process listening at the path is not the broker holding the data
 * directory's lock (control-listener.ts).
 */
export function sendControlRequest(
  socketPath: string,
  request: Exclude<ControlRequest, { op: 'api' }>,
  timeoutMs?: number,
): Promise<ControlReply>;
export function sendControlRequest(
  socketPath: string,
  request: Extract<ControlRequest, { op: 'api' }>,
  timeoutMs?: number,
): Promise<ControlApiReply>;
export function sendControlRequest(
  socketPath: string,
  request: ControlRequest,
  timeoutMs = controlRequestTimeoutMs,
): Promise<ControlReply | ControlApiReply> {
  return new Promise((resolve, reject) => {
    const socket = createConnection(socketPath);
    let received = Buffer.alloc(0);
    const finish = (settle: () => void): void => {
      clearTimeout(timer);
      socket.destroy();
      settle();
    };
    const timer = setTimeout(
      () => finish(() => reject(new CodedError('INTERNAL', `the daemon did not answer within ${timeoutMs} ms`))),
      timeoutMs,
    );
    socket.once('error', (error) => finish(() => reject(error)));
    socket.once('connect', () => {
      // Before the first byte: the listener must be the broker holding the data directory's lock (control-listener.ts).
      try {
        verifyControlListener(socket, path.dirname(socketPath));
      } catch (error) {
        finish(() => reject(error));
        return;
      }
      socket.write(`${JSON.stringify(request)}\n`);
    });
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
    socket.once('close', () =>
      finish(() => reject(new CodedError('INTERNAL', 'the daemon closed the control connection without a reply'))),
    );
  });
}
