import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { createTempDir, type TempDir } from './temp-dir.js';

/** How long sshd may take to print "Server listening" before the fixture gives up. */
export const sshdStartTimeoutMs = 10_000;
const sshdBinary = '/usr/sbin/sshd';

export interface SshKeyPair {
  readonly privateKey: Buffer;
  readonly publicKey: string;
  readonly fingerprint: string;
}

/**
 * A real OpenSSH sshd for one test file: its own sshd_config, host key and authorized_keys in a temp
 * dir, on 127.0.0.1, never touching the machine's sshd. As root sshd needs /run/sshd, so it runs in
 * a private mount namespace (`unshare --mount`) with a tmpfs on /run. Readiness is sshd's own
 * "Server listening" line on stderr (-D -e), never a sleep. `unavailableReason()` says why it
 * cannot run here (tests then skip with that reason).
 */
export class TestSshd {
  private child: ChildProcess | undefined;
  readonly log: string[] = [];
  /** Called on every chunk sshd logs (waitForLog's checks). */
  private readonly logListeners = new Set<() => void>();
  hostKey: SshKeyPair & { privateKeyPath: string };

  private constructor(
    readonly dir: TempDir,
    readonly port: number,
    readonly user: string,
    /** The key authorized_keys accepts. */
    readonly userKey: SshKeyPair,
    /** A valid key the server does not accept. */
    readonly strangerKey: SshKeyPair,
  ) {
    this.hostKey = generateKey(dir.path, 'host-1', 'test-host-key');
  }

  /** The started sshd, or the test skipped with the reason printed (never a silent skip). */
  static required(sshd: TestSshd | undefined, ctx: { skip: (note?: string) => never }): TestSshd {
    if (sshd === undefined) ctx.skip(`real sshd unavailable: ${TestSshd.unavailableReason() ?? 'not started'}`);
    return sshd;
  }

  static unavailableReason(): string | undefined {
    if (!existsSync(sshdBinary)) return `${sshdBinary} is not installed`;
    if (spawnSync('unshare', ['--mount', '--propagation', 'private', 'true']).status !== 0)
      return 'unshare --mount is not permitted here (needs root or user namespaces)';
    if (spawnSync('ssh-keygen', ['-?']).error !== undefined) return 'ssh-keygen is not installed';
    return undefined;
  }

  static async start(options: { userKeyComment?: string } = {}): Promise<TestSshd> {
    const dir = createTempDir('postern-sshd-');
    const user = process.env.USER ?? 'root';
    const userKey = generateKey(dir.path, 'user', options.userKeyComment ?? 'test-user-key');
    const strangerKey = generateKey(dir.path, 'stranger', 'stranger-key');
    writeFileSync(join(dir.path, 'authorized_keys'), `${userKey.publicKey}\n`, { mode: 0o600 });
    const sshd = new TestSshd(dir, await freePort(), user, userKey, strangerKey);
    await sshd.run();
    return sshd;
  }

  /** Restarts on the same port with a freshly generated host key (a "changed" server). */
  async restartWithNewHostKey(): Promise<void> {
    await this.stop();
    this.hostKey = generateKey(this.dir.path, `host-${Date.now()}`, 'test-host-key-2');
    await this.run();
  }

  private async run(): Promise<void> {
    const config = join(this.dir.path, 'sshd_config');
    writeFileSync(
      config,
      [
        `Port ${this.port}`,
        'ListenAddress 127.0.0.1',
        `HostKey ${this.hostKey.privateKeyPath}`,
        `PidFile ${join(this.dir.path, 'sshd.pid')}`,
        `AuthorizedKeysFile ${join(this.dir.path, 'authorized_keys')}`,
        'UsePAM no',
        'StrictModes no',
        'PasswordAuthentication no',
        'KbdInteractiveAuthentication no',
        'PermitRootLogin prohibit-password',
        'LogLevel VERBOSE',
        '',
      ].join('\n'),
    );
    const script = `mount -t tmpfs tmpfs /run && mkdir -m 755 /run/sshd && exec ${sshdBinary} -D -e -f ${config}`;
    const child = spawn('unshare', ['--mount', '--propagation', 'private', 'sh', '-c', script], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    this.child = child;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`sshd did not start within ${sshdStartTimeoutMs} ms: ${this.log.join('')}`)),
        sshdStartTimeoutMs,
      );
      child.stderr?.on('data', (chunk: Buffer) => {
        this.log.push(chunk.toString('utf8'));
        for (const listener of this.logListeners) listener();
        if (this.log.join('').includes(`Server listening on 127.0.0.1 port ${this.port}`)) {
          clearTimeout(timer);
          resolve();
        }
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`sshd exited (${code}): ${this.log.join('')}`));
      });
    });
  }

  /** How much sshd has logged so far: pass it as `from` to wait only for what it logs after this point. */
  logMark(): number {
    return this.log.join('').length;
  }

  /**
   * The first whole line sshd logs after `from` (a `logMark()`) that matches `pattern`, as soon as sshd writes it:
   * sshd's own report of what it did (LogLevel VERBOSE: "Starting session: command for …" once an exec request's
   * command is started), so a test waits on the server's event rather than a sleep. Rejects after `timeoutMs`.
   */
  waitForLog(pattern: RegExp, options: { from?: number; timeoutMs?: number } = {}): Promise<string> {
    const timeoutMs = options.timeoutMs ?? sshdStartTimeoutMs;
    return new Promise<string>((resolve, reject) => {
      const check = (): void => {
        // Only whole lines: the last piece may be a line sshd is still writing.
        const lines = this.log
          .join('')
          .slice(options.from ?? 0)
          .split('\n')
          .slice(0, -1);
        const line = lines.map((l) => l.replace(/\r$/, '')).find((l) => pattern.test(l));
        if (line === undefined) return;
        done();
        resolve(line);
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`sshd logged no line matching ${String(pattern)} within ${timeoutMs} ms`));
      }, timeoutMs);
      const done = (): void => {
        clearTimeout(timer);
        this.logListeners.delete(check);
      };
      this.logListeners.add(check);
      check();
    });
  }

  async stop(): Promise<void> {
    const child = this.child;
    this.child = undefined;
    if (child === undefined || child.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      child.once('exit', () => resolve());
      child.kill('SIGTERM');
    });
  }

  async dispose(): Promise<void> {
    await this.stop();
    this.dir.remove();
  }
}

/** An ed25519 key pair made by ssh-keygen (OpenSSH format, no passphrase) and its `ssh-keygen -lf` fingerprint. */
export function generateKey(dir: string, name: string, comment: string): SshKeyPair & { privateKeyPath: string } {
  const path = join(dir, name);
  const made = spawnSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', comment, '-f', path]);
  if (made.status !== 0) throw new Error(`ssh-keygen failed: ${made.stderr.toString()}`);
  const listed = spawnSync('ssh-keygen', ['-lf', `${path}.pub`]).stdout.toString();
  const fingerprint = /SHA256:[A-Za-z0-9+/]{43}/.exec(listed)?.[0];
  if (fingerprint === undefined) throw new Error(`ssh-keygen -lf printed no fingerprint: ${listed}`);
  return {
    privateKey: readFileSync(path),
    publicKey: readFileSync(`${path}.pub`, 'utf8').trim(),
    fingerprint,
    privateKeyPath: path,
  };
}

/** A port nothing listens on right now (the kernel's choice), for sshd and for refused connects. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}
