/**
 * The durable bench's fsync counter (bench/fsync-trace.ts): what it reads from strace's output — counts per thread
 * and file, and each WAL sync's time in the kernel, also when another thread's call split the sync over two lines;
 * and the WAL's page writes (pwrite64 of a page's size) by thread.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FsyncTrace, straceUnavailable, tracedArgv } from '../bench/fsync-trace.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});
function scratch(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'postern-fsync-trace-'));
  dirs.push(dir);
  return dir;
}

describe('FsyncTrace', () => {
  it('reads counts and kernel times from strace -f -y -T lines, an unfinished call timed by its resumed line', async () => {
    const dir = scratch();
    const traceFile = path.join(dir, 'trace');
    writeFileSync(
      traceFile,
      [
        '100 fdatasync(22</d/journal.sqlite-wal>) = 0 <0.000400>',
        '101 fdatasync(22</d/journal.sqlite-wal> <unfinished ...>',
        '102 fsync(23</d/journal.sqlite>) = 0 <0.002000>',
        '101 <... fdatasync resumed>) = 0 <0.001500>',
        '100 --- SIGCHLD {si_signo=SIGCHLD} ---',
        '103 fsync(9</d/other.json>) = 0 <0.000100>',
        '100 pwrite64(22</d/journal.sqlite-wal>, "\\0\\0\\0\\2, 7, 8) = "..., 24, 32) = 24 <0.000004>',
        '100 pwrite64(22</d/journal.sqlite-wal>, "x, 1, 2) = "..., 4096, 56) = 4096 <0.000006>',
        '104 pwrite64(22</d/journal.sqlite-wal>, "y"..., 4096, 4176 <unfinished ...>',
        '100 pwrite64(23</d/journal.sqlite>, "z"..., 4096, 0) = 4096 <0.000005>',
        '104 <... pwrite64 resumed>) = 4096 <0.000030>',
      ].join('\n') + '\n',
    );
    const trace = FsyncTrace.of(traceFile, 100);
    const count = await trace.countSince(0);
    expect(count.total).toBe(4);
    expect(count.onLoop).toBe(1);
    expect(count.offLoop).toBe(3);
    expect(Object.fromEntries(count.byFile)).toEqual({
      'journal WAL': 2,
      'db journal.sqlite': 1,
      'other.json': 1,
    });
    expect(count.walSyncMs.map((value) => Math.round(value * 1_000))).toEqual([400, 1_500]);
    // Pages, not frame headers, and only the WAL's: one on the loop, one on another thread (split over two lines).
    expect(count.walPages).toEqual({ onLoop: 1, offLoop: 1 });
    // A window starting after the first line sees only what came later.
    expect((await trace.countSince(1)).walSyncMs.map((value) => Math.round(value * 1_000))).toEqual([1_500]);
  });

  it('times the syncs of a real process under strace', async (context) => {
    const unavailable = straceUnavailable();
    if (unavailable !== undefined) {
      console.log(`skipped: ${unavailable}`);
      context.skip();
    }
    const dir = scratch();
    const traceFile = path.join(dir, 'trace');
    const wal = path.join(dir, 'journal.sqlite-wal');
    const other = path.join(dir, 'other.json');
    const pidFile = path.join(dir, 'pid');
    const script = `
      const fs = require('node:fs');
      fs.writeFileSync(${JSON.stringify(pidFile)}, String(process.pid));
      const wal = fs.openSync(${JSON.stringify(wal)}, 'w');
      const other = fs.openSync(${JSON.stringify(other)}, 'w');
      for (let i = 0; i < 5; i++) { fs.writeSync(wal, 'frame ' + i); fs.fdatasyncSync(wal); }
      for (let i = 0; i < 2; i++) { fs.writeSync(other, 'x'); fs.fsyncSync(other); }
      for (let i = 0; i < 3; i++) { fs.writeSync(wal, Buffer.alloc(24), 0, 24, i * 4120); fs.writeSync(wal, Buffer.alloc(4096), 0, 4096, i * 4120 + 24); }
      fs.writeSync(other, Buffer.alloc(4096), 0, 4096, 0);
      fs.fdatasync(wal, (error) => { if (error) throw error; });
    `;
    const child = spawn('strace', tracedArgv([process.execPath, '-e', script], traceFile), { stdio: 'ignore' });
    const [code] = (await once(child, 'exit')) as [number | null];
    expect(code).toBe(0);
    const count = await FsyncTrace.of(traceFile, Number(readFileSync(pidFile, 'utf8'))).countSince(0);
    expect(count.byFile.get('journal WAL')).toBe(6);
    expect(count.byFile.get('other.json')).toBe(2);
    // The seven synchronous calls ran on the main thread, the asynchronous one on libuv's threadpool.
    expect(count.onLoop).toBe(7);
    expect(count.offLoop).toBe(count.total - 7);
    expect(count.offLoop).toBeGreaterThanOrEqual(1);
    expect(count.walSyncMs).toHaveLength(6);
    expect(count.walPages).toEqual({ onLoop: 3, offLoop: 0 });
    for (const ms of count.walSyncMs) {
      expect(ms).toBeGreaterThan(0);
      expect(ms).toBeLessThan(10_000);
    }
  });
});
