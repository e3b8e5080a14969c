import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { sqliteBindingEnv } from '../broker/ports/open-database.js';

const repoRoot = path.resolve(import.meta.dirname, '..');
const manifest = JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as {
  main: string;
  bin: Record<string, string>;
  dependencies: Record<string, string>;
};

describe('the Electron bundles (scripts/build-app.mjs)', () => {
  const outdir = mkdtempSync(path.join(os.tmpdir(), 'postern-app-'));
  let main = '';
  let preload = '';
  beforeAll(async () => {
    await promisify(execFile)(process.execPath, [path.join(repoRoot, 'scripts', 'build-app.mjs'), '--outdir', outdir], {
      cwd: repoRoot,
    });
    main = readFileSync(path.join(outdir, 'main.mjs'), 'utf8');
    preload = readFileSync(path.join(outdir, 'preload.cjs'), 'utf8');
  });
  afterAll(() => rmSync(outdir, { recursive: true, force: true }));

  it('gives a preload that requires only electron, as a sandboxed preload must', () => {
    const required = [...preload.matchAll(/require\("([^"]+)"\)/g)].map((m) => m[1]);
    expect(required).toEqual(['electron']);
    expect(preload).toContain('exposeInMainWorld("postern"');
  });

  it('gives a main bundle that imports only node builtins, electron and declared dependencies', () => {
    const imported = new Set([...main.matchAll(/^import .* from "([^"]+)";$/gm)].map((m) => m[1] as string));
    expect(imported.size).toBeGreaterThan(0);
    for (const specifier of imported) {
      // The package name: the first path segment, or the first two for a scoped package (@scope/name).
      const name = specifier
        .split('/')
        .slice(0, specifier.startsWith('@') ? 2 : 1)
        .join('/');
      const allowed =
        specifier.startsWith('node:') || specifier === 'electron' || Object.hasOwn(manifest.dependencies, name);
      expect(allowed, specifier).toBe(true);
    }
  });

  it('opens its window isolated and sandboxed, without node integration', () => {
    expect(main).toContain('contextIsolation: true');
    expect(main).toContain('sandbox: true');
    expect(main).toContain('nodeIntegration: false');
    expect(main).toContain('setWindowOpenHandler(() => ({ action: "deny" }))');
  });

  it('serves the page from app://postern, never file://, and replaces the default menu', () => {
    expect(main).toContain('protocol.registerSchemesAsPrivileged([appSchemePrivileges])');
    expect(main).toContain('bypassCSP: false');
    expect(main).toContain('ses.protocol.handle(appScheme,');
    expect(main).toContain('win.loadURL(appPageUrl)');
    expect(main).not.toContain('loadFile(');
    expect(main).toContain('Menu.setApplicationMenu(');
    expect(main).toContain('devTools: options.devTools');
  });
});

describe('package.json and electron-builder.yml', () => {
  const config = parse(readFileSync(path.join(repoRoot, 'electron-builder.yml'), 'utf8')) as Record<string, unknown> & {
    files: string[];
    extraMetadata: { main: string };
    linux: { target: string[] };
    mac: { target: string[] };
    win: { target: string[] };
    extraResources: Array<{ from: string; to: string; filter: string[] }>;
  };

  it('runs the bundled main process', () => {
    expect(manifest.main).toBe('dist/app/main.mjs');
    expect(config.extraMetadata.main).toBe(manifest.main);
    expect(manifest.bin['postern']).toBe('bin/postern.mjs');
  });

  it('packs the bundles, with asar and without an in-place native rebuild', () => {
    expect(config).toMatchObject({ appId: 'dev.postern.app', productName: 'Postern', asar: true, npmRebuild: false });
    expect(config.files).toEqual(expect.arrayContaining(['package.json', 'dist/app/**', 'dist/renderer/**']));
  });

  it('leaves tests, benchmarks and source maps out', () => {
    expect(config.files).toEqual(
      expect.arrayContaining(['!**/*.test.*', '!bench/**', '!e2e/**', '!tests/**', '!**/*.map']),
    );
  });

  it('targets AppImage and deb, dmg, and nsis', () => {
    expect(config.linux.target).toEqual(['AppImage', 'deb']);
    expect(config.mac.target).toEqual(['dmg']);
    expect(config.win.target).toEqual(['nsis']);
  });

  it('ships better-sqlite3’s Electron build from its own folder, outside the asar', () => {
    expect(config.extraResources).toEqual([
      {
        from: 'dist/native-electron',
        to: 'native-electron',
        filter: ['better-sqlite3/build/Release/better_sqlite3.node', 'build-info.json'],
      },
    ]);
    expect(config.files).toContain('!dist/native-electron/**');
  });
});

describe('better-sqlite3’s two builds', () => {
  it('main and the journal agree on the variable that names the Electron build', () => {
    // app/ may not import broker/journal, so the name is written twice; this keeps them equal.
    const appSide = readFileSync(path.join(repoRoot, 'app', 'main', 'sqlite-binding.ts'), 'utf8');
    expect(appSide).toContain(`export const sqliteBindingEnv = '${sqliteBindingEnv}';`);
  });

  describe('when Electron’s headers cannot be downloaded (as on this machine)', () => {
    const home = mkdtempSync(path.join(os.tmpdir(), 'postern-home-'));
    const outdir = path.join(home, 'native-electron');
    const nodeBuild = path.join(repoRoot, 'node_modules', 'better-sqlite3', 'build', 'Release', 'better_sqlite3.node');
    const before = digest(nodeBuild);
    const electronVersion = (
      JSON.parse(readFileSync(path.join(repoRoot, 'node_modules', 'electron', 'package.json'), 'utf8')) as {
        version: string;
      }
    ).version;
    let result: { code: number; stderr: string } = { code: -1, stderr: '' };
    beforeAll(async () => {
      // A header URL nobody answers and an empty HOME (no cached headers): the same failure on every machine.
      const script = path.join(repoRoot, 'scripts', 'rebuild-electron-native.mjs');
      result = await new Promise((resolve) => {
        execFile(
          process.execPath,
          [script, '--outdir', outdir, '--header-url', 'http://127.0.0.1:9'],
          { cwd: repoRoot, timeout: 60_000, env: { ...process.env, HOME: home, USERPROFILE: home } },
          (error, _stdout, stderr) =>
            resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : -1, stderr }),
        );
      });
    }, 70_000);
    afterAll(() => rmSync(home, { recursive: true, force: true }));

    it('the rebuild script fails with exit code 2 and says why, without faking a build', () => {
      expect(result.code).toBe(2);
      expect(result.stderr).toContain(`Electron ${electronVersion}'s headers are not on this machine`);
      expect(result.stderr).toContain('could not be downloaded from http://127.0.0.1:9');
      expect(existsSync(outdir)).toBe(false);
    });

    it('leaves node_modules’ Node build as it was', () => {
      expect(digest(nodeBuild)).toBe(before);
    });
  });
});

function digest(file: string): string {
  return createHash('sha256').update(readFileSync(file)).digest('hex');
}
