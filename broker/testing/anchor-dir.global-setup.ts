import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { processExists } from '../ports/process-exists.js';

/** The prefix of each test run's anchor directory under the system's temp folder (anchor-dir.test.ts checks it). */
export const testAnchorDirPrefix = 'postern-test-anchors-';

/**
 * vitest globalSetup (vitest.config.ts, e2e/vitest.config.ts): the integrity anchors the daemons under test write go to
 * a directory of this run's own (`POSTERN_ANCHOR_DIR`, inherited by the test workers and every process they start),
 * never into the user's ~/.local/state, and it is removed when the run ends. One shared directory kept every anchor of
 * every run before: ~800 files a day of test runs, left in the temp folder. The directory's name carries the run's pid,
 * so a run that was killed (its teardown never ran) has its directory removed by the next run's setup.
 */
export default function setup(): () => void {
  removeDeadRunsAnchorDirs(os.tmpdir());
  const dir = mkdtempSync(path.join(os.tmpdir(), `${testAnchorDirPrefix}${process.pid}-`));
  process.env['POSTERN_ANCHOR_DIR'] = dir;
  return () => rmSync(dir, { recursive: true, force: true });
}

/**
 * Removes the anchor directories of runs whose process is gone. One whose pid is alive stays (another run, or, after
 * pid reuse, an unrelated process: left for a later run), as does one whose name carries no pid.
 */
export function removeDeadRunsAnchorDirs(tempDir: string): string[] {
  const removed: string[] = [];
  for (const name of readdirSync(tempDir)) {
    const pid = runPidOf(name);
    if (pid === undefined || processExists(pid)) continue;
    rmSync(path.join(tempDir, name), { recursive: true, force: true });
    removed.push(name);
  }
  return removed;
}

function runPidOf(name: string): number | undefined {
  if (!name.startsWith(testAnchorDirPrefix)) return undefined;
  const match = /^(\d{1,10})-/.exec(name.slice(testAnchorDirPrefix.length));
  return match === null ? undefined : Number(match[1]);
}
