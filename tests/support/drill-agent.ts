import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { posternBin, repoRoot } from './postern-process.js';

/** What a tool call came back as, through the real MCP SDK client and `postern mcp`. */
export interface ToolReply {
  isError?: boolean;
  structuredContent?: Record<string, unknown> & {
    error?: { code: string; outcome: string; phase: string; retry: string };
    invocation_id?: string;
  };
  content?: Array<{ type: string; text?: string }>;
  /** The progress notes the call received, when it asked for them (`call(…, { progress: true })`). */
  progress?: string[];
}

const readyWaitMs = 30_000;

export interface RanCommand {
  code: number | string;
  stdout: string;
  stderr: string;
}

/**
 * A separate agent process (tests/support/race-agent.mjs) driven over Node IPC: each `call` is one
 * MCP tools/call through the stdio shim into the broker's agent socket.
 */
export class DrillAgent {
  private next = 0;
  private readonly waiting = new Map<number, { resolve: (reply: ToolReply) => void; reject: (error: Error) => void }>();
  private readonly commands = new Map<number, (ran: RanCommand) => void>();
  private constructor(
    private readonly child: ChildProcess,
    readonly pid: number,
  ) {
    child.on(
      'message',
      (message: {
        result?: { id: number; reply?: ToolReply; error?: string; errorData?: unknown };
        ran?: RanCommand & { id: number };
      }) => {
        if (message.ran !== undefined) {
          this.commands.get(message.ran.id)?.(message.ran);
          this.commands.delete(message.ran.id);
          return;
        }
        const result = message.result;
        if (result === undefined) return;
        const entry = this.waiting.get(result.id);
        this.waiting.delete(result.id);
        if (result.error !== undefined)
          entry?.reject(Object.assign(new Error(result.error), { data: result.errorData }));
        else entry?.resolve(result.reply ?? {});
      },
    );
    child.on('exit', () => {
      for (const entry of this.waiting.values()) entry.reject(new Error('the agent process exited'));
      this.waiting.clear();
    });
  }

  static start(dataDir: string, name: string): Promise<DrillAgent> {
    const child = fork(path.join(repoRoot, 'tests', 'support', 'race-agent.mjs'), [posternBin, dataDir, name], {
      cwd: repoRoot,
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`agent ${name} was not ready within ${readyWaitMs} ms`));
      }, readyWaitMs);
      child.once('message', (message: { ready?: boolean; pid?: number; fatal?: string }) => {
        clearTimeout(timer);
        if (message.ready === true && child.pid !== undefined) resolve(new DrillAgent(child, child.pid));
        else reject(new Error(`agent ${name} failed: ${message.fatal ?? JSON.stringify(message)}`));
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`agent ${name} exited (${code}) before it was ready`));
      });
    });
  }

  /** Sends one tools/call; resolves with the tool result. The returned id can cancel it. */
  call(
    tool: string,
    args: Record<string, unknown>,
    options: { progress?: boolean } = {},
  ): { id: number; reply: Promise<ToolReply> } {
    const id = (this.next += 1);
    const reply = new Promise<ToolReply>((resolve, reject) => this.waiting.set(id, { resolve, reject }));
    this.child.send({ call: { id, tool, args, progress: options.progress === true } });
    return { id, reply };
  }

  /** Runs `postern ARGV` as a child of the agent process (an agent reaching for the operator CLI). */
  runPostern(argv: string[]): Promise<RanCommand> {
    const id = (this.next += 1);
    const ran = new Promise<RanCommand>((resolve) => this.commands.set(id, resolve));
    this.child.send({ run: { id, argv } });
    return ran;
  }

  /** MCP notifications/cancelled for that call (the SDK sends it when its signal aborts). */
  cancel(id: number): void {
    this.child.send({ cancel: id });
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    this.child.send({ exit: true });
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  }
}
