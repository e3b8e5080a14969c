import { existsSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { testAnchorDirPrefix } from './anchor-dir.global-setup.js';

describe('the test run’s anchor directory (anchor-dir.global-setup.ts)', () => {
  it('is this run’s own directory under the temp folder, never the user’s state folder', () => {
    const dir = process.env['POSTERN_ANCHOR_DIR'];
    expect(dir).toBeDefined();
    expect(path.dirname(dir as string)).toBe(os.tmpdir());
    expect(path.basename(dir as string).startsWith(testAnchorDirPrefix)).toBe(true);
    expect(existsSync(dir as string) && statSync(dir as string).isDirectory()).toBe(true);
  });
});
