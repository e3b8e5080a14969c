import { createConnection, type Socket } from 'node:net';
import type { Readable, Writable } from 'node:stream';
import type { Command } from 'commander';
import { agentSocketPath } from '../agent/index.js';
import { resolveFromOptions, withDataDir, type CommandContext, type CommonOptions } from './command-context.js';

/**
 * `postern mcp [--data-dir DIR]`: a byte pipe between stdio and the broker's agent socket, so any
 * MCP client that launches servers as processes works unchanged
 * (`claude mcp add postern -- npx postern mcp`). It adds nothing and reads nothing: framing,
 * limits and identity are the socket's (the broker identifies the shim's own process, the MCP
 * client's child, by the kernel). stdout carries socket bytes only; diagnostics go to stderr.
 */
export function registerMcpCommand(program: Command, context: CommandContext): void {
  withDataDir(program.command('mcp').description("Connect an MCP client on stdio to the running broker's agent socket.")).action(async (options: CommonOptions) => {
    const dataDir = resolveFromOptions(options, context.env);
    const code = await runMcpShim({ dataDir, socketPath: agentSocketPath(dataDir), stdin: process.stdin, stdout: process.stdout, err: context.io.err });
    context.setResult(code);
  });
}

export interface McpShimOptions {
  readonly dataDir: string;
  readonly socketPath: string;
  readonly stdin: Readable;
  readonly stdout: Writable;
  readonly err: (line: string) => void;
}

/** Resolves 0 when either side ends (after the other was ended too), 1 when no broker listens. */
export async function runMcpShim(options: McpShimOptions): Promise<number> {
  const { stdin, stdout } = options;
  let socket: Socket;
  try {
    socket = await connect(options.socketPath);
  } catch (error) {
    const reason = (error as { code?: unknown }).code;
    options.err(
      `postern mcp: no Postern broker is listening for data directory ${options.dataDir} (${options.socketPath}: ${typeof reason === 'string' ? reason : 'cannot connect'}). Start one with: postern daemon --data-dir ${options.dataDir}`,
    );
    return 1;
  }
  return new Promise<number>((resolve) => {
    let finished = false;
    const finish = (): void => {
      if (finished) return;
      finished = true;
      stdin.unpipe(socket);
      // stdin would keep the process alive; the shim has nothing more to read.
      stdin.pause();
      stdin.destroy();
      socket.destroy();
      resolve(0);
    };
    socket.on('error', finish);
    stdout.on('error', finish);
    stdin.on('error', finish);
    // Agent → broker. When the agent closes stdin, half-close the socket; the broker then closes.
    stdin.pipe(socket, { end: true });
    // Broker → agent. When the broker closes, end stdout and exit once it is flushed.
    socket.pipe(stdout, { end: false });
    socket.once('end', () => stdout.write('', () => finish()));
    socket.once('close', () => stdout.write('', () => finish()));
  });
}

function connect(socketPath: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = createConnection(socketPath);
    socket.once('error', reject);
    socket.once('connect', () => {
      socket.off('error', reject);
      resolve(socket);
    });
  });
}
