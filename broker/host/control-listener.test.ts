import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import { deviceNumbers, parseFlockHolders, verifyControlListener } from './control-listener.js';
import { lockDataDir } from './data-dir-lock.js';

describe('parseFlockHolders', () => {
  it('keeps granted exclusive flocks only: waiters, POSIX, OFD, shared and malformed lines are skipped', () => {
    const table = [
      '1: FLOCK  ADVISORY  WRITE 1234 fe:00:4507362 0 EOF',
      '1: -> FLOCK  ADVISORY  WRITE 999 fe:00:4507362 0 EOF',
      '2: POSIX  ADVISORY  WRITE 77 fe:00:11 0 EOF',
      '3: OFDLCK ADVISORY  WRITE -1 fe:00:12 0 EOF',
      '4: FLOCK  ADVISORY  READ 55 fe:00:13 0 EOF',
      '5: FLOCK  ADVISORY  WRITE 0 fe:00:14 0 EOF',
      '6: FLOCK  ADVISORY  WRITE 42 not-a-file 0 EOF',
      '7: FLOCK  ADVISORY  WRITE 4321 103:0a:99 0 EOF',
      '',
    ].join('\n');
    expect(parseFlockHolders(table)).toEqual([
      { pid: 1234, major: 0xfen, minor: 0n, inode: 4507362n },
      { pid: 4321, major: 0x103n, minor: 0xan, inode: 99n },
    ]);
  });
});

describe('deviceNumbers', () => {
  let dir: TempDir;
  beforeEach(() => (dir = createTempDir('pcl-')));
  afterEach(() => dir.remove());

  it('names the device as the kernel’s lock table does for a flock this process holds', () => {
    const lock = lockDataDir(dir.path);
    try {
      const stat = statSync(dir.path, { bigint: true });
      const { major, minor } = deviceNumbers(stat.dev);
      const mine = parseFlockHolders(readFileSync('/proc/locks', 'utf8')).filter((h) => h.pid === process.pid);
      expect(mine).toContainEqual({ pid: process.pid, major, minor, inode: stat.ino });
    } finally {
      lock.release();
    }
  });

  it('decodes glibc’s split major/minor bits', () => {
    // makedev(0x1234, 0x56789) as glibc encodes it.
    const dev =
      ((0x1234n & 0xfffn) << 8n) |
      ((0x1234n & 0xfffff000n) << 32n) |
      (0x56789n & 0xffn) |
      ((0x56789n & 0xffffff00n) << 12n);
    expect(deviceNumbers(dev)).toEqual({ major: 0x1234n, minor: 0x56789n });
  });
});

describe('verifyControlListener', () => {
  let dir: TempDir;
  let server: Server;
  let client: Socket;
  beforeEach(async () => {
    dir = createTempDir('pcl-');
    server = createServer();
    const socketPath = path.join(dir.path, 'control.sock');
    await new Promise<void>((resolve) => server.listen(socketPath, resolve));
    client = createConnection(socketPath);
    await new Promise<void>((resolve) => client.once('connect', resolve));
  });
  afterEach(async () => {
    client.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    dir.remove();
  });

  /** A lock table naming `pid` as the holder of this data directory. */
  function tableNaming(pid: number): string {
    const stat = statSync(dir.path, { bigint: true });
    const { major, minor } = deviceNumbers(stat.dev);
    const file = path.join(dir.path, 'locks');
    writeFileSync(
      file,
      `1: FLOCK  ADVISORY  WRITE ${pid} ${major.toString(16)}:${minor.toString(16)}:${stat.ino} 0 EOF\n`,
    );
    return file;
  }

  it('passes when the listener (this process, by SO_PEERCRED) holds the data directory’s lock', () => {
    const lock = lockDataDir(dir.path);
    try {
      expect(() => verifyControlListener(client, dir.path)).not.toThrow();
    } finally {
      lock.release();
    }
  });

  it('refuses when another process holds the lock, naming both pids', () => {
    expect(() => verifyControlListener(client, dir.path, { procLocksPath: tableNaming(process.pid + 1) })).toThrowError(
      expect.objectContaining({
        code: 'CONTROL_SOCKET_UNVERIFIED',
        field: '--data-dir',
        message: expect.stringContaining(
          `pid ${process.pid} listens on it, but the lock is held by pid ${process.pid + 1}`,
        ) as unknown,
      }),
    );
  });

  it('refuses a lock on another file of the same device, and an unreadable lock table', () => {
    const elsewhere = path.join(dir.path, 'other-locks');
    const stat = statSync(dir.path, { bigint: true });
    const { major, minor } = deviceNumbers(stat.dev);
    writeFileSync(
      elsewhere,
      `1: FLOCK  ADVISORY  WRITE ${process.pid} ${major.toString(16)}:${minor.toString(16)}:${stat.ino + 1n} 0 EOF\n`,
    );
    expect(() => verifyControlListener(client, dir.path, { procLocksPath: elsewhere })).toThrowError(
      expect.objectContaining({ message: expect.stringContaining('no process holds') as unknown }),
    );
    expect(() =>
      verifyControlListener(client, dir.path, { procLocksPath: path.join(dir.path, 'missing') }),
    ).toThrowError(expect.objectContaining({ code: 'CONTROL_SOCKET_UNVERIFIED' }));
  });

  it('refuses a listener of another uid, and one the kernel cannot name', () => {
    const table = tableNaming(process.pid);
    const uid = (process.getuid?.() ?? 0) + 1;
    expect(() =>
      verifyControlListener(client, dir.path, {
        procLocksPath: table,
        peerOf: () => ({ pid: process.pid, uid, gid: 0 }),
      }),
    ).toThrowError(
      expect.objectContaining({ message: expect.stringContaining(`another user (uid ${uid})`) as unknown }),
    );
    expect(() =>
      verifyControlListener(client, dir.path, {
        procLocksPath: table,
        peerOf: () => {
          throw new Error('no peer');
        },
      }),
    ).toThrowError(expect.objectContaining({ code: 'CONTROL_SOCKET_UNVERIFIED' }));
  });

  it('without a lock table (macOS) the listener must at least be the holder broker.lock names', () => {
    writeFileSync(
      path.join(dir.path, 'broker.lock'),
      `${JSON.stringify({ pid: process.pid + 1, started_at_ms: 1 })}\n`,
    );
    expect(() => verifyControlListener(client, dir.path, { platform: 'darwin' })).toThrowError(
      expect.objectContaining({ code: 'CONTROL_SOCKET_UNVERIFIED' }),
    );
    writeFileSync(path.join(dir.path, 'broker.lock'), `${JSON.stringify({ pid: process.pid, started_at_ms: 1 })}\n`);
    expect(() => verifyControlListener(client, dir.path, { platform: 'darwin' })).not.toThrow();
  });
});
