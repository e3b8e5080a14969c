import { spawn } from 'node:child_process';
import { posternBin, repoRoot } from './postern-process.js';

/** A person at a terminal is done in well under this (one node start, one Argon2id at the test cost). */
const terminalRunMs = 30_000;

export interface TerminalRun {
  code: number | null;
  /** Everything the terminal showed (prompts, output, errors; the typed passphrase is never echoed). */
  screen: string;
  /** Whether the passphrase prompt appeared (and so was answered). */
  prompted: boolean;
}

/**
 * Runs `postern ARGV` as a person would: inside a pseudo-terminal (util-linux `script`, which makes
 * the pty the command's controlling terminal), waits for the passphrase prompt on the screen, and
 * types `passphrase` then Enter. `script` runs in a new session of its own, so the terminal is the
 * only one the command has.
 */
export function runOnTerminal(
  argv: readonly string[],
  passphrase: string,
  env: Record<string, string> = {},
): Promise<TerminalRun> {
  const command = [process.execPath, posternBin, ...argv].map(shellQuote).join(' ');
  const child = spawn('script', ['-qec', command, '/dev/null'], {
    cwd: repoRoot,
    env: { ...process.env, ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
    detached: true,
  });
  let screen = '';
  let prompted = false;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(
        new Error(`postern ${argv.join(' ')} on a terminal did not finish within ${terminalRunMs} ms:\n${screen}`),
      );
    }, terminalRunMs);
    const read = (chunk: Buffer): void => {
      screen += chunk.toString('utf8');
      if (!prompted && /passphrase[^\n]*: $/i.test(screen)) {
        prompted = true;
        child.stdin.write(`${passphrase}\r`);
      }
    };
    child.stdout.on('data', read);
    child.stderr.on('data', read);
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      child.stdin.destroy();
      resolve({ code, screen, prompted });
    });
  });
}

function shellQuote(arg: string): string {
  return `'${arg.replaceAll("'", `'\\''`)}'`;
}
