/**
 * CLI start benchmark (issue 16: "the CLI and the shim start fast", target < 300 ms to first output):
 * the time from spawning `node bin/postern.mjs …` to its first byte on stdout, for `--version`, `--help`,
 * `status --json` on an empty data directory, `mcp` answering an MCP initialize, operator commands
 * answered by a running daemon (`approvals list`, `metrics --json`, `vault list`), `audit verify` of that daemon's
 * journal, and with no broker `config pending` (a data directory holding a postern.yaml of one route; and one a broker
 * ran in, whose postern.yaml changed since) and `config accept`'s passphrase prompt on a pseudo-terminal, three ways:
 * through the esbuild bundle in a checkout (`bundle`: scripts/build-cli.mjs), through the bundle of an installed copy
 * (`install`: the package under node_modules with every source dated after the build, as npm leaves it, so the bin
 * compares the inode and ctime it recorded for each, bin/postern.mjs), and through tsx (what the bin falls back to
 * without a fresh bundle). A last row is an installed copy's first start (`--version`), which reads and digests every
 * source before it has a record. Median, min and max of `runs` runs after one unreported warm-up run each.
 *
 *   node --import tsx bench/cli-start.ts [runs]
 *
 * Runs in three temp copies of the package layout (two with a bundle built here, one without), so the checkout's dist/
 * and sources (which people edit, making its bundle stale) are not involved.
 * Not part of the test run; about 6 minutes with 11 runs on a 2-core machine.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { cpus, loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { startAgentSocket } from '../broker/agent/index.js';
import { initializeFrame } from '../broker/testing/malformed-mcp.js';
import { ScriptedAgentBackend } from '../broker/testing/scripted-agent-backend.js';
import { oneRouteConfig } from '../scripts/vendor-script-plugin.mjs';
import { makeCliPackageRoot, type CliPackageRoot } from '../broker/testing/cli-package-root.js';
import { createTempDir, type TempDir } from '../broker/testing/temp-dir.js';
import { systemClock } from '../broker/ports/system-clock.js';
import { anchorsInScratch } from './anchor-dir.js';

const runs = Number(process.argv[2] ?? 10);
/** A start that has printed nothing by then is reported as a failure, not waited on forever. */
const firstOutputMsMax = 30_000;
/** Issues 16 and 18: an MCP client gives up on a slow shim; a person notices a slow `--version`. */
const firstOutputGoalMs = 300;

/**
 * Milliseconds from spawn to the first stdout byte; the child is then ended (stdin closed, then killed). On a
 * terminal (`script`'s pseudo-terminal, whose output is its stdout, stderr included): until what was written ends in a
 * passphrase prompt — anything else first (an error, a warning) fails the run rather than being timed as the prompt.
 */
function timeToFirstOutput(bin: string, args: readonly string[], stdin?: string, terminal = false): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const argv = [process.execPath, bin, ...args];
    const [command, ...rest] = terminal ? ['script', '-qec', argv.map(shellQuote).join(' '), '/dev/null'] : argv;
    // `script -c` runs the line with $SHELL: a plain sh, not the user's shell and its start-up files.
    const child = spawn(command as string, rest, {
      stdio: ['pipe', 'pipe', 'ignore'],
      env: terminal ? { ...process.env, SHELL: '/bin/sh' } : process.env,
    });
    let written = '';
    const fail = (why: string): void => {
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(new Error(`${args.join(' ')}: ${why}`));
    };
    const timer = setTimeout(() => fail(`no output within ${firstOutputMsMax} ms`), firstOutputMsMax);
    child.once('error', reject);
    const onExit = (): void => fail(`exited before its prompt: ${JSON.stringify(written.slice(-300))}`);
    if (terminal) child.once('exit', onExit);
    const onData = (chunk: Buffer): void => {
      const elapsed = performance.now() - started;
      written += chunk.toString('utf8');
      if (terminal && !/passphrase[^\n]*: $/i.test(written)) return;
      child.stdout.off('data', onData);
      child.off('exit', onExit);
      clearTimeout(timer);
      child.stdin.end();
      child.kill('SIGTERM');
      child.once('exit', () => resolve(elapsed));
    };
    child.stdout.on('data', onData);
    if (stdin !== undefined) child.stdin.write(stdin);
  });
}

const shellQuote = (arg: string): string => `'${arg.replaceAll("'", "'\\''")}'`;

interface Case {
  name: string;
  args: (dataDir: string) => string[];
  stdin?: string;
  /** Asks the daemon the bench started (its data directory is passed) instead of an empty data directory. */
  daemon?: true;
  /** A data directory with a vault and no broker (its path is passed), the command run on a pseudo-terminal. */
  vaultNoBroker?: true;
  /** A data directory a broker ran in (vault, journal, accepted copy), none running now, postern.yaml changed since. */
  changedNoBroker?: true;
  /** Files written into the empty data directory before each run. */
  files?: Readonly<Record<string, string>>;
}

/** A configuration of one route, as a person writes one: what `config pending` parses and shows (the build's run of
 * it writes the bundle's code caches on the same file). */
const benchConfig = oneRouteConfig;

const cases: Case[] = [
  { name: '--version', args: () => ['--version'] },
  { name: 'status --json (empty dir)', args: (dataDir) => ['status', '--json', '--data-dir', dataDir] },
  {
    name: 'mcp: initialize answered',
    args: (dataDir) => ['mcp', '--data-dir', dataDir],
    stdin: `${initializeFrame(1, 'bench')}\n`,
  },
  { name: '--help', args: () => ['--help'] },
  // An operator command's whole answer: start, the control socket's round trip, the printed result.
  { name: 'approvals list (daemon)', args: (dataDir) => ['approvals', 'list', '--data-dir', dataDir], daemon: true },
  { name: 'metrics --json (daemon)', args: (dataDir) => ['metrics', '--json', '--data-dir', dataDir], daemon: true },
  // The vault file read as it is (a snapshot beside the daemon's open connection), then the daemon asked for its state.
  { name: 'vault list (daemon)', args: (dataDir) => ['vault', 'list', '--data-dir', dataDir], daemon: true },
  // The whole verify of the daemon's (small) journal, read from a private snapshot beside it: the verifier's start.
  { name: 'audit verify (daemon)', args: (dataDir) => ['audit', 'verify', '--data-dir', dataDir], daemon: true },
  // No broker: the card from the files (postern.yaml parsed: yaml and zod load), and a person's decision, whose first
  // output is the passphrase prompt on the terminal.
  {
    name: 'config pending (no broker)',
    args: (dataDir) => ['config', 'pending', '--data-dir', dataDir],
    files: { 'postern.yaml': benchConfig },
  },
  // What a person runs after editing postern.yaml: the accepted copy and the file both parsed, the difference shown.
  {
    name: 'config pending (changed)',
    args: (dataDir) => ['config', 'pending', '--data-dir', dataDir],
    changedNoBroker: true,
  },
  {
    name: 'config accept: prompt',
    args: (dataDir) => ['config', 'accept', `sha256:${'0'.repeat(64)}`, '--data-dir', dataDir],
    vaultNoBroker: true,
  },
];

/** How long the bench waits for its daemon's ready event. */
const daemonReadyMs = 30_000;

/** A headless daemon on its own data directory (run from the bundle), answering the operator commands' cases. */
async function startDaemon(pkg: CliPackageRoot, dataDir: string, extraArgs: string[] = []): Promise<ChildProcess> {
  const child = spawn(process.execPath, [pkg.bin, 'daemon', '--data-dir', dataDir, '--port', '0', ...extraArgs], {
    env: { ...process.env, POSTERN_TEST_EVENTS: '1' },
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`the daemon was not ready within ${daemonReadyMs} ms`)),
        daemonReadyMs,
      );
      child.once('exit', (code) => reject(new Error(`the daemon exited (${code}) before it was ready`)));
      lines.on('line', (line) => {
        if (!line.startsWith('{"event":"ready"')) return;
        clearTimeout(timer);
        resolve();
      });
    });
  } catch (error) {
    child.kill('SIGKILL');
    throw error;
  }
  child.removeAllListeners('exit');
  return child;
}

async function stopDaemon(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), daemonReadyMs);
  await exited;
  clearTimeout(timer);
}

/** A data directory holding a vault (the test KDF: the bench times the prompt, not an unlock) and no broker. */
async function vaultDirWithoutBroker(): Promise<TempDir> {
  const dir = createTempDir('postern-bench-cli-vault-');
  const { openVault } = await import('../broker/vault/index.js');
  const vault = await openVault({ dataDir: dir.path, clock: systemClock, kdf: 'min', idleLockMs: 0 });
  await vault.init(Buffer.from('bench passphrase'));
  await vault.close();
  return dir;
}

/**
 * A data directory as a person has it after editing postern.yaml: `vault init` (which trusts the file present on first
 * use), a broker run that unlocked the vault (so the journal holds events and the accepted copy is sealed), then a
 * route added to the file. No broker runs in it afterwards.
 */
async function changedDirWithoutBroker(pkg: CliPackageRoot): Promise<TempDir> {
  const dir = createTempDir('postern-bench-cli-changed-');
  const passphraseFile = path.join(dir.path, '..', `${path.basename(dir.path)}.passphrase`);
  writeFileSync(passphraseFile, 'bench passphrase\n', { mode: 0o600 });
  try {
    writeFileSync(path.join(dir.path, 'postern.yaml'), benchConfig);
    await promisify(execFile)(process.execPath, [
      pkg.bin,
      'vault',
      'init',
      '--data-dir',
      dir.path,
      '--passphrase-file',
      passphraseFile,
    ]);
    await stopDaemon(await startDaemon(pkg, dir.path, ['--passphrase-file', passphraseFile]));
  } finally {
    rmSync(passphraseFile, { force: true });
  }
  const added = [
    '  - name: billing',
    '    base_url: https://billing.example.com',
    '    credential: billing-token',
    '    injection: bearer',
    '',
  ];
  writeFileSync(path.join(dir.path, 'postern.yaml'), `${benchConfig}${added.join('\n')}`);
  return dir;
}

async function measure(
  pkg: CliPackageRoot,
  c: Case,
  dirs: { daemon: TempDir; vault: TempDir; changed: TempDir },
): Promise<number[]> {
  const samples: number[] = [];
  for (let run = 0; run <= runs; run++) {
    if (c.changedNoBroker === true) {
      const ms = await timeToFirstOutput(pkg.bin, c.args(dirs.changed.path));
      if (run > 0) samples.push(ms);
      continue;
    }
    if (c.daemon === true || c.vaultNoBroker === true) {
      const dir = c.daemon === true ? dirs.daemon : dirs.vault;
      const ms = await timeToFirstOutput(pkg.bin, c.args(dir.path), c.stdin, c.vaultNoBroker === true);
      if (run > 0) samples.push(ms);
      // A run ended at its prompt may leave the vault's -wal and -shm: the next opens the file as the first did.
      if (c.vaultNoBroker === true)
        for (const sidecar of ['-wal', '-shm']) rmSync(path.join(dir.path, `vault.sqlite${sidecar}`), { force: true });
      continue;
    }
    const dataDir = createTempDir('postern-bench-cli-');
    for (const [name, text] of Object.entries(c.files ?? {})) writeFileSync(path.join(dataDir.path, name), text);
    // `mcp` relays to a broker's agent socket; a scripted backend stands in for the broker.
    const backend = new ScriptedAgentBackend();
    const socket = c.name.startsWith('mcp') ? await startAgentSocket({ dataDir: dataDir.path, backend }) : undefined;
    try {
      const ms = await timeToFirstOutput(pkg.bin, c.args(dataDir.path), c.stdin);
      if (run > 0) samples.push(ms);
    } finally {
      await socket?.close();
      dataDir.remove();
    }
  }
  return samples.sort((a, b) => a - b);
}

const fmt = (ms: number): string => ms.toFixed(0).padStart(6);
const scratch = createTempDir('postern-bench-cli-daemon-');
anchorsInScratch(scratch.path);
const daemonDir = createTempDir('postern-bench-cli-data-');
const vaultDir = await vaultDirWithoutBroker();
const withBundle = await makeCliPackageRoot({ bundle: true });
const withoutBundle = await makeCliPackageRoot({ bundle: false });
const installed = await makeCliPackageRoot({ bundle: true, installed: true });
let daemon: ChildProcess | undefined;
let changedDir: TempDir | undefined;
try {
  changedDir = await changedDirWithoutBroker(withBundle);
  daemon = await startDaemon(withBundle, daemonDir.path);
  const cpu = cpus();
  process.stdout.write(`CLI start: ${runs} runs each, time to first stdout byte (ms)\n`);
  const load = loadavg()
    .map((l) => l.toFixed(1))
    .join(' ');
  process.stdout.write(
    `machine: ${cpu.length} × ${cpu[0]?.model ?? 'unknown cpu'}, node ${process.version}, load average ${load}\n\n`,
  );
  process.stdout.write(
    `${'command'.padEnd(28)} ${'mode'.padEnd(7)} median    min    max  goal (bundle's median < ${firstOutputGoalMs} ms)\n`,
  );
  for (const c of cases) {
    for (const [mode, pkg] of [
      ['bundle', withBundle],
      ['install', installed],
      ['tsx', withoutBundle],
    ] as const) {
      const samples = await measure(pkg, c, { daemon: daemonDir, vault: vaultDir, changed: changedDir });
      const median = samples[Math.floor(samples.length / 2)] ?? Number.NaN;
      const [min, max] = [samples[0] ?? Number.NaN, samples.at(-1) ?? Number.NaN];
      // The goal is for what an installed `postern` runs (the bundle); tsx is shown for comparison only.
      const goal = mode === 'tsx' ? '' : median < firstOutputGoalMs ? 'PASS' : 'FAIL';
      process.stdout.write(`${c.name.padEnd(28)} ${mode.padEnd(7)} ${fmt(median)} ${fmt(min)} ${fmt(max)}  ${goal}\n`);
    }
  }
  // The first start after an install: every source is dated later than the build and none is recorded yet, so the bin
  // reads and digests each (bin/postern.mjs). Dated again before each run, so no run finds them recorded.
  const firstStarts: number[] = [];
  for (let run = 0; run <= runs; run++) {
    installed.redateSources();
    const ms = await timeToFirstOutput(installed.bin, ['--version']);
    if (run > 0) firstStarts.push(ms);
  }
  firstStarts.sort((a, b) => a - b);
  const firstMedian = firstStarts[Math.floor(firstStarts.length / 2)] ?? Number.NaN;
  const [firstMin, firstMax] = [firstStarts[0] ?? Number.NaN, firstStarts.at(-1) ?? Number.NaN];
  process.stdout.write(
    `${'--version, just installed'.padEnd(28)} ${'install'.padEnd(7)} ${fmt(firstMedian)} ${fmt(firstMin)} ${fmt(firstMax)}  ${firstMedian < firstOutputGoalMs ? 'PASS' : 'FAIL'}\n`,
  );
} finally {
  if (daemon !== undefined) await stopDaemon(daemon);
  withBundle.remove();
  withoutBundle.remove();
  installed.remove();
  daemonDir.remove();
  vaultDir.remove();
  changedDir?.remove();
  scratch.remove();
}
