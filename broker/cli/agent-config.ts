import path from 'node:path';
import type { Command } from 'commander';
import { CodedError } from '../contract/index.js';
import { withDataDir, type CommandContext, type CommonOptions, type Env } from './command-context.js';
import { packageRoot } from './package-root.js';

/** The MCP clients whose hookup `postern agent-config` knows, and where each reads it. */
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

/**
 * The exact hookup for one MCP client: absolute paths to this node and this installation's bin, so
 * it works whatever directory the client starts the server from (`npx postern` outside the checkout
 * would ask the public registry for a package of that name). Pure: the caller passes the paths.
 */
export function agentHookup(client: AgentClient, paths: { node: string; bin: string; dataDir?: string }): Hookup {
  const args = [paths.bin, 'mcp', ...(paths.dataDir === undefined ? [] : ['--data-dir', paths.dataDir])];
  const where = agentClients[client];
  switch (client) {
    case 'claude-code':
      return { text: ['claude', 'mcp', 'add', 'postern', '--', paths.node, ...args].map(shellWord).join(' '), where };
    case 'claude-desktop':
    case 'cursor':
      return { text: JSON.stringify({ mcpServers: { postern: { command: paths.node, args } } }, null, 2), where };
    case 'vscode':
      return { text: JSON.stringify({ servers: { postern: { type: 'stdio', command: paths.node, args } } }, null, 2), where };
  }
}

/** `postern agent-config [client]`: the hookup on stdout (nothing else, so it can be piped), where it goes on stderr. */
export function registerAgentConfigCommand(program: Command, context: CommandContext): void {
  withDataDir(
    program
      .command('agent-config')
      .description('Print how to hook an MCP client up to this installation, with absolute paths.')
      .argument('[client]', `one of: ${Object.keys(agentClients).join(', ')}`, 'claude-code'),
  ).action((client: string, options: CommonOptions) => {
    if (!isAgentClient(client)) {
      const known = Object.keys(agentClients).join(', ');
      throw new CodedError('INVALID_ARGUMENT', `unknown client ${JSON.stringify(client)}; one of: ${known}`, { field: 'client' });
    }
    const dataDir = explicitDataDir(options, context.env);
    const bin = path.join(packageRoot, 'bin', 'postern.mjs');
    const hookup = agentHookup(client, { node: process.execPath, bin, ...(dataDir === undefined ? {} : { dataDir }) });
    context.io.err(`# ${client}: ${hookup.where}`);
    context.io.out(hookup.text);
  });
}

function isAgentClient(name: string): name is AgentClient {
  return Object.hasOwn(agentClients, name);
}

/**
 * --data-dir, else POSTERN_DATA_DIR, as an absolute path; undefined when neither is set, so the shim
 * uses the same per-user default the daemon does. The client starts the shim with its own
 * environment and working directory, so a choice made here must be spelled out in the hookup.
 */
function explicitDataDir(options: CommonOptions, env: Env): string | undefined {
  const chosen = options.dataDir ?? env['POSTERN_DATA_DIR'];
  return chosen === undefined || chosen === '' ? undefined : path.resolve(chosen);
}

/** A word the shell reads back unchanged: bare when it is plainly safe, else single-quoted. */
function shellWord(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", "'\\''")}'`;
}
