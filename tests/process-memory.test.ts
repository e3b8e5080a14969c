import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, describe, expect, it } from 'vitest';
import { repoRoot } from './support/postern-process.js';

/**
 * THREAT-MODEL: a same-user process reads another's memory unless that process made itself
 * non-dumpable. The attacker (tests/support/memory-attacker.mjs) runs as an unprivileged uid and
 * starts, as its own children, a plain node process holding a canary (the control: the attack must
 * find it, so this test can fail) and the real `postern daemon` (the attack must be refused).
 *
 * Root has CAP_SYS_PTRACE, which ignores dumpable, so under root the attacker drops to nobody
 * (65534) with a data dir, HOME and TMPDIR (tsx's cache) of its own (see attackerCommand).
 */
const linux = process.platform === 'linux';
const runningAsRoot = process.getuid?.() === 0;
const nobody = 65534;
const attackMs = 90_000;
const refusals = ['EACCES', 'EPERM'];
const attackerScript = path.join(repoRoot, 'tests', 'support', 'memory-attacker.mjs');

if (!linux)
  console.log(
    `process-memory.test.ts skipped: /proc/<pid>/mem and PR_SET_DUMPABLE are Linux-only (this is ${process.platform})`,
  );

const started: ChildProcess[] = [];
const dirs: string[] = [];

afterAll(() => {
  for (const child of started) {
    // The attacker leads its own process group: this ends its daemon and control child too.
    if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    }
  }
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

interface Attack {
  mapsError: string | null;
  memOpenError: string | null;
  regions: number;
  bytesRead: number;
  found: boolean;
  coreLimit: string | null;
}

interface AttackReport {
  error?: string;
  attacker: { uid: number; capEff: string | null };
  control: Attack;
  daemon: Attack & { hardeningLine: string | null };
}

/** A home for the attacker: owned by the uid it will run as, so the daemon and tsx can write there. */
function attackerHome(uid: number): { home: string; dataDir: string; tmp: string } {
  const home = mkdtempSync(path.join(os.tmpdir(), 'postern-memory-'));
  dirs.push(home);
  const tmp = path.join(home, 'tmp');
  mkdirSync(tmp, { mode: 0o700 });
  if (uid !== process.getuid?.()) {
    chownSync(home, uid, uid);
    chownSync(tmp, uid, uid);
  }
  return { home, dataDir: path.join(home, 'data'), tmp };
}

/**
 * Under root the checkout may sit below a directory nobody cannot enter (a CI clone in a 0700 mktemp folder).
 * So the attacker runs in a private mount namespace where the checkout is bind-mounted at a path under a 0755
 * directory, and drops to nobody there (setpriv: uid and gid 65534, no groups, no capabilities). The same
 * path is taken whether or not the checkout's own path is reachable, so what CI runs is what runs here.
 */
function attackerCommand(home: string, dataDir: string): { file: string; args: string[] } {
  if (!runningAsRoot) return { file: process.execPath, args: [attackerScript, repoRoot, dataDir] };
  const mountPoint = path.join(home, 'checkout');
  mkdirSync(mountPoint, { mode: 0o755 });
  const script =
    'mount --bind "$1" "$2" && cd "$3" && exec setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all "$4" "$2/tests/support/memory-attacker.mjs" "$2" "$5"';
  return {
    file: 'unshare',
    args: [
      '--mount',
      '--propagation',
      'private',
      '--',
      'sh',
      '-c',
      script,
      'sh',
      repoRoot,
      mountPoint,
      home,
      process.execPath,
      dataDir,
    ],
  };
}

async function runAttacker(): Promise<AttackReport> {
  const uid = runningAsRoot ? nobody : (process.getuid?.() ?? nobody);
  const { home, dataDir, tmp } = attackerHome(uid);
  // The attacker's home must be enterable by nobody wherever os.tmpdir() is.
  if (runningAsRoot) chmodSync(home, 0o755);
  const command = attackerCommand(home, dataDir);
  const child = spawn(command.file, command.args, {
    cwd: home,
    env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: home, TMPDIR: tmp },
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  started.push(child);
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (text: string) => (stderr += text));
  const stdout = child.stdout;
  if (stdout === null) throw new Error('the attacker has no stdout');
  return new Promise((resolve, reject) => {
    createInterface({ input: stdout }).once('line', (line) => resolve(JSON.parse(line) as AttackReport));
    child.once('exit', (code, signal) => {
      reject(new Error(`the attacker exited (${code ?? signal}) without a report: ${stderr.slice(-2000)}`));
    });
  });
}

describe.skipIf(!linux)('when a same-user process tries to read the daemon’s memory', () => {
  it(
    'reads the canary out of a plain process, and is refused by the daemon, which writes no core',
    { timeout: attackMs },
    async () => {
      const report = await runAttacker();
      expect(report.error).toBeUndefined();

      // Preconditions: no capability stands in for the kernel's dumpable check.
      expect(report.attacker.capEff).toBe('0000000000000000');
      if (runningAsRoot) expect(report.attacker.uid).toBe(nobody);

      // The control: the same method, against a dumpable process of the same uid, finds the secret.
      expect(report.control.mapsError).toBeNull();
      expect(report.control.memOpenError).toBeNull();
      expect(report.control.found).toBe(true);

      // The daemon: neither its map nor its memory can be opened, and not one byte was read.
      expect(refusals).toContain(report.daemon.mapsError);
      expect(refusals).toContain(report.daemon.memOpenError);
      expect(report.daemon.bytesRead).toBe(0);
      expect(report.daemon.found).toBe(false);
      expect(report.daemon.coreLimit).toBe('0');
      expect(report.daemon.hardeningLine).toMatch(/^Process memory: not readable by other processes of this user/);
    },
  );
});
