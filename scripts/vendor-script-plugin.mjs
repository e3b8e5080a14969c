// @ts-check
// Pure-JavaScript packages of the CLI bundle (scripts/build-cli.mjs) as classic scripts with a V8 code cache, instead of
// ES modules: node 20 caches no compiled code for ES modules, and compiling zod and yaml's ~500 KB costs every start that
// loads them ~15-20 ms of a 2-vCPU VM (`postern config pending`, issue 18's cold start under 300 ms), commander's ~57 KB
// every command ~4 ms. broker/cli/vendor-script.ts runs a script through node:vm with its cache; each specifier Postern
// or a package built in imports (`zod`, `zod/v4`, `yaml`, `commander`) becomes a small shim module of the bundle that
// names that module's exports, read from the script's. A script holds one copy of each of its packages: zod's classes
// are the same whichever specifier imported them.
import { createHash } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Script } from 'node:vm';
import { build } from 'esbuild';
import { inlinePackagesPlugin, installedPackageDir, packageOf } from './inline-packages-plugin.mjs';

/**
 * @typedef {{ group: string; packages: readonly string[]; specifiers: readonly string[] }} VendorGroup
 *   group: the script's name before its digest
 *   packages: the packages in the script (what they import from other packages is built in too)
 *   specifiers: every specifier of theirs the bundle may import (another one fails the build)
 */

/**
 * The scripts, each what one kind of command loads: a command that parses no configuration (`mcp`, `--help`, an
 * operator command) reads none of zod's bytes.
 * @type {readonly VendorGroup[]}
 */
export const vendorGroups = Object.freeze([
  { group: 'schemas', packages: ['zod', 'yaml'], specifiers: ['zod', 'zod/v4', 'zod/v4-mini', 'zod/v4/core', 'yaml'] },
  { group: 'commander', packages: ['commander'], specifiers: ['commander'] },
]);
/**
 * Specifiers left to the bundle's modules: zod 3's own implementation (~85 KB, which shares nothing with zod 4's), which
 * only the MCP SDK and zod-to-json-schema name, in the daemon. Every start that loads zod would read it otherwise.
 */
export const moduleSpecifiers = Object.freeze(['zod/v3']);

/** The esbuild namespace of the shims: a bundle map names a shim's input `postern-vendor:<specifier>`. */
export const vendorNamespace = 'postern-vendor';

/** A script's wrapper: a function expression, so running the script returns it (broker/cli/vendor-script.ts). */
const wrapperStart = "(function (module, exports, require) {'use strict';";
const wrapperEnd = '})';

/**
 * @typedef {{
 *   name: string;
 *   code: string;
 *   map: string;
 *   packages: readonly string[];
 *   exportNames: Record<string, string[]>;
 *   inputs: string[];
 * }} VendorScript
 *   name: `vendor-<group>-<first 16 hex of the code's sha256>.js`, so a changed script never meets an old cache (V8
 *     checks a cache against its source's length only)
 *   packages: its group's packages (what loads any of its shims loads them all)
 *   exportNames: specifier → the names its module exports
 *   inputs: the packages' files esbuild read (relative to the package root; not the entry it was given)
 */

/**
 * Builds one group's script from what is installed under `root`, and runs it once to list each specifier's exports.
 * @param {string} root the package root
 * @param {string} dir where the script goes (its source map names the sources relative to it)
 * @param {import('esbuild').BuildOptions} minify the bundle's minify options
 * @param {VendorGroup} group
 * @returns {Promise<VendorScript>}
 */
export async function buildVendorScript(root, dir, minify, { group, packages, specifiers }) {
  const entry = [
    ...specifiers.map((specifier, i) => `import * as m${i} from ${JSON.stringify(specifier)};`),
    `export const modules = { ${specifiers.map((specifier, i) => `${JSON.stringify(specifier)}: m${i}`).join(', ')} };`,
  ].join('\n');
  const result = await build({
    ...minify,
    absWorkingDir: root,
    stdin: { contents: entry, resolveDir: root, sourcefile: `postern-vendor-${group}.js`, loader: 'js' },
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    plugins: [inlinePackagesPlugin(packages)],
    banner: { js: wrapperStart },
    footer: { js: wrapperEnd },
    outfile: path.join(dir, `vendor-${group}.js`),
    sourcemap: 'external',
    metafile: true,
    write: false,
    logLevel: 'warning',
  });
  const code = result.outputFiles.find((file) => file.path.endsWith('.js'))?.text;
  const map = result.outputFiles.find((file) => file.path.endsWith('.js.map'))?.text;
  if (code === undefined || map === undefined) throw new Error(`esbuild produced no vendor script for ${group}`);
  const name = `vendor-${group}-${createHash('sha256').update(code).digest('hex').slice(0, 16)}.js`;
  const modules = runVendorScript(code, path.join(dir, name));
  /** @type {Record<string, string[]>} */
  const exportNames = {};
  for (const specifier of specifiers) exportNames[specifier] = Object.keys(modules[specifier] ?? {}).sort();
  return {
    name,
    packages,
    // No line naming the map: node 20 reads none for a vm script, and the digest is then the whole file's.
    code,
    map,
    exportNames,
    inputs: Object.keys(result.metafile.inputs).filter((file) => installedPackageDir(file) !== undefined),
  };
}

/** @returns {Record<string, object>} */
function runVendorScript(/** @type {string} */ code, /** @type {string} */ file) {
  const wrapper = new Script(code, { filename: file }).runInThisContext();
  const module = { exports: /** @type {{ modules?: Record<string, object> }} */ ({}) };
  wrapper(module, module.exports, createRequire(file));
  if (module.exports.modules === undefined) throw new Error('the vendor script exports no modules');
  return module.exports.modules;
}

/**
 * The shims: each specifier of a script's packages resolves to a module that reads its exports from that script.
 * @param {string} root the package root (where broker/cli/vendor-script.ts is)
 * @param {readonly VendorScript[]} scripts
 * @returns {import('esbuild').Plugin}
 */
export const vendorShimPlugin = (root, scripts) => ({
  name: 'postern-vendor-shims',
  setup(pluginBuild) {
    const loader = path.join(root, 'broker', 'cli', 'vendor-script.ts');
    /** @type {Map<string, VendorScript>} */
    const bySpecifier = new Map();
    for (const script of scripts)
      for (const specifier of Object.keys(script.exportNames)) bySpecifier.set(specifier, script);
    const packages = new Set([...bySpecifier.keys()].map(packageOf));
    pluginBuild.onResolve({ filter: /^[^./]/ }, (args) => {
      if (!packages.has(packageOf(args.path)) || moduleSpecifiers.includes(args.path)) return undefined;
      if (!bySpecifier.has(args.path)) {
        const text = `${args.path} (imported by ${args.importer}) is in no vendor script: add it to vendorGroups in scripts/vendor-script-plugin.mjs`;
        return { errors: [{ text }] };
      }
      return { path: args.path, namespace: vendorNamespace };
    });
    pluginBuild.onLoad({ filter: /.*/, namespace: vendorNamespace }, (args) => {
      const script = bySpecifier.get(args.path);
      if (script === undefined) return { errors: [{ text: `no vendor script holds ${args.path}` }] };
      const names = script.exportNames[args.path] ?? [];
      // Reserved words are export names here (zod's `enum`, `null`, `function`): each is bound to a plain local first.
      const contents = [
        `import { vendorExports, vendorScriptPath } from ${JSON.stringify(loader)};`,
        `const m = vendorExports(vendorScriptPath(import.meta.url, ${JSON.stringify(script.name)}))[${JSON.stringify(args.path)}];`,
        ...names.map((exported, i) => `const v${i} = m[${JSON.stringify(exported)}];`),
        `export { ${names.map((exported, i) => `v${i} as ${exported}`).join(', ')} };`,
      ].join('\n');
      return { contents, loader: 'js', resolveDir: root };
    });
  },
});

/**
 * A configuration of one route, as a person writes one: what the build's run of `config pending` parses, and what
 * bench/cli-start.ts times `config pending` on.
 */
export const oneRouteConfig = [
  'version: 1',
  'routes:',
  '  - name: docs',
  '    base_url: https://api.example.com',
  '    credential: docs-token',
  '    injection: bearer',
  '    approval: per_call',
  '',
].join('\n');

/**
 * The scripts' code caches, from a run of `postern config pending` on a configuration, which loads every script (the
 * bundle writes each cache at exit, with the functions that run compiled, named after this node's V8:
 * broker/cli/vendor-script.ts). Best effort: where the run fails, the first start that loads a script writes its cache.
 * @param {string} bundle the bundle's entry
 * @param {readonly string[]} scriptFiles the vendor scripts
 * @returns {string | undefined} why a cache was not written, or undefined
 */
export function warmVendorCaches(bundle, scriptFiles) {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'postern-vendor-warm-'));
  // No NODE_OPTIONS: a V8 flag in it (--max-old-space-size) is part of what V8 checks a cache against, and a cache made
  // under one would be refused by every start without it (a package packed so would ship a cache no one can use).
  const env = { ...process.env };
  delete env['NODE_OPTIONS'];
  delete env['POSTERN_LAUNCH_TRACE'];
  /** `config pending` on the configuration: its stderr, or why it did not run */
  const configPending = (/** @type {NodeJS.ProcessEnv} */ runEnv) => {
    const run = spawnSync(process.execPath, [bundle, 'config', 'pending', '--data-dir', dataDir], {
      env: runEnv,
      timeout: 60_000,
      encoding: 'utf8',
    });
    if (run.error !== undefined) throw run.error;
    if (run.status !== 0) throw new Error(`exit ${run.status ?? run.signal}: ${run.stderr.split('\n')[0]}`);
    return run.stderr;
  };
  try {
    writeFileSync(path.join(dataDir, 'postern.yaml'), oneRouteConfig, { mode: 0o600 });
    configPending(env);
    // A second run, traced: each script must now say its cache was accepted (by this node, with no flag).
    const said = configPending({ ...env, POSTERN_LAUNCH_TRACE: '1' });
    const refused = scriptFiles.filter((file) => !said.includes(`${path.basename(file)}: code cache accepted`));
    return refused.length === 0
      ? undefined
      : `the second run did not accept ${refused.map((file) => path.basename(file)).join(', ')}`;
  } catch (error) {
    return `config pending failed: ${error instanceof Error ? error.message : String(error)}`;
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}
