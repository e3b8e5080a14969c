import { execFile } from 'node:child_process';
import { copyFileSync, cpSync, mkdirSync, readFileSync, symlinkSync, utimesSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { createTempDir, type TempDir } from './temp-dir.js';

/** The checkout this file is in (broker/testing's grandparent). */
const repoRoot = path.resolve(import.meta.dirname, '..', '..');

export interface CliPackageRoot {
  readonly root: string;
  /** The copied bin/postern.mjs: it decides between the bundle and tsx relative to `root`. */
  readonly bin: string;
  /** dist/cli/main.mjs, when built. */
  readonly bundle: string;
  readonly stamp: string;
  /** dist/cli/checked.json: the bin's record of sources later than the build that it found unchanged. */
  readonly checked: string;
  /**
   * Dates every source the stamp lists now, as npm dates each file it installs (later than the build in the package);
   * done once at the start for an installed copy.
   */
  redateSources(): void;
  remove(): void;
}

/**
 * A throwaway copy of the package layout for the `postern` launcher: bin/postern.mjs, the build
 * script and broker/ copied (each resolves paths relative to itself), node_modules, package.json and
 * the tsconfig linked, and, when asked, the CLI bundle built into its dist/cli. The sources are a
 * snapshot, not links: in a checkout where people edit broker/ the real bundle goes stale at any
 * moment (as it should), and tests and the bench must not depend on that. They can then build,
 * stamp and age a bundle (and touch its sources) without touching the checkout. One helper for both
 * (tests/cli-bundle.test.ts, bench/cli-start.ts): the bench's own copy of it once missed a file the
 * build came to need (scripts/writer-worker-plugin.mjs), and its cold-start table stopped running.
 * `installed`: the package's root is `node_modules/postern` inside the temp folder, and its sources are dated after the
 * build, as an install by npm leaves them.
 */
export async function makeCliPackageRoot(options: { bundle: boolean; installed?: boolean }): Promise<CliPackageRoot> {
  const dir = createTempDir('postern-cli-root-');
  try {
    return await copyPackage(dir, options);
  } catch (error) {
    // A build that fails (or a copy) leaves nothing behind: the caller never gets the copy to remove.
    dir.remove();
    throw error;
  }
}

async function copyPackage(dir: TempDir, options: { bundle: boolean; installed?: boolean }): Promise<CliPackageRoot> {
  // Installed: the package's root inside a node_modules folder, where the bin trusts the packages beside it.
  const root = options.installed === true ? path.join(dir.path, 'node_modules', 'postern') : dir.path;
  for (const file of [
    'bin/postern.mjs',
    'scripts/build-cli.mjs',
    'scripts/writer-worker-plugin.mjs',
    'scripts/inline-packages-plugin.mjs',
    'scripts/vendor-script-plugin.mjs',
  ]) {
    mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
    copyFileSync(path.join(repoRoot, file), path.join(root, file));
  }
  cpSync(path.join(repoRoot, 'broker'), path.join(root, 'broker'), { recursive: true });
  for (const entry of ['node_modules', 'package.json', 'tsconfig.base.json']) {
    symlinkSync(path.join(repoRoot, entry), path.join(root, entry));
  }
  const outdir = path.join(root, 'dist', 'cli');
  if (options.bundle)
    await promisify(execFile)(process.execPath, [path.join(root, 'scripts', 'build-cli.mjs')], { cwd: root });
  const redateSources = (): void => {
    const stamp = JSON.parse(readFileSync(path.join(outdir, 'stamp.json'), 'utf8')) as { inputs: object };
    const now = new Date();
    for (const file of Object.keys(stamp.inputs)) utimesSync(path.join(root, file), now, now);
  };
  if (options.bundle && options.installed === true) redateSources();
  return {
    root,
    bin: path.join(root, 'bin', 'postern.mjs'),
    bundle: path.join(outdir, 'main.mjs'),
    stamp: path.join(outdir, 'stamp.json'),
    checked: path.join(outdir, 'checked.json'),
    redateSources,
    remove: dir.remove,
  };
}
