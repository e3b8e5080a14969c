// An agent process for tests/process-allowlist.test.ts, forked under whichever node executable the test chooses (a
// copy, a modified copy, the original): an MCP SDK client straight on the agent socket, so its session is this
// process and its executable is what the broker hashes. Driven over Node IPC: {tool: {id, name, args}} →
// {result: {id, value}} (the tool result as the client got it), {control: {id, method, input, proof}} → the control
// socket's reply to this process (an agent's process tree), {reconnect: {id, name, args}} → a tool call on a second connection, {exit: true}.
// A third argument `on-request`: it says {waiting: true, pid} first and connects only when sent {connect: true}.
import { register } from 'tsx/esm/api';

register();
const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
const { SocketClientTransport } = await import('../../broker/sdk/index.ts');
const { agentSocketPath } = await import('../../broker/agent/index.ts');
const { controlSocketPath, sendControlRequest } = await import('../../broker/host/index.ts');
const [dataDir, name, when] = process.argv.slice(2);

if (when === 'on-request') {
  const asked = new Promise((resolve) => process.on('message', (m) => m.connect === true && resolve()));
  process.send?.({ waiting: true, pid: process.pid });
  await asked;
}

const client = new Client({ name: name ?? 'allowlist-agent', version: '1' });
try {
  await client.connect(new SocketClientTransport(agentSocketPath(dataDir)));
} catch (error) {
  process.send?.({ fatal: String(error?.message ?? error) });
  process.exit(1);
}

const answer = (id, work) =>
  work.then(
    (value) => process.send?.({ result: { id, value: value ?? null } }),
    (error) => process.send?.({ result: { id, value: { thrown: String(error?.message ?? error) } } }),
  );

process.on('message', (message) => {
  if (message.exit === true) {
    void client
      .close()
      .catch(() => undefined)
      .finally(() => process.exit(0));
    return;
  }
  if (message.tool !== undefined) {
    const { id, name: tool, args } = message.tool;
    answer(id, client.callTool({ name: tool, arguments: args }, undefined, { timeout: 60_000 }));
  }
  // A second connection of the same process (what a shim's reconnect or another client in it opens), and one tool
  // call on it: the call waits for the session that connection opened, so its answer comes after that session's gate.
  if (message.reconnect !== undefined) {
    const { id, name: tool, args } = message.reconnect;
    const second = new Client({ name: `${name ?? 'allowlist-agent'}-again`, version: '1' });
    answer(
      id,
      second
        .connect(new SocketClientTransport(agentSocketPath(dataDir)))
        .then(() => second.callTool({ name: tool, arguments: args }, undefined, { timeout: 60_000 })),
    );
  }
  if (message.control !== undefined) {
    const { id, method, input, proof } = message.control;
    answer(id, sendControlRequest(controlSocketPath(dataDir), { op: 'api', method, input, proof }));
  }
});
process.on('disconnect', () => process.exit(0));
process.send?.({ ready: true, pid: process.pid });
