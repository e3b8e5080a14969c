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

  /** Stops the child: stdin closed and SIGTERM to its group, SIGKILL after the grace. Resolves once it exited. */
  async close(): Promise<void> {
    this.closeReason ??= 'stopped';
    this.stopChild();
    await this.exited;
  }

  /** Resolves when the child has exited (whoever stopped it). */
  whenExited(): Promise<ChildEnd> {
    return this.exited;
  }

  private stopChild(): void {
    const child = this.child;
    if (child === undefined || this.end !== undefined) {
      this.markExited(this.end ?? { code: null, signal: null });
      return;
    }
    child.stdin?.end();
    signalGroup(child, 'SIGTERM');
    const timer = setTimeout(() => signalGroup(child, 'SIGKILL'), this.options.killGraceMs);
    timer.unref();
    void this.exited.then(() => clearTimeout(timer));
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

function signalGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // The group is gone already (or never formed): the child itself, then.
    try {
      child.kill(signal);
    } catch {
      // Already exited.
    }
  }
}

export function errnoCode(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[A-Za-z0-9_]{1,32}$/.test(code) ? code : 'unknown';
}
