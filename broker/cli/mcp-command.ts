import type { Readable, Writable } from 'node:stream';
import type { Command } from 'commander';
import { agentSocketPath } from '../agent/socket-path.js';
import { CodedError } from '../contract/coded-error.js';
import { brokerDataDir, withDataDir, type CommandContext, type CommonOptions } from './command-context.js';
import { reconnectPolicyDefault, type ReconnectPolicy } from './mcp-reconnect-policy.js';

interface McpOptions extends CommonOptions {
  reconnectFor: string;
}

/** The longest --reconnect-for: a day; a broker away longer than that is not coming back for this client. */
const reconnectForSecondsMax = 86_400;
const giveUpSecondsDefault = reconnectPolicyDefault.giveUpMs / 1000;

/**
 * `postern mcp [--data-dir DIR]`: a pipe between stdio and the broker's agent socket, so any MCP
 * client that launches servers as processes works unchanged (`postern agent-config` prints the line).
 * Framing, limits and identity are the socket's: the broker identifies the MCP client behind this
 * shim by the kernel, so the session is the agent's, not the shim's. When the broker goes away the
 * shim answers the client's unanswered requests with BROKER_RESTARTED, reconnects with backoff and
 * replays the client's initialize (mcp-relay.ts). stdout carries socket bytes and those answers
 * only; diagnostics go to stderr.
 */
export function registerMcpCommand(program: Command, context: CommandContext): void {
  withDataDir(
    program.command('mcp').description("Connect an MCP client on stdio to the running broker's agent socket."),
  )
    .option(
      '--reconnect-for <seconds>',
      'keep reconnecting this long after the broker goes away (0: exit at once)',
      String(giveUpSecondsDefault),
    )
    .action(async (options: McpOptions) => {
      const reconnect = { ...reconnectPolicyDefault, giveUpMs: parseReconnectFor(options.reconnectFor) * 1000 };
      // A missing data directory has no broker: said as every command that only asks a broker says it, and not created.
      const dataDir = brokerDataDir(options, context.env);
      const socketPath = agentSocketPath(dataDir);
      const code = await runMcpShim({
        dataDir,
        socketPath,
        stdin: process.stdin,
        stdout: process.stdout,
        err: context.io.err,
        reconnect,
      });
      context.setResult(code);
    });
}

export interface McpShimOptions {
  readonly dataDir: string;
  readonly socketPath: string;
  readonly stdin: Readable;
  readonly stdout: Writable;
  readonly err: (line: string) => void;
  readonly reconnect?: ReconnectPolicy;
}

/**
 * Resolves 0 when the client ends, 1 when the broker does not come back within the reconnect window or refuses this
 * process itself (PEER_REFUSED: not retried); throws NOT_FOUND
 * (--data-dir) when no broker listens at start, which the CLI prints as its one coded stderr line (exit 1).
 */
export async function runMcpShim(options: McpShimOptions): Promise<number> {
  // Loaded here, not with the command: the full program registers `mcp` for its help and never runs it (main.ts sends
  // `postern mcp` to mcp-main.ts).
  const { McpRelay } = await import('./mcp-relay.js');
  return new McpRelay({ ...options, reconnect: options.reconnect ?? reconnectPolicyDefault }).run();
}

function parseReconnectFor(raw: string): number {
  const seconds = /^\d{1,6}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isInteger(seconds) || seconds > reconnectForSecondsMax) {
    const message = `must be whole seconds from 0 to ${reconnectForSecondsMax} (got ${JSON.stringify(raw)})`;
    throw new CodedError('INVALID_ARGUMENT', message, { field: '--reconnect-for' });
  }
  return seconds;
}
