import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { _electron, type ElectronApplication } from 'playwright-core';
import { displayAvailable } from '../broker/cli/desktop-probe.js';

/**
 * Whether the e2e specs can also run against the real desktop app, decided without loading the
 * electron package (its index.js downloads the binary on first require, which fails offline —
 * STACK-NOTES): path.txt names the binary, the binary must exist and answer `--version`, and the
 * app needs its bundles, better-sqlite3's Electron build and a display.
 */
export type ElectronAvailability = { available: true; electronPath: string } | { available: false; reason: string };

const versionWaitMs = 10_000;

export function electronAvailability(repoRoot: string): ElectronAvailability {
  const electronDir = path.join(repoRoot, 'node_modules', 'electron');
  const pathFile = path.join(electronDir, 'path.txt');
  const relative = existsSync(pathFile) ? readFileSync(pathFile, 'utf8').trim() : '';
  const electronPath = path.join(electronDir, 'dist', relative === '' ? 'electron' : relative);
  if (relative === '' || !existsSync(electronPath)) {
    return {
      available: false,
      reason: `Electron's binary is not installed on this machine (${electronPath}) — the same specs run against the headless daemon`,
    };
  }
  const version = spawnSync(electronPath, ['--version'], {
    encoding: 'utf8',
    timeout: versionWaitMs,
    env: { ...process.env, ELECTRON_RUN_AS_NODE: '1' },
  });
  if (version.status !== 0) {
    return {
      available: false,
      reason: `Electron's binary at ${electronPath} does not run (${(version.stderr || String(version.error ?? '')).trim().split('\n')[0]}) — the same specs run against the headless daemon`,
    };
  }
  if (!displayAvailable(process.platform, process.env)) {
    return {
      available: false,
      reason:
        'no display for Electron (DISPLAY and WAYLAND_DISPLAY are unset; try xvfb-run) — the same specs run against the headless daemon',
    };
  }
  for (const [file, how] of [
    [path.join(repoRoot, 'dist', 'app', 'main.mjs'), 'npm run build:app'],
    [path.join(repoRoot, 'dist', 'renderer', 'index.html'), 'npm run build:renderer'],
    [
      path.join(repoRoot, 'dist', 'native-electron', 'better-sqlite3', 'build', 'Release', 'better_sqlite3.node'),
      'npm run rebuild:electron-native',
    ],
  ] as const) {
    if (!existsSync(file))
      return {
        available: false,
        reason: `${path.relative(repoRoot, file)} is missing (${how}) — the same specs run against the headless daemon`,
      };
  }
  return { available: true, electronPath };
}

/** The line a skipped run prints, so a reader of the log sees what was not exercised and why. */
export function skippedLine(availability: Extract<ElectronAvailability, { available: false }>): string {
  return `skipped: ${availability.reason}`;
}

/** Starts the desktop app from the repository (package.json "main" → dist/app/main.mjs) on a fresh data directory. */
export async function launchDesktopApp(
  electronPath: string,
  repoRoot: string,
  dataDir: string,
): Promise<ElectronApplication> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env))
    if (value !== undefined && name !== 'ELECTRON_RUN_AS_NODE') env[name] = value;
  env['POSTERN_DATA_DIR'] = dataDir;
  return _electron.launch({ executablePath: electronPath, args: [repoRoot], env, timeout: 30_000 });
}
