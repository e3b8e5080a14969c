import { existsSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { connect } from 'node:net';
import path from 'node:path';
import { Option, type Command } from 'commander';
import { CodedError, isCodedError } from '../contract/index.js';
import { controlSocketPath } from '../host/control-client.js';
import { dataDirLockHolder, verifyControlListener } from '../host/control-listener.js';
import { brokerLockFileName } from '../host/data-dir-lock.js';
import { drainBoundMs } from '../host/shutdown-sequence.js';
import { actionListScanRowsMax } from '../journal/action-list-query.js';
import type { CliIo } from './cli-io.js';
import { exitCode, runProgram } from './cli-program.js';
import { statusLines, type JournalReport } from './status-text.js';
import {
  prepareDataDir,
  resolveFromOptions,
  withDataDir,
  type CommandContext,
  type CommonOptions,
  type Env,
} from './command-context.js';
import { probeDesktop } from './desktop-probe.js';
import { headlessOnlyOptions, launchDesktop, type HeadlessOnlyOption } from './launch-desktop.js';
import { packageRoot } from '../host/package-root.js';
import { waitForStopSignal } from './stop-signal.js';
import { registerVaultCommands } from './vault-commands.js';
import { registerAuditCommands } from './audit-commands.js';
import { registerMcpCommand } from './mcp-command.js';
import { registerAgentConfigCommand } from './agent-config.js';
import { callOperator, registerOperatorCommands } from './operator-commands.js';
import { registerMcpServerCommands } from './mcp-server-commands.js';
import { registerConfigCommands } from './config-commands.js';
import { registerIntegrityCommands } from './integrity-commands.js';
import { passphraseFromFile } from './secret-input.js';

export { exitCode } from './cli-program.js';

interface ServeOptions extends CommonOptions {
  port?: string;
  passphraseFile?: string;
  config?: string;
  /** `daemon` only, hidden: tests lower the action list's search bound with it (testActionListScanRowsOption). */
  testActionListScanRows?: string;
  /** `daemon` only, hidden: tests lower the stop's drain bound with it (testDrainMs). */
  testDrainMs?: string;
}
interface StatusOptions extends CommonOptions {
  json?: boolean;
}

/** Parses argv (without node and the script), runs the command, returns the process exit code. */
export function runCli(argv: readonly string[], env: Env, io: CliIo): Promise<number> {
  return runProgram(argv, env, io, registerCommands);
}

/** Every command group, one line each. */
function registerCommands(program: Command, context: CommandContext): void {
  registerServeCommands(program, context);
  registerVaultCommands(program, context);
  registerAuditCommands(program, context);
  registerMcpCommand(program, context);
  registerAgentConfigCommand(program, context);
  registerOperatorCommands(program, context);
  registerConfigCommands(program, context);
  registerIntegrityCommands(program, context);
  registerMcpServerCommands(program, context);
}

/** start, daemon and status: the commands that run the broker or report on its data directory. */
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

  withDataDir(program.command('status').description("Print the data directory's journal and action counts."))
    .option('--json', 'print one JSON object instead of text')
    .action(async (options: StatusOptions) => {
      setResult(await printStatus(resolveFromOptions(options, env), options.json === true, io));
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
        `any process of this user can read it, so the CLI then cannot prove a person: decide in the operator UI${headless}`,
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

async function printStatus(dataDir: string, json: boolean, io: CliIo): Promise<number> {
  if (!isDirectory(dataDir)) {
    if (json) io.out(JSON.stringify({ data_dir: dataDir, exists: false }));
    else io.out(`Data directory: ${dataDir} (does not exist: nothing has run here yet)`);
    return exitCode.ok;
  }
  const answer = await brokerAnswers(dataDir);
  const running = answer === true;
  const impostor = typeof answer === 'string' ? answer : undefined;
  // No answer on the socket is not "no broker": one starting (journal recovery, vault unlock) or stopping (draining
  // in-flight calls) holds the lock with its control socket closed, and `postern daemon` would be refused.
  const holder = answer === false ? lockHolderPid(dataDir) : undefined;
  const report = await journalReport(dataDir, answer, holder);
  if (json) {
    const unverified = impostor === undefined ? {} : { control_socket_unverified: impostor };
    const held = holder === undefined ? {} : { lock_held_by_pid: holder };
    const { journal, actions, read_from, journal_file, used_by } = report;
    const file = {
      ...(journal_file === undefined ? {} : { journal_file }),
      ...(used_by === undefined ? {} : { used_by }),
    };
    const out = { data_dir: dataDir, journal, actions, journal_read_from: read_from, ...file };
    io.out(JSON.stringify({ ...out, exists: true, broker_running: running, ...unverified, ...held }));
    return exitCode.ok;
  }
  for (const line of statusLines({ dataDir, running, impostor, holder, report })) io.out(line);
  return exitCode.ok;
}

/** A live broker answers its status in milliseconds; `postern status` must stay quick beside a stopped one. */
const statusAnswerMs = 5_000;

/**
 * The journal as the process holding it sees it: a verified running broker is asked for its own
 * status (a read over the control socket), so "open" or "failed" is its word. Otherwise the file is
 * read read-only (read-snapshot.ts), and its state is "closed" only when nothing listens for the
 * data directory and no process holds its lock; when a broker, an unverified listener or a lock holder
 * (`holder`: a broker starting or stopping) is there, the file cannot say: "unknown".
 */
async function journalReport(dataDir: string, answer: boolean | string, holder?: number): Promise<JournalReport> {
  let brokerSilent: string | undefined;
  if (answer === true) {
    try {
      const { journal, actions } = await callOperator(dataDir, 'status', {}, { timeoutMs: statusAnswerMs });
      return { journal, actions, read_from: 'broker' };
    } catch (error) {
      // A stopped (SIGSTOP) or wedged broker still holds the lock: say so, and read the file instead.
      brokerSilent = isCodedError(error) ? `${error.code}: ${error.message}` : String(error);
    }
  }
  const { readDataDirStatus } = await import('../host/data-dir-status.js');
  const { journal, actions, journal_file } = await readDataDirStatus(dataDir);
  const { vaultFileName } = await import('../vault/vault-store.js');
  // No file: never opened here ("none"), or once used — the lock file or the vault says so — and the journal is gone.
  const usedBy = journal_file
    ? undefined
    : [brokerLockFileName, vaultFileName].find((f) => existsSync(path.join(dataDir, f)));
  // `--json`'s journal section keeps the broker's status schema (closed): journal_file and used_by say the rest.
  const state = answer === false && holder === undefined ? journal.state : 'unknown';
  return {
    journal: { ...journal, state },
    actions,
    read_from: 'file',
    journal_file,
    ...(usedBy === undefined ? {} : { used_by: usedBy }),
    ...(brokerSilent === undefined ? {} : { broker_silent: brokerSilent }),
    ...(holder === undefined ? {} : { lock_holder: holder }),
  };
}

/**
 * The process the kernel's lock table shows holding the data directory's exclusive flock (data-dir-lock.ts), read
 * only: status never takes the lock, so it cannot make a starting broker fail. Linux only (/proc/locks); elsewhere, or
 * with the table unreadable, undefined, and status says what the control socket says.
 */
function lockHolderPid(dataDir: string): number | undefined {
  if (process.platform !== 'linux') return undefined;
  try {
    return dataDirLockHolder(dataDir)?.pid;
  } catch {
    return undefined;
  }
}

/**
 * Whether a broker serves this data directory: its control socket accepts a connection from the process that holds
 * the data directory's lock (control-listener.ts: nothing is written). A connection is harmless, and a socket file
 * left by a crash refuses. Another process listening there: the refusal's words (the CLI would send it nothing).
 */
function brokerAnswers(dataDir: string): Promise<boolean | string> {
  return new Promise((resolve) => {
    const socket = connect(controlSocketPath(dataDir));
    socket.once('connect', () => {
      try {
        verifyControlListener(socket, dataDir);
        resolve(true);
      } catch (error) {
        resolve(error instanceof Error ? error.message : String(error));
      } finally {
        socket.destroy();
      }
    });
    socket.once('error', () => resolve(false));
  });
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

function isDirectory(target: string): boolean {
  try {
    return statSync(target).isDirectory();
  } catch {
    return false;
  }
}
