import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { repoRoot } from './postern-process.js';

/** What one SDK call came back as: the parsed answer, or the error it threw (PosternActionError carries the envelope). */
export type SdkResult =
  | { value: Record<string, unknown> & { invocation_id?: string | null } }
  | { error: { name: string; code: string | null; message: string; envelope: Record<string, unknown> | null } };

/** Bound on any one exchange with the agent process (a broker answers reads at once). */
const exchangeWaitMs = 60_000;

/**
 * A separate agent process (tests/support/sdk-agent.mjs) using the SDK's connectPostern on the
 * agent socket, driven over Node IPC. Unlike the shim-based DrillAgent, its session is its own
 * process, so after a broker restart `connect()` opens the same session again.
 */
export class SdkAgent {
  private next = 0;
  private readonly waiting = new Map<number, (result: SdkResult) => void>();
  private constructor(private readonly child: ChildProcess) {
    child.on('message', (message: { result?: SdkResult & { id: number } }) => {
      const result = message.result;
      if (result === undefined) return;
      this.waiting.get(result.id)?.(result);
      this.waiting.delete(result.id);
    });
    child.on('exit', () => {
      for (const settle of this.waiting.values())
        settle({ error: { name: 'Exit', code: null, message: 'the agent process exited', envelope: null } });
      this.waiting.clear();
    });
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  static start(dataDir: string, name: string): Promise<SdkAgent> {
    const child = fork(path.join(repoRoot, 'tests', 'support', 'sdk-agent.mjs'), [dataDir, name], {
      cwd: repoRoot,
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`sdk agent ${name} was not ready within ${exchangeWaitMs} ms`));
      }, exchangeWaitMs);
      child.once('message', (message: { ready?: boolean }) => {
        clearTimeout(timer);
        if (message.ready === true) resolve(new SdkAgent(child));
        else reject(new Error(`sdk agent ${name} failed: ${JSON.stringify(message)}`));
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`sdk agent ${name} exited (${code}) before it was ready`));
      });
    });
  }

  /** (Re)connects to the broker's agent socket; the session is found by this process's pid and start time. */
  async connect(): Promise<void> {
    const result = await this.exchange((id) => ({ connect: id }));
    if ('error' in result) throw new Error(`connect failed: ${result.error.code ?? ''} ${result.error.message}`);
  }

  /** One SDK method call (`httpRequest`, `fetchResult`, `actionStatus`…), bounded. */
  call(method: 'httpRequest' | 'fetchResult' | 'actionStatus', ...args: unknown[]): Promise<SdkResult> {
    return this.exchange((id) => ({ call: { id, method, args } }));
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    this.child.send({ exit: true });
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  }

  private exchange(message: (id: number) => Record<string, unknown>): Promise<SdkResult> {
    const id = (this.next += 1);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(id);
        reject(new Error(`no answer from the sdk agent within ${exchangeWaitMs} ms`));
      }, exchangeWaitMs);
      this.waiting.set(id, (result) => {
        clearTimeout(timer);
        resolve(result);
      });
      this.child.send(message(id));
    });
  }
}
