import type { Command } from 'commander';
import { brokerDataDir, withDataDir, type CommandContext, type CommonOptions } from './command-context.js';
import { callOperator, printable } from './operator-commands.js';

/**
 * `postern mcp-servers authorize NAME`: a person starts the OAuth authorization of an upstream MCP server
 * (docs/upstream-mcp.md). A decision: the daemon asks for the vault passphrase typed on this terminal. The URL
 * is printed for the person to open in their browser; the broker's loopback listener receives the redirect.
 */
export function registerMcpServerCommands(program: Command, context: CommandContext): void {
  const servers = program.command('mcp-servers').description('Upstream MCP servers behind Postern.');
  withDataDir(
    servers
      .command('authorize')
      .argument('<name>', 'the server name in postern.yaml (it has an oauth: section)')
      .description('Authorize Postern at the server’s OAuth authorization server: prints the URL to open.'),
  ).action(async (name: string, options: CommonOptions) => {
    const started = await callOperator(
      brokerDataDir(options, context.env),
      'mcp_servers.authorize',
      { server: name },
      {
        proveOnTerminal: true,
      },
    );
    context.io.out(`Open this URL in your browser to authorize ${printable(started.server)}:`);
    context.io.out(printable(started.authorization_url));
    context.io.out(`Postern waits for the redirect until ${new Date(started.expires_at_ms).toISOString()}.`);
  });
}
