import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { inspectorPortParked } from '../../broker/core/index.js';
import { signInCodeLabel } from '../../broker/host/http-host.js';
import { unlockAsPerson } from './person-decision.js';

export const repoRoot = path.resolve(import.meta.dirname, '..', '..');
export const posternBin = path.join(repoRoot, 'bin', 'postern.mjs');
/** node's arguments for `postern …`, as its shebang and the MCP hookup lines start it (inspector parked). */
export const posternArgs = (args: readonly string[]): string[] => [inspectorPortParked, posternBin, ...args];

/** Bound on waiting for a line: a real daemon is ready in well under a second. */
export const lineWaitMs = 20_000;

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/**
 * `node bin/postern.mjs …` as a real child process, with its output as lines. Waits are on lines
 * and events, bounded by a deadline that fails the test, never on sleeps.
 */
export class PosternProcess {
  readonly child: ChildProcess;
  readonly stdoutLines: string[] = [];
  stderr = '';
  readonly exited: Promise<Exit>;
  private readonly listeners = new Set<() => void>();

  constructor(args: readonly string[], env: Readonly<Record<string, string | undefined>> = {}) {
    this.child = spawn(process.execPath, posternArgs(args), {
      cwd: repoRoot,
      env: { ...process.env, POSTERN_TEST_EVENTS: '1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const stdout = this.child.stdout;
    const stderr = this.child.stderr;
    if (stdout === null || stderr === null) throw new Error('child has no stdout/stderr pipes');
    createInterface({ input: stdout }).on('line', (line) => {
      this.stdoutLines.push(line);
      this.notify();
    });
    stderr.setEncoding('utf8');
    stderr.on('data', (chunk: string) => {
      this.stderr += chunk;
      this.notify();
    });
    this.exited = new Promise((resolve) => {
      this.child.once('exit', (code, signal) => {
        // Let readline deliver the last lines before waiters see the exit.
        stdout.once('close', () => {
          this.notify();
          resolve({ code, signal });
        });
        if (stdout.closed) resolve({ code, signal });
      });
    });
  }

  get stdout(): string {
    return this.stdoutLines.join('\n');
  }

  /** The first stdout line matching, waiting for it; fails on exit or after the deadline. */
  waitForLine(match: (line: string) => boolean, what: string, timeoutMs = lineWaitMs): Promise<string> {
    return new Promise((resolve, reject) => {
      let exited = false;
      const check = (): void => {
        const found = this.stdoutLines.find(match);
        if (found !== undefined) finish(() => resolve(found));
        else if (exited)
          finish(() =>
            reject(new Error(`postern exited before ${what}.\nstdout:\n${this.stdout}\nstderr:\n${this.stderr}`)),
          );
      };
      const deadline = setTimeout(
        () =>
          finish(() =>
            reject(new Error(`no ${what} within ${timeoutMs} ms.\nstdout:\n${this.stdout}\nstderr:\n${this.stderr}`)),
          ),
        timeoutMs,
      );
      const finish = (settle: () => void): void => {
        clearTimeout(deadline);
        this.listeners.delete(check);
        settle();
      };
      void this.exited.then(() => {
        exited = true;
        check();
      });
      this.listeners.add(check);
      check();
    });
  }

  /** The first `{"event": name, …}` line (POSTERN_TEST_EVENTS=1). */
  async waitForEvent(name: string): Promise<Record<string, unknown>> {
    const line = await this.waitForLine((l) => parseEvent(l)?.['event'] === name, `a "${name}" event`);
    return parseEvent(line) as Record<string, unknown>;
  }

  /** Sends the signal and waits for the exit, bounded. */
  async stop(signal: NodeJS.Signals = 'SIGTERM', timeoutMs = lineWaitMs): Promise<Exit> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill(signal);
    return this.exitWithin(timeoutMs);
  }

  async exitWithin(timeoutMs = lineWaitMs): Promise<Exit> {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => {
        this.child.kill('SIGKILL');
        reject(
          new Error(`postern did not exit within ${timeoutMs} ms.\nstdout:\n${this.stdout}\nstderr:\n${this.stderr}`),
        );
      }, timeoutMs);
    });
    try {
      return await Promise.race([this.exited, deadline]);
    } finally {
      clearTimeout(timer);
    }
  }

  private notify(): void {
    for (const listener of [...this.listeners]) listener();
  }
}

function parseEvent(line: string): Record<string, unknown> | undefined {
  if (!line.startsWith('{"event":')) return undefined;
  try {
    return JSON.parse(line) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

export interface RunningDaemon {
  process: PosternProcess;
  /** http://127.0.0.1:PORT */
  origin: string;
  port: number;
  /** The tokened operator URL, read from the one stdout line that carries it. */
  operatorUrl: string;
  token: string;
  /** The sign-in code printed beside the URL (`Sign-in code: 1234-5678 …`), never in it. */
  signInCode: string;
  ready: Record<string, unknown>;
  /**
   * The vault passphrase a person unlocked this daemon with (startDaemon's `person`): a sign-in that presents it
   * decides (broker/host/web-proof.ts). Undefined for a daemon started locked or from a passphrase file, whose web
   * sessions take no decision.
   */
  personPassphrase?: string;
}

/** Each printed operator URL's code, so a helper given only the URL (e2e/fixtures/browser.ts) can sign in with it. */
const signInCodes = new Map<string, string>();

/** Each daemon's vault passphrase, by origin, where a person unlocked it (startDaemon's `person`). */
const personPassphrases = new Map<string, string>();

/**
 * The vault passphrase of the daemon serving this operator URL, if a person unlocked it: what a person types into
 * the page to decide there (the sign-in form's passphrase field, or the "Confirm it is you" prompt).
 */
export function personPassphraseFor(operatorUrl: string): string | undefined {
  return personPassphrases.get(new URL(operatorUrl).origin);
}

/** The code the daemon printed beside this operator URL (startDaemon read it). */
export function signInCodeFor(operatorUrl: string): string {
  const code = signInCodes.get(operatorUrl);
  if (code === undefined)
    throw new Error(`no sign-in code was printed beside ${operatorUrl} (not started by startDaemon?)`);
  return code;
}

/** The code on the newest stdout line that starts with `prefix` (`Sign-in code: ` or its next-sign-in form). */
export function printedSignInCode(lines: readonly string[], prefix: string): string {
  const line = lines.findLast((l) => l.startsWith(prefix));
  const code = line === undefined ? undefined : /^\d{4}-\d{4}/.exec(line.slice(prefix.length))?.[0];
  if (code === undefined) throw new Error(`no "${prefix}" line with a code on stdout:\n${lines.join('\n')}`);
  return code;
}

/**
 * The newest sign-in URL the daemon printed on its terminal and the code printed beside it (it prints the next ones
 * each time one is used).
 */
export function nextPrintedSignIn(daemon: Pick<RunningDaemon, 'process'>): { url: string; code: string } {
  const lines = daemon.process.stdoutLines;
  const line = lines.findLast((l) => l.startsWith('Operator UI (next sign-in): '));
  if (line === undefined) throw new Error(`no next sign-in URL was printed:\n${daemon.process.stdout}`);
  const code = printedSignInCode(lines, `${signInCodeLabel} (next sign-in): `);
  return { url: line.slice('Operator UI (next sign-in): '.length), code };
}

/**
 * A program's sign-in on a daemon's operator host: POST /auth/session with the printed token and the code printed
 * beside it. Resolves to the session secret; a refusal throws with the host's answer.
 */
export async function signInAsProgram(
  daemon: Pick<RunningDaemon, 'origin' | 'token' | 'signInCode'>,
  /** Presented right after (POST /auth/prove) so the session decides; a refusal throws. */
  passphrase?: string,
): Promise<string> {
  const answer = await fetch(`${daemon.origin}/auth/session`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ token: daemon.token, code: daemon.signInCode }),
  });
  const reply = (await answer.json()) as { ok: boolean; value?: { session?: unknown } };
  if (!reply.ok || typeof reply.value?.session !== 'string')
    throw new Error(`signing in answered ${answer.status}: ${JSON.stringify(reply)}`);
  if (passphrase !== undefined) await proveSession(daemon.origin, reply.value.session, passphrase);
  return reply.value.session;
}

/** POST /auth/prove: the session presents the vault passphrase, as a person types it into the page; a refusal throws. */
export async function proveSession(origin: string, session: string, passphrase: string): Promise<void> {
  const answer = await fetch(`${origin}/auth/prove`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${session}` },
    body: JSON.stringify({ passphrase }),
  });
  const reply = (await answer.json()) as { ok: boolean };
  if (!reply.ok) throw new Error(`proving the session answered ${answer.status}: ${JSON.stringify(reply)}`);
}

/** Starts `postern <command> --data-dir DIR --port 0` and waits for its ready event. */
export async function startDaemon(
  dataDir: string,
  options: {
    command?: 'daemon' | 'start';
    env?: Record<string, string | undefined>;
    port?: number;
    /** More options for the command (a test knob such as `--test-action-list-scan-rows N`). */
    args?: readonly string[];
    /**
     * A person unlocks the vault: the daemon starts locked (no passphrase file, whatever `env` says) and is unlocked
     * over its control socket with this passphrase (or the one in this file), as `postern vault unlock` typed on a
     * terminal does;
     * the daemon's web sessions then decide once they present it (personPassphraseFor, signInAsProgram).
     */
    person?: { passphraseFile: string } | { passphrase: string };
  } = {},
): Promise<RunningDaemon> {
  const port = String(options.port ?? 0);
  const env = options.person === undefined ? options.env : { ...options.env, POSTERN_PASSPHRASE_FILE: undefined };
  const proc = new PosternProcess(
    [options.command ?? 'daemon', '--data-dir', dataDir, '--port', port, ...(options.args ?? [])],
    env,
  );
  try {
    const ready = await proc.waitForEvent('ready');
    const urlLine = proc.stdoutLines.find((line) => line.startsWith('Operator UI: '));
    if (urlLine === undefined) throw new Error(`no "Operator UI:" line before the ready event:\n${proc.stdout}`);
    const operatorUrl = urlLine.slice('Operator UI: '.length);
    const url = new URL(operatorUrl);
    const token = url.searchParams.get('token');
    if (token === null) throw new Error(`the operator URL has no token: ${operatorUrl}`);
    const signInCode = printedSignInCode(proc.stdoutLines, `${signInCodeLabel}: `);
    signInCodes.set(operatorUrl, signInCode);
    const running = {
      process: proc,
      origin: url.origin,
      port: Number(url.port),
      operatorUrl,
      token,
      signInCode,
      ready,
    };
    if (options.person === undefined) return running;
    const personPassphrase =
      'passphrase' in options.person
        ? options.person.passphrase
        : readFileSync(options.person.passphraseFile, 'utf8').replace(/\r?\n$/, '');
    await unlockAsPerson(dataDir, personPassphrase);
    personPassphrases.set(url.origin, personPassphrase);
    return { ...running, personPassphrase };
  } catch (error) {
    await proc.stop('SIGKILL');
    throw error;
  }
}

export interface CommandRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * `node bin/postern.mjs …` to its exit, with `stdin` piped in, detached (setsid: no controlling
 * terminal, so "ask on the terminal" is deterministically unavailable, as for a backgrounded agent
 * tool), bounded by a deadline that fails the test.
 */
export function runPostern(
  args: readonly string[],
  options: { stdin?: string; env?: Record<string, string> } = {},
): Promise<CommandRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, posternArgs(args), {
      cwd: repoRoot,
      env: { ...process.env, ...options.env },
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const deadline = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`postern ${args.join(' ')} did not exit within ${lineWaitMs} ms\n${stdout}\n${stderr}`));
    }, lineWaitMs);
    child.on('close', (code) => {
      clearTimeout(deadline);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(options.stdin ?? '');
  });
}
