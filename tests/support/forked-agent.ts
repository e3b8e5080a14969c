import { fork, type ChildProcess } from 'node:child_process';
import { repoRoot } from './postern-process.js';

/** Bound on any one exchange with an agent process, its start included; a call waiting for a card fits well within. */
export const exchangeWaitMs = 60_000;

/**
 * An agent that is its own process (a script under tests/support), driven over Node IPC: the control socket refuses
 * a person's decision from an agent's process tree, so a test that plays both the agent and the person keeps the
 * agent out of its own tree. The script says `{ready: true}` once connected; every request carries an id its answer
 * repeats; `{exit: true}` ends it.
 */
export class ForkedAgent<A extends { id: number }> {
  private next = 0;
  private readonly waiting = new Map<number, (answer: A) => void>();

  private constructor(
    readonly child: ChildProcess,
    answerOf: (message: Record<string, unknown>) => A | undefined,
    exitedAnswer: (id: number) => A,
  ) {
    child.on('message', (message: Record<string, unknown>) => {
      const answer = answerOf(message);
      if (answer === undefined) return;
      this.waiting.get(answer.id)?.(answer);
      this.waiting.delete(answer.id);
    });
    child.on('exit', () => {
      for (const [id, settle] of this.waiting) settle(exitedAnswer(id));
      this.waiting.clear();
    });
  }

  /** Forks `script` (absolute) with `args` and resolves once it reported ready. */
  static start<A extends { id: number }>(
    script: string,
    args: readonly string[],
    label: string,
    answerOf: (message: Record<string, unknown>) => A | undefined,
    exitedAnswer: (id: number) => A,
  ): Promise<ForkedAgent<A>> {
    const child = fork(script, [...args], { cwd: repoRoot, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`${label} was not ready within ${exchangeWaitMs} ms`));
      }, exchangeWaitMs);
      child.once('message', (message: { ready?: boolean; fatal?: string }) => {
        clearTimeout(timer);
        if (message.ready === true) resolve(new ForkedAgent(child, answerOf, exitedAnswer));
        else reject(new Error(`${label} failed: ${message.fatal ?? JSON.stringify(message)}`));
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`${label} exited (${code}) before it was ready`));
      });
    });
  }

  /** Sends the request `message(id)` builds and resolves with the answer carrying that id, bounded. */
  exchange(message: (id: number) => Record<string, unknown>): Promise<A> {
    const id = (this.next += 1);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(id);
        reject(new Error(`no answer from the agent process within ${exchangeWaitMs} ms`));
      }, exchangeWaitMs);
      this.waiting.set(id, (answer) => {
        clearTimeout(timer);
        resolve(answer);
      });
      this.child.send(message(id));
    });
  }

  stop(): Promise<void> {
    return stopForkedChild(this.child);
  }
}

/** Asks a forked agent to exit (`{exit: true}`) and waits for it; one that lingers 5 s is killed. */
export async function stopForkedChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.send({ exit: true });
  const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
  await exited;
  clearTimeout(timer);
}
