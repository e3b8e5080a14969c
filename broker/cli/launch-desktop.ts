import { spawn } from 'node:child_process';
import { CodedError } from '../contract/coded-error.js';
import { inspectorPortParked } from '../core/inspector-port.js';
import type { CliIo } from './cli-io.js';
import type { Env } from './command-context.js';

export interface DesktopLaunch {
  electronPath: string;
  packageRoot: string;
  dataDir: string;
  io: CliIo;
  /** The CLI's environment: Electron starts with it (and POSTERN_DATA_DIR). */
  env: Env;
  /** Which of `start`'s headless-only options (headlessOnlyOptions) the command line gave. */
  given?: readonly HeadlessOnlyOption[];
}

/**
 * `start`'s options that only the headless broker reads: the desktop app takes its data directory and nothing else
 * (its operator UI is its window, its vault is unlocked there, its configuration is the data directory's).
 */
export const headlessOnlyOptions = ['--port', '--passphrase-file', '--config'] as const;
export type HeadlessOnlyOption = (typeof headlessOnlyOptions)[number];

/**
 * Runs the Electron shell (package.json "main" → dist/app/main.mjs) and mirrors its exit code.
 * The data directory was resolved and created here; Electron gets it through POSTERN_DATA_DIR so
 * both processes agree on it. Signals to this process are passed on so Ctrl-C closes the window.
 */
export function launchDesktop(launch: DesktopLaunch): Promise<number> {
  const [first, ...more] = launch.given ?? [];
  // Refused, not dropped: a --config the window silently ignored would run another configuration than the one named.
  if (first !== undefined)
    throw new CodedError(
      'INVALID_ARGUMENT',
      `the desktop app does not take ${[first, ...more].join(', ')} (only the headless broker does): ` +
        `run \`postern daemon\` with ${more.length === 0 ? 'it' : 'them'}, or \`postern start\` without`,
      { field: first },
    );
  // Said, not refused: the variable may be set for the CLI's own `vault unlock`, and the window asks for the
  // passphrase itself. Dropped from Electron's environment so no part of the app can read the file later.
  if ((launch.env['POSTERN_PASSPHRASE_FILE'] ?? '') !== '')
    launch.io.err(
      'warning: POSTERN_PASSPHRASE_FILE is set, but the desktop app does not read it (only `postern daemon` and a ' +
        'headless `postern start` do): the vault starts locked; unlock it in the window.',
    );
  const env: NodeJS.ProcessEnv = { ...launch.env, POSTERN_DATA_DIR: launch.dataDir };
  delete env['POSTERN_PASSPHRASE_FILE'];
  // Set by some tools; it would make the binary behave as plain Node and ignore the app.
  delete env['ELECTRON_RUN_AS_NODE'];
  // Parked like every Postern process (broker/core/inspector-port.ts): a developer build's main honours SIGUSR1 until
  // its first import holds the signal. A packaged build refuses the switch; its nodeCliInspect fuse ignores SIGUSR1.
  const child = spawn(launch.electronPath, [inspectorPortParked, launch.packageRoot], { stdio: 'inherit', env });
  const forward = (signal: NodeJS.Signals): void => {
    child.kill(signal);
  };
  process.on('SIGINT', forward);
  process.on('SIGTERM', forward);
  const stopForwarding = (): void => {
    process.off('SIGINT', forward);
    process.off('SIGTERM', forward);
  };
  return new Promise((resolve) => {
    child.once('error', (error) => {
      stopForwarding();
      launch.io.err(`postern: could not start Electron at ${launch.electronPath}: ${error.message}`);
      resolve(1);
    });
    child.once('exit', (code, signal) => {
      stopForwarding();
      resolve(code ?? (signal === null ? 1 : 128 + signalNumber(signal)));
    });
  });
}

function signalNumber(signal: NodeJS.Signals): number {
  return signal === 'SIGINT' ? 2 : signal === 'SIGTERM' ? 15 : 1;
}
