// The CLI bundle's zod and yaml (scripts/vendor-script-plugin.mjs): one classic script beside the bundle's chunks, run
// through node:vm with a V8 code cache, because node 20 keeps no code cache for ES modules (module.enableCompileCache
// came in 22.1) and compiling zod and yaml as modules costs every start that loads them ~15-20 ms of a 2-vCPU VM
// (`postern config pending`, issue 18's 300 ms). The bundle's modules import them through shims that read the exports of
// what this returns. Only the bundle reaches this file: run from the sources (tsx), zod and yaml load from node_modules.
//
// The cache sits beside the script, named after it and the V8 that compiled it:
// `chunks/vendor-<content digest>.js.<V8 version>-<arch>.cache`. The script's name carries its digest because V8 checks
// a cache against its source's length, not its bytes: a new script never meets an old cache. Each V8 has its own, so
// two nodes used in turn (nvm) do not overwrite each other's at every start. A cache V8 refuses (here, another V8 flag:
// --max-old-space-size, --stack-size) or a missing one is written at this process's exit, by
// a temporary file renamed into place, where the package is this user's to write; where it is not (a system-wide
// install), nothing is written and the script compiles as a module would. The cache is never written anywhere else (the
// user's cache directory): it is bytecode this process runs, as trusted as the bundle itself, so it lives where the
// bundle does and with the bundle's owner.
import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Script } from 'node:vm';

/** What running the script returns: a wrapper called with CommonJS's `module`, whose exports' `modules` it fills. */
type VendorFunction = (module: { exports: object }, exports: object, require: NodeJS.Require) => void;
/** Specifier (`zod`, `zod/v4`, `yaml`…) → that module's namespace. */
type Modules = Readonly<Record<string, Readonly<Record<string, unknown>>>>;

/** What a start did with the code cache (POSTERN_LAUNCH_TRACE=1 prints it). */
type VendorCacheState = 'accepted' | 'rejected' | 'missing';

const loaded = new Map<string, Modules>();

/**
 * The script's modules, run once per process.
 * @param file the script's absolute path
 */
export function vendorExports(file: string): Modules {
  const done = loaded.get(file);
  if (done !== undefined) return done;
  const source = readFileSync(file, 'utf8');
  const cacheFile = `${file}.${process.versions.v8}-${process.arch}.cache`;
  let cachedData: Buffer | undefined;
  try {
    cachedData = readFileSync(cacheFile);
  } catch {
    cachedData = undefined;
  }
  const script = new Script(source, { filename: file, ...(cachedData === undefined ? {} : { cachedData }) });
  const state: VendorCacheState =
    cachedData === undefined ? 'missing' : script.cachedDataRejected === true ? 'rejected' : 'accepted';
  const trace = process.env['POSTERN_LAUNCH_TRACE'] === '1';
  if (trace) {
    const then = state === 'accepted' ? '' : ', written at exit';
    process.stderr.write(`postern: ${path.basename(file)}: code cache ${state}${then}\n`);
  }
  // At exit, not now: the cache then holds the functions this run compiled, not only the top level.
  if (state !== 'accepted') process.once('exit', () => writeCache(script, cacheFile, trace));
  const wrapper = script.runInThisContext() as VendorFunction;
  const module = { exports: {} };
  wrapper(module, module.exports, createRequire(file));
  const { modules } = module.exports as { modules?: Modules };
  if (modules === undefined) throw new Error(`${file} is not a vendor script of scripts/vendor-script-plugin.mjs`);
  loaded.set(file, modules);
  return modules;
}

/** Best effort: a package this user cannot write, or a full disk, leaves the next start to compile as this one did. */
function writeCache(script: Script, cacheFile: string, trace: boolean): void {
  const temp = `${cacheFile}.${process.pid}.tmp`;
  try {
    writeFileSync(temp, script.createCachedData(), { flag: 'wx', mode: 0o644 });
    renameSync(temp, cacheFile);
  } catch (error) {
    try {
      rmSync(temp, { force: true });
    } catch {
      // Nothing to remove, or nothing removable: a stray temporary file is read by nothing.
    }
    if (trace) {
      const code = (error as NodeJS.ErrnoException).code ?? String(error);
      process.stderr.write(`postern: the code cache ${path.basename(cacheFile)} was not written: ${code}\n`);
    }
  }
}

/**
 * The script beside a chunk of the bundle: the chunks sit in `chunks/` below the entry (scripts/build-cli.mjs), and
 * the shim that calls this may have been built into either.
 * @param moduleUrl `import.meta.url` of the output file the shim is in
 * @param name the script's file name
 */
export function vendorScriptPath(moduleUrl: string, name: string): string {
  const dir = path.dirname(fileURLToPath(moduleUrl));
  return path.join(path.basename(dir) === 'chunks' ? dir : path.join(dir, 'chunks'), name);
}
