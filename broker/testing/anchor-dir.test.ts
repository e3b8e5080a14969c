import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { removeDeadRunsAnchorDirs, testAnchorDirPrefix } from './anchor-dir.global-setup.js';

describe('the test run’s anchor directory (anchor-dir.global-setup.ts)', () => {
  it('is this run’s own directory under the temp folder, never the user’s state folder', () => {
    const dir = process.env['POSTERN_ANCHOR_DIR'];
    expect(dir).toBeDefined();
    expect(path.dirname(dir as string)).toBe(os.tmpdir());
    // Named with the run's pid, so the next run can tell a killed run's directory (removeDeadRunsAnchorDirs).
    expect(path.basename(dir as string).startsWith(testAnchorDirPrefix)).toBe(true);
    expect(path.basename(dir as string).slice(testAnchorDirPrefix.length)).toMatch(/^\d+-/);
    expect(existsSync(dir as string) && statSync(dir as string).isDirectory()).toBe(true);
  });

  it('removes the directories of killed runs (their pid is gone) and keeps a live run’s and any other', () => {
    const temp = mkdtempSync(path.join(os.tmpdir(), 'postern-anchor-sweep-'));
    try {
      // A child that has exited: its pid names a run that is gone (it is not reused within this test in practice;
      // if it were, the directory would stay and the first assertion would say so).
      const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']).stdout.toString();
      const names = [
        `${testAnchorDirPrefix}${dead}-aaaaaa`,
        `${testAnchorDirPrefix}${process.pid}-bbbbbb`,
        `${testAnchorDirPrefix}cccccc`,
        'postern-journal-dddddd',
      ];
      for (const name of names) mkdirSync(path.join(temp, name));
      writeFileSync(path.join(temp, names[0] as string, 'anchor'), 'x');
      expect(removeDeadRunsAnchorDirs(temp)).toEqual([names[0]]);
      expect(readdirSync(temp).sort()).toEqual(names.slice(1).sort());
    } finally {
      rmSync(temp, { recursive: true, force: true });
    }
  });
});
