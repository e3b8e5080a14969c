import type { CliIo } from './cli-io.js';
import { runProgram } from './cli-program.js';
import type { Env } from './command-context.js';
import { registerMcpCommand } from './mcp-command.js';

/**
 * `postern mcp …` alone (main.ts sends it here): the same program, options, help and error lines as runCli gives the
 * command, with no other command registered, so the shim an MCP client launches loads neither the contract's schemas
 * nor any other command's modules before it answers (issue 18: cold start; MCP clients give up on a slow server).
 */
export function runMcpCli(argv: readonly string[], env: Env, io: CliIo): Promise<number> {
  return runProgram(argv, env, io, registerMcpCommand);
}
