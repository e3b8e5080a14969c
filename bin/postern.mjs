#!/usr/bin/env -S node --inspect-port=192.0.2.1:9229
// The `postern` command (also the MCP shim: MCP clients launch `postern mcp` and give up on a slow
// start). It runs dist/cli/main.mjs, the esbuild bundle of broker/cli/main.ts that `npm run build`,
// `npm start` and `npm test` write (scripts/build-cli.mjs), when that bundle is fresh: its stamp
// lists every source file it was built from, and none may be missing, changed in size, or modified
// since the build started with other content than the build read, and, in a checkout, no npm package
// built into it (zod, yaml, commander, the MCP SDK and what they import) may have another version
// installed where the build read it (an installed copy carries its own). Otherwise (no build yet, a developer edited a .ts file or upgraded a package)
// it runs the TypeScript sources through tsx as before, so a checkout needs no build step and never
// runs a stale bundle. The check is one small JSON read, one stat per source file (~340) and one
// package.json per built-in package (~13): ~10 ms here. A source whose time is later than the build (in an installed
// package npm dated every file at the install) is read and digested (~35 ms for all of them here) until a start has
// found it unchanged: dist/cli/checked.json (or, where the package is not this user's to write, a file in the user's
// cache) then holds its inode and ctime, and later starts compare those instead.
// POSTERN_LAUNCH_TRACE=1 says on stderr which one ran and why.
import { mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
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

/**
 * Where a start records the sources it found unchanged by their content (see below): beside the stamp
 * (scripts/build-cli.mjs removes it with the stamp it was made for), or where this user cannot write the package (a
 * system-wide install) in the user's cache, one file per package root.
 */
const checkedName = 'checked.json';
const checkedPlaces = () => {
  const beside = path.join(bundleDir, checkedName);
  let cache;
  try {
    cache = process.env['XDG_CACHE_HOME'] || path.join(homedir(), '.cache');
  } catch {
    // No home directory to be found (no HOME, no passwd entry): the package's directory only.
    return [beside];
  }
  return [beside, path.join(cache, 'postern', `launch-checked-${fnv1a(root)}.json`)];
};
/** A short name for a path (node:crypto costs a start ~5 ms to load); the record holds the root it was made for. */
const fnv1a = (/** @type {string} */ text) => {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return hash.toString(16).padStart(8, '0');
};
/**
 * A source is recorded only if its ctime is this much older than the start that read it, as git does with its index:
 * a save in the same clock tick as the read (file times come from a coarse clock), or on a file system whose clock is a
 * little off, must still change the ctime the next start compares.
 */
const recordMarginMs = 2_000;

/** @returns {Promise<{ bundle: string; digested: number } | { stale: string }>} */
async function freshBundle() {
  const startedMs = Date.now();
  // node:crypto loads only for a source whose time is later than the build (~5 ms of every start otherwise).
  /** @type {((data: Buffer) => string) | undefined} */
  let sha256;
  let stamp;
  try {
    stamp = JSON.parse(readFileSync(path.join(bundleDir, 'stamp.json'), 'utf8'));
  } catch {
    return { stale: 'no build (dist/cli/stamp.json)' };
  }
  const { builtAtMs, entry, inputs, digests, packages } = stamp ?? {};
  const wellFormed = typeof builtAtMs === 'number' && typeof entry === 'string' && path.basename(entry) === entry;
  const isMap = (/** @type {unknown} */ value) => typeof value === 'object' && value !== null;
  if (!wellFormed || !isMap(inputs) || !isMap(digests) || !isMap(packages)) {
    return { stale: 'dist/cli/stamp.json is not a stamp of scripts/build-cli.mjs' };
  }
  // Sources whose time is later than the build, whose content an earlier start found to be what the build read: each
  // with its inode and ctime then. A save, a rename over it, a `touch` or `cp -p` (which can set any mtime) all move the
  // ctime, which no program can set, so an unchanged pair means unchanged content. npm dates every file it installs,
  // so in an installed copy this spares every later start a digest of each source (~35 ms here).
  /** @type {Record<string, [number, number] | undefined> | undefined} read at the first such source */
  let checked;
  /** @type {Record<string, [number, number]>} */
  const nextChecked = {};
  let digested = 0;
  for (const [file, bytes] of Object.entries(inputs)) {
    // The stamp's paths are relative with `/`, the root ends in a separator: joined as they are (path.resolve costs
    // ~5 ms of a start over ~340 paths).
    const at = root + file;
    let stat;
    try {
      stat = statSync(at, { throwIfNoEntry: false });
    } catch {
      return { stale: `${file} cannot be read` };
    }
    if (stat === undefined) return { stale: `${file} is gone` };
    if (stat.size !== bytes) return { stale: `${file} changed since the build` };
    // Saved since the build started: unchanged only if its content is what the build read.
    if (stat.mtimeMs < builtAtMs) continue;
    checked ??= readChecked(builtAtMs);
    const was = checked[file];
    if (was === undefined || was[0] !== stat.ino || was[1] !== stat.ctimeMs) {
      if (sha256 === undefined) {
        const { createHash } = await import('node:crypto');
        sha256 = (data) => createHash('sha256').update(data).digest('hex');
      }
      if (digests[file] !== sha256(readFileSync(at))) return { stale: `${file} changed since the build` };
      digested += 1;
    }
    if (stat.ctimeMs < startedMs - recordMarginMs) nextChecked[file] = [stat.ino, stat.ctimeMs];
  }
  // The npm packages built into the bundle, in a checkout: another version installed where the build read them is an
  // upgrade the bundle does not have yet. An installed copy (its root inside a node_modules folder) carries its own:
  // whatever npm put beside it since (another patch release within the ranges, hoisted or not) is not what it runs.
  const installedCopy = root.split(path.sep).includes('node_modules');
  for (const [dir, version] of installedCopy ? [] : Object.entries(packages)) {
    let installed;
    try {
      installed = JSON.parse(readFileSync(root + dir + '/package.json', 'utf8')).version;
    } catch {
      continue;
    }
    if (installed !== version) return { stale: `${dir} is ${installed}, the bundle has ${version}` };
  }
  if (digested > 0) recordChecked(builtAtMs, nextChecked);
  return { bundle: path.join(bundleDir, entry), digested };
}

/** @returns {Record<string, [number, number] | undefined>} the first record made for this build of this root, or none */
function readChecked(/** @type {number} */ builtAtMs) {
  for (const file of checkedPlaces()) {
    let record;
    try {
      record = JSON.parse(readFileSync(file, 'utf8'));
    } catch {
      continue;
    }
    if (record?.root !== root || record.builtAtMs !== builtAtMs) continue;
    if (typeof record.sources !== 'object' || record.sources === null) continue;
    /** @type {Record<string, [number, number]>} */
    const sources = {};
    for (const [source, pair] of Object.entries(record.sources))
      if (Array.isArray(pair) && pair.length === 2 && pair.every((n) => typeof n === 'number')) sources[source] = pair;
    return sources;
  }
  return {};
}

/** Best effort, in the first place that takes it: where none does, every start digests the later-dated sources. */
function recordChecked(/** @type {number} */ builtAtMs, /** @type {Record<string, [number, number]>} */ sources) {
  const text = JSON.stringify({ root, builtAtMs, sources });
  for (const file of checkedPlaces()) {
    const temp = `${file}.${process.pid}.tmp`;
    try {
      mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
      writeFileSync(temp, text);
      renameSync(temp, file);
      return;
    } catch {
      try {
        rmSync(temp, { force: true });
      } catch {
        // A start never fails over its record; a stray temporary file beside it is read by nothing.
      }
    }
  }
}

const choice = await freshBundle();
const trace = process.env['POSTERN_LAUNCH_TRACE'] === '1';
if ('bundle' in choice) {
  if (trace) {
    const read = choice.digested > 0 ? ` (sources read for their content: ${choice.digested})` : '';
    process.stderr.write(`postern: running the bundle ${choice.bundle}${read}\n`);
  }
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
