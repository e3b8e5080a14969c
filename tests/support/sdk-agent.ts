import path from 'node:path';
import { ForkedAgent } from './forked-agent.js';
import { repoRoot } from './postern-process.js';

/** What one SDK call came back as: the parsed answer, or the error it threw (PosternActionError carries the envelope). */
export type SdkResult =
  | { value: Record<string, unknown> & { invocation_id?: string | null } }
  | { error: { name: string; code: string | null; message: string; envelope: Record<string, unknown> | null } };

/**
 * A separate agent process (tests/support/sdk-agent.mjs) using the SDK's connectPostern on the
 * agent socket, driven over Node IPC. Unlike the shim-based DrillAgent, its session is its own
 * process, so after a broker restart `connect()` opens the same session again.
 */
export class SdkAgent {
  private constructor(private readonly agent: ForkedAgent<SdkResult & { id: number }>) {}

  get pid(): number | undefined {
    return this.agent.child.pid;
  }

  static async start(dataDir: string, name: string): Promise<SdkAgent> {
    const agent = await ForkedAgent.start<SdkResult & { id: number }>(
      path.join(repoRoot, 'tests', 'support', 'sdk-agent.mjs'),
      [dataDir, name],
      `sdk agent ${name}`,
      (message) => message['result'] as (SdkResult & { id: number }) | undefined,
      (id) => ({ id, error: { name: 'Exit', code: null, message: 'the agent process exited', envelope: null } }),
    );
    return new SdkAgent(agent);
  }

  /** (Re)connects to the broker's agent socket; the session is found by this process's pid and start time. */
  async connect(): Promise<void> {
    const result = await this.agent.exchange((id) => ({ connect: id }));
    if ('error' in result) throw new Error(`connect failed: ${result.error.code ?? ''} ${result.error.message}`);
  }

  /** One SDK method call (`httpRequest`, `fetchResult`, `actionStatus`…), bounded. */
  call(
    method: 'httpRequest' | 'fetchResult' | 'actionStatus' | 'cancelAction',
    ...args: unknown[]
  ): Promise<SdkResult> {
    return this.agent.exchange((id) => ({ call: { id, method, args } }));
  }

  stop(): Promise<void> {
    return this.agent.stop();
  }
}
