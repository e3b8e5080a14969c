import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** The prefix of each test run's anchor directory under the system's temp folder (anchor-dir.test.ts checks it). */
export const testAnchorDirPrefix = 'postern-test-anchors-';

/**
 * vitest globalSetup (vitest.config.ts, e2e/vitest.config.ts): the integrity anchors the daemons under test write go to
 * a directory of this run's own (`POSTERN_ANCHOR_DIR`, inherited by the test workers and every process they start),
 * never into the user's ~/.local/state, and it is removed when the run ends. One shared directory kept every anchor of
 * every run before: ~800 files a day of test runs, left in the temp folder.
 */
export default function setup(): () => void {
  const dir = mkdtempSync(path.join(os.tmpdir(), testAnchorDirPrefix));
  process.env['POSTERN_ANCHOR_DIR'] = dir;
  return () => rmSync(dir, { recursive: true, force: true });
}
