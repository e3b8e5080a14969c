import path from 'node:path';
import type { Command } from 'commander';
import { CodedError } from '../contract/coded-error.js';
import { agentClients, agentHookup, isAgentClient } from '../core/agent-hookup.js';
import { withDataDir, type CommandContext, type CommonOptions, type Env } from './command-context.js';
import { packageRoot } from '../host/package-root.js';

// The hookup is pure and shared with the operator API's `agent.hookup` (broker/host/agent-hookup.ts).
export { agentClients, agentHookup, type AgentClient, type Hookup } from '../core/agent-hookup.js';

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
      throw new CodedError('INVALID_ARGUMENT', `unknown client ${JSON.stringify(client)}; one of: ${known}`, {
        field: 'client',
      });
    }
    const dataDir = explicitDataDir(options, context.env);
    const bin = path.join(packageRoot, 'bin', 'postern.mjs');
    const hookup = agentHookup(client, { node: process.execPath, bin, ...(dataDir === undefined ? {} : { dataDir }) });
    context.io.err(`# ${client}: ${hookup.where}`);
    context.io.out(hookup.text);
  });
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
