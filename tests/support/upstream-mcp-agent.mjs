// One agent process for the upstream MCP test: a real MCP SDK client that launches `postern mcp` (the stdio shim),
// lists the tools first — so the SDK validates every structuredContent against the listed outputSchema — and is
// driven over Node IPC: {list: id} → {listed: {id, tools}}, {call: {id, tool, args}} → {result: {id, reply | error}},
// {exit: true}. A separate process because operator decisions are refused to an agent's ancestors and descendants:
// the test process, which decides as a person, must not be the MCP client itself.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const [posternBin, dataDir, name] = process.argv.slice(2);
const transport = new StdioClientTransport({
  command: process.execPath,
  args: [posternBin, 'mcp', '--data-dir', dataDir],
  stderr: 'inherit',
});
const client = new Client({ name: name ?? 'upstream-mcp-agent', version: '1.0.0' });

try {
  await client.connect(transport);
  await client.listTools();
} catch (error) {
  process.send?.({ fatal: String(error) });
  process.exit(1);
}
process.send?.({ ready: true });

process.on('message', (message) => {
  if (message.exit === true) {
    void client.close().finally(() => process.exit(0));
    return;
  }
  if (message.list !== undefined) {
    const id = message.list;
    client.listTools().then(
      ({ tools }) => process.send?.({ listed: { id, tools } }),
      (error) => process.send?.({ listed: { id, error: String(error?.message ?? error) } }),
    );
    return;
  }
  if (message.call !== undefined) {
    const { id, tool, args } = message.call;
    client.callTool({ name: tool, arguments: args }, undefined, { timeout: 120_000 }).then(
      (reply) => process.send?.({ result: { id, reply } }),
      (error) => process.send?.({ result: { id, error: String(error?.message ?? error) } }),
    );
  }
});
process.on('disconnect', () => process.exit(0));
