import { createConnection } from 'node:net';
import path from 'node:path';
import { CodedError } from '../contract/coded-error.js';
import type { Reply, ReplyError } from '../contract/index.js';
import type { VaultState } from '../ports/index.js';
import type { ControlRequest } from './control-request.js';
import { verifyControlListener } from './control-listener.js';

/**
 * The client half of the control socket (control-socket.ts serves it): the socket's name and one request → one reply.
 * Kept apart from the server so the CLI can talk to a running broker without loading the broker, and from the request
 * schema (control-request.ts, which the server parses with) so it loads no zod: a CLI command's cold start (issue 18).
 */
export { controlSocketFileName, controlSocketPath } from './control-socket-path.js';

export type { ControlRequest } from './control-request.js';

export interface ControlValue {
  state: VaultState;
  credentials?: number;
}
export type ControlReply = { ok: true; value: ControlValue } | { ok: false; error: ReplyError };
/** What an `api` request answers: the operator method's own Reply. */
export type ControlApiReply = Reply<unknown>;

/** Vault replies are small; operator API replies (cards, activity pages) are bounded pages. */
const replyBytesMax = 32 * 1024 * 1024;
/** A local daemon answers within milliseconds; an unlock waits for Argon2id (~1 s at moderate). */
export const controlRequestTimeoutMs = 15_000;
/**
 * Connections tried for one request when the broker closes them unread (at its connection cap), and the pause before
 * each retry: at most ~175 ms of waiting in all, inside the request's timeout.
 */
export const controlAttemptsMax = 4;
export const controlRetryBackoffMs: readonly number[] = [25, 50, 100];

/**
 * The client side (used by `postern vault unlock|lock` and the operator commands): one request, one reply. Rejects
 * with the socket error (ENOENT / ECONNREFUSED mean "no daemon is running here"), or CONTROL_SOCKET_UNVERIFIED before
 * writing anything when the process listening at the path is not the broker holding the data directory's lock
 * (control-listener.ts). `timeoutMs` bounds the whole request, retries included.
 *
 * A request the broker provably never read is sent again on a new connection, at most controlAttemptsMax times in
 * all; after that it rejects with CONTROL_SOCKET_BUSY. Provably never read: the broker said so (its first line is
 * CONTROL_SOCKET_BUSY, written only to a connection with no request in progress and no reply still being written,
 * so as a first line only to one none of whose requests it read, and nothing is read after it),
 * the connect failed with EAGAIN (a full listen backlog), the one write failed with EPIPE, or the connection was reset
 * (ECONNRESET) before any byte came back. The broker acts only on a whole line; the request is one write ending in its
 * newline and nothing is written after it, so EPIPE means that newline never reached the broker's socket, and a reset
 * of a Unix socket means the broker closed its end with bytes of ours still unread — the newline, the last of them,
 * among them. Anything else is never retried: a connection closed without a reply, or a timeout, may follow a request
 * the broker read and acted on (a decision, an unlock attempt the passphrase gate counts).
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
export async function sendControlRequest(
  socketPath: string,
  request: ControlRequest,
  timeoutMs = controlRequestTimeoutMs,
): Promise<ControlReply | ControlApiReply> {
  const line = `${JSON.stringify(request)}\n`;
  const deadline = Date.now() + timeoutMs;
  for (let attempt = 1; ; attempt += 1) {
    const outcome = await attemptControlRequest(socketPath, line, Math.max(1, deadline - Date.now()), timeoutMs);
    if (outcome.kind === 'reply') return outcome.reply;
    const pauseMs = controlRetryBackoffMs[attempt - 1] ?? 0;
    if (attempt >= controlAttemptsMax || Date.now() + pauseMs >= deadline) {
      throw new CodedError(
        'CONTROL_SOCKET_BUSY',
        `the broker closed the control connection before reading the request, ${attempt} time(s) (${outcome.why}); nothing was done: retry`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, pauseMs));
  }
}

/**
 * Whether a socket error proves the request never reached the broker: the connect itself failed with EAGAIN (the
 * listen backlog was full; nothing was sent), or EPIPE / ECONNRESET came before any reply byte (see sendControlRequest).
 * ENOENT and ECONNREFUSED are not here: they mean no broker listens, which the caller reports.
 */
function neverRead(code: string | undefined, connected: boolean, receivedBytes: number): boolean {
  if (!connected) return code === 'EAGAIN';
  return receivedBytes === 0 && (code === 'EPIPE' || code === 'ECONNRESET');
}

/** One connection's answer: the broker's reply, or proof that it never read the request (why, for the message). */
type Attempt = { kind: 'reply'; reply: ControlReply | ControlApiReply } | { kind: 'unread'; why: string };

function attemptControlRequest(socketPath: string, line: string, waitMs: number, timeoutMs: number): Promise<Attempt> {
  return new Promise((resolve, reject) => {
    const socket = createConnection(socketPath);
    // The reply's chunks so far, joined once its newline arrives (a page can be MiBs: no copy per chunk).
    const chunks: Buffer[] = [];
    let receivedBytes = 0;
    const finish = (settle: () => void): void => {
      clearTimeout(timer);
      socket.destroy();
      settle();
    };
    const timer = setTimeout(
      () => finish(() => reject(new CodedError('INTERNAL', `the daemon did not answer within ${timeoutMs} ms`))),
      waitMs,
    );
    let connected = false;
    socket.once('error', (error: NodeJS.ErrnoException) =>
      finish(() =>
        neverRead(error.code, connected, receivedBytes)
          ? resolve({ kind: 'unread', why: error.code ?? '' })
          : reject(error),
      ),
    );
    socket.once('connect', () => {
      connected = true;
      // Before the first byte: the listener must be the broker holding the data directory's lock (control-listener.ts).
      try {
        verifyControlListener(socket, path.dirname(socketPath));
      } catch (error) {
        finish(() => reject(error));
        return;
      }
      socket.write(line);
    });
    socket.on('data', (chunk: Buffer) => {
      const newlineInChunk = chunk.indexOf(0x0a);
      chunks.push(newlineInChunk >= 0 ? chunk.subarray(0, newlineInChunk) : chunk);
      receivedBytes += chunk.length;
      if (newlineInChunk >= 0) {
        const text = Buffer.concat(chunks).toString('utf8');
        finish(() => {
          let reply: ControlReply | ControlApiReply;
          try {
            reply = JSON.parse(text) as ControlReply | ControlApiReply;
          } catch {
            reject(new CodedError('INTERNAL', 'the daemon sent a malformed reply'));
            return;
          }
          resolve(
            !reply.ok && reply.error.code === 'CONTROL_SOCKET_BUSY'
              ? { kind: 'unread', why: reply.error.message }
              : { kind: 'reply', reply },
          );
        });
      } else if (receivedBytes > replyBytesMax) {
        finish(() => reject(new CodedError('INTERNAL', 'the daemon sent an oversized reply')));
      }
    });
    socket.once('close', () =>
      finish(() => reject(new CodedError('INTERNAL', 'the daemon closed the control connection without a reply'))),
    );
  });
}
