import { spawn } from 'node:child_process';
import type { CliIo } from './cli-io.js';

export interface DesktopLaunch {
  electronPath: string;
  packageRoot: string;
  dataDir: string;
  io: CliIo;
}

/**
 * Runs the Electron shell (package.json "main" → dist/app/main.mjs) and mirrors its exit code.
 * The data directory was resolved and created here; Electron gets it through POSTERN_DATA_DIR so
 * both processes agree on it. Signals to this process are passed on so Ctrl-C closes the window.
 */
export function launchDesktop(launch: DesktopLaunch): Promise<number> {
  const env: NodeJS.ProcessEnv = { ...process.env, POSTERN_DATA_DIR: launch.dataDir };
  // Set by some tools; it would make the binary behave as plain Node and ignore the app.
  delete env['ELECTRON_RUN_AS_NODE'];
  const child = spawn(launch.electronPath, [launch.packageRoot], { stdio: 'inherit', env });
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
