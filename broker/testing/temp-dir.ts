import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TempDir {
  readonly path: string;
  /** Removes the directory and everything in it; safe to call twice. */
  remove(): void;
}

/**
 * A fresh data directory for one test (real files, no filesystem mocks). Callers remove it in
 * afterEach so a failed run does not leave journals behind.
 */
export function createTempDir(prefix = 'postern-'): TempDir {
  const path = mkdtempSync(join(tmpdir(), prefix));
  return {
    path,
    remove: () => rmSync(path, { recursive: true, force: true }),
  };
}
