#!/usr/bin/env node
// @ts-check
// Builds better-sqlite3 for Electron's ABI into its OWN folder, never touching node_modules (whose
// Node build `npm test`, the CLI and the daemon use):
//
//   dist/native-electron/better-sqlite3/build/Release/better_sqlite3.node   (+ build-info.json)
//
// The Electron main process points better-sqlite3's `nativeBinding` at it (app/main/sqlite-binding.ts,
// broker/journal/open-database.ts); electron-builder ships the folder as the extra resource
// `native-electron/`. How: copy the package's sources (no build/) to a staging folder, run
// @electron/rebuild on that copy, check the result is NOT loadable by this Node (an Electron-ABI
// build refuses to load here; a Node build would load — that is the failure STACK-NOTES saw when
// npm's `nodedir` pointed node-gyp at Node's headers), then move it into place.
//
// It needs Electron's headers, which node-gyp downloads (https://www.electronjs.org/headers) into
// ~/.electron-gyp/<version>. Where that host cannot be reached it fails with exit code 2 and says
// so; nothing is faked.
//
// Usage: node scripts/rebuild-electron-native.mjs [--outdir DIR] [--header-url URL]
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';

const root = path.resolve(import.meta.dirname, '..');
const require = createRequire(path.join(root, 'package.json'));
const { values } = parseArgs({
  options: {
    outdir: { type: 'string', default: path.join(root, 'dist', 'native-electron') },
    'header-url': { type: 'string', default: 'https://www.electronjs.org/headers' },
  },
});
const outdir = path.resolve(values.outdir);
const headerURL = values['header-url'];

const electronDir = path.dirname(require.resolve('electron/package.json'));
const electronVersion = readJson(path.join(electronDir, 'package.json')).version;
const electronAbi = readFileSync(path.join(electronDir, 'abi_version'), 'utf8').trim();
const sqliteDir = path.dirname(require.resolve('better-sqlite3/package.json'));
const sqliteVersion = readJson(path.join(sqliteDir, 'package.json')).version;
const headersDir = path.join(os.homedir(), '.electron-gyp', electronVersion);

const staging = path.join(outdir, '.staging', 'better-sqlite3');
const target = path.join(outdir, 'better-sqlite3', 'build', 'Release', 'better_sqlite3.node');

// npm exports its config (the machine's `nodedir`) as npm_config_* variables; node-gyp would then
// build against Node's headers and call the result an Electron build.
for (const name of Object.keys(process.env)) {
  if (/^npm_config_(nodedir|target|runtime|disturl|dist_url)$/i.test(name)) delete process.env[name];
}

rmSync(path.join(outdir, '.staging'), { recursive: true, force: true });
mkdirSync(staging, { recursive: true });
for (const entry of ['package.json', 'binding.gyp', 'src', 'deps', 'lib']) {
  cpSync(path.join(sqliteDir, entry), path.join(staging, entry), { recursive: true });
}

log(
  `building better-sqlite3 ${sqliteVersion} for Electron ${electronVersion} (ABI ${electronAbi}) in ${path.relative(root, staging)}`,
);
const { rebuild } = await import('@electron/rebuild');
try {
  await rebuild({
    buildPath: staging,
    projectRootPath: staging,
    electronVersion,
    onlyModules: ['better-sqlite3'],
    force: true,
    buildFromSource: true,
    mode: 'sequential',
    headerURL,
  });
} catch (error) {
  const haveHeaders = existsSync(path.join(headersDir, 'include', 'node', 'node_version.h'));
  if (!haveHeaders) {
    fail(
      2,
      [
        `Electron ${electronVersion}'s headers are not on this machine (${headersDir}) and could not be downloaded from ${headerURL}.`,
        'No Electron build of better-sqlite3 was made; node_modules was not touched.',
        'Run this on a machine that can reach that host, or put the headers for this exact Electron version in',
        `${headersDir} (node-gyp's layout: include/node/…), then run it again.`,
        `(${firstLine(error)})`,
      ].join('\n'),
    );
  }
  fail(1, `@electron/rebuild failed with Electron's headers present: ${firstLine(error)}`);
}

const built = path.join(staging, 'build', 'Release', 'better_sqlite3.node');
if (!existsSync(built)) fail(1, `@electron/rebuild reported success but ${built} does not exist`);
const abiCheck = checkNotNodeAbi(built);
if (abiCheck !== undefined) fail(1, abiCheck);

mkdirSync(path.dirname(target), { recursive: true });
renameSync(built, target);
writeFileSync(
  path.join(outdir, 'build-info.json'),
  `${JSON.stringify({ module: 'better-sqlite3', version: sqliteVersion, electron: electronVersion, abi: electronAbi, platform: process.platform, arch: process.arch }, null, 2)}\n`,
);
rmSync(path.join(outdir, '.staging'), { recursive: true, force: true });
log(`wrote ${path.relative(root, target)}`);

/**
 * An Electron-ABI addon must refuse to load in this Node with a module-version mismatch naming
 * Electron's ABI. If it loads, it was built against Node's headers.
 * @param {string} file
 * @returns {string | undefined}
 */
function checkNotNodeAbi(file) {
  const probe = spawnSync(process.execPath, ['-e', `process.dlopen({ exports: {} }, ${JSON.stringify(file)})`], {
    encoding: 'utf8',
  });
  if (probe.status === 0)
    return `${file} loads in Node ${process.version}: it was built against Node's headers, not Electron's`;
  if (!probe.stderr.includes(`NODE_MODULE_VERSION ${electronAbi}`)) {
    return `${file} does not load in Node, but not because of Electron's ABI ${electronAbi}:\n${probe.stderr.trim().split('\n').slice(0, 5).join('\n')}`;
  }
  return undefined;
}

/** @param {string} file @returns {{ version: string }} */
function readJson(file) {
  return JSON.parse(readFileSync(file, 'utf8'));
}

/** @param {unknown} error */
function firstLine(error) {
  return (error instanceof Error ? error.message : String(error)).split('\n')[0];
}

/** @param {string} line */
function log(line) {
  process.stdout.write(`rebuild-electron-native: ${line}\n`);
}

/** @param {number} code @param {string} message @returns {never} */
function fail(code, message) {
  rmSync(path.join(outdir, '.staging'), { recursive: true, force: true });
  if (existsSync(outdir) && readdirSync(outdir).length === 0) rmSync(outdir, { recursive: true, force: true });
  process.stderr.write(`rebuild-electron-native: ${message}\n`);
  process.exit(code);
}
