import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** A stop for the walk up: the package root is a few levels above this file, never more. */
const levelsMax = 8;

/**
 * The checkout (or installed package) root: the nearest directory above this module holding
 * Postern's package.json. Found by walking up rather than by a fixed `../../` because this module
 * runs from two places: broker/host/package-root.ts (tsx, vitest) and the bundle
 * dist/cli/main.mjs (scripts/build-cli.mjs), whose import.meta.url is the bundle's.
 */
function findPackageRoot(): string {
  const here = path.dirname(fileURLToPath(import.meta.url));
  let dir = here;
  for (let level = 0; level < levelsMax; level++) {
    const manifest = path.join(dir, 'package.json');
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: unknown }).name === 'postern')
      return dir;
    const parent = path.dirname(dir);
    if (parent === dir) break;
    dir = parent;
  }
  throw new Error(`postern: no package.json of postern above ${here}`);
}

export const packageRoot = findPackageRoot();

export function packageVersion(): string {
  const manifest = JSON.parse(readFileSync(path.join(packageRoot, 'package.json'), 'utf8')) as { version?: unknown };
  return typeof manifest.version === 'string' ? manifest.version : '0.0.0';
}
