import { Command, CommanderError } from 'commander';
import { isCodedError } from '../contract/coded-error.js';
import { packageVersion } from '../host/package-root.js';
import type { CliIo } from './cli-io.js';
import { withDataDir, type CommandContext, type Env } from './command-context.js';

/** Exit codes: 0 done, 1 the broker failed, 2 the command line was wrong. */
export const exitCode = { ok: 0, failure: 1, usage: 2 } as const;

/**
 * The `postern` program around its commands: the version, the coded error line, `--data-dir` anywhere. `register`
 * adds the commands (program.ts: all of them; mcp-main.ts and status-main.ts: one each, for a fast start). Kept free of
 * the contract's schemas and of every command's modules, so a lean entry pays only for what it registers.
 */
export async function runProgram(
  argv: readonly string[],
  env: Env,
  io: CliIo,
  register: (program: Command, context: CommandContext) => void,
): Promise<number> {
  const version = packageVersion();
  let result: number = exitCode.ok;
  const program = new Command('postern')
    .description('Postern: an action broker that lets AI agents act on real systems without holding the keys.')
    .version(version)
    .exitOverride()
    .configureOutput({
      writeOut: (text) => process.stdout.write(text),
      writeErr: (text) => process.stderr.write(text),
      // Parse errors are reported once, as coded errors, by reportError below.
      outputError: () => undefined,
    });
  acceptDataDirAnywhere(program);
  register(program, { env, io, version, setResult: (code) => (result = code) });
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return result;
  } catch (error) {
    return reportError(error, io);
  }
}

/**
 * `postern --data-dir D vault list` and `postern vault list --data-dir D` mean the same. Without
 * positional options commander gives the program's own options to the program wherever they appear,
 * so the value is handed to the command that runs (whose action reads its own options).
 */
function acceptDataDirAnywhere(program: Command): void {
  withDataDir(program).hook('preAction', (_program, actionCommand) => {
    const dataDir = program.getOptionValue('dataDir') as string | undefined;
    if (dataDir !== undefined && actionCommand !== program) actionCommand.setOptionValue('dataDir', dataDir);
  });
}

/** One line, `postern: CODE FIELD: message`, then the exit code: 2 for usage, 1 otherwise. */
function reportError(error: unknown, io: CliIo): number {
  if (error instanceof CommanderError) {
    if (error.exitCode === 0) return exitCode.ok; // --help, --version
    // Commander prints the help to stderr when no command is given; add the coded line.
    const message =
      error.code === 'commander.help'
        ? 'a command is required (the commands are listed above)'
        : error.message.replace(/^error:\s*/, '');
    io.err(`postern: INVALID_ARGUMENT ${commanderField(error)}: ${message}`);
    io.err("Run 'postern --help' for usage.");
    return exitCode.usage;
  }
  if (isCodedError(error)) {
    // A field of '' names none (the whole input, such as the file): `CODE: message`, never `CODE : message`.
    const field = error.field === undefined || error.field === '' ? '' : ` ${error.field}`;
    io.err(`postern: ${error.code}${field}: ${error.message}`);
    return error.code === 'INVALID_ARGUMENT' ? exitCode.usage : exitCode.failure;
  }
  io.err(`postern: INTERNAL: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  return exitCode.failure;
}

/** Names what was wrong on the command line: the option if the message quotes one, else what kind of thing. */
function commanderField(error: CommanderError): string {
  const quoted = /'(-[^' ]+)/.exec(error.message)?.[1];
  if (quoted !== undefined) return quoted;
  if (error.code === 'commander.unknownCommand' || error.code === 'commander.help') return 'command';
  if (error.code === 'commander.excessArguments') return 'arguments';
  return 'arguments';
}
