import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, lstatSync, openSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import { brokerLockFileName, lockDataDir, type DataDirLock } from './data-dir-lock.js';

const lockModule = fileURLToPath(new URL('./data-dir-lock.ts', import.meta.url));
const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
/** Every wait on a child is bounded; a child is ready in well under a second. */
const lineWaitMs = 15_000;

/**
 * A child process that takes the lock when it reads "go" on stdin (so several can be released at
 * once) and reports on one JSON line; a winner keeps the lock until it is killed. With `spawnHeir`
 * it first starts a long-lived grandchild, to see that the descriptor is not inherited.
 */
const childScript = `
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { lockDataDir } from ${JSON.stringify(lockModule)};
const [dataDir, heir] = process.argv.slice(1);
const heirPid = heir === 'heir' ? spawn('sleep', ['60'], { stdio: 'ignore', detached: true }).pid : undefined;
const say = (o) => process.stdout.write(JSON.stringify({ pid: process.pid, heirPid, ...o }) + '\\n');
say({ ready: true });
createInterface({ input: process.stdin }).once('line', () => {
  try { lockDataDir(dataDir); say({ won: true }); setInterval(() => {}, 60_000); }
  catch (error) { say({ won: false, code: error.code, message: error.message }); process.exit(0); }
});
`;

interface Report {
  pid: number;
  heirPid?: number;
  ready?: boolean;
  won?: boolean;
  code?: string;
  message?: string;
}

class LockChild {
  readonly lines: Report[] = [];
  private readonly waiters = new Set<() => void>();
  readonly exited: Promise<void>;
  constructor(readonly child: ChildProcess) {
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (line) => {
      this.lines.push(JSON.parse(line) as Report);
      for (const wake of [...this.waiters]) wake();
    });
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
  }

  static start(dataDir: string, heir = false): LockChild {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', '--input-type=module', '-e', childScript, dataDir, heir ? 'heir' : ''],
      {
        cwd: repoRoot,
        stdio: ['pipe', 'pipe', 'inherit'],
      },
    );
    const started = new LockChild(child);
    children.push(started);
    return started;
  }

  next(holds: (report: Report) => boolean, what: string): Promise<Report> {
    return new Promise((resolve, reject) => {
      const check = (): void => {
        const found = this.lines.find(holds);
        if (found === undefined) return;
        clearTimeout(timer);
        this.waiters.delete(check);
        resolve(found);
      };
      const timer = setTimeout(() => {
        this.waiters.delete(check);
        reject(new Error(`no ${what} within ${lineWaitMs} ms: ${JSON.stringify(this.lines)}`));
      }, lineWaitMs);
      this.waiters.add(check);
      check();
    });
  }

  go(): void {
    this.child.stdin?.write('go\n');
  }

  async kill(): Promise<void> {
    const heir = this.lines[0]?.heirPid;
    if (heir !== undefined) killQuietly(heir, 'SIGKILL');
    if (this.child.exitCode === null && this.child.signalCode === null) {
      killQuietly(this.child.pid, 'SIGCONT');
      this.child.kill('SIGKILL');
    }
    await this.exited;
  }
}

function killQuietly(pid: number | undefined, signal: NodeJS.Signals): void {
  try {
    if (pid !== undefined) process.kill(pid, signal);
  } catch {
    // Already gone.
  }
}

let dir: TempDir | undefined;
const children: LockChild[] = [];
const held: DataDirLock[] = [];
afterEach(async () => {
  for (const lock of held.splice(0)) lock.release();
  await Promise.all(children.splice(0).map((c) => c.kill()));
  dir?.remove();
  dir = undefined;
});

function freshDir(): string {
  dir = createTempDir('postern-lock-');
  return dir.path;
}

function take(dataDir: string): DataDirLock {
  const lock = lockDataDir(dataDir);
  held.push(lock);
  return lock;
}

async function holdingChild(dataDir: string, heir = false): Promise<LockChild> {
  const child = LockChild.start(dataDir, heir);
  await child.next((r) => r.ready === true, 'ready');
  child.go();
  expect(await child.next((r) => r.won !== undefined, 'a lock answer')).toMatchObject({ won: true });
  return child;
}

describe('when the data directory is free', () => {
  it('takes the lock, records this pid in a 0600 file, refuses a second taker naming it, and frees it on release', () => {
    const dataDir = freshDir();
    const lock = take(dataDir);
    expect(lock.path).toBe(path.join(dataDir, brokerLockFileName));
    expect(lstatSync(lock.path).mode & 0o777).toBe(0o600);
    expect(JSON.parse(readFileSync(lock.path, 'utf8'))).toMatchObject({
      pid: process.pid,
      started_at_ms: expect.any(Number),
    });
    // Another open file of the same process is another taker: flock locks belong to open files.
    expect(() => lockDataDir(dataDir)).toThrow(
      expect.objectContaining({
        code: 'BROKER_ALREADY_RUNNING',
        field: '--data-dir',
        message: expect.stringContaining(`pid ${process.pid}`),
      }),
    );
    lock.release();
    lock.release();
    expect(() => take(dataDir)).not.toThrow();
  });

  it('still refuses a second broker after an agent deleted broker.lock (the directory itself is locked)', () => {
    const dataDir = freshDir();
    const lock = take(dataDir);
    rmSync(lock.path);
    expect(() => lockDataDir(dataDir)).toThrow(expect.objectContaining({ code: 'BROKER_ALREADY_RUNNING' }));
    lock.release();
    expect(() => take(dataDir)).not.toThrow();
  });

  it('refuses with BROKER_ALREADY_RUNNING, not a RangeError, when an agent wrote a start time no clock can write', () => {
    const dataDir = freshDir();
    const lock = take(dataDir);
    for (const started of [9e15, -1, 253_402_300_800_000]) {
      writeFileSync(lock.path, JSON.stringify({ pid: 4242, started_at_ms: started }));
      expect(() => lockDataDir(dataDir)).toThrow(
        expect.objectContaining({ code: 'BROKER_ALREADY_RUNNING', message: expect.stringContaining('not recorded') }),
      );
    }
    // The last millisecond of year 9999 is still a time: the holder is named.
    writeFileSync(lock.path, JSON.stringify({ pid: 4242, started_at_ms: 253_402_300_799_999 }));
    expect(() => lockDataDir(dataDir)).toThrow(
      expect.objectContaining({ message: expect.stringContaining('pid 4242, started 9999-12-31T23:59:59.999Z') }),
    );
    lock.release();
  });

  it('creates a missing data directory 0700 and tightens a wider lock file to 0600', () => {
    const dataDir = path.join(freshDir(), 'new');
    take(dataDir).release();
    expect(lstatSync(dataDir).mode & 0o777).toBe(0o700);
    writeFileSync(path.join(dataDir, brokerLockFileName), '', { mode: 0o644 });
    take(dataDir);
    expect(lstatSync(path.join(dataDir, brokerLockFileName)).mode & 0o777).toBe(0o600);
  });
});

describe('when several processes race for one data directory', () => {
  it('exactly one wins; every loser is refused with BROKER_ALREADY_RUNNING', async () => {
    const dataDir = freshDir();
    const racers = Array.from({ length: 4 }, () => LockChild.start(dataDir));
    await Promise.all(racers.map((r) => r.next((x) => x.ready === true, 'ready')));
    for (const racer of racers) racer.go();
    const answers = await Promise.all(racers.map((r) => r.next((x) => x.won !== undefined, 'a lock answer')));
    const winners = answers.filter((a) => a.won === true);
    expect(winners).toHaveLength(1);
    const losers = answers.filter((a) => a.won === false);
    expect(losers).toHaveLength(3);
    for (const loser of losers) {
      expect(loser.code).toBe('BROKER_ALREADY_RUNNING');
      // The winner writes its pid just after locking; a loser that read before that says so.
      expect(loser.message).toMatch(new RegExp(`pid ${winners[0]?.pid}|not recorded yet`));
    }
  }, 30_000);
});

describe('when the holder is stopped or killed', () => {
  it('a stopped (SIGSTOP) holder still holds it; once it is killed the kernel has released it', async () => {
    const dataDir = freshDir();
    const holder = await holdingChild(dataDir);
    process.kill(holder.child.pid as number, 'SIGSTOP');
    expect(() => lockDataDir(dataDir)).toThrow(
      expect.objectContaining({
        code: 'BROKER_ALREADY_RUNNING',
        message: expect.stringContaining(`pid ${holder.child.pid}`),
      }),
    );
    holder.child.kill('SIGKILL');
    await holder.exited;
    const lock = take(dataDir);
    expect(JSON.parse(readFileSync(lock.path, 'utf8'))).toMatchObject({ pid: process.pid });
  }, 30_000);

  it('a child the holder started does not inherit the lock (close-on-exec): the lock is free while it lives on', async () => {
    const dataDir = freshDir();
    const holder = await holdingChild(dataDir, true);
    const heir = holder.lines[0]?.heirPid;
    expect(heir).toBeGreaterThan(0);
    holder.child.kill('SIGKILL');
    await holder.exited;
    expect(() => process.kill(heir as number, 0)).not.toThrow();
    expect(() => take(dataDir)).not.toThrow();
  }, 30_000);
});

describe('when broker.lock is not a plain file of ours', () => {
  it('refuses a symlink planted there without following it', () => {
    const dataDir = freshDir();
    const elsewhere = path.join(dataDir, 'elsewhere');
    writeFileSync(elsewhere, 'untouched', { mode: 0o644 });
    symlinkSync(elsewhere, path.join(dataDir, brokerLockFileName));
    expect(() => lockDataDir(dataDir)).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', field: '--data-dir' }),
    );
    expect(readFileSync(elsewhere, 'utf8')).toBe('untouched');
    expect(lstatSync(elsewhere).mode & 0o777).toBe(0o644);
  });

  it('fails closed without the addon or its lockFile: no kernel lock, no start', () => {
    const dataDir = freshDir();
    expect(() => lockDataDir(dataDir, new Error('cannot load'))).toThrow(expect.objectContaining({ code: 'INTERNAL' }));
    expect(() => lockDataDir(dataDir, {})).toThrow(
      expect.objectContaining({ code: 'INTERNAL', message: expect.stringContaining('npm rebuild postern-peercred') }),
    );
  });
});

describe('the addon lockFile', () => {
  const addon = createRequire(import.meta.url)('postern-peercred') as { lockFile: (fd: unknown) => boolean };

  it('refuses a non-descriptor and reports a bad descriptor with its errno', () => {
    expect(() => addon.lockFile(-1)).toThrow(expect.objectContaining({ code: 'PEERCRED_BAD_ARGUMENT' }));
    expect(() => addon.lockFile('3')).toThrow(expect.objectContaining({ code: 'PEERCRED_BAD_ARGUMENT' }));
    const fd = openSync(path.join(freshDir(), 'f'), 'w');
    closeSync(fd);
    expect(() => addon.lockFile(fd)).toThrow(expect.objectContaining({ code: 'PEERCRED_SYSCALL_FAILED', errno: 9 }));
  });
});
