import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { Option, type Command } from 'commander';
import { CodedError } from '../contract/coded-error.js';
import { drainBoundMs } from '../host/shutdown-sequence.js';
import { actionListScanRowsMax } from '../journal/action-list-scan-rows.js';
import type { CliIo } from './cli-io.js';
import { runProgram } from './cli-program.js';
import { registerStatusCommand } from './status-command.js';
import { prepareDataDir, withDataDir, type CommandContext, type CommonOptions, type Env } from './command-context.js';
import { probeDesktop } from './desktop-probe.js';
import { headlessOnlyOptions, launchDesktop, type HeadlessOnlyOption } from './launch-desktop.js';
import { packageRoot } from '../host/package-root.js';
import { waitForStopSignal } from './stop-signal.js';
import { registerVaultCommands } from './vault-commands.js';
import { registerAuditCommands } from './audit-commands.js';
import { registerMcpCommand } from './mcp-command.js';
import { registerAgentConfigCommand } from './agent-config.js';
import { registerOperatorCommands } from './operator-commands.js';
import { registerMcpServerCommands } from './mcp-server-commands.js';
import { registerConfigCommands } from './config-commands.js';
import { registerIntegrityCommands } from './integrity-commands.js';
import { passphraseFromFile } from './secret-input.js';

interface ServeOptions extends CommonOptions {
  port?: string;
  passphraseFile?: string;
  config?: string;
  /** `daemon` only, hidden: tests lower the action list's search bound with it (testActionListScanRowsOption). */
  testActionListScanRows?: string;
  /** `daemon` only, hidden: tests lower the stop's drain bound with it (testDrainMs). */
  testDrainMs?: string;
}

/** Parses argv (without node and the script), runs the command, returns the process exit code. */
export function runCli(argv: readonly string[], env: Env, io: CliIo): Promise<number> {
  return runProgram(argv, env, io, registerCommands);
}

/** Every command group, one line each. */
function registerCommands(program: Command, context: CommandContext): void {
  registerServeCommands(program, context);
  registerStatusCommand(program, context);
  registerVaultCommands(program, context);
  registerAuditCommands(program, context);
  registerMcpCommand(program, context);
  registerAgentConfigCommand(program, context);
  registerOperatorCommands(program, context);
  registerConfigCommands(program, context);
  registerIntegrityCommands(program, context);
  registerMcpServerCommands(program, context);
}

/** start and daemon: the commands that run the broker (status: status-command.ts). */
function registerServeCommands(program: Command, context: CommandContext): void {
  const { env, io, setResult } = context;
  withServeOptions(
    program
      .command('start')
      .description('Open the desktop app if Electron and a display are available; otherwise run headless.'),
    true,
  ).action(async (options: ServeOptions) => {
    const port = parsePort(options.port);
    const dataDir = prepareDataDir(options, env);
    const probe = probeDesktop({
      packageRoot,
      electronDir: resolveElectronDir(),
      env,
      platform: process.platform,
      exists: existsSync,
      readText: readTextOrUndefined,
    });
    if (probe.usable) {
      const given = headlessOnlyOptions.filter((flag) => headlessOnlyValue(options, flag) !== undefined);
      setResult(await launchDesktop({ electronPath: probe.electronPath, packageRoot, dataDir, io, env, given }));
      return;
    }
    io.out(`Electron not used: ${probe.reason}. Running headless.`);
    setResult(await serveHeadless(options, dataDir, port, context));
  });

  withServeOptions(
    program.command('daemon').description('Run the broker headless with the operator web UI on 127.0.0.1.'),
  )
    .addOption(testActionListScanRowsOption())
    .addOption(new Option('--test-drain-ms <ms>', 'tests only').hideHelp())
    .action(async (options: ServeOptions) => {
      const port = parsePort(options.port);
      const scanRows = testActionListScanRows(options.testActionListScanRows);
      const drainMs = testDrainMs(options.testDrainMs);
      const dataDir = prepareDataDir(options, env);
      setResult(await serveHeadless(options, dataDir, port, context, scanRows, drainMs));
    });
}

/** The broker without a window: `start` where Electron is unusable, and `daemon`. */
async function serveHeadless(
  options: ServeOptions,
  dataDir: string,
  port: number | undefined,
  { env, io, version }: CommandContext,
  actionListScanRowsMax?: number,
  drainMs?: number,
): Promise<number> {
  const vaultPassphrase = passphraseFromFile({ file: options.passphraseFile, env });
  // The broker itself loads only for the commands that run it (the CLI bundle splits at each dynamic import).
  const { runHeadless } = await import('./run-headless.js');
  return runHeadless({
    dataDir,
    port,
    version,
    io,
    stopSignal: waitForStopSignal(io),
    vaultPassphrase,
    ...configFile(options),
    actionListScanRowsMax,
    ...(drainMs === undefined ? {} : { drainBoundMs: drainMs }),
  });
}

/**
 * Tests only, hence hidden from --help: the stop's drain bound (ms), lowered from drainBoundMs so an end-to-end test
 * reaches the cut without waiting 10 s. It can only lower the bound (a shorter wait for dispatched actions, whose cut
 * the next start records as unknown), so it changes no protection.
 */
function testDrainMs(raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const ms = /^\d{1,6}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isInteger(ms) || ms > drainBoundMs) {
    throw new CodedError(
      'INVALID_ARGUMENT',
      `must be an integer from 0 to ${drainBoundMs} (got ${JSON.stringify(raw)})`,
      {
        field: '--test-drain-ms',
      },
    );
  }
  return ms;
}

/**
 * Tests only, hence hidden from --help: the rows one `actions.list` search page examines, lowered from
 * actionListScanRowsMax so an end-to-end test reaches "Search older" on a small journal. It can only lower
 * the bound (less work per page, never more), so it changes no protection.
 */
function testActionListScanRowsOption(): Option {
  return new Option('--test-action-list-scan-rows <rows>', 'tests only').hideHelp();
}

function testActionListScanRows(raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const rows = /^\d{1,6}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isInteger(rows) || rows < 1 || rows > actionListScanRowsMax) {
    throw new CodedError(
      'INVALID_ARGUMENT',
      `must be an integer from 1 to ${actionListScanRowsMax} (got ${JSON.stringify(raw)})`,
      { field: '--test-action-list-scan-rows' },
    );
  }
  return rows;
}

/** The option values the desktop app would not read (launch-desktop.ts refuses them). */
function headlessOnlyValue(options: ServeOptions, flag: HeadlessOnlyOption): string | undefined {
  return flag === '--port' ? options.port : flag === '--passphrase-file' ? options.passphraseFile : options.config;
}

function withServeOptions(command: Command, desktop = false): Command {
  // `start` opens the desktop app when it can, which takes none of these: it refuses them then.
  const headless = desktop ? ' (headless only: refused when the desktop app opens)' : '';
  return withDataDir(command)
    .option(
      '--port <port>',
      `operator UI port on 127.0.0.1 (default: operator.port in the config, else 0: a free one)${headless}`,
    )
    .option(
      '--passphrase-file <file>',
      'unlock the vault at start with the passphrase in this file (else POSTERN_PASSPHRASE_FILE; else it starts locked); ' +
        `any process of this user can read it, so no passphrase proves a person then (no decision on the CLI or in the operator UI): ` +
        `start without it and unlock at a terminal to decide${headless}`,
    )
    .option(
      '--config <file>',
      `the configuration: routes, SSH hosts and every other setting (default: <data dir>/postern.yaml)${headless}`,
    );
}

/** --config as an absolute path (the daemon may not share the CLI's working directory forever). */
function configFile(options: ServeOptions): { configFile?: string } {
  return options.config === undefined ? {} : { configFile: path.resolve(options.config) };
}

const portMax = 65_535;

/** --port as given; undefined when absent, so the configuration's operator.port (else 0) applies. */
function parsePort(raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const port = /^\d{1,5}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isInteger(port) || port > portMax) {
    throw new CodedError('INVALID_ARGUMENT', `must be an integer from 0 to ${portMax} (got ${JSON.stringify(raw)})`, {
      field: '--port',
    });
  }
  return port;
}

/** Resolving package.json never runs electron's index.js, which would start a download. */
function resolveElectronDir(): string | undefined {
  try {
    return path.dirname(createRequire(import.meta.url).resolve('electron/package.json'));
  } catch {
    return undefined;
  }
}

function readTextOrUndefined(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}
