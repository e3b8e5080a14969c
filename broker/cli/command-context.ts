import { statSync } from 'node:fs';
import os from 'node:os';
import { Option, type Command } from 'commander';
import { CodedError } from '../contract/coded-error.js';
import { ensureDataDir, resolveDataDir } from '../host/data-dir.js';
import type { CliIo } from './cli-io.js';

export type Env = Readonly<Record<string, string | undefined>>;

export interface CommonOptions {
  dataDir?: string;
}

/**
 * What a group of commands (vault, audit, …) gets to register itself on the program: each group
 * lives in its own file and exports `registerXCommands(program, context)`.
 */
export interface CommandContext {
  readonly env: Env;
  readonly io: CliIo;
  readonly version: string;
  /** The process exit code the running command wants (0 unless set). */
  setResult(code: number): void;
}

/** Every command takes --data-dir. */
export function withDataDir(command: Command): Command {
  return command.addOption(
    new Option(
      '--data-dir <dir>',
      'where the journal and vault live (default: POSTERN_DATA_DIR or the per-user app data folder)',
    ),
  );
}

/**
 * A group's default subcommand (`postern integrity` is `integrity status`): commander hands it every word the group
 * does not know, and would refuse `postern integrity anchor` as "too many arguments for 'status'". It says the word
 * is not one of the group's commands instead.
 */
export function defaultSubcommand(group: Command, name: string): Command {
  return group
    .command(name, { isDefault: true })
    .allowExcessArguments()
    .hook('preAction', (_hooked, command) => {
      const [stray] = command.args;
      if (stray === undefined) return;
      // Named on the command line (`postern sessions list extra`): an extra argument, as for any other command.
      if (group.args[0] === name)
        throw new CodedError('INVALID_ARGUMENT', `too many arguments for '${name}': it takes none (got '${stray}')`, {
          field: 'arguments',
        });
      const known = group.commands.map((c) => c.name()).filter((c) => c !== 'help');
      throw new CodedError(
        'INVALID_ARGUMENT',
        `unknown command '${stray}' for 'postern ${group.name()}' (its commands: ${known.join(', ')})`,
        { field: 'command' },
      );
    });
}

/** --data-dir, else POSTERN_DATA_DIR, else the per-user application data folder. */
export function resolveFromOptions(options: CommonOptions, env: Env): string {
  return resolveDataDir({
    flag: options.dataDir,
    env,
    platform: process.platform,
    home: os.homedir(),
    cwd: process.cwd(),
  });
}

/** Resolves the data directory and creates it (0700) if needed; refuses one others can read. */
export function prepareDataDir(options: CommonOptions, env: Env): string {
  const dataDir = resolveFromOptions(options, env);
  ensureDataDir(dataDir);
  return dataDir;
}

/**
 * The data directory of a command that only reads or changes what is already there (vault list,
 * remove…): a missing one is a mistyped --data-dir, not a place to create an empty vault in.
 */
export function existingDataDir(options: CommonOptions, env: Env): string {
  const dataDir = resolveFromOptions(options, env);
  if (!isDirectory(dataDir)) {
    throw new CodedError(
      'INVALID_ARGUMENT',
      `no data directory at ${dataDir} (create one with: postern vault init --data-dir ${dataDir})`,
      {
        field: '--data-dir',
      },
    );
  }
  return prepareDataDir(options, env);
}

/**
 * The data directory of a command that only asks the running broker (approvals, actions, sessions,
 * activity, metrics, integrity…): a missing one has no broker to ask, and making it would leave an
 * empty directory behind a typo. Said as the missing broker is said, naming --data-dir.
 */
export function brokerDataDir(options: CommonOptions, env: Env): string {
  const dataDir = resolveFromOptions(options, env);
  if (!isDirectory(dataDir)) {
    throw new CodedError(
      'NOT_FOUND',
      `no data directory at ${dataDir}, so no broker is running for it (start one with: postern daemon --data-dir ${dataDir})`,
      { field: '--data-dir' },
    );
  }
  // Exists: vetted as the broker's own would be (private to this user), never created or changed.
  return prepareDataDir(options, env);
}

function isDirectory(dataDir: string): boolean {
  try {
    return statSync(dataDir).isDirectory();
  } catch {
    // Missing or unreadable: both mean nothing of Postern's is there for this command.
    return false;
  }
}
