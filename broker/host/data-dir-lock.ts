import {
  closeSync,
  constants,
  fchmodSync,
  fstatSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  readSync,
  writeSync,
} from 'node:fs';
import { loadNativeAddon } from './native-addon.js';
import path from 'node:path';
import { CodedError } from '../contract/coded-error.js';
import { isoFourDigitYearsEndMs, isoTime } from '../contract/time-words.js';

/**
 * One broker per data directory, decided by the kernel. A broker takes an exclusive flock on the data
 * directory itself and on `<dataDir>/broker.lock` (which names the holder) before it reads or writes anything else there (migrations, recovery, the
 * vault, the sockets) and holds it for its whole life. The kernel drops the lock when the holder's
 * last descriptor closes, so when the process dies, however it died; a stopped (SIGSTOP) or busy
 * broker still holds it. That is the point: "its control socket does not answer" is not "it is
 * dead", and a second broker that decided so would run recovery under a live one.
 */
export const brokerLockFileName = 'broker.lock';
/** The holder line is a short JSON object; anything longer is not ours and is not read further. */
const holderBytesMax = 256;

/** Who holds the lock, as the holder wrote it (informational only: a same-user process can write this file). */
export interface LockHolder {
  readonly pid: number;
  /** When the holding process started (wall clock, ms), to tell a reused pid apart in the message. */
  readonly started_at_ms: number;
}

export interface DataDirLock {
  readonly path: string;
  /**
   * Drops the lock by closing its descriptor. Call only once nothing of the data directory is open
   * any more (the runtime's last closer). Idempotent.
   */
  release(): void;
}

/** The addon's export (native/peercred/index.d.ts), as loose as a missing or older build may be. */
export interface LockAddon {
  readonly lockFile?: unknown;
}

/**
 * Takes the data directory's lock or refuses with BROKER_ALREADY_RUNNING naming the holder's pid.
 * Fails closed: without the addon there is no kernel lock, and a broker that cannot prove it is
 * alone must not recover anything.
 */
export function lockDataDir(dataDir: string, addon: LockAddon | Error = loadNativeAddon()): DataDirLock {
  const lockFile = lockFunction(addon);
  // 0700 like the journal's own mkdir; ensureDataDir (data-dir.ts) has already vetted an existing one.
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const lockPath = path.join(dataDir, brokerLockFileName);
  // The directory itself is locked first: a same-user agent can delete broker.lock, and a second broker would then
  // lock a fresh file; it cannot delete the directory that holds the live journal (a renamed one is no longer the
  // path the second broker opens).
  const dirFd = openSync(dataDir, constants.O_RDONLY | constants.O_DIRECTORY);
  const fd = openLockFile(lockPath, dirFd);
  let locked: boolean;
  try {
    locked = lockFile(dirFd) && lockFile(fd);
  } catch (error) {
    closeSync(fd);
    closeSync(dirFd);
    throw new CodedError(
      'INVALID_ARGUMENT',
      `could not lock ${lockPath} (${codeOf(error)}); use a data directory on a local file system`,
      {
        field: '--data-dir',
        cause: error,
      },
    );
  }
  if (!locked) {
    const holder = readHolder(fd);
    closeSync(fd);
    closeSync(dirFd);
    throw new BrokerAlreadyRunning(holder, lockPath);
  }
  writeHolder(fd, { pid: process.pid, started_at_ms: Math.round(Date.now() - process.uptime() * 1000) });
  let open = true;
  return {
    path: lockPath,
    release: () => {
      if (!open) return;
      open = false;
      closeSync(fd);
      closeSync(dirFd);
    },
  };
}

/**
 * O_NOFOLLOW: a symlink planted at broker.lock is refused, not followed to some other file. Node
 * opens with O_CLOEXEC, so no child process inherits the descriptor and outlives us holding it.
 */
function openLockFile(lockPath: string, dirFd: number): number {
  let fd: number;
  try {
    fd = openSync(lockPath, constants.O_RDWR | constants.O_CREAT | constants.O_NOFOLLOW, 0o600);
  } catch (error) {
    closeSync(dirFd);
    throw new CodedError(
      'INVALID_ARGUMENT',
      `could not open ${lockPath} (${codeOf(error)}); it must be a regular file`,
      { field: '--data-dir', cause: error },
    );
  }
  const stat = fstatSync(fd);
  if (!stat.isFile()) {
    closeSync(fd);
    closeSync(dirFd);
    throw new CodedError('INVALID_ARGUMENT', `${lockPath} exists and is not a regular file; remove it`, {
      field: '--data-dir',
    });
  }
  if ((stat.mode & 0o777) !== 0o600) fchmodSync(fd, 0o600);
  return fd;
}

/**
 * Best effort: the lock is the kernel's, the pid only names the holder in a second broker's
 * message. On a full disk the write fails and the start goes on to fail where it matters (the
 * journal, with a coded error), rather than here.
 */
function writeHolder(fd: number, holder: LockHolder): void {
  try {
    ftruncateSync(fd, 0);
    writeSync(fd, `${JSON.stringify(holder)}\n`, 0);
  } catch {
    // See above: an unnamed holder is still the holder.
  }
}

/** The holder as written, or undefined when it is not there yet (it writes after locking) or is not ours. */
export function readHolder(fd: number): LockHolder | undefined {
  const buffer = Buffer.alloc(holderBytesMax);
  let text: string;
  try {
    text = buffer.subarray(0, readSync(fd, buffer, 0, holderBytesMax, 0)).toString('utf8');
  } catch {
    return undefined;
  }
  try {
    const parsed = JSON.parse(text) as { pid?: unknown; started_at_ms?: unknown };
    const { pid, started_at_ms: started } = parsed;
    if (!Number.isSafeInteger(pid) || (pid as number) <= 0 || !plausibleStart(started)) return undefined;
    return { pid: pid as number, started_at_ms: started as number };
  } catch {
    return undefined;
  }
}

/**
 * A start time a clock can write (1970..9999): the file is the same user's to write, and a time no formatter takes
 * would turn BROKER_ALREADY_RUNNING into a RangeError while its message is built.
 */
function plausibleStart(started: unknown): started is number {
  return Number.isSafeInteger(started) && (started as number) >= 0 && (started as number) <= isoFourDigitYearsEndMs;
}

/**
 * BROKER_ALREADY_RUNNING naming the holder. Its message writes the holder's start ISO UTC, as the terminal writes times;
 * `describe` words it with another writer of times: the desktop's start-failure box writes it as every console time
 * (local, 24-hour, the zone named: app/main/start-failure.ts), one wording either way.
 */
export class BrokerAlreadyRunning extends CodedError {
  constructor(
    readonly holder: LockHolder | undefined,
    readonly lockPath: string,
  ) {
    super('BROKER_ALREADY_RUNNING', alreadyRunningText(holder, lockPath, isoTime), { field: '--data-dir' });
  }

  describe(time: (ms: number) => string): string {
    return alreadyRunningText(this.holder, this.lockPath, time);
  }
}

function alreadyRunningText(holder: LockHolder | undefined, lockPath: string, time: (ms: number) => string): string {
  const who =
    holder === undefined
      ? 'another Postern broker (its pid is not recorded yet)'
      : `another Postern broker (pid ${holder.pid}, started ${time(holder.started_at_ms)})`;
  return `${who} holds ${lockPath}; stop it first (a stopped or unresponsive broker still runs)`;
}

function lockFunction(addon: LockAddon | Error): (fd: number) => boolean {
  if (addon instanceof Error || typeof addon.lockFile !== 'function') {
    const why =
      addon instanceof Error
        ? `did not load (${codeOf(addon)})`
        : 'has no lockFile (rebuild it: npm rebuild postern-peercred)';
    throw new CodedError(
      'INTERNAL',
      `the addon postern-peercred ${why}; without its kernel lock a broker cannot prove it is alone on a data directory`,
    );
  }
  const lockFile = addon.lockFile as (fd: number) => unknown;
  return (fd) => lockFile(fd) === true;
}

function codeOf(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : 'no code';
}
