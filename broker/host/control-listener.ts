import { closeSync, openSync, readFileSync, statSync } from 'node:fs';
import type { Socket } from 'node:net';
import path from 'node:path';
import { readPeerCredentials, type PeerCredentials } from '../agent/peer-credentials.js';
import { CodedError } from '../contract/coded-error.js';
import { brokerLockFileName, readHolder } from './data-dir-lock.js';

/**
 * Who serves the control socket, asked of the kernel before the CLI writes a byte to it. A same-user agent can rename
 * `<dataDir>/control.sock` and listen at its path itself; the CLI would then hand it what a person types for the
 * broker — the vault passphrase (`vault unlock`, every decision's proof), a credential being added — and the agent
 * could replay that passphrase to the real socket as "a person". What the agent cannot do is take the data
 * directory's lock from a live broker (data-dir-lock.ts): so the listener (SO_PEERCRED on the connected socket names the
 * process that called listen()) must be the process the kernel's lock table (/proc/locks) shows holding the exclusive
 * flock on the data directory itself, matched by device and inode. Anything else — another listener, no lock holder,
 * a lock table that cannot be read — refuses before the request is written. What this cannot tell apart: an agent
 * that kills the broker and starts its own process holding the lock (docs/security.md).
 */
export interface ControlListenerCheck {
  /** The kernel's lock table (tests point it at a scripted file). */
  readonly procLocksPath?: string;
  /** Which OS's facts to read (default: this one's). */
  readonly platform?: NodeJS.Platform;
  /** Reads the listener's credentials from the connected socket (default: the addon's SO_PEERCRED). */
  readonly peerOf?: (socket: Socket) => PeerCredentials;
}

/** One exclusive flock in /proc/locks: who holds it and on which file (device major/minor, inode). */
export interface FlockHolder {
  readonly pid: number;
  readonly major: bigint;
  readonly minor: bigint;
  readonly inode: bigint;
}

/**
 * The exclusive flocks granted in a /proc/locks text: `N: FLOCK  ADVISORY  WRITE <pid> <maj>:<min>:<ino> <start> <end>`,
 * major and minor in hex. Waiters (`N: -> FLOCK …`), POSIX and OFD locks, shared (READ) locks and lines that do not
 * parse are skipped: only a granted exclusive flock is what a broker holds.
 */
export function parseFlockHolders(text: string): FlockHolder[] {
  const holders: FlockHolder[] = [];
  for (const line of text.split('\n')) {
    const fields = line.trim().split(/\s+/);
    if (fields.length < 6 || fields[1] !== 'FLOCK' || fields[3] !== 'WRITE') continue;
    const pid = Number(fields[4]);
    const file = /^([0-9a-f]+):([0-9a-f]+):(\d+)$/i.exec(fields[5] ?? '');
    if (!Number.isSafeInteger(pid) || pid <= 0 || file === null) continue;
    const [, major = '', minor = '', inode = ''] = file;
    holders.push({ pid, major: BigInt(`0x${major}`), minor: BigInt(`0x${minor}`), inode: BigInt(inode) });
  }
  return holders;
}

/** glibc's dev_t encoding (gnu_dev_major / gnu_dev_minor), as Node's stat reports st_dev. */
export function deviceNumbers(dev: bigint): { major: bigint; minor: bigint } {
  return {
    major: ((dev >> 8n) & 0xfffn) | ((dev >> 32n) & 0xfffff000n),
    minor: (dev & 0xffn) | ((dev >> 12n) & 0xffffff00n),
  };
}

/**
 * Throws CONTROL_SOCKET_UNVERIFIED unless the process listening on `socket` (connected, nothing written yet) holds the
 * data directory's lock. `dataDir` is the directory the control socket was looked up in.
 */
export function verifyControlListener(socket: Socket, dataDir: string, check: ControlListenerCheck = {}): void {
  let listener: PeerCredentials;
  try {
    listener = (check.peerOf ?? readPeerCredentials)(socket);
  } catch (error) {
    throw unverified(dataDir, `the kernel did not name the process listening on it (${messageOf(error)})`, error);
  }
  if (typeof process.getuid === 'function' && listener.uid !== process.getuid())
    throw unverified(dataDir, `it is served by another user (uid ${listener.uid})`);
  const platform = check.platform ?? process.platform;
  if (platform !== 'linux') {
    // No lock table to read: the holder the lock file names is all there is (a same-user process can write it).
    if (holderNamedInLockFile(dataDir) !== listener.pid)
      throw unverified(dataDir, `pid ${listener.pid} listens on it, and ${brokerLockFileName} names another holder`);
    return;
  }
  let holder: FlockHolder | undefined;
  try {
    holder = dataDirLockHolder(dataDir, check.procLocksPath);
  } catch (error) {
    throw unverified(dataDir, `the lock table could not be read (${messageOf(error)})`, error);
  }
  if (holder === undefined) throw unverified(dataDir, 'no process holds the data directory’s lock');
  if (holder.pid !== listener.pid)
    throw unverified(dataDir, `pid ${listener.pid} listens on it, but the lock is held by pid ${holder.pid}`);
}

/**
 * The process the kernel's lock table (Linux /proc/locks) shows holding the data directory's exclusive flock
 * (data-dir-lock.ts), or undefined when none does. Reads only: it never takes the lock. Throws when the directory or
 * the table cannot be read.
 */
export function dataDirLockHolder(dataDir: string, procLocksPath = '/proc/locks'): FlockHolder | undefined {
  const dir = statSync(dataDir, { bigint: true });
  const { major, minor } = deviceNumbers(dir.dev);
  const table = readFileSync(procLocksPath, 'utf8');
  return parseFlockHolders(table).find((h) => h.inode === dir.ino && h.major === major && h.minor === minor);
}

function holderNamedInLockFile(dataDir: string): number | undefined {
  let fd: number | undefined;
  try {
    fd = openSync(path.join(dataDir, brokerLockFileName), 'r');
    return readHolder(fd)?.pid;
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

function unverified(dataDir: string, why: string, cause?: unknown): CodedError {
  return new CodedError(
    'CONTROL_SOCKET_UNVERIFIED',
    `the control socket in ${dataDir} is not served by the broker that holds the data directory's lock: ${why}; nothing was sent. Another process may have put its own socket in its place: stop the broker, check the directory, start it again`,
    { field: '--data-dir', ...(cause === undefined ? {} : { cause }) },
  );
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
