import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { WebSocket } from 'undici';
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inspectorPortParked } from '../broker/core/index.js';
import { lineWaitMs, posternArgs, posternBin, startDaemon, type RunningDaemon } from './support/postern-process.js';

/**
 * THREAT-MODEL: the agent runs as the same user, so it may signal the broker. `kill -USR1 <pid>` makes a node
 * process open its inspector, and whoever connects runs code inside it (the vault, the approvals). The attack is
 * performed for real: against a plain node process (the control: the same attack must run code there, so this test
 * can fail) and against the real `postern daemon` (it must find no door). The inspector's port is 0 (any free
 * one) so parallel tests never fight over 9229.
 */
const linux = process.platform === 'linux';
if (!linux)
  console.log(
    `inspector-signal.test.ts: the listening-socket check reads /proc (Linux only; this is ${process.platform})`,
  );

const scratch = mkdtempSync(path.join(os.tmpdir(), 'postern-inspector-'));
let dirs = 0;
const freshDir = (): string => path.join(scratch, `data-${(dirs += 1)}`);
const children: ChildProcess[] = [];
const daemons: RunningDaemon[] = [];
const anyPortOnSignal = { NODE_OPTIONS: '--inspect-port=127.0.0.1:0' };

/**
 * The operator UI's listening sockets: its port on 127.0.0.1, and the same port on ::1 where the machine has an IPv6
 * loopback (broker/host/http-host.ts holds both, so no other program can answer localhost:PORT). Nothing else listens.
 */
let operatorListeners = (port: number): number[] => [port];
beforeAll(async () => {
  const probe = createServer();
  const ipv6 = await new Promise<boolean>((resolve) => {
    probe.once('error', () => resolve(false));
    probe.listen({ port: 0, host: '::1', ipv6Only: true }, () => resolve(true));
  });
  if (ipv6) {
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    operatorListeners = (port) => [port, port];
  }
});

afterAll(async () => {
  for (const daemon of daemons) await daemon.process.stop('SIGKILL');
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  rmSync(scratch, { recursive: true, force: true });
});

describe.runIf(linux)('SIGUSR1 from another process of the same user', () => {
  it('opens a door in a plain node process: the attack runs code there (the control)', async () => {
    // It says "ready" once running: node sets up its SIGUSR1 handler before any script runs.
    const child = spawn(process.execPath, ['-e', 'console.log("ready"); setInterval(() => {}, 1000)'], {
      env: { ...process.env, ...anyPortOnSignal },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    const stderr = collect(child, 'stderr');
    const stdout = collect(child, 'stdout');
    await waitUntil(() => stdout().includes('ready'), 'the control to start');
    const pid = child.pid as number;
    process.kill(pid, 'SIGUSR1');
    const url = await waitUntil(() => /Debugger listening on (ws:\/\/\S+)/.exec(stderr())?.[1], 'the inspector');
    expect(listeningPorts(pid)).toContain(Number(new URL(url).port));
    expect(await evaluateThrough(url, 'process.pid')).toBe(pid);
  });

  it('finds no door in the broker: the inspector stays closed, the refusal is logged, the broker serves on', async () => {
    const daemon = await startDaemon(freshDir(), { env: anyPortOnSignal });
    daemons.push(daemon);
    const pid = daemon.process.child.pid as number;
    expect(listeningPorts(pid)).toEqual(operatorListeners(daemon.port));

    process.kill(pid, 'SIGUSR1');
    const outcome = await waitUntil(() => {
      const text = daemon.process.stderr;
      if (/Debugger listening on (ws:\/\/\S+)/.test(text)) return 'opened';
      return text.includes('warning: refused SIGUSR1') ? 'refused' : undefined;
    }, 'the broker to answer the signal');
    expect(outcome).toBe('refused');
    expect(daemon.process.stderr).toContain('the inspector stays closed (1 refused since start)');
    expect(listeningPorts(pid)).toEqual(operatorListeners(daemon.port));
    // Serving on: the operator API still answers (refusing an unsigned request, as it should).
    expect((await fetch(`${daemon.origin}/api/status`)).status).toBe(401);
    expect(await daemon.process.stop()).toEqual({ code: 0, signal: null });
  });

  it('opens no door while it starts either: node is started with the inspector parked (the window before our listener)', async () => {
    // The control: started as `node bin/postern.mjs` (no parking), SIGUSR1 sent over and over from just after node set
    // up its own handler until the broker is ready: some signal lands before Postern's first line, and node opens its
    // inspector — the window an attacker's code could use to blind every later check. (Postern then refuses to run
    // with it open, DEBUGGER_OPEN: too late against a fast attacker.)
    const control = await signalWhileStarting([posternBin, 'daemon', '--data-dir', freshDir(), '--port', '0'], {
      NODE_OPTIONS: '--inspect-port=127.0.0.1:0',
    });
    expect(control.stderr).toMatch(/Debugger listening on ws:\/\//);
    // Started as the shebang and the hookup lines start it: the same signals open nothing reachable.
    const parked = await signalWhileStarting(posternArgs(['daemon', '--data-dir', freshDir(), '--port', '0']), {});
    expect(parked.signalsSent).toBeGreaterThan(5);
    expect(parked.stderr).not.toMatch(/Debugger listening/);
    expect(parked.stderr).not.toMatch(/DEBUGGER_OPEN/);
    expect(parked.uiPort).toBeDefined();
    expect(parked.listening).toEqual(operatorListeners(parked.uiPort ?? 0));
    // The signals before Postern's listener failed to open anything reachable; those after it were refused and told
    // once the broker was ready (the start's count included).
    expect(parked.stderr).toMatch(/warning: refused SIGUSR1 .*\((\d+) refused since start\)/);
  });

  it('is parked by its own first line, and says so when started without it', async () => {
    expect(readFileSync(posternBin, 'utf8').split('\n')[0]).toBe(`#!/usr/bin/env -S node ${inspectorPortParked}`);
    const daemon = await startDaemon(freshDir());
    daemons.push(daemon);
    expect(daemon.process.stderr).not.toContain('started without');
    await daemon.process.stop();
    const bare = spawn(process.execPath, [posternBin, 'daemon', '--data-dir', freshDir(), '--port', '0'], {
      env: { ...process.env, POSTERN_TEST_EVENTS: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(bare);
    const stderr = collect(bare, 'stderr');
    const stdout = collect(bare, 'stdout');
    await waitUntil(() => stdout().includes('"event":"ready"'), 'the bare daemon to be ready');
    expect(stderr()).toContain(`warning: node was started without ${inspectorPortParked}`);
    bare.kill('SIGTERM');
  });

  it('refuses to run with its inspector open from the start (--inspect), creating nothing', async () => {
    const dataDir = freshDir();
    // As a developer would ask for it: after the parked port (a later --inspect wins), or through NODE_OPTIONS.
    const asked = [inspectorPortParked, '--inspect=127.0.0.1:0', posternBin, 'daemon', '--data-dir', dataDir];
    const run = await runNode(asked, {});
    const viaEnv = await runNode([posternBin, 'status', '--data-dir', dataDir], {
      NODE_OPTIONS: '--inspect=127.0.0.1:0',
    });
    expect(viaEnv.code).toBe(2);
    expect(viaEnv.stderr).toContain('postern: DEBUGGER_OPEN');
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(
      /^postern: DEBUGGER_OPEN node's inspector was open in this process .* refuses to run\./m,
    );
    expect(existsSync(dataDir)).toBe(false);
    expect(run.stdout).not.toContain('Operator UI');
  });
});

/** Waits (polling, bounded) for `read` to give a value; fails the test with `what` after lineWaitMs. */
async function waitUntil<T>(read: () => T | undefined | false, what: string): Promise<T> {
  const deadline = Date.now() + lineWaitMs;
  for (;;) {
    const value = read();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`no ${what} within ${lineWaitMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

function collect(child: ChildProcess, stream: 'stdout' | 'stderr'): () => string {
  let text = '';
  child[stream]?.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
  return () => text;
}

/** The TCP ports `pid` listens on: its socket inodes matched against the LISTEN rows of its network namespace. */
function listeningPorts(pid: number): number[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    let target = '';
    try {
      target = readlinkSync(`/proc/${pid}/fd/${fd}`);
    } catch {
      continue; // closed meanwhile
    }
    const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
    if (inode !== undefined) inodes.add(inode);
  }
  const ports: number[] = [];
  for (const table of ['tcp', 'tcp6']) {
    for (const row of readFileSync(`/proc/${pid}/net/${table}`, 'utf8').split('\n').slice(1)) {
      const columns = row.trim().split(/\s+/);
      const [, local, , state, , , , , , inode] = columns;
      if (state === '0A' && inode !== undefined && inodes.has(inode) && local !== undefined)
        ports.push(Number.parseInt(local.split(':').at(-1) ?? '', 16));
    }
  }
  return ports.sort((a, b) => a - b);
}

/** What an attacker does with an open inspector: connect and evaluate an expression in the process. */
async function evaluateThrough(url: string, expression: string): Promise<unknown> {
  const socket = new WebSocket(url);
  try {
    await new Promise<void>((resolve, reject) => {
      socket.addEventListener('open', () => resolve());
      socket.addEventListener('error', () => reject(new Error(`could not connect to ${url}`)));
    });
    const answer = new Promise<unknown>((resolve) => {
      socket.addEventListener('message', (event) => {
        const message = JSON.parse(String(event.data)) as { id?: number; result?: { result?: { value?: unknown } } };
        if (message.id === 1) resolve(message.result?.result?.value);
      });
    });
    socket.send(JSON.stringify({ id: 1, method: 'Runtime.evaluate', params: { expression, returnByValue: true } }));
    return await answer;
  } finally {
    socket.close();
  }
}

interface SignalledStart {
  stderr: string;
  signalsSent: number;
  /** The TCP ports it listened on once ready (empty if it never got there). */
  listening: number[];
  uiPort: number | undefined;
}

/**
 * Starts node with `args` and sends SIGUSR1 every 5 ms from the moment node has its own handler (a "ready" probe would
 * need our code to run, so: 30 ms after spawn, retried later if an earlier signal found no handler yet and ended the
 * process) until it is ready or exits; then stops it. Bounded in tries and time.
 */
async function signalWhileStarting(args: string[], env: Record<string, string>): Promise<SignalledStart> {
  for (const startAfterMs of [30, 60, 120]) {
    const child = spawn(process.execPath, args, {
      env: { ...process.env, POSTERN_TEST_EVENTS: '1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    const stderr = collect(child, 'stderr');
    const stdout = collect(child, 'stdout');
    let signalsSent = 0;
    await new Promise((resolve) => setTimeout(resolve, startAfterMs));
    const timer = setInterval(() => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGUSR1');
      signalsSent += 1;
    }, 5);
    const end = await waitUntil(() => {
      if (child.signalCode === 'SIGUSR1') return 'killed early';
      if (child.exitCode !== null) return 'exited';
      return stdout().includes('"event":"ready"') ? 'ready' : undefined;
    }, 'the broker to be ready or gone');
    clearInterval(timer);
    if (end === 'killed early') continue; // node had no handler yet: try again a little later
    const ready = /\{"event":"ready".*\}/.exec(stdout())?.[0];
    const uiPort = ready === undefined ? undefined : (JSON.parse(ready) as { port: number }).port;
    const listening = end === 'ready' && child.pid !== undefined ? listeningPorts(child.pid) : [];
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    }
    return { stderr: stderr(), signalsSent, listening, uiPort };
  }
  throw new Error('every try ended before node had set up its SIGUSR1 handler');
}

/** `node …args` to its exit (bounded), with `env` over this process's. */
function runNode(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      args,
      { env: { ...process.env, ...env }, timeout: lineWaitMs },
      (error, stdout, stderr) =>
        resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : null, stdout, stderr }),
    );
  });
}
