import {
  closeSync,
  copyFileSync,
  constants,
  existsSync,
  lstatSync,
  mkdtempSync,
  openSync,
  readSync,
  readdirSync,
  realpathSync,
  rmSync,
  statSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { processExists } from './process-exists.js';

/**
 * Which file a reader that promises to write nothing opens (`postern audit verify`, the journal and, with `--check-key`,
 * the vault: docs/audit.md, "verify writes nothing"). SQLite's reader of a WAL database creates the `-shm` index and an
 * empty `-wal` where there are none, and a read-only connection cannot remove them again. So:
 * - both `-wal` and `-shm` there (a broker has the database open, or stopped without closing it): the file itself,
 *   under SQLite's locking, which gives one snapshot of the database and the WAL's committed frames. Nothing is
 *   created: both exist.
 * - no `-wal` (a closed database, a copy of one): every committed row is in the database file. It is opened
 *   `immutable`, which takes no lock and opens no `-wal` or `-shm`.
 * - a `-wal` without its `-shm` (a copy of a running database's two files): its frames are committed rows, and SQLite
 *   reads a WAL only through a `-shm`. The two files are copied into a private temporary directory and the copy is read.
 * Without locks nothing stops a broker from starting and writing while the file is read, so a private read
 * (`settled`) counts only if the files are as they were before it; otherwise the reader reads again.
 */
export interface PrivateSnapshot {
  /** What the reader (and its worker threads) open: a path or an SQLite URI filename. */
  readonly file: string;
  /** Whether a lock-free read may have seen the file change under it: true when it cannot have. */
  readonly settled: () => boolean;
  readonly dispose: () => void;
}

/** Private reads tried before reading under SQLite's locking (which may then create the sidecars). */
export const privateReadsMax = 3;

/** undefined: the database is open in a broker (both sidecars there), read it under SQLite's locking. */
export function privateSnapshot(named: string): PrivateSnapshot | undefined {
  // SQLite keeps the sidecars beside the file a link resolves to: looked for beside the link, a running journal's
  // WAL would go unseen and the file be read immutable without it.
  const path = realpathSync(named);
  for (let n = 1; ; n += 1) {
    try {
      return snapshotOf(path);
    } catch (error) {
      // A copy that failed because the files moved (a broker checkpointed and removed the -wal meanwhile): take a
      // fresh look, which may now read the file immutable. Any other failure is the caller's to route.
      if (!(error instanceof FilesMoved) || n >= privateReadsMax) throw error;
    }
  }
}

class FilesMoved extends Error {}

function snapshotOf(path: string): PrivateSnapshot | undefined {
  const before = fingerprint(path);
  if (before.wal !== undefined && before.shm) return undefined;
  const unchanged = (): boolean => fingerprint(path).text === before.text;
  if (before.wal === undefined) {
    // SQLite reads the parameters only from a URI (open-database.ts enables them); `?` and `#` in the path are escaped.
    return { file: `${pathToFileURL(path).href}?immutable=1`, settled: unchanged, dispose: () => undefined };
  }
  removeAbandonedCopies();
  const dir = mkdtempSync(join(tmpdir(), `${copyPrefix}${process.pid}-`));
  try {
    const copy = join(dir, basename(path));
    // A reflink where the file system has them: a copy without copying the bytes.
    copyFileSync(path, copy, constants.COPYFILE_FICLONE);
    copyFileSync(`${path}-wal`, `${copy}-wal`, constants.COPYFILE_FICLONE);
    const copied = unchanged();
    // The copy is one consistent state; a read of it counts while the original is still as it was when copied.
    return {
      file: copy,
      settled: () => copied && unchanged(),
      dispose: () => rmSync(dir, { recursive: true, force: true }),
    };
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw unchanged() ? error : new FilesMoved('the database changed while it was copied');
  }
}

/**
 * `read` over a private snapshot of the database (nothing created beside it; `isPrivate` true, and a throw there only
 * sends the read to the next way), else — a broker has the database open, no private read could be made, or the file
 * changed under each of them — over the file itself under SQLite's locking (`isPrivate` false).
 */
export async function readPrivately<T>(
  path: string,
  read: (file: string, isPrivate: boolean) => Promise<T>,
): Promise<T> {
  for (let n = 0; n < privateReadsMax; n += 1) {
    let snapshot: PrivateSnapshot | undefined;
    try {
      snapshot = privateSnapshot(path);
    } catch {
      // No private copy (a full or unwritable temporary directory).
      break;
    }
    if (snapshot === undefined) break;
    try {
      const value = await read(snapshot.file, true);
      if (snapshot.settled()) return value;
    } catch {
      // URI filenames off in this process (SQLITE_USE_URI=0), the copy unreadable: the locking read answers.
      break;
    } finally {
      snapshot.dispose();
    }
  }
  return read(path, false);
}

/** A private copy's directory: `postern-verify-<pid>-XXXXXX`, so a later reader knows whose it was. */
const copyPrefix = 'postern-verify-';

/**
 * Copies left by verifies that did not get to remove theirs (killed, interrupted: a signal ends the CLI without its
 * `finally`). Only a directory this user owns whose process is gone is removed; one of a live process, another
 * user's, or anything not a directory (a link named like one) is left alone.
 */
function removeAbandonedCopies(): void {
  let names: string[];
  try {
    names = readdirSync(tmpdir());
  } catch {
    return;
  }
  const uid = process.getuid?.();
  for (const name of names) {
    const pid = /^postern-verify-(\d+)-/.exec(name)?.[1];
    if (pid === undefined || Number(pid) === process.pid || processExists(Number(pid))) continue;
    const entry = join(tmpdir(), name);
    try {
      // Only a directory this user owns: another user could name one so, and swap what is inside it for a link to
      // this user's files while it is removed; under a sticky /tmp only its owner can rename or replace ours.
      const found = lstatSync(entry);
      if (!found.isDirectory() || (uid !== undefined && found.uid !== uid)) continue;
      rmSync(entry, { recursive: true, force: true });
    } catch {
      // Not ours to remove (another user's, under a sticky /tmp): left as it is.
    }
  }
}

/** The database's header and the identity, size and times of it and its sidecars: any write changes one of them. */
function fingerprint(path: string): { readonly wal: string | undefined; readonly shm: boolean; readonly text: string } {
  const wal = fileState(`${path}-wal`);
  const shm = existsSync(`${path}-shm`);
  return { wal, shm, text: JSON.stringify([fileState(path), header(path), wal ?? null, shm]) };
}

function fileState(path: string): string | undefined {
  const s = statSync(path, { bigint: true, throwIfNoEntry: false });
  return s === undefined ? undefined : `${s.dev}:${s.ino}:${s.size}:${s.mtimeNs}:${s.ctimeNs}`;
}

/** SQLite's 100-byte header: page count and change counter, for writes within one tick of a coarse file clock. */
function header(path: string): string | undefined {
  let fd: number | undefined;
  try {
    fd = openSync(path, 'r');
    const bytes = Buffer.alloc(100);
    const read = readSync(fd, bytes, 0, bytes.length, 0);
    return bytes.subarray(0, read).toString('hex');
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}
