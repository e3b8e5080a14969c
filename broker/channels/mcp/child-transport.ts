import { spawn, type ChildProcess } from 'node:child_process';
import { homedir, tmpdir } from 'node:os';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { JSONRPCMessageSchema, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

/** The PATH a child gets: fixed, so neither the agent's nor the broker's environment picks what a server runs. */
export const childPath = '/usr/local/bin:/usr/bin:/bin';

export interface ChildTransportOptions {
  readonly command: string;
  readonly args: readonly string[];
  readonly cwd?: string;
  /** The server's rendered env (secrets included); added to the minimal base. */
  readonly env: Readonly<Record<string, string>>;
  /** One stdout line (one JSON-RPC message) at most; beyond it the child is stopped (the flood case). */
  readonly lineBytesMax: number;
  readonly killGraceMs: number;
  readonly onStderr: (chunk: Buffer) => void;
  readonly onStderrEnd: () => void;
}

/** spawn() failed (ENOENT, EACCES…): nothing ran. `detail` is the errno code only. */
export class SpawnFailed extends Error {
  constructor(readonly detail: string) {
    super(`spawn failed (${detail})`);
    this.name = 'SpawnFailed';
  }
}

export type ChildEnd = { readonly code: number | null; readonly signal: string | null };

/**
 * The stdio transport of one upstream child (instead of the SDK's StdioClientTransport, which starts the child
 * with part of the broker's own environment and hides the write, the exit and the line size): newline-delimited
 * JSON-RPC on stdin/stdout, stderr handed to the caller, a bound on one stdout line, and the child in a process
 * group of its own so a stop reaches what it started (`npx` wrappers). `send` resolves when the pipe accepted the
 * whole message (the write callback): the observation REQUEST_SENT rests on.
 */
export class ChildTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: <T extends JSONRPCMessage>(message: T) => void;
  /** Why the transport closed, when it was the channel's doing or the bound's. */
  closeReason: 'stopped' | 'reply_too_large' | undefined;
  end: ChildEnd | undefined;
  private child: ChildProcess | undefined;
  private started: Promise<void> | undefined;
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private closed = false;
  private signalled = false;
  /** Resolves when the leader exited and its group is empty or was sent SIGKILL. */
  private groupDone: Promise<void> | undefined;
  private readonly exited: Promise<ChildEnd>;
  private markExited: (end: ChildEnd) => void = () => undefined;

  constructor(private readonly options: ChildTransportOptions) {
    this.exited = new Promise((resolve) => {
      this.markExited = resolve;
    });
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /**
   * Spawns the child once. The channel starts it itself (to tell a failed spawn from a failed initialize) and the
   * SDK's Client.connect calls start() again: a second spawn would leave a child holding the secrets nobody tracks.
   */
  start(): Promise<void> {
    this.started ??= this.spawnChild();
    return this.started;
  }

  private spawnChild(): Promise<void> {
    const { command, args, cwd, env } = this.options;
    return new Promise<void>((resolve, reject) => {
      const child = spawn(command, [...args], {
        ...(cwd === undefined ? {} : { cwd }),
        env: {
          HOME: process.env['HOME'] ?? homedir(),
          LANG: process.env['LANG'] ?? 'C.UTF-8',
          TMPDIR: tmpdir(),
          ...env,
          PATH: childPath,
        },
        stdio: ['pipe', 'pipe', 'pipe'],
        detached: true,
        windowsHide: true,
      });
      this.child = child;
      child.once('error', (error) => {
        if (child.pid === undefined) {
          // No process: no exit event will come, so the transport ends here.
          this.end = { code: null, signal: null };
          this.markExited(this.end);
          this.closed = true;
          reject(new SpawnFailed(errnoCode(error)));
        } else this.onerror?.(new Error(`child process error (${errnoCode(error)})`));
      });
      child.once('spawn', () => resolve());
      child.once('exit', (code, signal) => {
        this.end = { code, signal };
        this.markExited(this.end);
        // The leader may be a wrapper (sh, npx) that exited on its own or on SIGTERM while the real server — same
        // group, maybe ignoring SIGTERM, holding the secrets in its env — lives on: the group is stopped either way.
        this.stopChild();
        this.finish();
      });
      // A write to a child that is gone fails with EPIPE: the send that did it reports it; nothing else must throw.
      child.stdin?.on('error', () => undefined);
      child.stdout?.on('data', (chunk: Buffer) => this.read(chunk));
      // A child that closed its stdout can answer nothing more: it is stopped, and the transport ends at its exit
      // (so the exit status is known when the session reports how it ended).
      child.stdout?.on('close', () => {
        if (this.end === undefined) this.stopChild();
      });
      child.stderr?.on('data', (chunk: Buffer) => this.options.onStderr(chunk));
      child.stderr?.on('end', () => this.options.onStderrEnd());
    });
  }

  /** Whether a send now would be handed to a running child's open stdin. */
  get writable(): boolean {
    const stdin = this.child?.stdin;
    return !this.closed && !this.signalled && stdin !== undefined && stdin !== null && !stdin.destroyed;
  }

  send(message: JSONRPCMessage): Promise<void> {
    const stdin = this.child?.stdin;
    if (this.closed || stdin === undefined || stdin === null || stdin.destroyed)
      return Promise.reject(new Error('the child is not running'));
    return new Promise<void>((resolve, reject) => {
      stdin.write(`${JSON.stringify(message)}\n`, (error) =>
        error ? reject(new Error('write to the child failed')) : resolve(),
      );
    });
  }

  /**
   * Stops the child: stdin closed and SIGTERM to its group, SIGKILL after the grace. Resolves once the leader exited
   * and its group is empty or was sent SIGKILL.
   */
  async close(): Promise<void> {
    this.closeReason ??= 'stopped';
    this.stopChild();
    await this.exited;
    await this.groupDone;
  }

  /** Resolves when the child has exited (whoever stopped it). */
  whenExited(): Promise<ChildEnd> {
    return this.exited;
  }

  private stopChild(): void {
    const child = this.child;
    if (child?.pid === undefined) {
      this.markExited(this.end ?? { code: null, signal: null });
      return;
    }
    if (this.signalled) return;
    this.signalled = true;
    const pgid = child.pid;
    child.stdin?.end();
    signalGroup(pgid, 'SIGTERM');
    // Not cleared when the leader exits: what it started may still be in the group.
    this.groupDone = new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        signalGroup(pgid, 'SIGKILL');
        resolve();
      }, this.options.killGraceMs);
      timer.unref();
      void this.exited.then(() => {
        if (groupAlive(pgid)) return;
        clearTimeout(timer);
        resolve();
      });
    });
  }

  private read(chunk: Buffer): void {
    let rest = chunk;
    for (;;) {
      const newline = rest.indexOf(0x0a);
      if (newline < 0) break;
      const line = Buffer.concat([...this.pending, rest.subarray(0, newline)]);
      this.pending = [];
      this.pendingBytes = 0;
      rest = rest.subarray(newline + 1);
      if (line.length > this.options.lineBytesMax) return this.tooLarge();
      this.deliver(line.toString('utf8').replace(/\r$/, ''));
      if (this.closed) return;
    }
    if (rest.length === 0) return;
    this.pending.push(Buffer.from(rest));
    this.pendingBytes += rest.length;
    if (this.pendingBytes > this.options.lineBytesMax) this.tooLarge();
  }

  private deliver(line: string): void {
    if (line.trim() === '') return;
    let message: JSONRPCMessage;
    try {
      message = JSONRPCMessageSchema.parse(JSON.parse(line));
    } catch {
      // A line that is not JSON-RPC is the server's noise, not an answer; the SDK's own transport skips it too.
      this.onerror?.(new Error('the child wrote a line that is not JSON-RPC'));
      return;
    }
    this.onmessage?.(message);
  }

  private tooLarge(): void {
    this.pending = [];
    this.pendingBytes = 0;
    this.closeReason = 'reply_too_large';
    this.stopChild();
    this.finish();
  }

  /** Closed once: the child exited, its stdout closed, or the channel gave up on it. */
  private finish(): void {
    if (this.closed) return;
    this.closed = true;
    this.onclose?.();
  }
}

/** Signals the whole group, the leader gone or not (the group outlives it while a member lives); ESRCH: empty. */
function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // The group is empty already.
  }
}

function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

export function errnoCode(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[A-Za-z0-9_]{1,32}$/.test(code) ? code : 'unknown';
}
