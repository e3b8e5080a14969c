import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { posternBin, repoRoot } from './support/postern-process.js';

/**
 * Issue 14: `postern daemon` started on a full disk says so in one coded line (JOURNAL_UNAVAILABLE
 * naming SQLite's or the file system's code) and exits non-zero, never a stack trace. The disk is
 * real: a 1 MiB tmpfs in a private mount namespace (as broker/journal/fail-closed.test.ts does),
 * filled up before the daemon starts; it vanishes with the namespace.
 */
const canMountTmpfs =
  process.platform === 'linux' && spawnSync('unshare', ['--mount', '--propagation', 'private', 'true']).status === 0;
const scratch = mkdtempSync(path.join(os.tmpdir(), 'pfull-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
const exitWithinMs = 30_000;

/** A journal written while there was room: the start then meets a full disk with recovery to run. */
const makeJournal = [
  `import { Journal } from ${JSON.stringify(path.join(repoRoot, 'broker/journal/index.ts'))};`,
  `import { systemClock } from ${JSON.stringify(path.join(repoRoot, 'broker/ports/index.ts'))};`,
  'await (await Journal.open({ dataDir: process.argv[1], clock: systemClock })).close();',
].join(' ');

function startOnFullDisk(
  dir: string,
  withJournal: boolean,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const script = [
    'set -e',
    'mount -t tmpfs -o size=1m tmpfs "$1"',
    'mkdir -m 700 "$1/data"',
    withJournal ? '"$2" --import tsx --input-type=module -e "$4" "$1/data"' : 'true',
    // Fill what is left; head stops at ENOSPC, which is the point.
    'head -c 4194304 /dev/zero > "$1/fill" 2>/dev/null || true',
    'exec "$2" "$3" daemon --data-dir "$1/data" --port 0',
  ].join('\n');
  return new Promise((resolve, reject) => {
    const child = spawn(
      'unshare',
      ['--mount', '--propagation', 'private', 'sh', '-c', script, 'sh', dir, process.execPath, posternBin, makeJournal],
      {
        cwd: repoRoot,
        env: { ...process.env, POSTERN_TEST_EVENTS: '1' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the daemon on a full disk did not exit within ${exitWithinMs} ms:\n${stdout}\n${stderr}`));
    }, exitWithinMs);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe('when the daemon starts on a full disk', () => {
  it.for<[string, boolean]>([
    ['a new data directory', false],
    ['an existing journal', true],
  ])(
    '%s: one coded JOURNAL_UNAVAILABLE line, no stack trace, exit 1, never ready',
    { timeout: 60_000 },
    async ([, withJournal], ctx) => {
      if (!canMountTmpfs)
        ctx.skip('needs Linux and the right to unshare a mount namespace (root) to mount a tiny tmpfs');
      const dir = mkdtempSync(path.join(scratch, 'disk-'));
      const run = await startOnFullDisk(dir, withJournal);
      expect(run.code, run.stderr).toBe(1);
      const lines = run.stderr.trim().split('\n');
      expect(lines, run.stderr).toHaveLength(1);
      expect(lines[0]).toMatch(
        /^postern: JOURNAL_UNAVAILABLE: the journal could not be opened \((SQLITE_[A-Z_]+|ENOSPC)\b/,
      );
      expect(run.stderr).not.toMatch(/\n\s+at /);
      expect(run.stdout).not.toContain('"event":"ready"');
    },
  );
});
