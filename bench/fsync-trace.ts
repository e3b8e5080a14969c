/**
 * fsyncs counted from outside the process: the broker side runs under
 * `strace -f --seccomp-bpf -y -e trace=<sync calls>`, which sees every thread (the event loop, libuv's
 * threadpool behind node's async fs, worker threads owning a SQLite connection) and names the file of
 * each call. The journal's own commit counter is never consulted: a second connection, a result store
 * or a vault write that fsyncs is counted like any other.
 *
 * Each call's time in the kernel comes from strace's `-T` (syscall entry to exit as the tracer saw them, so a few
 * microseconds of tracing ride on each): the sync itself, apart from the wait of the event loop that hears it.
 *
 * The WAL's page writes are counted too (`pwrite64` of a page's size to a `-wal` file, by thread): each is one frame
 * of a commit, so pages per action say what a commit writes, which the syncs alone do not (each frame is a syscall
 * of its own, and its 24-byte header another).
 *
 * A window is a range of lines of the trace file (strace writes a line per call as it happens),
 * closed once no new line has arrived for a short quiet period, so a commit that trails the last
 * answer (lazy observations riding the next commit) still lands in its window.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';

const syncCalls = ['fsync', 'fdatasync', 'sync_file_range', 'syncfs', 'msync'] as const;
/** SQLite writes each WAL frame's page with one pwrite64 (its header with another). */
const writeCalls = ['pwrite64'] as const;
/** SQLite's smallest page: a write this long or longer to the WAL is a frame's page (headers are 24 and 32 bytes). */
const pageBytesMin = 512;
/** A window closes after this long without a new sync call... */
const quietMs = 300;
/** ...or after this long in any case (a broker that syncs on a timer would never be quiet). */
const settleMsMax = 3_000;
const pollMs = 25;

const callLine = new RegExp(`^(\\d+)\\s+(${syncCalls.join('|')})\\((\\d+)(?:<([^>]*)>)?.*?(?:<(\\d+\\.\\d+)>)?$`);
/** The end of a call another thread's call interrupted in the trace (`<unfinished ...>`): its time is on this line. */
const resumedLine = new RegExp(`^(\\d+)\\s+<\\.\\.\\. (?:${syncCalls.join('|')}) resumed>.*<(\\d+\\.\\d+)>$`);
/** A write's call line (finished or not): its thread, file and byte count (strace prints the count before the offset). */
const writeLine = /^(\d+)\s+pwrite64\(\d+<([^>]*)>, .*, (\d+), \d+(?:\) = |\s*<unfinished)/;

/** Whether strace can run here; the reason it cannot otherwise (printed in the table instead of numbers). */
export function straceUnavailable(): string | undefined {
  const probe = spawnSync('strace', ['-f', '--seccomp-bpf', '-qq', '-e', 'trace=fsync', '-o', '/dev/null', 'true'], {
    encoding: 'utf8',
  });
  if (probe.error !== undefined) return `strace not runnable (${probe.error.message}); apt-get install strace`;
  if (probe.status !== 0) return `strace cannot trace here: ${probe.stderr.trim().split('\n')[0] ?? 'no reason given'}`;
  return undefined;
}

/** argv that runs `argv` under strace, writing one line per sync call to `traceFile`. */
export function tracedArgv(argv: readonly string[], traceFile: string): string[] {
  return [
    '-f',
    '--seccomp-bpf',
    '-y',
    '-T',
    '-qq',
    '-e',
    `trace=${[...syncCalls, ...writeCalls].join(',')}`,
    '-o',
    traceFile,
    '--',
    ...argv,
  ];
}

export interface SyncCount {
  total: number;
  /** Calls made by the process's main thread (the event loop): each blocks the loop for a disk flush. */
  onLoop: number;
  /** Calls made by any other thread (libuv threadpool, worker threads). */
  offLoop: number;
  /** Calls by file kind: the journal database, its WAL, anything else (named). */
  byFile: Map<string, number>;
  /** Each sync call on the journal's WAL: its time in the kernel, ms (strace -T). */
  walSyncMs: number[];
  /** Pages written to the journal's WAL (one per frame), by the event loop and by any other thread. */
  walPages: { onLoop: number; offLoop: number };
}

export class FsyncTrace {
  private constructor(
    private readonly traceFile: string,
    private readonly loopTid: number,
  ) {}

  /** `loopTid` is the traced process's pid, the thread id of its main thread. */
  static of(traceFile: string, loopTid: number): FsyncTrace {
    return new FsyncTrace(traceFile, loopTid);
  }

  /** The index where a window starting now begins. */
  mark(): number {
    return this.lines().length;
  }

  /** Waits for the broker to go quiet (bounded), then counts the sync calls since `from`. */
  async countSince(from: number): Promise<SyncCount> {
    const started = performance.now();
    let seen = this.lines().length;
    let quietSince = performance.now();
    while (performance.now() - quietSince < quietMs && performance.now() - started < settleMsMax) {
      await delay(pollMs);
      const now = this.lines().length;
      if (now !== seen) [seen, quietSince] = [now, performance.now()];
    }
    return this.count(this.lines().slice(from));
  }

  private lines(): string[] {
    return readFileSync(this.traceFile, 'utf8')
      .split('\n')
      .filter((line) => callLine.test(line) || resumedLine.test(line) || writeLine.test(line));
  }

  private count(lines: readonly string[]): SyncCount {
    const result: SyncCount = {
      total: 0,
      onLoop: 0,
      offLoop: 0,
      byFile: new Map(),
      walSyncMs: [],
      walPages: { onLoop: 0, offLoop: 0 },
    };
    // A call left unfinished in the trace, by thread: its time comes on that thread's resumed line.
    const unfinished = new Map<string, string>();
    const timed = (kind: string, seconds: string): void => {
      if (kind === 'journal WAL') result.walSyncMs.push(Number(seconds) * 1_000);
    };
    for (const line of lines) {
      const write = writeLine.exec(line);
      if (write !== null) {
        const [, tid = '', file = '', bytes = ''] = write;
        if (fileKind(file) === 'journal WAL' && Number(bytes) >= pageBytesMin) {
          if (Number(tid) === this.loopTid) result.walPages.onLoop += 1;
          else result.walPages.offLoop += 1;
        }
        continue;
      }
      const resumed = resumedLine.exec(line);
      if (resumed !== null) {
        const [, tid = '', seconds = ''] = resumed;
        const kind = unfinished.get(tid);
        unfinished.delete(tid);
        if (kind !== undefined) timed(kind, seconds);
        continue;
      }
      const [, tid = '', , , file, seconds] = callLine.exec(line) ?? [];
      result.total += 1;
      if (Number(tid) === this.loopTid) result.onLoop += 1;
      else result.offLoop += 1;
      const kind = fileKind(file ?? '');
      result.byFile.set(kind, (result.byFile.get(kind) ?? 0) + 1);
      if (seconds !== undefined) timed(kind, seconds);
      else if (line.includes('<unfinished ...>')) unfinished.set(tid, kind);
    }
    return result;
  }
}

function fileKind(path: string): string {
  const name = path.split('/').at(-1) ?? path;
  if (name === '') return 'unnamed fd';
  if (name.endsWith('-wal')) return 'journal WAL';
  if (name.endsWith('-journal')) return 'rollback journal';
  if (/\.(sqlite|db)$/.test(name)) return `db ${name}`;
  if (path.endsWith('/') || !name.includes('.')) return `dir ${name}`;
  return name;
}

/** The pid strace started (its only direct child), read from /proc: the tracee's loop thread id. */
export function traceePid(stracePid: number): number | undefined {
  try {
    const children = readFileSync(`/proc/${stracePid}/task/${stracePid}/children`, 'utf8').trim().split(/\s+/);
    const pid = Number(children[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}
