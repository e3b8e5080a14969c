import type { Command } from 'commander';
import { brokerDataDir, withDataDir, type CommandContext, type CommonOptions } from './command-context.js';
import { callOperator, printable } from './operator-commands.js';

/**
 * `postern mcp-servers authorize NAME`: a person starts the OAuth authorization of an upstream MCP server
 * (docs/upstream-mcp.md). A decision: the daemon asks for the vault passphrase typed on this terminal. The printed
 * URL is the broker's one-time loopback start link, not the authorization server's: opening it binds the
 * authorization to that browser and redirects there; the same loopback listener receives the redirect back.
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
    context.io.out('It works once, in one browser: do not share or paste it elsewhere. If your browser says it was');
    context.io.out('already used, someone else opened it; nothing is stored then: run this command again.');
    context.io.out(`Postern waits for the redirect until ${new Date(started.expires_at_ms).toISOString()}.`);
  });
}
