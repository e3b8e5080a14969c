// The same-user attacker of tests/process-memory.test.ts, run as an unprivileged uid (no
// CAP_SYS_PTRACE). It starts two processes of its own uid as its children (so neither the uid nor
// a Yama "descendants only" rule stands in its way), reads what it can of their memory through
// /proc/<pid>/maps and /proc/<pid>/mem, and prints one JSON line:
//   control: a plain node process holding a canary (the attack must find it: it proves the method);
//   daemon:  the real `postern daemon` (the attack must be refused).
// Plain .mjs on purpose: no tsx, nothing of the broker's in the attacker's own process.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, openSync, readFileSync, readSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';

const [repoRoot, dataDir] = process.argv.slice(2);
const deadlineMs = 60_000;
const readBytesMax = 2 * 1024 * 1024 * 1024;
const chunkBytes = 1024 * 1024;

const started = [];
const giveUp = setTimeout(() => finish({ error: `the attacker ran out of time (${deadlineMs} ms)` }), deadlineMs);

function finish(report) {
  for (const child of started) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  clearTimeout(giveUp);
  process.stdout.write(`${JSON.stringify(report)}\n`, () => process.exit(0));
}

/** Resolves with the child's stdout lines once one matches; rejects if it exits first. */
function waitForLine(child, match, what) {
  const lines = [];
  let stderr = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (text) => (stderr += text));
  return new Promise((resolve, reject) => {
    createInterface({ input: child.stdout }).on('line', (line) => {
      lines.push(line);
      if (match(line)) resolve(lines);
    });
    child.once('exit', (code, signal) => {
      reject(new Error(`${what} exited (${code ?? signal}) before it was ready: ${stderr.slice(-2000)}`));
    });
  });
}

function errorCode(action) {
  try {
    action();
    return null;
  } catch (error) {
    return error.code ?? String(error);
  }
}

/** Reads every readable mapping of `pid` through /proc/<pid>/mem, looking for `needle`. */
function attack(pid, needle) {
  const result = { mapsError: null, memOpenError: null, regions: 0, bytesRead: 0, found: false, firstReadError: null };
  let maps;
  result.mapsError = errorCode(() => (maps = readFileSync(`/proc/${pid}/maps`, 'utf8')));
  let fd;
  result.memOpenError = errorCode(() => (fd = openSync(`/proc/${pid}/mem`, 'r')));
  if (maps === undefined || fd === undefined) {
    if (fd !== undefined) closeSync(fd);
    return result;
  }
  const buffer = Buffer.alloc(chunkBytes);
  try {
    for (const line of maps.split('\n')) {
      const match = /^([0-9a-f]+)-([0-9a-f]+) (\S{4})/.exec(line);
      if (match === null || match[3][0] !== 'r' || line.endsWith('[vsyscall]') || line.endsWith('[vvar]')) continue;
      result.regions += 1;
      let carry = Buffer.alloc(0);
      for (
        let at = BigInt(`0x${match[1]}`), end = BigInt(`0x${match[2]}`);
        at < end && result.bytesRead < readBytesMax;
      ) {
        const want = Number(end - at < BigInt(chunkBytes) ? end - at : BigInt(chunkBytes));
        let got;
        const readError = errorCode(() => (got = readSync(fd, buffer, 0, want, at)));
        if (readError !== null || got === 0) {
          result.firstReadError ??= readError;
          break;
        }
        result.bytesRead += got;
        const window = Buffer.concat([carry, buffer.subarray(0, got)]);
        if (window.includes(needle)) {
          result.found = true;
          return result;
        }
        carry = window.subarray(Math.max(0, window.length - needle.length + 1));
        at += BigInt(got);
      }
    }
    return result;
  } finally {
    closeSync(fd);
  }
}

function coreLimit(pid) {
  const line = readFileSync(`/proc/${pid}/limits`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('Max core file size'));
  return line?.split(/\s{2,}/)[1] ?? null;
}

function capEff() {
  return /^CapEff:\s*(\S+)/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? null;
}

async function main() {
  const env = { PATH: process.env.PATH, HOME: process.env.HOME, TMPDIR: process.env.TMPDIR, POSTERN_TEST_EVENTS: '1' };

  // The control: its canary reaches it as base64 in the environment, so the plain bytes exist only
  // in the memory the target built them in.
  const canary = Buffer.from(`process-memory-canary-${randomBytes(12).toString('hex')}`);
  const holder =
    'globalThis.kept = Buffer.from(process.env.CANARY_B64, "base64"); console.log("ready"); setInterval(() => {}, 60000);';
  const control = spawn(process.execPath, ['-e', holder], {
    env: { ...env, CANARY_B64: canary.toString('base64') },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  started.push(control);
  await waitForLine(control, (line) => line === 'ready', 'the control process');

  const daemon = spawn(
    process.execPath,
    [path.join(repoRoot, 'bin', 'postern.mjs'), 'daemon', '--data-dir', dataDir, '--port', '0'],
    {
      cwd: repoRoot,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  started.push(daemon);
  const daemonLines = await waitForLine(daemon, (line) => line.startsWith('{"event":"ready"'), 'the daemon');

  finish({
    attacker: { uid: process.getuid(), capEff: capEff() },
    control: { ...attack(control.pid, canary), coreLimit: coreLimit(control.pid) },
    // The needle is beside the point here: any byte read from the daemon is a failure.
    // Only the hardening line of its output: another line carries the operator token.
    daemon: {
      ...attack(daemon.pid, canary),
      coreLimit: coreLimit(daemon.pid),
      hardeningLine: daemonLines.find((l) => l.startsWith('Process memory:')) ?? null,
    },
  });
}

main().catch((error) => finish({ error: error instanceof Error ? error.message : String(error) }));
