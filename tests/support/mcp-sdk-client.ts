import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { posternBin, repoRoot } from './postern-process.js';

/**
 * An agent on the MCP SDK's own client, connected through `postern mcp --data-dir <dataDir>` (a real shim process).
 * It lists the tools first, so the SDK validates every later structuredContent against its tool's outputSchema.
 */
export async function connectSdkClient(dataDir: string, name: string): Promise<Client> {
  const client = new Client({ name, version: '1' });
  try {
    await client.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [posternBin, 'mcp', '--data-dir', dataDir],
        cwd: repoRoot,
        stderr: 'pipe',
      }),
    );
    await client.listTools();
  } catch (error) {
    await client.close().catch(() => undefined);
    throw error;
  }
  return client;
}
