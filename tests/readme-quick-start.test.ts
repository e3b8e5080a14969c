import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { callOperator } from '../broker/cli/operator-commands.js';
import { loadConfig } from '../broker/config/index.js';
import { resolveRoutePolicy } from '../broker/core/index.js';
import { runOnTerminal } from './support/operator-terminal.js';
import { posternBin, repoRoot, startDaemon, type CommandRun } from './support/postern-process.js';

/**
 * The README's Quick start, line by line, as a person would type it in the checkout: each `npx postern …` line runs
 * the same command (through bin/postern.mjs, as npx does), with HOME a fresh folder. Where the README has a person
 * type something (the new passphrase, the passphrase that accepts the configuration), the test types it: the
 * passphrase through POSTERN_PASSPHRASE_FILE for init and add, a real pseudo-terminal for the acceptance. If a line is
 * added, renamed or broken, this test says which.
 */
const home = mkdtempSync(path.join(os.tmpdir(), 'poqs-'));
afterAll(() => rmSync(home, { recursive: true, force: true }));
const dataDir = path.join(home, '.postern');
const passphrase = 'quick start passphrase (test only)';
const passphraseFile = path.join(home, 'pass');
const token = 'CANARY-quick-start-token';

/** The lines of the first ```sh block under "## Quick start", without comments. */
function quickStartLines(): string[] {
  const readme = readFileSync(path.join(repoRoot, 'README.md'), 'utf8');
  const section = readme.split(/^## /m).find((part) => part.startsWith('Quick start'));
  if (section === undefined) throw new Error('README.md has no "## Quick start" section');
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1];
  if (block === undefined) throw new Error('the Quick start has no ```sh block');
  return block
    .split('\n')
    .map((line) => line.replace(/\s+#.*$/, '').trim())
    .filter((line) => line !== '');
}

it('the Quick start is at most ten lines, and each works in order', async () => {
  writeFileSync(passphraseFile, `${passphrase}\n`, { mode: 0o600 });
  writeFileSync(path.join(home, 'github-token.txt'), token);
  const lines = quickStartLines();
  expect(lines.length).toBeLessThanOrEqual(10);
  const env: Record<string, string> = { HOME: home, POSTERN_PASSPHRASE_FILE: passphraseFile };
  // `npx postern` runs this checkout's bin; the shell expands $POSTERN_DATA_DIR, ~ and < as it would for a person.
  const shell = (line: string) =>
    runShell(line.replaceAll('npx postern ', `'${process.execPath}' '${posternBin}' `), env);
  const seen: string[] = [];
  for (const line of lines) {
    if (line.startsWith('export POSTERN_DATA_DIR=')) {
      expect(line).toBe('export POSTERN_DATA_DIR="$HOME/.postern"');
      Object.assign(env, { POSTERN_DATA_DIR: dataDir });
    } else if (line === 'npx postern config pending') {
      const result = await shell(line);
      expect(result.code, result.stderr).toBe(0);
      const digest = /postern config accept (sha256:[0-9a-f]{64})/.exec(result.stdout)?.[1];
      expect(digest, result.stdout).toBeDefined();
      // What the README's comment asks the person to do next: accept it, proven by the passphrase typed here.
      const accepted = await runOnTerminal(['config', 'accept', String(digest)], passphrase, env);
      expect(accepted.code, accepted.screen).toBe(0);
    } else if (line === 'npx postern daemon') {
      const daemon = await startDaemon(dataDir, { env: { HOME: home } });
      try {
        expect(daemon.operatorUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/\?token=/);
        expect(await callOperator(dataDir, 'config.pending', {})).toMatchObject({ trust: 'unverified', change: null });
        // What the README promises of the example: reads need no card, writes do.
        expect((await callOperator(dataDir, 'config.show', {})).routes).toEqual([
          expect.objectContaining({ name: 'github', approval: 'per_call' }),
        ]);
        const route = loadConfig({ dataDir }).routes.get('github');
        if (route === undefined) throw new Error('no github route');
        expect(resolveRoutePolicy(route, 'GET', '/repos/o/r').approval).toBe('none');
        expect(resolveRoutePolicy(route, 'POST', '/repos/o/r/issues').approval).toBe('per_call');
      } finally {
        await daemon.process.stop('SIGTERM');
      }
    } else if (line.startsWith('npx postern agent-config ')) {
      const result = await shell(line);
      expect(result.code, result.stderr).toBe(0);
      expect(result.stdout).toContain(
        `claude mcp add postern -- ${process.execPath} --inspect-port=192.0.2.1:9229 ${posternBin} mcp --data-dir ${dataDir}`,
      );
    } else {
      const result = await shell(line);
      expect(result.code, `${line}\n${result.stderr}`).toBe(0);
    }
    seen.push(line.split(/\s+/).slice(0, 4).join(' '));
  }
  expect(seen).toEqual(
    expect.arrayContaining(['npx postern vault init', 'npx postern config pending', 'npx postern daemon']),
  );
  expect(readFileSync(path.join(dataDir, 'vault.sqlite')).includes(token)).toBe(false);
}, 120_000);

/** One line in `sh` in the checkout, detached (no terminal), bounded. */
function runShell(line: string, env: Record<string, string>): Promise<CommandRun> {
  return new Promise((resolve, reject) => {
    const child = spawn('sh', ['-c', line], {
      cwd: repoRoot,
      env: { ...process.env, ...env },
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const deadline = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${line} did not finish within 30 s\n${stdout}\n${stderr}`));
    }, 30_000);
    child.on('close', (code) => {
      clearTimeout(deadline);
      resolve({ code, stdout, stderr });
    });
  });
}
