import { existsSync, statSync } from 'node:fs';
import { connect } from 'node:net';
import path from 'node:path';
import type { Command } from 'commander';
import { isCodedError } from '../contract/coded-error.js';
import { controlSocketPath } from '../host/control-socket-path.js';
import { dataDirLockHolder, verifyControlListener } from '../host/control-listener.js';
import { brokerLockFileName } from '../host/data-dir-lock.js';
import { vaultFileName } from '../vault/vault-file-name.js';
import type { CliIo } from './cli-io.js';
import { exitCode } from './cli-program.js';
import { resolveFromOptions, withDataDir, type CommandContext, type CommonOptions } from './command-context.js';
import { statusLines, type JournalReport } from './status-text.js';

interface StatusOptions extends CommonOptions {
  json?: boolean;
}

/**
 * `postern status [--json]`. Its own module, registered by program.ts with every command and by status-main.ts alone
 * (main.ts sends `status` there): what it needs loads when it needs it — the operator client once a broker answers,
 * the journal once there is a journal file — so a look at a data directory starts fast (issue 18: cold start).
 */
export function registerStatusCommand(program: Command, { env, io, setResult }: CommandContext): void {
  withDataDir(program.command('status').description("Print the data directory's journal and action counts."))
    .option('--json', 'print one JSON object instead of text')
    .action(async (options: StatusOptions) => {
      setResult(await printStatus(resolveFromOptions(options, env), options.json === true, io));
    });
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
    // Loaded only for a broker that answers; outside the try, so a module that fails to load is not a silent broker.
    const { callOperator } = await import('./operator-commands.js');
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

function isDirectory(target: string): boolean {
  try {
    return statSync(target).isDirectory();
  } catch {
    return false;
  }
}
