import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startAgentSocket } from '../broker/agent/index.js';
import { systemClock } from '../broker/ports/index.js';
import { ScriptedAgentBackend } from '../broker/testing/scripted-agent-backend.js';
import { createTempDir } from '../broker/testing/temp-dir.js';
import { openVault } from '../broker/vault/index.js';
import { makeCliPackageRoot, type CliPackageRoot } from '../broker/testing/cli-package-root.js';
import { repoRoot } from './support/postern-process.js';

/**
 * Issue 16, "the CLI and the shim start fast": scripts/build-cli.mjs bundles broker/cli/main.ts and
 * bin/postern.mjs runs that bundle only while its stamp says no source changed since. Everything runs
 * in a temp copy of the package layout (broker/testing/cli-package-root.ts) with a bundle built here,
 * never the checkout's dist/. POSTERN_LAUNCH_TRACE=1 makes the bin say which one it ran.
 */
const run = promisify(execFile);
const manifestText = readFileSync(path.join(repoRoot, 'package.json'), 'utf8');
const manifest = JSON.parse(manifestText) as { version: string; dependencies: Record<string, string> };
const traced = { ...process.env, POSTERN_LAUNCH_TRACE: '1' };
const commandMs = 60_000;

interface CliStamp {
  builtAtMs: number;
  entry: string;
  inputs: Record<string, number>;
  digests: Record<string, string>;
  packages: Record<string, string>;
}

let pkg: CliPackageRoot;
let originalStamp = '';
beforeAll(async () => {
  pkg = await makeCliPackageRoot({ bundle: true });
  originalStamp = readFileSync(pkg.stamp, 'utf8');
}, commandMs);
afterAll(() => pkg.remove());

/** The package a specifier names: `zod/v4` → `zod`, `@scope/name/sub` → `@scope/name`. */
function packageName(specifier: string): string {
  return specifier
    .split('/')
    .slice(0, specifier.startsWith('@') ? 2 : 1)
    .join('/');
}

/** A built-in package's name from the directory the stamp names: `node_modules/a/node_modules/@s/b` → `@s/b`. */
function installedName(dir: string): string {
  return dir.slice(dir.lastIndexOf('node_modules/') + 'node_modules/'.length);
}

/** Each output file of the bundle: what it imports statically and the npm packages built into it (build-cli.mjs). */
function readBundleMap(): Record<string, { imports: string[]; packages: string[] }> {
  const file = path.join(path.dirname(pkg.bundle), 'bundle-map.json');
  return JSON.parse(readFileSync(file, 'utf8')) as Record<string, { imports: string[]; packages: string[] }>;
}

function readStamp(): CliStamp {
  return JSON.parse(readFileSync(pkg.stamp, 'utf8')) as CliStamp;
}

/** Each output of the bundle (its entry, its chunks and its vendor scripts) with the sources its map names. */
function bundledSources(): { output: string; sources: string[] }[] {
  const chunkDir = path.join(path.dirname(pkg.bundle), 'chunks');
  const maps = [
    `${pkg.bundle}.map`,
    ...readdirSync(chunkDir)
      .filter((name) => name.endsWith('.map'))
      .map((name) => path.join(chunkDir, name)),
  ];
  return maps.map((map) => ({
    output: path.basename(map).slice(0, -'.map'.length),
    sources: (JSON.parse(readFileSync(map, 'utf8')) as { sources: string[] }).sources,
  }));
}

/** A classic script of the bundle's (scripts/vendor-script-plugin.mjs): `schemas` (zod and yaml) or `commander`. */
function vendorScript(group: string): string {
  const chunkDir = path.join(path.dirname(pkg.bundle), 'chunks');
  const found = readdirSync(chunkDir).filter((name) => new RegExp(`^vendor-${group}-[0-9a-f]+\\.js$`).test(name));
  if (found.length !== 1) throw new Error(`${found.length} ${group} scripts in ${chunkDir}`);
  return path.join(chunkDir, found[0] as string);
}

/** A configuration whose route's base_url is a number: zod's own message says so. */
const wrongTypeConfig = ['version: 1', 'routes:', '  - name: docs', '    base_url: 5', '    credential: t', ''].join(
  '\n',
);
const wrongTypeMessage = 'routes[0].base_url: Invalid input: expected string, received number';

/** `postern config pending` run from the bundle itself. */
function configPending(
  dataDir: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ stdout: string; stderr: string }> {
  return run(process.execPath, [pkg.bundle, 'config', 'pending', '--data-dir', dataDir], {
    cwd: pkg.root,
    env,
    timeout: commandMs,
  });
}

/** The stamp's sources (absolute paths), a time one second after the build, and a way to give them their own back. */
function stampSources(): { stamp: CliStamp; later: Date; files: string[]; restoreTimes(): void } {
  const stamp = readStamp();
  const files = Object.keys(stamp.inputs).map((file) => path.join(pkg.root, file));
  const times = files.map((file) => statSync(file).mtime);
  const restoreTimes = (): void => files.forEach((file, i) => utimesSync(file, times[i] as Date, times[i] as Date));
  return { stamp, later: new Date(stamp.builtAtMs + 1_000), files, restoreTimes };
}

/** bin/postern.mjs's record of the sources whose time is later than the build that a start found unchanged. */
function readChecked(): { builtAtMs: number; sources: Record<string, [number, number]> } {
  return JSON.parse(readFileSync(pkg.checked, 'utf8')) as {
    builtAtMs: number;
    sources: Record<string, [number, number]>;
  };
}

/** bin/postern.mjs records a source only if its ctime is this much older than the start that read it. */
const checkedMarginMs = 2_000;

/** Waits (on the clock, polled) until every file's ctime is more than `marginMs` in the past. */
async function ctimesOlderThan(files: readonly string[], marginMs: number): Promise<void> {
  const newest = Math.max(...files.map((file) => statSync(file).ctimeMs));
  while (Date.now() <= newest + marginMs) await new Promise((resolve) => setTimeout(resolve, 100));
}

function postern(args: string[]): Promise<{ stdout: string; stderr: string }> {
  return run(process.execPath, [pkg.bin, ...args], { cwd: pkg.root, env: traced, timeout: commandMs });
}

describe('the CLI bundle (scripts/build-cli.mjs)', () => {
  it('is an ESM bundle with a source map and a stamp of every broker source it read', () => {
    expect(existsSync(`${pkg.bundle}.map`)).toBe(true);
    const stamp = readStamp();
    expect(stamp.entry).toBe('main.mjs');
    expect(stamp.builtAtMs).toBeLessThanOrEqual(Date.now());
    const inputs = Object.keys(stamp.inputs);
    expect(inputs).toContain('broker/cli/main.ts');
    expect(inputs).toContain('broker/vault/kdf-worker.ts');
    expect(inputs.filter((file) => !file.startsWith('broker/'))).toEqual([]);
    expect(stamp.inputs['broker/cli/main.ts']).toBe(statSync(path.join(pkg.root, 'broker', 'cli', 'main.ts')).size);
    // Each source's content as the build read it.
    expect(Object.keys(stamp.digests).sort()).toEqual([...inputs].sort());
    const main = readFileSync(path.join(pkg.root, 'broker', 'cli', 'main.ts'));
    expect(stamp.digests['broker/cli/main.ts']).toBe(createHash('sha256').update(main).digest('hex'));
    // The writer thread's script is built into the bundle: its entry counts, and the module the build replaced with it
    // is stamped with its own size on disk (else every launch would find the bundle stale and run through tsx).
    expect(inputs).toContain('broker/journal/writer-worker.ts');
    for (const file of ['broker/journal/writer-worker.ts', 'broker/journal/writer-worker-source.ts'])
      expect(stamp.inputs[file]).toBe(statSync(path.join(pkg.root, file)).size);
    // The npm packages built in, each with the version installed where the build read it: Postern's choices and
    // what they import (scripts/inline-packages-plugin.mjs), none of the external ones.
    const built = Object.keys(stamp.packages);
    for (const name of ['zod', 'yaml', 'commander', '@modelcontextprotocol/sdk', 'ajv'])
      expect(built, name).toContain(`node_modules/${name}`);
    for (const name of ['better-sqlite3', 'undici', 'ssh2', 'pino', 'libsodium-wrappers-sumo'])
      expect(built, name).not.toContain(`node_modules/${name}`);
    for (const [dir, version] of Object.entries(stamp.packages)) {
      const installed = JSON.parse(readFileSync(path.join(pkg.root, dir, 'package.json'), 'utf8')) as {
        version: string;
      };
      expect(version, dir).toBe(installed.version);
    }
  });

  it('imports only node builtins and declared dependencies: the packages not built in load from node_modules', () => {
    const map = readBundleMap();
    // Every output file is mapped, and what it imports is another output file or a specifier outside the bundle.
    const chunkDir = path.join(path.dirname(pkg.bundle), 'chunks');
    const outputs = [
      'main.mjs',
      ...readdirSync(chunkDir)
        .filter((n) => n.endsWith('.mjs'))
        .map((n) => `chunks/${n}`),
    ];
    expect(Object.keys(map).sort()).toEqual(outputs.sort());
    const imported = new Set(
      Object.values(map).flatMap(({ imports }) => imports.filter((specifier) => !Object.hasOwn(map, specifier))),
    );
    expect(imported).toContain('better-sqlite3');
    // A package built in is never also loaded from node_modules: one zod in the process, the SDK's included.
    for (const name of Object.keys(readStamp().packages).map(installedName))
      expect([...imported].filter((specifier) => packageName(specifier) === name)).toEqual([]);
    for (const specifier of imported) {
      expect(
        specifier.startsWith('node:') || Object.hasOwn(manifest.dependencies, packageName(specifier)),
        specifier,
      ).toBe(true);
    }
  });

  it('starts light: the entry loads nothing from node_modules; `mcp` (the shim) neither a broker package nor the schemas; `status`, every other command and the operator client neither SQLite nor the schemas', () => {
    // The npm packages a chunk imports statically, transitively, or holds built in (bundle-map.json, from esbuild's
    // metafile): what loads before the code after its first await runs.
    const outdir = path.dirname(pkg.bundle);
    const map = readBundleMap();
    const closure = (file: string): Set<string> => {
      const seen = new Set<string>();
      const external = new Set<string>();
      const visit = (output: string): void => {
        if (seen.has(output)) return;
        seen.add(output);
        const entry = map[output];
        if (entry === undefined) throw new Error(`bundle-map.json names no ${output}`);
        for (const dir of entry.packages) external.add(installedName(dir));
        for (const specifier of entry.imports) {
          if (Object.hasOwn(map, specifier)) visit(specifier);
          else if (!specifier.startsWith('node:')) external.add(specifier);
        }
      };
      visit(path.relative(outdir, file).split(path.sep).join('/'));
      return external;
    };
    /** The chunk main.mjs imports once it knows the command (main.ts: mcp-main, status-main, program). */
    const routeChunk = (name: string): string => {
      const found = /import\("(\.\/chunks\/[^"]+)"\)/g;
      const chunk = [...readFileSync(pkg.bundle, 'utf8').matchAll(found)]
        .map((m) => m[1] as string)
        .find((specifier) => path.basename(specifier).startsWith(`${name}-`));
      if (chunk === undefined) throw new Error(`main.mjs imports no ${name} chunk`);
      return path.resolve(path.dirname(pkg.bundle), chunk);
    };
    /** A chunk esbuild named after the module a dynamic import() loads. */
    const chunkNamed = (name: string): string => {
      const chunkDir = path.join(path.dirname(pkg.bundle), 'chunks');
      const found = readdirSync(chunkDir).filter((file) => file.startsWith(`${name}-`) && file.endsWith('.mjs'));
      if (found.length !== 1) throw new Error(`${found.length} chunks named ${name}`);
      return path.join(chunkDir, found[0] as string);
    };
    // `--version` answers before any command loads.
    expect(closure(pkg.bundle)).toEqual(new Set());
    // The shim: its route, and the relay it loads once the command line is parsed (mcp-command.ts).
    const shim = new Set([...closure(routeChunk('mcp-main')), ...closure(chunkNamed('mcp-relay'))]);
    for (const heavy of [
      'better-sqlite3',
      'libsodium-wrappers-sumo',
      'undici',
      'ssh2',
      '@modelcontextprotocol/sdk',
      'pino',
      'yaml',
      // The contract's schemas: zod's ~100 modules cost a cold start ~100 ms on a 2-vCPU VM.
      'zod',
    ]) {
      expect(shim.has(heavy), `${heavy} is loaded by postern mcp`).toBe(false);
    }
    expect(shim).toContain('commander');
    // `status` looks at a data directory with neither SQLite nor the schemas loaded (a journal file loads them later).
    const status = closure(routeChunk('status-main'));
    expect(status.has('better-sqlite3'), 'better-sqlite3 is loaded by postern status').toBe(false);
    expect(status.has('zod'), 'zod is loaded by postern status').toBe(false);
    expect(status.has('yaml'), 'yaml is loaded by postern status').toBe(false);
    // Every other command registers with neither (the broker and the journal load only for the commands that run or
    // read them), and the operator client a command loads to ask the broker checks no schema.
    const program = closure(routeChunk('program'));
    expect(program).toContain('commander');
    for (const [name, modules] of [
      ['the program', program],
      ['the operator client', closure(chunkNamed('control-client'))],
      // `vault list` reads the file without opening the vault (vault-listing.ts).
      ['the vault listing', closure(chunkNamed('vault-listing'))],
    ] as const) {
      for (const heavy of ['zod', 'libsodium-wrappers-sumo', 'ssh2', 'undici', 'pino', 'yaml']) {
        expect(modules.has(heavy), `${heavy} is loaded by ${name}`).toBe(false);
      }
      // SQLite: the listing reads the vault file; the program and the client read no database.
      if (name !== 'the vault listing')
        expect(modules.has('better-sqlite3'), `better-sqlite3 is loaded by ${name}`).toBe(false);
    }
    // `audit verify` (without --check-key or --checkpoint): the verifier and its codes, over ciphertext, with neither the
    // vault (ssh2's key parser) nor the journal nor the contract's schemas (audit-commands.ts, verifyModules).
    const verifier = new Set([...closure(chunkNamed('verify-journal')), ...closure(chunkNamed('verify-codes'))]);
    expect(verifier).toContain('better-sqlite3');
    for (const heavy of ['zod', 'ssh2', 'undici', 'pino', 'yaml', 'commander']) {
      expect(verifier.has(heavy), `${heavy} is loaded by audit verify's verifier`).toBe(false);
    }
  });

  it('runs on its own: node dist/cli/main.mjs --version prints the package version', async () => {
    const { stdout } = await run(process.execPath, [pkg.bundle, '--version'], { cwd: pkg.root, timeout: commandMs });
    expect(stdout.trim()).toBe(manifest.version);
  });

  it("carries zod's English messages and none of its other locales, and a configuration error still reads in English", async () => {
    // The sources each output was built from (its source map, the vendor script's included): zod's locales index names
    // `en` alone in the bundle (scripts/inline-packages-plugin.mjs, zodLocalesIndex).
    const locales = bundledSources()
      .flatMap(({ sources }) => sources)
      .filter((source) => /node_modules\/zod\/v4\/locales\//.test(source));
    expect(locales.map((source) => path.basename(source)).sort()).toEqual(['en.js', 'index.js']);
    // zod's own message for a field of the wrong type, as `postern config pending` prints it from the bundle.
    const data = createTempDir('postern-cli-zod-');
    try {
      writeFileSync(path.join(data.path, 'postern.yaml'), wrongTypeConfig, { mode: 0o600 });
      await expect(configPending(data.path)).rejects.toMatchObject({
        code: 1,
        stderr: expect.stringContaining(wrongTypeMessage),
      });
    } finally {
      data.remove();
    }
  });

  it('holds zod 4 and yaml, and commander, once each, in scripts named after their content, without zod 3', () => {
    const bundled = bundledSources();
    const held = (file: string, pattern: RegExp): boolean =>
      bundled.some(({ output, sources }) => output === file && sources.some((source) => pattern.test(source)));
    const outputs = bundled.map(({ output }) => output);
    for (const [group, patterns] of [
      [
        'schemas',
        [/node_modules\/zod\/v4\/classic\/schemas\.js$/, /node_modules\/zod\/v4\/core\//, /node_modules\/yaml\//],
      ],
      ['commander', [/node_modules\/commander\/lib\/command\.js$/]],
    ] as const) {
      const script = path.basename(vendorScript(group));
      for (const pattern of patterns) {
        expect(held(script, pattern), `${script} holds ${String(pattern)}`).toBe(true);
        // No other output carries a second copy: zod's classes are one, whichever specifier imported them.
        for (const output of outputs.filter((name) => name !== script))
          expect(held(output, pattern), `${output} holds ${String(pattern)}`).toBe(false);
      }
      // The name carries the digest of the whole file: V8 checks a code cache against its source's length only, so a
      // changed script must never meet an old cache.
      const digest = createHash('sha256')
        .update(readFileSync(vendorScript(group)))
        .digest('hex')
        .slice(0, 16);
      expect(script).toBe(`vendor-${group}-${digest}.js`);
    }
    // zod 3's own implementation (which the MCP SDK names, and its bundled code never calls) is no start's to read.
    expect(outputs.some((output) => held(output, /node_modules\/zod\/v3\//))).toBe(false);
  });

  it("loads zod and yaml with the build's code cache; a refused, stale or missing cache is written at exit, never for a script that is not its name's digest; one that cannot be written fails nothing", async () => {
    // Named after the V8 that wrote it (this one: the build's run of the bundle is this node's).
    const script = vendorScript('schemas');
    const scriptText = readFileSync(script);
    const cache = `${script}.${process.versions.v8}-${process.arch}.cache`;
    const built = readFileSync(cache);
    const data = createTempDir('postern-cli-cache-');
    /** A traced `config pending` on a configuration zod rejects: its message, and what the start did with the cache. */
    const traceOf = async (message = wrongTypeMessage): Promise<string> => {
      const failed = await configPending(data.path, traced).then(
        () => undefined,
        (error: unknown) => error as { stderr: string },
      );
      expect(failed?.stderr).toContain(message);
      const said = `postern: ${path.basename(script)}: `;
      const line = failed?.stderr.split('\n').find((text) => text.startsWith(said));
      return line?.slice(said.length) ?? 'no trace of the code cache';
    };
    try {
      writeFileSync(path.join(data.path, 'postern.yaml'), wrongTypeConfig, { mode: 0o600 });
      expect(await traceOf()).toBe('code cache accepted');
      expect(readFileSync(cache).equals(built)).toBe(true);
      // A cache V8 refuses (here bytes of no V8's; in life, one another node wrote): the script compiles, and the
      // process writes a cache of its own at exit.
      writeFileSync(cache, Buffer.alloc(built.length, 7));
      expect(await traceOf()).toBe('code cache rejected, written at exit');
      expect(readFileSync(cache).equals(Buffer.alloc(built.length, 7))).toBe(false);
      expect(await traceOf()).toBe('code cache accepted');
      rmSync(cache);
      expect(await traceOf()).toBe('code cache missing, written at exit');
      expect(await traceOf()).toBe('code cache accepted');
      // The script modified after its cache, keeping its length (V8 checks no more): here zod's English message, whose
      // function the cache holds compiled from the old text since the run above. The edit runs, not the cache, and no
      // cache is written for a script that is not its name's digest.
      const original = readFileSync(script);
      const edited = Buffer.from(
        original.toString('latin1').replace('Invalid input: expected', 'Invalid INPUT: expected'),
        'latin1',
      );
      expect(edited.length).toBe(original.length);
      expect(edited.equals(original)).toBe(false);
      const cacheBefore = readFileSync(cache);
      // File times come from a coarse clock: the cache is dated back first, so an edit in the tick of its write is
      // still later (a person's edit is seconds later at least).
      const olderCache = (): void => {
        const back = new Date(statSync(cache).mtimeMs - 2_000);
        utimesSync(cache, back, back);
      };
      olderCache();
      writeFileSync(script, edited);
      expect(await traceOf(wrongTypeMessage.replace('Invalid input', 'Invalid INPUT'))).toBe(
        "code cache stale, not written: the script's content is not its name's digest",
      );
      expect(readFileSync(cache).equals(cacheBefore)).toBe(true);
      // The build's script put back (later than the cache too): compiled, and its cache written anew.
      olderCache();
      writeFileSync(script, original);
      expect(await traceOf()).toBe('code cache stale, written at exit');
      expect(await traceOf()).toBe('code cache accepted');
      // Where the cache cannot be written (here its place is a directory; in life, a package that is not the user's),
      // the command still answers, and the next start compiles again.
      rmSync(cache);
      mkdirSync(cache);
      const failed = await configPending(data.path, traced).catch((error: unknown) => error as { stderr: string });
      expect(failed.stderr).toContain(wrongTypeMessage);
      expect(failed.stderr).toContain(`the code cache ${path.basename(cache)} was not written: E`);
      expect(readdirSync(path.dirname(cache)).filter((name) => name.includes('.tmp'))).toEqual([]);
    } finally {
      // The build's script and its cache, in that order (a cache older than its script is stale).
      writeFileSync(script, scriptText);
      rmSync(cache, { recursive: true, force: true });
      writeFileSync(cache, built);
      data.remove();
    }
  });

  it(
    'derives a vault key on its Argon2id worker thread from the bundle (vault unlock)',
    async () => {
      const data = createTempDir('postern-cli-vault-');
      try {
        const passphrase = 'cli-bundle-test-passphrase';
        const vault = await openVault({ dataDir: data.path, clock: systemClock, kdf: 'min', idleLockMs: 0 });
        await vault.init(Buffer.from(passphrase));
        await vault.close();
        const passphraseFile = path.join(data.path, 'passphrase');
        writeFileSync(passphraseFile, passphrase, { mode: 0o600 });
        const args = [pkg.bundle, 'vault', 'unlock', '--data-dir', data.path, '--passphrase-file', passphraseFile];
        const unlock = () => run(process.execPath, args, { cwd: pkg.root, timeout: commandMs });
        await expect(unlock()).resolves.toMatchObject({
          stdout: expect.stringContaining('The passphrase is correct'),
          stderr: '',
        });
        writeFileSync(passphraseFile, 'not the passphrase');
        await expect(unlock()).rejects.toMatchObject({
          code: 1,
          stderr: expect.stringContaining('postern: VAULT_PASSPHRASE_INVALID'),
        });
      } finally {
        data.remove();
      }
    },
    commandMs,
  );
});

describe('bin/postern.mjs', () => {
  afterEach(() => writeFileSync(pkg.stamp, originalStamp));

  it(
    'runs the bundle while no source changed since the build: --version, and --help through the whole program',
    async () => {
      const { stdout, stderr } = await postern(['--version']);
      expect(stdout.trim()).toBe(manifest.version);
      expect(stderr).toBe(`postern: running the bundle ${pkg.bundle}\n`);
      const help = await postern(['--help']);
      expect(help.stdout).toContain('agent-config');
      // The program's commander from its classic script, with the build's code cache (scripts/vendor-script-plugin.mjs).
      const commander = path.basename(vendorScript('commander'));
      expect(help.stderr).toBe(
        `postern: running the bundle ${pkg.bundle}\npostern: ${commander}: code cache accepted\n`,
      );
    },
    commandMs,
  );

  it(
    'runs the bundle when sources only got newer times (npm dates every file it installs), tsx when one has other content',
    async () => {
      const { stamp, later, files, restoreTimes } = stampSources();
      const edited = path.join(pkg.root, 'broker', 'cli', 'program.ts');
      const original = readFileSync(edited);
      const bundleRan = (read = 0): string =>
        `postern: running the bundle ${pkg.bundle}${read > 0 ? ` (sources read for their content: ${read})` : ''}\n`;
      try {
        for (const file of files) utimesSync(file, later, later);
        // Every source is later than the build: each is read and its digest compared, and the bundle runs.
        expect((await postern(['--version'])).stderr).toBe(bundleRan(files.length));
        // Recorded once their ctimes are older than the bin's margin (a save in the same clock tick as the read must
        // still move the ctime): from then on a start compares inode and ctime, and reads none.
        await ctimesOlderThan(files, checkedMarginMs);
        expect((await postern(['--version'])).stderr).toBe(bundleRan(files.length));
        expect(Object.keys(readChecked().sources).sort()).toEqual(Object.keys(stamp.inputs).sort());
        expect((await postern(['--version'])).stderr).toBe(bundleRan());
        // A record made for another build is not this bundle's: every source is read again.
        writeFileSync(pkg.checked, JSON.stringify({ ...readChecked(), builtAtMs: stamp.builtAtMs - 1 }));
        expect((await postern(['--version'])).stderr).toBe(bundleRan(files.length));
        expect((await postern(['--version'])).stderr).toBe(bundleRan());
        // The same size, other bytes, saved after the build and dated back to a time the record has seen: the ctime
        // moved (no program can set it), so the file is read, and the sources run through tsx, the whole program too.
        const changed = Buffer.from(original);
        const at = changed.indexOf('Parses argv');
        changed.write('parses', at, 'latin1');
        writeFileSync(edited, changed);
        utimesSync(edited, later, later);
        const { stdout, stderr } = await postern(['--help']);
        expect(stdout).toContain('agent-config');
        expect(stderr).toBe(
          'postern: running the sources through tsx: broker/cli/program.ts changed since the build\n',
        );
        // Its old content back (a new ctime again): read, found to be what the build read, and the bundle runs.
        writeFileSync(edited, original);
        expect((await postern(['--version'])).stderr).toBe(bundleRan(1));
      } finally {
        writeFileSync(edited, original);
        restoreTimes();
        rmSync(pkg.checked, { force: true });
      }
      expect((await postern(['--version'])).stderr).toBe(bundleRan());
    },
    4 * commandMs,
  );

  it(
    "keeps its record in the user's cache where the package directory takes none (a system-wide install)",
    async () => {
      const { stamp, later, files, restoreTimes } = stampSources();
      const cache = createTempDir('postern-cli-cache-');
      // Root may write anywhere: a directory where the record would go refuses it the same way.
      mkdirSync(path.join(pkg.checked, 'taken'), { recursive: true });
      const withCache = (): Promise<{ stderr: string }> =>
        run(process.execPath, [pkg.bin, '--version'], {
          cwd: pkg.root,
          env: { ...traced, XDG_CACHE_HOME: cache.path },
          timeout: commandMs,
        });
      try {
        for (const file of files) utimesSync(file, later, later);
        await ctimesOlderThan(files, checkedMarginMs);
        expect((await withCache()).stderr).toBe(
          `postern: running the bundle ${pkg.bundle} (sources read for their content: ${files.length})\n`,
        );
        const records = readdirSync(path.join(cache.path, 'postern'));
        expect(records).toEqual([expect.stringMatching(/^launch-checked-[0-9a-f]{8}\.json$/)]);
        const record = JSON.parse(readFileSync(path.join(cache.path, 'postern', records[0] as string), 'utf8')) as {
          root: string;
          builtAtMs: number;
          sources: Record<string, unknown>;
        };
        expect(record.root).toBe(`${pkg.root}${path.sep}`);
        expect(record.builtAtMs).toBe(stamp.builtAtMs);
        expect(Object.keys(record.sources).sort()).toEqual(Object.keys(stamp.inputs).sort());
        expect((await withCache()).stderr).toBe(`postern: running the bundle ${pkg.bundle}\n`);
        // Another package root's record (a copy elsewhere whose name hashed the same) is not this one's.
        writeFileSync(
          path.join(cache.path, 'postern', records[0] as string),
          JSON.stringify({ ...record, root: '/elsewhere/' }),
        );
        expect((await withCache()).stderr).toContain(`(sources read for their content: ${files.length})`);
      } finally {
        restoreTimes();
        rmSync(pkg.checked, { recursive: true, force: true });
        cache.remove();
      }
    },
    2 * commandMs,
  );

  it(
    'runs the sources when a listed file changed size or is gone, a built-in package was upgraded, or the stamp is wrong or missing',
    async () => {
      const stamp = readStamp();
      writeFileSync(pkg.stamp, JSON.stringify({ ...stamp, inputs: { ...stamp.inputs, 'broker/cli/main.ts': 1 } }));
      expect((await postern(['--version'])).stderr).toContain('tsx: broker/cli/main.ts changed since the build');
      writeFileSync(pkg.stamp, JSON.stringify({ ...stamp, inputs: { ...stamp.inputs, 'broker/cli/removed.ts': 10 } }));
      expect((await postern(['--version'])).stderr).toContain('tsx: broker/cli/removed.ts is gone');
      // A package built in whose installed version moved (an upgrade the bundle does not have): the sources. One not
      // installed where the build read it (an installed copy, hoisted elsewhere by npm): the bundle has its own.
      const zod = JSON.parse(readFileSync(path.join(pkg.root, 'node_modules', 'zod', 'package.json'), 'utf8')) as {
        version: string;
      };
      writeFileSync(
        pkg.stamp,
        JSON.stringify({ ...stamp, packages: { ...stamp.packages, 'node_modules/zod': '0.0.1' } }),
      );
      expect((await postern(['--version'])).stderr).toContain(
        `tsx: node_modules/zod is ${zod.version}, the bundle has 0.0.1`,
      );
      writeFileSync(
        pkg.stamp,
        JSON.stringify({ ...stamp, packages: { ...stamp.packages, 'node_modules/not-installed-here': '1.0.0' } }),
      );
      expect((await postern(['--version'])).stderr).toBe(`postern: running the bundle ${pkg.bundle}\n`);
      // An installed copy (its root inside node_modules) runs its bundle whatever versions npm installed beside it
      // since: a later patch release within the ranges is not an edit of the bundle's code.
      const installed = createTempDir('postern-cli-installed-');
      try {
        const copy = path.join(installed.path, 'node_modules', 'postern');
        cpSync(pkg.root, copy, { recursive: true, verbatimSymlinks: true });
        const copyStamp = path.join(copy, 'dist', 'cli', 'stamp.json');
        writeFileSync(
          copyStamp,
          JSON.stringify({ ...stamp, packages: { ...stamp.packages, 'node_modules/zod': '0.0.1' } }),
        );
        const ran = await run(process.execPath, [path.join(copy, 'bin', 'postern.mjs'), '--version'], {
          cwd: copy,
          env: traced,
          timeout: commandMs,
        });
        // Copied now, every source is later than the build: each is read (and found to be what the build read).
        const read = Object.keys(stamp.inputs).length;
        expect(ran.stderr).toBe(
          `postern: running the bundle ${path.join(copy, 'dist', 'cli', 'main.mjs')} (sources read for their content: ${read})\n`,
        );
      } finally {
        installed.remove();
      }
      const { packages: _dropped, ...withoutPackages } = stamp;
      writeFileSync(pkg.stamp, JSON.stringify(withoutPackages));
      expect((await postern(['--version'])).stderr).toContain('tsx: dist/cli/stamp.json is not a stamp');
      writeFileSync(pkg.stamp, JSON.stringify({ ...stamp, entry: '../../elsewhere.mjs' }));
      expect((await postern(['--version'])).stderr).toContain('tsx: dist/cli/stamp.json is not a stamp');
      writeFileSync(pkg.stamp, '');
      const { stdout, stderr } = await postern(['--version']);
      expect(stdout.trim()).toBe(manifest.version);
      expect(stderr).toContain('tsx: no build');
    },
    4 * commandMs,
  );

  it(
    'serves `postern mcp` from the bundle: an MCP client initializes and lists the tools',
    async () => {
      const data = createTempDir('postern-cli-mcp-');
      const socket = await startAgentSocket({ dataDir: data.path, backend: new ScriptedAgentBackend() });
      const args = [pkg.bin, 'mcp', '--data-dir', data.path];
      const transport = new StdioClientTransport({
        command: process.execPath,
        args,
        cwd: pkg.root,
        env: traced,
        stderr: 'pipe',
      });
      let stderr = '';
      transport.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
      const client = new Client({ name: 'cli-bundle-test', version: '1' });
      try {
        await client.connect(transport);
        expect(client.getServerVersion()?.name).toBeTruthy();
        const { tools } = await client.listTools();
        expect(tools.map((tool) => tool.name)).toContain('http_request');
        expect(stderr).toContain(`postern: running the bundle ${pkg.bundle}`);
      } finally {
        await client.close();
        await socket.close();
        data.remove();
      }
    },
    commandMs,
  );
});
