// @ts-check
// An esbuild plugin for the Node-side bundles (scripts/build-cli.mjs): which npm packages are built into the bundle
// and which load from node_modules at run time.
//
// Built in: the packages in `inlinedPackages` that Postern's own code imports, and every package those import in turn
// (resolved at build time from where the importing package sits, so a bundle never depends on how npm hoisted them at
// an install). Everything else Postern imports stays external: native addons (better-sqlite3, ssh2's optional
// cpu-features), libsodium's wasm build, pino (its transports start threads from files), undici and ssh2 themselves.
import { builtinModules } from 'node:module';
import path from 'node:path';

/**
 * Why these: each is pure JavaScript, and Node's ESM loader resolves, reads and compiles every file of a package
 * loaded from node_modules as its own module. zod (~120 files) and yaml (~70) cost a cold start ~60 ms of a 2-vCPU
 * VM that way (`postern config pending` with no broker: issue 18's 300 ms). The MCP SDK and zod-to-json-schema
 * import zod: built in too, the main thread holds one zod (a second copy costs the daemon ~4 MB and splits zod's
 * classes; the journal's writer thread, an isolate of its own, loads its own from node_modules). commander is every
 * command's parser.
 */
export const inlinedPackages = Object.freeze([
  'zod',
  'yaml',
  'commander',
  '@modelcontextprotocol/sdk',
  'zod-to-json-schema',
]);

/**
 * zod's locales index (`zod/v4/locales/index.js`, which both `z.locales` and `zod/v4/core`'s `locales` re-export): the
 * error messages of ~60 languages, half of zod's bytes in the bundle once minified (~290 of ~580 KB), carried because
 * `z` is a namespace esbuild cannot shake. Each start that loads zod compiles them (~20 ms of `postern config pending`
 * on a 2-vCPU VM). Postern never configures a locale (its messages are its own, and zod's default is English), so the
 * bundle's index names `en` alone: `z.locales.en` is there, every other language is undefined.
 */
export const zodLocalesIndex = /[\\/]node_modules[\\/]zod[\\/]v4[\\/]locales[\\/]index\.js$/;

/** What the bundle reads in place of zod's locales index. */
export const zodLocalesIndexEnglishOnly = 'export { default as en } from "./en.js";\n';

/**
 * CommonJS packages built into an ESM bundle call `require` for node's builtins (commander: `node:events`, yaml:
 * `process`): each output file gets one, made for its own URL.
 */
export const requireBanner =
  "import { createRequire as __posternCreateRequire } from 'node:module';\n" +
  'const require = __posternCreateRequire(import.meta.url);';

/** The npm package a bare specifier names: `zod/v4` → `zod`, `@scope/name/sub` → `@scope/name`. */
export function packageOf(/** @type {string} */ specifier) {
  const parts = specifier.split('/');
  return parts.slice(0, specifier.startsWith('@') ? 2 : 1).join('/');
}

/**
 * The installed package a bundled file came from, as a path from its first `node_modules`: `node_modules/zod`, or
 * `node_modules/a/node_modules/b` for a copy npm nested. Undefined for a file of Postern's own.
 * @param {string} file a path as esbuild's metafile names it (relative to the working directory, `/`-separated)
 */
export function installedPackageDir(file) {
  const segments = file.split('/');
  const first = segments.indexOf('node_modules');
  const last = segments.lastIndexOf('node_modules');
  if (first < 0 || last + 1 >= segments.length) return undefined;
  const nameLength = segments[last + 1]?.startsWith('@') ? 2 : 1;
  return segments.slice(first, last + 1 + nameLength).join('/');
}

/**
 * @param {readonly string[]} inlined the packages built in when Postern's own code imports them
 * @returns {import('esbuild').Plugin}
 */
export const inlinePackagesPlugin = (inlined) => ({
  name: 'postern-inline-packages',
  setup(pluginBuild) {
    const wanted = new Set(inlined);
    // Whether a file is a package's is judged below the build's root: a checkout that itself sits in some node_modules
    // folder must not build every package in.
    const root = pluginBuild.initialOptions.absWorkingDir ?? process.cwd();
    // Bare specifiers only: relative and absolute paths are files of whatever imports them.
    pluginBuild.onResolve({ filter: /^[^./]/ }, (args) => {
      if (args.kind === 'entry-point') return undefined;
      if (args.path.startsWith('node:') || builtinModules.includes(args.path))
        return { path: args.path, external: true };
      const fromPackage = path.relative(root, args.importer).split(/[\\/]/).includes('node_modules');
      if (fromPackage || wanted.has(packageOf(args.path))) return undefined;
      return { path: args.path, external: true };
    });
    pluginBuild.onLoad({ filter: zodLocalesIndex }, (args) => ({
      contents: zodLocalesIndexEnglishOnly,
      loader: 'js',
      resolveDir: path.dirname(args.path),
    }));
  },
});
