import path from 'node:path';

export interface DesktopProbeInputs {
  packageRoot: string;
  /** node_modules/electron, or undefined when the package cannot be resolved. */
  electronDir: string | undefined;
  env: Readonly<Record<string, string | undefined>>;
  platform: NodeJS.Platform;
  exists(file: string): boolean;
  readText(file: string): string | undefined;
}

export type DesktopProbe = { usable: true; electronPath: string } | { usable: false; reason: string };

/** The Electron main bundle `npm run build:app` writes; `electron <packageRoot>` runs it via package.json "main". */
export const desktopBundle = path.join('dist', 'app', 'main.mjs');

/**
 * better-sqlite3 built for Electron's ABI (scripts/rebuild-electron-native.mjs; app/main/sqlite-binding.ts
 * reads the same place in a development tree). Without it the app could not open its journal.
 */
export const electronSqliteBuild = path.join(
  'dist',
  'native-electron',
  'better-sqlite3',
  'build',
  'Release',
  'better_sqlite3.node',
);

/**
 * Can `postern start` open the desktop app? Decided from files only: the electron package
 * downloads its binary lazily the first time it is required (STACK-NOTES), which hangs or fails
 * offline, so this never loads it. It reads path.txt, the way electron's own index.js finds the
 * binary, and checks that the binary exists.
 */
export function probeDesktop(inputs: DesktopProbeInputs): DesktopProbe {
  const { electronDir } = inputs;
  if (electronDir === undefined) return { usable: false, reason: 'the electron package is not installed' };
  const relative = inputs.readText(path.join(electronDir, 'path.txt'))?.trim();
  if (relative === undefined || relative === '') {
    return {
      usable: false,
      reason: 'the Electron binary is not downloaded (node_modules/electron/path.txt is missing)',
    };
  }
  const electronPath = path.join(electronDir, 'dist', relative);
  if (!inputs.exists(electronPath)) {
    return { usable: false, reason: `the Electron binary is missing at ${electronPath}` };
  }
  if (!displayAvailable(inputs.platform, inputs.env)) {
    return { usable: false, reason: 'no display is available (DISPLAY and WAYLAND_DISPLAY are unset)' };
  }
  if (!inputs.exists(path.join(inputs.packageRoot, desktopBundle))) {
    return { usable: false, reason: `the desktop bundle ${desktopBundle} is not built (run \`npm run build\`)` };
  }
  if (!inputs.exists(path.join(inputs.packageRoot, electronSqliteBuild))) {
    return {
      usable: false,
      reason: `better-sqlite3 is not built for Electron (${electronSqliteBuild}; run \`npm run rebuild:electron-native\`)`,
    };
  }
  return { usable: true, electronPath };
}

/** macOS and Windows always have a window server for a logged-in user; X11/Wayland say so in env. */
export function displayAvailable(
  platform: NodeJS.Platform,
  env: Readonly<Record<string, string | undefined>>,
): boolean {
  if (platform === 'darwin' || platform === 'win32') return true;
  return Boolean(env['DISPLAY']) || Boolean(env['WAYLAND_DISPLAY']);
}
