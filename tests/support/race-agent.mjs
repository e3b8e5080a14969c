// One agent process for the two-write race drill: a real MCP SDK client that launches
// `postern mcp` (the stdio shim) and speaks to the broker through it. The test drives it over the
// Node IPC channel: {call: {id, tool, args}} → {result: {id, reply}}, {cancel: id},
// {run: {id, argv}} → {ran: {id, code, stdout, stderr}} (runs `postern ARGV` as its child), {exit: true}.
// Plain JS so it starts without a TypeScript loader; everything it reports is the SDK's own result.
import { execFile } from 'node:child_process';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const [posternBin, dataDir, name] = process.argv.slice(2);
const transport = new StdioClientTransport({
  command: process.execPath,
  args: [posternBin, 'mcp', '--data-dir', dataDir],
  stderr: 'inherit',
});
const client = new Client({ name: name ?? 'race-agent', version: '1.0.0' });
const inFlight = new Map();

try {
  await client.connect(transport);
} catch (error) {
  process.send?.({ fatal: String(error) });
  process.exit(1);
}
process.send?.({ ready: true, pid: process.pid });

process.on('message', (message) => {
  if (message.exit === true) {
    void client.close().finally(() => process.exit(0));
    return;
  }
  if (message.run !== undefined) {
    // An agent trying the operator CLI itself (e.g. from its shell tool): a child of this process.
    const { id, argv } = message.run;
    execFile(process.execPath, [posternBin, ...argv], { timeout: 30_000 }, (error, stdout, stderr) => {
      process.send?.({ ran: { id, code: error === null ? 0 : (error.code ?? -1), stdout, stderr } });
    });
    return;
  }
  if (message.cancel !== undefined) {
    inFlight.get(message.cancel)?.abort('the drill cancels this call');
    return;
  }
  if (message.call !== undefined) {
    const { id, tool, args, progress } = message.call;
    const controller = new AbortController();
    inFlight.set(id, controller);
    // Asked for: the call carries a progressToken and the notes come back with the reply.
    const notes = [];
    const onprogress = progress === true ? { onprogress: (p) => notes.push(p.message ?? '') } : {};
    client
      .callTool({ name: tool, arguments: args }, undefined, {
        signal: controller.signal,
        timeout: 120_000,
        ...onprogress,
      })
      .then(
        (reply) => process.send?.({ result: { id, reply: progress === true ? { ...reply, progress: notes } : reply } }),
        // An MCP error's data (e.g. the shim's BROKER_RESTARTED naming the lost call's action) travels with it.
        (error) => process.send?.({ result: { id, error: String(error?.message ?? error), errorData: error?.data } }),
      )
      .finally(() => inFlight.delete(id));
  }
});
process.on('disconnect', () => process.exit(0));
