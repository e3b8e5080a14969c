// The CLI bundle's vendor scripts (scripts/vendor-script-plugin.mjs): zod and yaml in one classic script beside the
// bundle's chunks, commander in another, run through node:vm with a V8 code cache, because node 20 keeps no code cache
// for ES modules (module.enableCompileCache came in 22.1) and compiling zod and yaml as modules costs every start that
// loads them ~15-20 ms of a 2-vCPU VM (`postern config pending`, issue 18's 300 ms). The bundle's modules import them
// through shims that read the exports of what this returns. Only the bundle reaches this file: run from the sources
// (tsx), the packages load from node_modules. Node 20 reads no source map for a vm script: a stack frame inside zod,
// yaml or commander names the script's line and column (its map is beside it in a checkout, for reading by hand).
//
// A cache sits beside its script, named after it and the V8 that compiled it:
// `chunks/vendor-<group>-<content digest>.js.<V8 version>-<arch>.cache`. V8 checks a cache against its source's length,
// not its bytes, so:
// - a script's name carries its digest: a new build's script never meets an old cache;
// - a script modified after its cache was written (edited in place, of the same length) is compiled without it, and a
//   cache is written only for a script whose content is still its name's digest: an old cache never runs for new code.
// Each V8 has its own cache, so two nodes used in turn (nvm) do not overwrite each other's at every start. A cache V8
// refuses (here, another V8 flag: --max-old-space-size, --stack-size), a stale one or a missing one is written at this
// process's exit, by a temporary file renamed into place, where the package is this user's to write; where it is not
// (a system-wide install), nothing is written and the script compiles as a module would. A cache is never read from or
// written anywhere else (the user's cache directory): it is bytecode this process runs, as trusted as the bundle itself,
// so it lives where the bundle does and with the bundle's owner.
import type * as Crypto from 'node:crypto';
import { closeSync, existsSync, openSync, readFileSync, renameSync, rmSync, statSync, writeSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Script } from 'node:vm';

/** What running the script returns: a wrapper called with CommonJS's `module`, whose exports' `modules` it fills. */
type VendorFunction = (module: { exports: object }, exports: object, require: NodeJS.Require) => void;
/** Specifier (`zod`, `zod/v4`, `yaml`…) → that module's namespace. */
type Modules = Readonly<Record<string, Readonly<Record<string, unknown>>>>;

/**
 * What a start did with the code cache (POSTERN_LAUNCH_TRACE=1 prints it): used it, or compiled the script because V8
 * refused the cache, the script was modified after it, or there was none.
 */
type VendorCacheState = 'accepted' | 'rejected' | 'stale' | 'missing';

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
  let state: VendorCacheState = 'missing';
  try {
    const cacheTime = statSync(cacheFile).mtimeMs;
    if (statSync(file).mtimeMs > cacheTime) state = 'stale';
    else cachedData = readFileSync(cacheFile);
  } catch {
    cachedData = undefined;
  }
  const script = new Script(source, { filename: file, ...(cachedData === undefined ? {} : { cachedData }) });
  if (cachedData !== undefined) state = script.cachedDataRejected === true ? 'rejected' : 'accepted';
  const trace = process.env['POSTERN_LAUNCH_TRACE'] === '1';
  // At exit, not now: the cache then holds the functions this run compiled, not only the top level. Only for the
  // build's own script: a cache made for other content under its name would meet the build's script later.
  const write = state !== 'accepted' && isBuildsScript(file, source);
  if (write) process.once('exit', () => writeCache(script, cacheFile, trace));
  if (trace) {
    const then =
      state === 'accepted'
        ? ''
        : write
          ? ', written at exit'
          : ", not written: the script's content is not its name's digest";
    process.stderr.write(`postern: ${path.basename(file)}: code cache ${state}${then}\n`);
  }
  const wrapper = script.runInThisContext() as VendorFunction;
  const module = { exports: {} };
  wrapper(module, module.exports, createRequire(file));
  const { modules } = module.exports as { modules?: Modules };
  if (modules === undefined) throw new Error(`${file} is not a vendor script of scripts/vendor-script-plugin.mjs`);
  loaded.set(file, modules);
  return modules;
}

/**
 * Whether the script's content is what its name says: `vendor-<group>-<first 16 hex of the file's sha256>.js`. Read
 * only where the cache is not used (node:crypto is loaded for it then, not at every start).
 */
function isBuildsScript(file: string, source: string): boolean {
  const named = /-([0-9a-f]{16})\.js$/.exec(file)?.[1];
  const { createHash } = createRequire(import.meta.url)('node:crypto') as typeof Crypto;
  return named !== undefined && createHash('sha256').update(source).digest('hex').slice(0, 16) === named;
}

/** Best effort: a package this user cannot write, or a full disk, leaves the next start to compile as this one did. */
function writeCache(script: Script, cacheFile: string, trace: boolean): void {
  const temp = `${cacheFile}.${process.pid}-${Math.random().toString(36).slice(2, 10)}.tmp`;
  try {
    // Opened before the cache is made (~4 ms for zod and yaml's): a package the user cannot write costs the exit nothing.
    const fd = openSync(temp, 'wx', 0o644);
    try {
      writeSync(fd, script.createCachedData());
    } finally {
      closeSync(fd);
    }
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
 * The script beside an output file of the bundle: the entry sits in the output directory and the chunks in its
 * `chunks/` (scripts/build-cli.mjs), and the shim that calls this may have been built into either. The script's name
 * carries its digest, so the first place that has it is the one.
 * @param moduleUrl `import.meta.url` of the output file the shim is in
 * @param name the script's file name
 */
export function vendorScriptPath(moduleUrl: string, name: string): string {
  const dir = path.dirname(fileURLToPath(moduleUrl));
  const beside = path.join(dir, name);
  return existsSync(beside) ? beside : path.join(dir, 'chunks', name);
}
