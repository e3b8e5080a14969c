import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';

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
    await promisify(execFile)(process.execPath, [path.join(repoRoot, 'scripts', 'build-app.mjs'), '--outdir', outdir], { cwd: repoRoot });
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
      const name = specifier.split('/').slice(0, specifier.startsWith('@') ? 2 : 1).join('/');
      const allowed = specifier.startsWith('node:') || specifier === 'electron' || Object.hasOwn(manifest.dependencies, name);
      expect(allowed, specifier).toBe(true);
    }
  });

  it('opens its window isolated and sandboxed, without node integration', () => {
    expect(main).toContain('contextIsolation: true');
    expect(main).toContain('sandbox: true');
    expect(main).toContain('nodeIntegration: false');
    expect(main).toContain('setWindowOpenHandler(() => ({ action: "deny" }))');
  });
});

describe('package.json and electron-builder.yml', () => {
  const config = parse(readFileSync(path.join(repoRoot, 'electron-builder.yml'), 'utf8')) as Record<string, unknown> & {
    files: string[];
    extraMetadata: { main: string };
    linux: { target: string[] };
    mac: { target: string[] };
    win: { target: string[] };
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
    expect(config.files).toEqual(expect.arrayContaining(['!**/*.test.*', '!bench/**', '!e2e/**', '!tests/**', '!**/*.map']));
  });

  it('targets AppImage and deb, dmg, and nsis', () => {
    expect(config.linux.target).toEqual(['AppImage', 'deb']);
    expect(config.mac.target).toEqual(['dmg']);
    expect(config.win.target).toEqual(['nsis']);
  });
});
