import type { CliIo } from './cli-io.js';
import { runProgram } from './cli-program.js';
import type { Env } from './command-context.js';
import { registerStatusCommand } from './status-command.js';

/**
 * `postern status …` alone (main.ts sends it here): the same program, options, help and error lines as runCli gives the
 * command, with no other command registered, so a look at a data directory loads the journal only when there is one
 * and the operator client only when a broker answers (issue 18: cold start).
 */
export function runStatusCli(argv: readonly string[], env: Env, io: CliIo): Promise<number> {
  return runProgram(argv, env, io, registerStatusCommand);
}
