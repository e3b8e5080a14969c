import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  copyFileSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';

/**
 * electron-builder.yml checked for real, offline (STACK-NOTES: `--linux dir` with a local
 * electronDist and npmRebuild false packs without the network; installers need it):
 *
 * 1. the file passes electron-builder's own configuration validator (its JSON schema);
 * 2. `electron-builder --linux dir` packs a copy of the project against a stand-in Electron
 *    distribution: a file carrying Electron's fuse sentinel and a fuse wire, so the configured
 *    fuses are really flipped by @electron/fuses and read back here.
 *
 * The copy lives under the repository's tmp/ (gitignored) with node_modules hard-linked, so the
 * dependency walk sees the real tree; nothing in the repository's own dist/ is written.
 */
const repoRoot = path.resolve(import.meta.dirname, '..');
const require = createRequire(import.meta.url);
const packTimeoutMs = 60_000;

/** @electron/fuses: the sentinel before the wire, and the wire's states. */
const fuseSentinel = 'dL7pKGdnNz796PbbjQWNKmHXBZaB9tsX';
const FuseState = { disable: 0x30, enable: 0x31 } as const;
/** Positions on the V1 wire (@electron/fuses FuseV1Options). */
const Fuse = {
  RunAsNode: 0,
  EnableCookieEncryption: 1,
  EnableNodeOptionsEnvironmentVariable: 2,
  EnableNodeCliInspectArguments: 3,
  EnableEmbeddedAsarIntegrityValidation: 4,
  OnlyLoadAppFromAsar: 5,
  LoadBrowserProcessSpecificV8Snapshot: 6,
  GrantFileProtocolExtraPrivileges: 7,
} as const;

const config = parse(readFileSync(path.join(repoRoot, 'electron-builder.yml'), 'utf8')) as Record<string, unknown>;

describe('electron-builder.yml against electron-builder’s own schema', () => {
  type Validate = (config: unknown, logger: unknown) => Promise<void>;
  const { validateConfiguration } = require('app-builder-lib/out/util/config/config.js') as {
    validateConfiguration: Validate;
  };
  const { DebugLogger } = require('builder-util') as { DebugLogger: new (enabled: boolean) => unknown };

  it('is a valid configuration', async () => {
    await expect(validateConfiguration(structuredClone(config), new DebugLogger(false))).resolves.toBeUndefined();
  });

  it('would be refused if a fuse were misspelled (the schema has teeth)', async () => {
    const broken = { ...structuredClone(config), electronFuses: { runAsNod: false } };
    await expect(validateConfiguration(broken, new DebugLogger(false))).rejects.toThrow(
      /Invalid configuration object[\s\S]*electronFuses/,
    );
  });

  it('turns off RunAsNode, NODE_OPTIONS, --inspect and file://’s extra privileges, encrypts cookies, loads only a validated app.asar', () => {
    expect(config['electronFuses']).toEqual({
      runAsNode: false,
      enableNodeOptionsEnvironmentVariable: false,
      enableNodeCliInspectArguments: false,
      onlyLoadAppFromAsar: true,
      enableEmbeddedAsarIntegrityValidation: true,
      grantFileProtocolExtraPrivileges: false,
      enableCookieEncryption: true,
    });
  });

  it('would be refused if the file-protocol or cookie fuse were misspelled (the names are the ones electron-builder 26 knows)', async () => {
    for (const fuse of ['grantFileProtocolExtraPrivilege', 'enableCookiesEncryption']) {
      const broken = { ...structuredClone(config), electronFuses: { [fuse]: false } };
      await expect(validateConfiguration(broken, new DebugLogger(false)), fuse).rejects.toThrow(/electronFuses/);
    }
  });
});

describe('electron-builder --linux dir with a stand-in Electron distribution', () => {
  let work = '';
  let appOut = '';
  let packLog = '';
  const nodeBuild = path.join(repoRoot, 'node_modules', 'better-sqlite3', 'build', 'Release', 'better_sqlite3.node');
  const nodeBuildDigest = digest(nodeBuild);
  const standInElectronBuild = 'stand-in for the Electron-ABI better_sqlite3.node';

  beforeAll(async () => {
    mkdirSync(path.join(repoRoot, 'tmp'), { recursive: true });
    work = mkdtempSync(path.join(repoRoot, 'tmp', 'electron-builder-'));
    const project = path.join(work, 'project');
    mkdirSync(project);
    for (const file of ['package.json', 'package-lock.json', 'electron-builder.yml'])
      copyFileSync(path.join(repoRoot, file), path.join(project, file));
    linkTree(path.join(repoRoot, 'node_modules'), path.join(project, 'node_modules'));
    // postern-peercred is a file: dependency; its node_modules entry is a relative symlink to native/peercred.
    linkTree(path.join(repoRoot, 'native', 'peercred'), path.join(project, 'native', 'peercred'));
    await promisify(execFile)(
      process.execPath,
      [path.join(repoRoot, 'scripts', 'build-app.mjs'), '--outdir', path.join(project, 'dist', 'app')],
      { cwd: repoRoot },
    );
    writeFiles(project, {
      'dist/app/main.mjs.map': '{}',
      'dist/renderer/index.html': `<meta http-equiv="Content-Security-Policy" content="script-src 'self'; object-src 'none'"><script type="module" src="./assets/index.js"></script>`,
      'dist/renderer/assets/index.js': 'export {};',
      'dist/native-electron/better-sqlite3/build/Release/better_sqlite3.node': standInElectronBuild,
      'dist/native-electron/build-info.json': '{"electron":"45.5.0"}',
      'dist/native-electron/.staging/better-sqlite3/binding.gyp': '{}',
      'tests/should-not-ship.test.ts': '',
    });
    const electronDist = path.join(work, 'electron-dist');
    mkdirSync(electronDist);
    writeFileSync(path.join(electronDist, 'electron'), standInElectron(), { mode: 0o755 });
    writeFileSync(path.join(electronDist, 'version'), '45.5.0');
    const output = path.join(work, 'out');
    const cli = path.join(path.dirname(require.resolve('electron-builder/package.json')), 'cli.js');
    const { stdout, stderr } = await promisify(execFile)(
      process.execPath,
      [
        cli,
        '--linux',
        'dir',
        '--projectDir',
        project,
        `-c.electronDist=${electronDist}`,
        `-c.directories.output=${output}`,
      ],
      { cwd: project, timeout: packTimeoutMs, maxBuffer: 16 * 1024 * 1024, env: withoutVitest(process.env) },
    );
    packLog = `${stdout}\n${stderr}`;
    appOut = path.join(output, 'linux-unpacked');
  }, packTimeoutMs + 30_000);

  afterAll(() => {
    if (work !== '') rmSync(work, { recursive: true, force: true });
  });

  it('packs without rebuilding native modules in place', () => {
    expect(packLog).toContain('skipped dependencies rebuild');
    expect(digest(nodeBuild)).toBe(nodeBuildDigest);
  });

  it('puts the bundles and the production dependencies in app.asar, and leaves tests, maps and dev tools out', () => {
    const { listPackage, extractFile } = require('@electron/asar') as {
      listPackage(archive: string, options: object): string[];
      extractFile(archive: string, file: string): Buffer;
    };
    const archive = path.join(appOut, 'resources', 'app.asar');
    const entries = new Set(listPackage(archive, {}).map((entry) => entry.split(path.sep).join('/')));
    for (const file of [
      '/package.json',
      '/dist/app/main.mjs',
      '/dist/app/preload.cjs',
      '/dist/renderer/index.html',
      '/dist/renderer/assets/index.js',
    ]) {
      expect(entries, file).toContain(file);
    }
    for (const dependency of ['better-sqlite3', 'zod', 'bindings', 'ssh2', 'postern-peercred'])
      expect(entries, dependency).toContain(`/node_modules/${dependency}/package.json`);
    for (const devTool of ['electron', 'electron-builder', 'vitest', 'typescript', 'vite'])
      expect(entries, devTool).not.toContain(`/node_modules/${devTool}/package.json`);
    expect(
      [...entries].filter(
        (entry) => entry.endsWith('.map') || entry.startsWith('/tests/') || entry.startsWith('/dist/native-electron'),
      ),
    ).toEqual([]);
    const manifest = JSON.parse(extractFile(archive, 'package.json').toString('utf8')) as { main: string };
    expect(manifest.main).toBe('dist/app/main.mjs');
  });

  it('unpacks native addons next to the asar', () => {
    const unpacked = path.join(appOut, 'resources', 'app.asar.unpacked', 'node_modules');
    expect(digest(path.join(unpacked, 'better-sqlite3', 'build', 'Release', 'better_sqlite3.node'))).toBe(
      nodeBuildDigest,
    );
    expect(readdirSync(path.join(unpacked, 'postern-peercred', 'build', 'Release'))).toContain('peercred.node');
  });

  it('ships better-sqlite3’s Electron build as the native-electron resource, and nothing else from that folder', () => {
    const shipped = path.join(appOut, 'resources', 'native-electron');
    expect(readFileSync(path.join(shipped, 'better-sqlite3', 'build', 'Release', 'better_sqlite3.node'), 'utf8')).toBe(
      standInElectronBuild,
    );
    expect(readdirSync(shipped).sort()).toEqual(['better-sqlite3', 'build-info.json']);
  });

  it('flips the fuses in the packed binary', () => {
    const wire = readFuseWire(path.join(appOut, 'postern'));
    expect(wire[Fuse.RunAsNode]).toBe(FuseState.disable);
    expect(wire[Fuse.EnableNodeOptionsEnvironmentVariable]).toBe(FuseState.disable);
    expect(wire[Fuse.EnableNodeCliInspectArguments]).toBe(FuseState.disable);
    expect(wire[Fuse.EnableEmbeddedAsarIntegrityValidation]).toBe(FuseState.enable);
    expect(wire[Fuse.OnlyLoadAppFromAsar]).toBe(FuseState.enable);
    // The stand-in starts with Electron's defaults for these two (cookies plain, file:// privileged).
    expect(wire[Fuse.GrantFileProtocolExtraPrivileges]).toBe(FuseState.disable);
    expect(wire[Fuse.EnableCookieEncryption]).toBe(FuseState.enable);
    // Not configured: left as the binary had it.
    expect(wire[Fuse.LoadBrowserProcessSpecificV8Snapshot]).toBe(FuseState.disable);
  });
});

/**
 * A stand-in for Electron's executable: a shell script that carries the fuse sentinel, wire
 * version 1 and an eight-fuse wire in Electron's defaults (RunAsNode, NODE_OPTIONS and inspect on).
 */
function standInElectron(): Buffer {
  const wire = [
    FuseState.enable,
    FuseState.disable,
    FuseState.enable,
    FuseState.enable,
    FuseState.disable,
    FuseState.disable,
    FuseState.disable,
    FuseState.enable,
  ];
  return Buffer.concat([
    Buffer.from(`#!/bin/sh\nexit 0\n# ${fuseSentinel}`),
    Buffer.from([1, wire.length, ...wire]),
    Buffer.from('\n'),
  ]);
}

function readFuseWire(binary: string): number[] {
  const bytes = readFileSync(binary);
  const at = bytes.indexOf(fuseSentinel);
  expect(at, 'fuse sentinel').toBeGreaterThanOrEqual(0);
  const wire = at + fuseSentinel.length;
  expect(bytes[wire], 'fuse wire version').toBe(1);
  return [...bytes.subarray(wire + 2, wire + 2 + (bytes[wire + 1] ?? 0))];
}

/** A hard-linked copy (same file system: the copy is under the repository's tmp/); symlinks are recreated as they were. */
function linkTree(from: string, to: string): void {
  mkdirSync(to, { recursive: true });
  for (const entry of readdirSync(from, { withFileTypes: true })) {
    const source = path.join(from, entry.name);
    const target = path.join(to, entry.name);
    if (entry.isSymbolicLink()) symlinkSync(readlinkSync(source), target);
    else if (entry.isDirectory()) linkTree(source, target);
    else linkSync(source, target);
  }
}

/** electron-builder's logger goes quiet when it sees VITEST; the test reads its log. */
function withoutVitest(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(env).filter(([name]) => !name.startsWith('VITEST')));
}

function writeFiles(root: string, files: Record<string, string>): void {
  for (const [relative, text] of Object.entries(files)) {
    const file = path.join(root, ...relative.split('/'));
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, text);
  }
}

function digest(file: string): string {
  return createHash('sha256').update(readFileSync(file)).digest('hex');
}
