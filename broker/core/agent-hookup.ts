import type { AgentHookup } from '../contract/index.js';
import { inspectorPortParked } from './inspector-port.js';

/**
 * The MCP clients whose hookup Postern knows, and where each reads it. `postern agent-config` prints
 * one; the operator API's `agent.hookup` answers all of them for the running broker (first run).
 */
export const agentClients = {
  'claude-code': 'run this once (add --scope user before "postern" to have it in every project)',
  'claude-desktop':
    'merge into claude_desktop_config.json (macOS: ~/Library/Application Support/Claude/, Windows: %APPDATA%\\Claude\\), ' +
    'then restart Claude Desktop',
  cursor: 'merge into ~/.cursor/mcp.json (every project) or <project>/.cursor/mcp.json',
  vscode: 'merge into <workspace>/.vscode/mcp.json (or the user mcp.json: "MCP: Open User Configuration")',
} as const;
export type AgentClient = keyof typeof agentClients;

export interface Hookup {
  /** What to paste: a shell line for Claude Code, a JSON object for the others. */
  readonly text: string;
  /** Where it goes. */
  readonly where: string;
}

export interface HookupPaths {
  readonly node: string;
  readonly bin: string;
  readonly dataDir?: string;
}

/**
 * The exact hookup for one MCP client: absolute paths to this node and this installation's bin, so
 * it works whatever directory the client starts the server from (`npx postern` outside the checkout
 * would ask the public registry for a package of that name). Pure: the caller passes the paths.
 */
export function agentHookup(client: AgentClient, paths: HookupPaths): Hookup {
  // Node's own option first: the shim is started parked like every Postern process (inspector-port.ts).
  const dataDir = paths.dataDir === undefined ? [] : ['--data-dir', paths.dataDir];
  const args = [inspectorPortParked, paths.bin, 'mcp', ...dataDir];
  const where = agentClients[client];
  switch (client) {
    case 'claude-code':
      return { text: ['claude', 'mcp', 'add', 'postern', '--', paths.node, ...args].map(shellWord).join(' '), where };
    case 'claude-desktop':
    case 'cursor':
      return { text: JSON.stringify({ mcpServers: { postern: { command: paths.node, args } } }, null, 2), where };
    case 'vscode':
      return {
        text: JSON.stringify({ servers: { postern: { type: 'stdio', command: paths.node, args } } }, null, 2),
        where,
      };
  }
}

/** Every known client's hookup for one broker, in agentClients' order (the first is the default). */
export function agentHookups(paths: HookupPaths & { dataDir: string }, note: string | null = null): AgentHookup {
  const clients = (Object.keys(agentClients) as AgentClient[]).map((client) => ({
    client,
    ...agentHookup(client, paths),
  }));
  return { data_dir: paths.dataDir, clients, note };
}

export function isAgentClient(name: string): name is AgentClient {
  return Object.hasOwn(agentClients, name);
}

/** A word the shell reads back unchanged: bare when it is plainly safe, else single-quoted. */
function shellWord(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", "'\\''")}'`;
}
