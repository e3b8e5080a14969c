// @ts-check
// zod and yaml in the CLI bundle (scripts/build-cli.mjs) as one classic script with a V8 code cache, instead of ES
// modules: node 20 caches no compiled code for ES modules, and compiling zod and yaml's ~660 KB costs every start that
// loads them ~15-20 ms of a 2-vCPU VM (`postern config pending`, issue 18's cold start under 300 ms). broker/cli/
// vendor-script.ts runs the script through node:vm with the cache; each specifier Postern or a package built in imports
// (`zod`, `zod/v4`, `yaml`…) becomes a small shim module of the bundle that names that module's exports, read from
// the script's. The script holds one copy of each package: zod's classes are the same whichever specifier imported them.
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Script } from 'node:vm';
import { build } from 'esbuild';
import { inlinePackagesPlugin, installedPackageDir, packageOf } from './inline-packages-plugin.mjs';

/** The packages in the script, and every specifier of theirs the bundle may import (another one fails the build). */
export const vendorPackages = Object.freeze(['zod', 'yaml']);
export const vendorSpecifiers = Object.freeze(['zod', 'zod/v4', 'zod/v4-mini', 'zod/v4/core', 'yaml']);
/**
 * Specifiers left to the bundle's modules: zod 3's own implementation (~85 KB, which shares nothing with zod 4's), which
 * only the MCP SDK and zod-to-json-schema import, in the daemon. Every start that loads zod would read it otherwise.
 */
export const moduleSpecifiers = Object.freeze(['zod/v3']);

/** The esbuild namespace of the shims: a bundle map names a shim's input `postern-vendor:<specifier>`. */
export const vendorNamespace = 'postern-vendor';

/** The script's wrapper: a function expression, so running the script returns it (broker/cli/vendor-script.ts). */
const wrapperStart = "(function (module, exports, require) {'use strict';";
const wrapperEnd = '})';

/**
 * @typedef {{
 *   name: string;
 *   code: string;
 *   map: string;
 *   exportNames: Record<string, string[]>;
 *   inputs: string[];
 * }} VendorScript
 *   name: `vendor-<first 16 hex of the code's sha256>.js`, so a changed script never meets an old cache (V8 checks a
 *     cache against its source's length only)
 *   exportNames: specifier → the names its module exports
 *   inputs: the packages' files esbuild read (relative to the package root; not the entry it was given)
 */

/**
 * Builds the script from what is installed under `root`, and runs it once to list each specifier's exports.
 * @param {string} root the package root
 * @param {string} dir where the script goes (its source map names the sources relative to it)
 * @param {import('esbuild').BuildOptions} minify the bundle's minify options
 * @returns {Promise<VendorScript>}
 */
export async function buildVendorScript(root, dir, minify) {
  const entry = [
    ...vendorSpecifiers.map((specifier, i) => `import * as m${i} from ${JSON.stringify(specifier)};`),
    `export const modules = { ${vendorSpecifiers.map((specifier, i) => `${JSON.stringify(specifier)}: m${i}`).join(', ')} };`,
  ].join('\n');
  const result = await build({
    ...minify,
    absWorkingDir: root,
    stdin: { contents: entry, resolveDir: root, sourcefile: 'postern-vendor-entry.js', loader: 'js' },
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    plugins: [inlinePackagesPlugin(vendorPackages)],
    banner: { js: wrapperStart },
    footer: { js: wrapperEnd },
    outfile: path.join(dir, 'vendor.js'),
    sourcemap: 'external',
    metafile: true,
    write: false,
    logLevel: 'warning',
  });
  const code = result.outputFiles.find((file) => file.path.endsWith('.js'))?.text;
  const map = result.outputFiles.find((file) => file.path.endsWith('.js.map'))?.text;
  if (code === undefined || map === undefined) throw new Error('esbuild produced no vendor script');
  const name = `vendor-${createHash('sha256').update(code).digest('hex').slice(0, 16)}.js`;
  const modules = runVendorScript(code, path.join(dir, name));
  /** @type {Record<string, string[]>} */
  const exportNames = {};
  for (const specifier of vendorSpecifiers) exportNames[specifier] = Object.keys(modules[specifier] ?? {}).sort();
  return {
    name,
    code: `${code}//# sourceMappingURL=${name}.map\n`,
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
 * The shims: each specifier of the script's packages resolves to a module that reads its exports from the script.
 * @param {string} root the package root (where broker/cli/vendor-script.ts is)
 * @param {VendorScript} vendor
 * @returns {import('esbuild').Plugin}
 */
export const vendorShimPlugin = (root, vendor) => ({
  name: 'postern-vendor-shims',
  setup(pluginBuild) {
    const loader = path.join(root, 'broker', 'cli', 'vendor-script.ts');
    const packages = new Set(vendorPackages);
    pluginBuild.onResolve({ filter: /^[^./]/ }, (args) => {
      if (!packages.has(packageOf(args.path)) || moduleSpecifiers.includes(args.path)) return undefined;
      if (!Object.hasOwn(vendor.exportNames, args.path)) {
        const text = `${args.path} (imported by ${args.importer}) is not in the vendor script: add it to vendorSpecifiers in scripts/vendor-script-plugin.mjs`;
        return { errors: [{ text }] };
      }
      return { path: args.path, namespace: vendorNamespace };
    });
    pluginBuild.onLoad({ filter: /.*/, namespace: vendorNamespace }, (args) => {
      const names = vendor.exportNames[args.path] ?? [];
      // Reserved words are export names here (zod's `enum`, `null`, `function`): each is bound to a plain local first.
      const contents = [
        `import { vendorExports, vendorScriptPath } from ${JSON.stringify(loader)};`,
        `const m = vendorExports(vendorScriptPath(import.meta.url, ${JSON.stringify(vendor.name)}))[${JSON.stringify(args.path)}];`,
        ...names.map((exported, i) => `const v${i} = m[${JSON.stringify(exported)}];`),
        `export { ${names.map((exported, i) => `v${i} as ${exported}`).join(', ')} };`,
      ].join('\n');
      return { contents, loader: 'js', resolveDir: root };
    });
  },
});

/** A configuration of one route, as a person writes one: what the build's run of `config pending` parses. */
const warmConfig = [
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
 * The script's code cache, from a run of `postern config pending` on a configuration (the bundle writes it at exit, with
 * the functions that run compiled, named after this node's V8: broker/cli/vendor-script.ts). Best effort: where the run
 * fails, the first start that loads the script writes it.
 * @param {string} bundle the bundle's entry
 * @param {string} scriptFile the vendor script
 * @returns {string | undefined} why no cache was written, or undefined
 */
export function warmVendorCache(bundle, scriptFile) {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'postern-vendor-warm-'));
  try {
    writeFileSync(path.join(dataDir, 'postern.yaml'), warmConfig, { mode: 0o600 });
    const env = { ...process.env };
    delete env['POSTERN_LAUNCH_TRACE'];
    execFileSync(process.execPath, [bundle, 'config', 'pending', '--data-dir', dataDir], { stdio: 'pipe', env });
  } catch (error) {
    return `config pending failed: ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`;
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
  const cached = readdirSync(path.dirname(scriptFile)).some(
    (name) => name.startsWith(`${path.basename(scriptFile)}.`) && name.endsWith('.cache'),
  );
  return cached ? undefined : 'config pending wrote none';
}
