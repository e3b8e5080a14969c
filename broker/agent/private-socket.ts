import { chmodSync, lstatSync, mkdirSync, unlinkSync, type Stats } from 'node:fs';
import { createConnection, type Server, type Socket } from 'node:net';
import { CodedError } from '../contract/index.js';

/**
 * Private Unix sockets, for the agent socket and the daemon's control socket
 * (broker/host/control-socket.ts imports these): a 0700 directory, a 0600 socket created under
 * umask (no window where it is wider), a stale socket replaced and a live one refused.
 */

/** Unix socket paths are limited to ~108 bytes (sun_path); refuse early with a clear message. */
export const socketPathBytesMax = 100;
/** How long a probe of an existing socket waits for the other side to accept. */
export const liveProbeMs = 2_000;

/** mkdir's mode is masked by the umask, so the mode is set explicitly after. */
export function ensurePrivateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const stat = lstatSync(dir);
  if (!stat.isDirectory())
    throw new CodedError('INVALID_ARGUMENT', `${dir} exists and is not a directory`, { field: '--data-dir' });
  chmodSync(dir, 0o700);
}

/** umask 0o177 around listen: the socket file is created 0600. */
export async function listenPrivately(server: Server, socketPath: string): Promise<void> {
  const previous = process.umask(0o177);
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(socketPath, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } finally {
    process.umask(previous);
  }
}

/**
 * The stale-socket rule. Only the process holding the data directory's kernel lock
 * (broker/host/data-dir-lock.ts, taken first in createBrokerRuntime) gets here, so a second broker
 * never probes, let alone deletes, a live broker's socket: a stopped broker does not answer, and
 * "does not answer" is not "dead". Under the lock a socket file is a dead broker's, or a listener
 * that is not ours: one nobody accepts on is removed; one that `isLive` says answers makes us
 * refuse rather than take it over. The default probe is a plain connect; the control socket asks
 * its own question (a `vault_status` round trip). Only the very file that was probed is removed.
 */
export async function replaceStaleSocket(
  socketPath: string,
  isLive: (socketPath: string) => Promise<boolean> = acceptsConnections,
  liveMessage = 'another Postern broker is already serving agents on this data directory',
): Promise<void> {
  let probed: Stats;
  try {
    probed = lstatSync(socketPath);
  } catch {
    return;
  }
  if (!probed.isSocket())
    throw new CodedError('INVALID_ARGUMENT', `${socketPath} exists and is not a socket; remove it`, {
      field: '--data-dir',
    });
  if (await isLive(socketPath)) throw new CodedError('INVALID_ARGUMENT', liveMessage, { field: '--data-dir' });
  // A socket bound at this path while we probed is not the one we judged stale: leave it.
  const now = statOrUndefined(socketPath);
  if (now === undefined) return;
  if (now.ino !== probed.ino || now.dev !== probed.dev)
    throw new CodedError('INVALID_ARGUMENT', liveMessage, { field: '--data-dir' });
  unlinkIfSocket(socketPath);
}

function statOrUndefined(socketPath: string): Stats | undefined {
  try {
    return lstatSync(socketPath);
  } catch {
    return undefined;
  }
}

/**
 * Listens 0600 on `socketPath` and returns how to stop: drop every live connection, stop
 * accepting, and make sure the socket file is gone so a restart finds none (server.close unlinks it
 * on Unix; this checks anyway).
 */
export async function servePrivately(
  server: Server,
  socketPath: string,
  connections: ReadonlySet<Socket>,
): Promise<{ stopListening(): Promise<void>; close(): Promise<void> }> {
  await listenPrivately(server, socketPath);
  // server.close's callback waits for every connection to end: the listener itself stops at once.
  let closed: Promise<void> | undefined;
  const stopListening = (): Promise<void> => {
    closed ??= new Promise<void>((resolve) => server.close(() => resolve()));
    return Promise.resolve();
  };
  return {
    stopListening,
    close: async () => {
      await stopListening();
      for (const socket of connections) socket.destroy();
      await closed;
      unlinkIfSocket(socketPath);
    },
  };
}

export function unlinkIfSocket(socketPath: string): void {
  try {
    if (lstatSync(socketPath).isSocket()) unlinkSync(socketPath);
  } catch {
    // Already gone.
  }
}

function acceptsConnections(socketPath: string): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createConnection(socketPath);
    const done = (live: boolean): void => {
      clearTimeout(timer);
      probe.destroy();
      resolve(live);
    };
    // A listener that never accepts within the probe time is treated as live: refusing to start is
    // the safe mistake, deleting a live broker's socket is not.
    const timer = setTimeout(() => done(true), liveProbeMs);
    probe.once('connect', () => done(true));
    // Only "nobody listens" means stale; any other error (EACCES…) is not proof, so refuse.
    probe.once('error', (error: NodeJS.ErrnoException) =>
      done(!(error.code === 'ECONNREFUSED' || error.code === 'ENOENT')),
    );
  });
}
