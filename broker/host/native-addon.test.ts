import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readlinkSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { loadNativeAddon } from './native-addon.js';

/**
 * The addon's listeningTcpInodes against real sockets of this process on 127.0.0.1 and ::1: the kernel's sock_diag
 * answer names the listening socket's inode, and neither end of an established connection (the inspector check in
 * broker/actions/process-allowlist.ts matches these against a process's /proc/<pid>/fd links).
 */
const linux = process.platform === 'linux';

/** The socket inode behind a descriptor of this process, as /proc/self/fd names it (`socket:[N]`). */
function inodeOf(handle: unknown): number {
  const fd = (handle as { _handle?: { fd?: unknown } })._handle?.fd;
  if (typeof fd !== 'number') throw new Error('no descriptor');
  const link = readlinkSync(`/proc/self/fd/${fd}`);
  const inode = /^socket:\[(\d+)\]$/.exec(link)?.[1];
  if (inode === undefined) throw new Error(`not a socket: ${link}`);
  return Number(inode);
}

async function listen(host: string): Promise<Server | undefined> {
  const server = createServer();
  return new Promise((resolve) => {
    server.once('error', () => resolve(undefined));
    server.listen(0, host, () => resolve(server));
  });
}

async function connectTo(server: Server, host: string): Promise<{ client: Socket; accepted: Socket }> {
  const accepted = new Promise<Socket>((resolve) => server.once('connection', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('not listening on TCP');
  const client = connect(address.port, host);
  await new Promise((resolve) => client.once('connect', resolve));
  return { client, accepted: await accepted };
}

describe.skipIf(!linux)('listeningTcpInodes with the real addon', () => {
  if (!linux) console.log(`native-addon.test.ts: sock_diag is Linux-only (this is ${process.platform})`);

  it('names this process’s listening sockets (IPv4 and IPv6), and neither end of a connection', async () => {
    const addon = loadNativeAddon();
    if (addon instanceof Error) throw addon;
    // An addon built before this function (rebuild it: npm rebuild postern-peercred) fails here, by name.
    expect(typeof addon.listeningTcpInodes, 'postern-peercred has listeningTcpInodes').toBe('function');
    const listeningTcpInodes = addon.listeningTcpInodes as () => number[];
    const v4 = await listen('127.0.0.1');
    const v6 = await listen('::1');
    if (v4 === undefined) throw new Error('cannot listen on 127.0.0.1');
    if (v6 === undefined) console.log('native-addon.test.ts: no ::1 here, the IPv6 listener is not checked');
    const { client, accepted } = await connectTo(v4, '127.0.0.1');
    try {
      const inodes = listeningTcpInodes();
      expect(Array.isArray(inodes)).toBe(true);
      expect(inodes).toContain(inodeOf(v4));
      if (v6 !== undefined) expect(inodes).toContain(inodeOf(v6));
      expect(inodes).not.toContain(inodeOf(client));
      expect(inodes).not.toContain(inodeOf(accepted));

      // Closed, it is no longer listed.
      const closed = inodeOf(v4);
      client.destroy();
      accepted.destroy();
      await new Promise((resolve) => v4.close(resolve));
      expect(listeningTcpInodes()).not.toContain(closed);
    } finally {
      client.destroy();
      accepted.destroy();
      v4.close();
      v6?.close();
    }
  });
});

describe.skipIf(!linux)('listeningTcpInodes when the kernel cannot dump TCP sockets', () => {
  it('throws (the caller falls back to /proc), never answers "no listeners" while one listens', (ctx) => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'postern-nodiag-'));
    try {
      const preload = path.join(dir, 'sock-diag-unhandled.so');
      const source = path.join(import.meta.dirname, '..', 'testing', 'sock-diag-unhandled.c');
      try {
        execFileSync('cc', ['-shared', '-fPIC', '-o', preload, source, '-ldl'], { stdio: 'pipe' });
      } catch (error) {
        console.log(`native-addon.test.ts: no C compiler to build the stand-in kernel (${String(error)}); skipped`);
        ctx.skip();
      }
      // A child with its own listener asks the real addon, its request rewritten as a kernel without tcp_diag sees it.
      const probe = `
        const addon = require(${JSON.stringify(path.join(import.meta.dirname, '..', '..', 'native', 'peercred'))});
        require('node:net').createServer().listen(0, '127.0.0.1', function () {
          let answer;
          try { answer = { inodes: addon.listeningTcpInodes() }; } catch (e) { answer = { code: e.code, errno: e.errno }; }
          process.stdout.write(JSON.stringify(answer));
          this.close();
        });`;
      const child = spawnSync(process.execPath, ['-e', probe], {
        env: { ...process.env, LD_PRELOAD: preload },
        encoding: 'utf8',
        timeout: 20_000,
      });
      expect(child.status, child.stderr).toBe(0);
      expect(JSON.parse(child.stdout)).toEqual({ code: 'PEERCRED_SYSCALL_FAILED', errno: 2 });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
