#!/usr/bin/env node
// @ts-check
// Bundles the `postern` CLI (broker/cli/main.ts, which is also the MCP shim) into dist/cli/main.mjs, so
// `postern …` starts without transpiling TypeScript through tsx (issue 16: MCP clients time out on a
// slow `postern mcp`). ESM for node20. A few pure-JavaScript packages are built in (zod, yaml, commander, the MCP SDK,
// and what they import: scripts/inline-packages-plugin.mjs says which and why); every other npm package stays
// external: native addons (better-sqlite3, postern-peercred, ssh2's cpu-features), libsodium's wasm, pino, undici.
// zod and yaml, and commander, are built in as classic scripts beside the chunks, which node:vm runs with a V8 code cache
// that this build writes by running `config pending` once (scripts/vendor-script-plugin.mjs, broker/cli/vendor-script.ts).
//
// Beside the bundle, stamp.json lists every source file of Postern's esbuild read (paths relative to the package
// root, with their sizes and content digests), the version of each npm package built in, and the time the build
// started. bin/postern.mjs runs the bundle only while no listed file is missing, changed in size, or modified since
// then with other content, and (in a checkout) no built-in package has another version installed where the build found it;
// otherwise it falls back to tsx, so an edited .ts file (or an upgraded package) is never run from a stale bundle.
// bundle-map.json says what each output file imports statically and which npm packages it holds (esbuild's metafile,
// for tests/cli-bundle.test.ts: what a command loads).
// The stamp is written last and removed first, and each file is replaced by a rename, so a `postern`
// started during a rebuild sees either the complete old bundle, the complete new one, or no stamp (tsx).
//
// Usage: node scripts/build-cli.mjs [--outdir DIR] [--quiet]   (DIR must be inside the package,
// below its root like dist/cli, for node_modules and the package root to be found from it)
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { build } from 'esbuild';
import {
  inlinedPackages,
  inlinePackagesPlugin,
  installedPackageDir,
  packageOf,
  requireBanner,
} from './inline-packages-plugin.mjs';
import {
  buildVendorScript,
  vendorGroups,
  vendorNamespace,
  vendorShimPlugin,
  warmVendorCaches,
} from './vendor-script-plugin.mjs';
import { writerWorkerPlugin } from './writer-worker-plugin.mjs';

const root = path.resolve(import.meta.dirname, '..');
export const defaultOutdir = path.join(root, 'dist', 'cli');
export const bundleName = 'main.mjs';
export const stampName = 'stamp.json';
export const bundleMapName = 'bundle-map.json';
export const chunkDirName = 'chunks';
export const checkedName = 'checked.json';

/**
 * @typedef {{
 *   builtAtMs: number;
 *   entry: string;
 *   inputs: Record<string, number>;
 *   digests: Record<string, string>;
 *   packages: Record<string, string>;
 * }} CliStamp
 *   inputs: source path relative to the package root → its size in bytes when it was bundled
 *   digests: source path → sha256 (hex) of its content, for each source not modified since the build started (so the
 *     content esbuild read): a source whose time is later but whose content is this is unchanged (npm sets every file's
 *     time to the moment it extracts the package)
 *   packages: each npm package built in, as the directory it was read from (`node_modules/zod`, from the first
 *     node_modules) → the version its package.json stated
 */

/**
 * How a Node-side entry of Postern is compiled into what ships: one ESM bundle for node20, compiled with Postern's
 * own tsconfig, the packages of inline-packages-plugin.mjs built in and every other npm package external. No
 * keepNames (tsx's default, which wraps each closure created at run time in a defineProperty call) and no source maps
 * at run time (bin/postern.mjs does not switch them on). The durable bench (bench/durable.ts) bundles its executor
 * with the same options, so it measures this code, not tsx's.
 * @type {import('esbuild').BuildOptions}
 */
export const nodeBundleOptions = {
  absWorkingDir: root,
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  // tsx compiles with Postern's own tsconfig; the bundle must be compiled the same way.
  tsconfig: path.join(root, 'tsconfig.base.json'),
  // The journal's writer thread runs a script built from the sources: in a bundle, built at bundle time.
  plugins: [writerWorkerPlugin(), inlinePackagesPlugin(inlinedPackages)],
  banner: { js: requireBanner },
  // Whitespace and syntax only (names stay: stack traces and errors keep them): ~12 ms less to read and compile at a
  // cold start here (config pending after an edit). Source maps are beside the bundle (NODE_OPTIONS=--enable-source-maps).
  minifyWhitespace: true,
  minifySyntax: true,
};

/**
 * Builds the CLI bundle into `outdir` and returns its stamp.
 * @param {{ outdir?: string }} [options]
 * @returns {Promise<CliStamp>}
 */
export async function buildCli(options = {}) {
  const outdir = path.resolve(options.outdir ?? defaultOutdir);
  // Taken before esbuild reads anything: a file saved while the build runs is newer than the stamp.
  const builtAtMs = Date.now();
  /** @type {Record<string, { bytes: number }>} */
  let writerInputs = {};
  // zod and yaml, and commander: classic scripts with a code cache, which the bundle's modules import through shims
  // (first, so the shims take those specifiers before they are built in as modules).
  const minify = { minifyWhitespace: nodeBundleOptions.minifyWhitespace, minifySyntax: nodeBundleOptions.minifySyntax };
  const vendors = await Promise.all(
    vendorGroups.map((group) => buildVendorScript(root, path.join(outdir, chunkDirName), minify, group)),
  );
  const result = await build({
    ...nodeBundleOptions,
    plugins: [
      vendorShimPlugin(root, vendors),
      writerWorkerPlugin((inputs) => (writerInputs = inputs)),
      inlinePackagesPlugin(inlinedPackages),
    ],
    entryPoints: { main: path.join(root, 'broker', 'cli', 'main.ts') },
    outdir,
    // Code behind a dynamic import() goes into its own chunk with its own imports, so `postern mcp` or
    // `--version` never load what only the daemon needs (the MCP server SDK, undici, ssh2, libsodium).
    splitting: true,
    entryNames: '[name]',
    chunkNames: `${chunkDirName}/[name]-[hash]`,
    outExtension: { '.js': '.mjs' },
    sourcemap: 'linked',
    metafile: true,
    write: false,
    logLevel: 'warning',
  });
  /** @type {Record<string, number>} */
  const inputs = {};
  /** @type {Record<string, string>} */
  const digests = {};
  /** @type {Record<string, string>} */
  const packages = {};
  // The writer thread's script is bundled inside the bundle (writer-worker-plugin.mjs): its sources count too. Sizes
  // are the files' on disk, which bin/postern.mjs compares: a module a plugin replaced (writer-worker-source.ts) is
  // recorded by esbuild with the size of what replaced it. An npm package built in counts by its version, not file by
  // file (where npm puts it at an install is npm's choice).
  for (const file of [
    ...new Set([
      ...Object.keys({ ...writerInputs, ...result.metafile.inputs }),
      ...vendors.flatMap((vendor) => vendor.inputs),
    ]),
  ]) {
    // The shims are modules of the plugin's, not files.
    if (file.startsWith(`${vendorNamespace}:`)) continue;
    const packageDir = installedPackageDir(file);
    if (packageDir !== undefined) {
      // A package built in: its version, read from where esbuild found it (a linked node_modules included).
      const manifest = path.join(root, file.slice(0, file.lastIndexOf(packageDir) + packageDir.length), 'package.json');
      packages[packageDir] ??= String(JSON.parse(readFileSync(manifest, 'utf8')).version);
      continue;
    }
    const at = path.join(root, file);
    const { size, mtimeMs } = statSync(at);
    inputs[file] = size;
    // A file saved while the build ran may not be what esbuild read: no digest, so only its time can vouch for it. Nor
    // one saved while it is read here (its time moved).
    if (mtimeMs >= builtAtMs) continue;
    const digest = createHash('sha256').update(readFileSync(at)).digest('hex');
    if (statSync(at).mtimeMs === mtimeMs) digests[file] = digest;
  }
  /** @type {CliStamp} */
  const stamp = { builtAtMs, entry: bundleName, inputs, digests, packages };
  const fromOutdir = (/** @type {string} */ output) =>
    path.relative(outdir, path.resolve(root, output)).split(path.sep).join('/');
  /**
   * @type {Record<string, { imports: string[]; packages: string[] }>} output file (relative to outdir) → what it
   *   imports statically (other outputs relative to outdir, npm packages and node builtins by specifier) and the npm
   *   packages built into it
   */
  const bundleMap = {};
  for (const [output, meta] of Object.entries(result.metafile.outputs)) {
    if (output.endsWith('.map')) continue;
    const imports = meta.imports
      .filter((entry) => entry.kind === 'import-statement')
      .map((entry) => (entry.external === true ? entry.path : fromOutdir(entry.path)));
    // A shim counts as every package of its script held: what loads it runs the whole script.
    const held = new Set(
      Object.keys(meta.inputs).flatMap((file) => {
        if (!file.startsWith(`${vendorNamespace}:`)) return installedPackageDir(file) ?? [];
        const specifier = file.slice(vendorNamespace.length + 1);
        const script = vendors.find((vendor) => Object.hasOwn(vendor.exportNames, specifier));
        return (script?.packages ?? [packageOf(specifier)]).map((name) => `node_modules/${name}`);
      }),
    );
    bundleMap[fromOutdir(output)] = { imports: [...new Set(imports)].sort(), packages: [...held].sort() };
  }

  const stampPath = path.join(outdir, stampName);
  mkdirSync(outdir, { recursive: true });
  rmSync(stampPath, { force: true });
  // bin/postern.mjs's record of sources it found unchanged names the old stamp's build: it goes with it.
  rmSync(path.join(outdir, checkedName), { force: true });
  mkdirSync(path.join(outdir, chunkDirName), { recursive: true });
  // Chunks first (content-hashed names, so an old main.mjs still finds its own), the entry last but one, the stamp last.
  const outputs = [...result.outputFiles].sort(
    (a, b) => Number(path.basename(a.path).startsWith('main.')) - Number(path.basename(b.path).startsWith('main.')),
  );
  const vendorFiles = [];
  for (const vendor of vendors) {
    const file = path.join(outdir, chunkDirName, vendor.name);
    replaceFile(file, vendor.code);
    replaceFile(`${file}.map`, vendor.map);
    vendorFiles.push(file);
  }
  for (const output of outputs) replaceFile(output.path, output.contents);
  replaceFile(path.join(outdir, bundleMapName), `${JSON.stringify(bundleMap, null, 1)}\n`);
  replaceFile(stampPath, `${JSON.stringify(stamp, null, 1)}\n`);
  // Chunks no current output names are an earlier build's: gone once the new stamp stands.
  const current = new Set(outputs.map((output) => path.basename(output.path)));
  for (const vendor of vendors) current.add(vendor.name).add(`${vendor.name}.map`);
  // A script's code caches, one per V8 that ran it (broker/cli/vendor-script.ts), stay with it.
  const isCurrentCache = (/** @type {string} */ name) =>
    name.endsWith('.cache') && vendors.some((vendor) => name.startsWith(`${vendor.name}.`));
  for (const name of readdirSync(path.join(outdir, chunkDirName))) {
    if (!current.has(name) && !isCurrentCache(name)) rmSync(path.join(outdir, chunkDirName, name), { force: true });
  }
  const uncached = warmVendorCaches(path.join(outdir, bundleName), vendorFiles);
  if (uncached !== undefined)
    process.stderr.write(`build-cli: no code cache (${uncached}): the first start writes it\n`);
  return stamp;
}

/** Write beside, then rename over: a reader never sees a half-written file. */
function replaceFile(/** @type {string} */ file, /** @type {string | Uint8Array} */ contents) {
  const temp = `${file}.${process.pid}.tmp`;
  writeFileSync(temp, contents);
  renameSync(temp, file);
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === import.meta.filename) {
  const { values } = parseArgs({
    options: { outdir: { type: 'string', default: defaultOutdir }, quiet: { type: 'boolean', default: false } },
  });
  const stamp = await buildCli({ outdir: values.outdir });
  const where = path.relative(root, path.resolve(values.outdir)) || '.';
  // --quiet for `npm pack` (prepack): its stdout is the pack's own report (`npm pack --json` is parsed).
  if (!values.quiet)
    process.stdout.write(`built ${where}/${bundleName} from ${Object.keys(stamp.inputs).length} source files\n`);
}
