#!/usr/bin/env -S node --inspect-port=192.0.2.1:9229
// The `postern` command (also the MCP shim: MCP clients launch `postern mcp` and give up on a slow
// start). It runs dist/cli/main.mjs, the esbuild bundle of broker/cli/main.ts that `npm run build`,
// `npm start` and `npm test` write (scripts/build-cli.mjs), when that bundle is fresh: its stamp
// lists every source file it was built from, and none may be missing, changed in size, or modified
// since the build started with other content than the build read. Otherwise (no build yet, or a
// developer edited a .ts file) it runs the TypeScript sources through tsx as before, so a checkout
// needs no build step and never runs a stale bundle. The check is one small JSON read and one stat per source file (~300): a
// few ms; in an installed package, whose files npm dated at the install, a digest of each (~10 ms).
// POSTERN_LAUNCH_TRACE=1 says on stderr which one ran and why.
import { createHash } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

// The shebang's option parks node's inspector on an address nothing local can reach (broker/core/inspector-port.ts), so
// `kill -USR1` opens no door even before this line. Then, before anything slow, a SIGUSR1 listener: node's own handler
// never runs again. broker/host/inspector-guard.ts takes over from it, with the count of refusals so far.
const earlyRefusals = { refused: 0, listener: () => (earlyRefusals.refused += 1) };
globalThis[Symbol.for('postern.earlyInspectorSignals')] = earlyRefusals;
process.on('SIGUSR1', earlyRefusals.listener);

const root = fileURLToPath(new URL('..', import.meta.url));
const bundleDir = path.join(root, 'dist', 'cli');

/** @returns {{ bundle: string } | { stale: string }} */
function freshBundle() {
  let stamp;
  try {
    stamp = JSON.parse(readFileSync(path.join(bundleDir, 'stamp.json'), 'utf8'));
  } catch {
    return { stale: 'no build (dist/cli/stamp.json)' };
  }
  const { builtAtMs, entry, inputs, digests } = stamp ?? {};
  const wellFormed = typeof builtAtMs === 'number' && typeof entry === 'string' && path.basename(entry) === entry;
  const isMap = (/** @type {unknown} */ value) => typeof value === 'object' && value !== null;
  if (!wellFormed || !isMap(inputs) || !isMap(digests)) {
    return { stale: 'dist/cli/stamp.json is not a stamp of scripts/build-cli.mjs' };
  }
  for (const [file, bytes] of Object.entries(inputs)) {
    const at = path.resolve(root, file);
    let stat;
    try {
      stat = statSync(at, { throwIfNoEntry: false });
    } catch {
      return { stale: `${file} cannot be read` };
    }
    if (stat === undefined) return { stale: `${file} is gone` };
    if (stat.size !== bytes) return { stale: `${file} changed since the build` };
    // Saved since the build started: unchanged only if its content is what the build read. npm gives every file of a
    // package it installs the time of the install, so an installed copy takes this path for every file (~10 ms).
    if (stat.mtimeMs >= builtAtMs && digests[file] !== createHash('sha256').update(readFileSync(at)).digest('hex')) {
      return { stale: `${file} changed since the build` };
    }
  }
  return { bundle: path.join(bundleDir, entry) };
}

const choice = freshBundle();
const trace = process.env['POSTERN_LAUNCH_TRACE'] === '1';
if ('bundle' in choice) {
  if (trace) process.stderr.write(`postern: running the bundle ${choice.bundle}\n`);
  // Source maps are not switched on here: reading the 1.6 MB map costs every start ~35 ms (MCP
  // clients wait on that). For stack traces that name the .ts lines: NODE_OPTIONS=--enable-source-maps.
  await import(pathToFileURL(choice.bundle).href);
} else {
  if (trace) process.stderr.write(`postern: running the sources through tsx: ${choice.stale}\n`);
  // tsx is told which tsconfig to use: by default it reads the one in the CURRENT directory, which
  // for an installed `postern` started by an MCP client is some other project's, whose settings
  // (decorators, class fields, JSX) must not change how Postern's own code is compiled.
  const { register } = await import('tsx/esm/api');
  register({ tsconfig: path.join(root, 'tsconfig.base.json') });
  await import('../broker/cli/main.ts');
}
