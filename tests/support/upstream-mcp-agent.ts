import path from 'node:path';
import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import { ForkedAgent } from './forked-agent.js';
import { posternBin, repoRoot } from './postern-process.js';

type Answer = { id: number; error?: string } & Record<string, unknown>;

/**
 * A separate agent process (tests/support/upstream-mcp-agent.mjs): a real MCP SDK client through `postern mcp` that
 * listed the tools before any call, so the SDK checks every structuredContent against the listed outputSchema.
 */
export class UpstreamMcpAgent {
  private constructor(private readonly agent: ForkedAgent<Answer>) {}

  static async start(dataDir: string, name: string): Promise<UpstreamMcpAgent> {
    const agent = await ForkedAgent.start<Answer>(
      path.join(repoRoot, 'tests', 'support', 'upstream-mcp-agent.mjs'),
      [posternBin, dataDir, name],
      `agent ${name}`,
      (message) => (message['result'] ?? message['listed']) as Answer | undefined,
      (id) => ({ id, error: 'the agent process exited' }),
    );
    return new UpstreamMcpAgent(agent);
  }

  async listTools(): Promise<Tool[]> {
    const answer = await this.agent.exchange((id) => ({ list: id }));
    if (answer.error !== undefined) throw new Error(`tools/list failed: ${answer.error}`);
    return answer['tools'] as Tool[];
  }

  /** One tools/call; an SDK error (a schema mismatch, a JSON-RPC error) rejects with its message. */
  async call(tool: string, args: Record<string, unknown>): Promise<CallToolResult> {
    const answer = await this.agent.exchange((id) => ({ call: { id, tool, args } }));
    if (answer.error !== undefined) throw new Error(`${tool} failed in the SDK client: ${answer.error}`);
    return answer['reply'] as CallToolResult;
  }

  stop(): Promise<void> {
    return this.agent.stop();
  }
}
