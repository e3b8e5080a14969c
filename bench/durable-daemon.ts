/**
 * The MCP side of bench/durable.ts: a real daemon (`postern daemon`, optionally under strace) with one
 * bearer route `bench` (approval none, one lane per document) to a loopback target, and a real MCP SDK
 * client speaking to it through `postern mcp`. The same set-up as tests/support/bearer-route-daemon.ts
 * (which this project cannot import): vault created and the config accepted as a person before start.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { acceptConfigFile } from '../broker/host/index.js';
import { digestOf } from '../broker/host/config-integrity.js';
import { systemClock } from '../broker/ports/index.js';
import { openVault } from '../broker/vault/index.js';
import { anchorsInScratch } from './anchor-dir.js';
import { tracedArgv, traceePid } from './fsync-trace.js';

const repoRoot = path.resolve(import.meta.dirname, '..');
const posternBin = path.join(repoRoot, 'bin', 'postern.mjs');
/** A daemon through tsx on a loaded 2-core machine is ready in seconds; past this it is broken. */
const readyWaitMs = 60_000;
const callWaitMs = 30_000;
const body = JSON.stringify({ title: 'bench', n: 1 });

export interface McpRig {
  readonly dataDir: string;
  /** The daemon's pid (the traced process when under strace: its loop thread id). */
  readonly daemonPid: number;
  /** One http_request POST to a fresh document; throws unless the action succeeded. */
  post(): Promise<void>;
  /**
   * CPU time so far, ms, of the daemon and of the `postern mcp` shim (user + system, every thread of each), read from
   * /proc: where an MCP call's time goes besides the client's own process.
   */
  cpuMs(): { daemon: number; shim: number };
  stop(): Promise<void>;
}

async function prepareDataDir(origin: string): Promise<{ scratch: string; dataDir: string; passphraseFile: string }> {
  const scratch = mkdtempSync(path.join(tmpdir(), 'postern-bench-mcp-'));
  anchorsInScratch(scratch);
  const dataDir = path.join(scratch, 'data');
  mkdirSync(dataDir, { mode: 0o700 });
  const passphrase = 'bench passphrase (bench only)';
  const passphraseFile = path.join(scratch, 'pass');
  writeFileSync(passphraseFile, `${passphrase}\n`, { mode: 0o600 });
  const config = [
    'version: 1',
    'agents:',
    '  session_approval: observe',
    'routes:',
    '  - name: bench',
    `    base_url: ${origin}/api`,
    '    credential: bench-token',
    '    injection: bearer',
    '    approval: none',
    '    lanes:',
    "      - { methods: ['*'], path: '/documents/{id}', lane: 'doc-{id}' }",
    '',
  ].join('\n');
  writeFileSync(path.join(dataDir, 'postern.yaml'), config);
  const vault = await openVault({ dataDir, clock: systemClock, kdf: 'min', idleLockMs: 0 });
  try {
    await vault.init(Buffer.from(passphrase));
    await vault.add({ name: 'bench-token', kind: 'bearer', secret: Buffer.from('bench-secret'), bindings: ['bench'] });
    const actor = { kind: 'person', id: 'bench-setup', surface: 'cli', auth: 'vault_passphrase_tty' } as const;
    acceptConfigFile({ dataDir, vault, clock: systemClock, actor, digest: digestOf(config) });
  } finally {
    await vault.close();
  }
  return { scratch, dataDir, passphraseFile };
}

/** Starts the daemon and waits (bounded) for its ready event. */
function startDaemon(dataDir: string, passphraseFile: string, traceFile: string | undefined): Promise<ChildProcess> {
  const argv = [process.execPath, posternBin, 'daemon', '--data-dir', dataDir, '--port', '0'];
  const [command, ...args] = traceFile === undefined ? argv : ['strace', ...tracedArgv(argv, traceFile)];
  const child = spawn(command as string, args, {
    cwd: repoRoot,
    env: { ...process.env, POSTERN_TEST_EVENTS: '1', POSTERN_PASSPHRASE_FILE: passphraseFile },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr = (stderr + chunk).slice(-4_000)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => fail(`no ready event within ${readyWaitMs} ms`), readyWaitMs);
    const fail = (why: string): void => {
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(new Error(`daemon: ${why}\n${stderr}`));
    };
    child.once('exit', (code) => fail(`exited (${code}) before ready`));
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (line) => {
      if (!line.startsWith('{"event":"ready"')) return;
      clearTimeout(timer);
      child.removeAllListeners('exit');
      resolve(child);
    });
  });
}

/** Clock ticks a second in /proc's times (USER_HZ: 100 on every Linux this runs on; asked once). */
let ticksPerSecond: number | undefined;

/** A process's CPU time so far, ms: user + system of every thread (/proc/<pid>/stat's utime and stime). */
function processCpuMs(pid: number): number {
  ticksPerSecond ??= Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
  // The fields after the command name, which may itself hold spaces and parentheses: utime and stime are 14 and 15.
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / ticksPerSecond;
}

export async function startMcpRig(origin: string, traceFile?: string): Promise<McpRig> {
  const { scratch, dataDir, passphraseFile } = await prepareDataDir(origin);
  const child = await startDaemon(dataDir, passphraseFile, traceFile);
  const daemonPid = traceFile === undefined ? child.pid : traceePid(child.pid ?? 0);
  if (daemonPid === undefined) throw new Error('the daemon has no pid');
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const client = new Client({ name: 'postern-bench', version: '1' });
  const args = [posternBin, 'mcp', '--data-dir', dataDir];
  const transport = new StdioClientTransport({ command: process.execPath, args, cwd: repoRoot, stderr: 'pipe' });
  await client.connect(transport);
  const shimPid = transport.pid;
  if (shimPid === null) throw new Error('the shim has no pid');
  let documents = 0;
  return {
    dataDir,
    daemonPid,
    cpuMs: () => ({ daemon: processCpuMs(daemonPid), shim: processCpuMs(shimPid) }),
    post: async () => {
      documents += 1;
      const args = { route: 'bench', method: 'POST', path: `/documents/${documents}`, body };
      const answer = await client.callTool({ name: 'http_request', arguments: args }, undefined, {
        timeout: callWaitMs,
      });
      const reply = answer.structuredContent as { effect?: string; error?: { code?: string } } | undefined;
      if (reply?.effect !== 'succeeded') throw new Error(`mcp: ${reply?.error?.code ?? JSON.stringify(reply)}`);
    },
    stop: async () => {
      await client.close().catch(() => undefined);
      // Under strace the daemon is strace's child: SIGTERM goes to it, and strace exits after it.
      process.kill(daemonPid, 'SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), readyWaitMs);
      await exited;
      clearTimeout(timer);
      rmSync(scratch, { recursive: true, force: true });
    },
  };
}
