import path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  desktopBundle,
  displayAvailable,
  electronSqliteBuild,
  probeDesktop,
  type DesktopProbeInputs,
} from './desktop-probe.js';

const root = '/repo';
const electronDir = path.join(root, 'node_modules', 'electron');
const binary = path.join(electronDir, 'dist', 'electron');

/** A fake file system: the files that exist and the text of path.txt. */
function inputs(files: readonly string[], overrides: Partial<DesktopProbeInputs> = {}): DesktopProbeInputs {
  const present = new Set(files);
  return {
    packageRoot: root,
    electronDir,
    env: { DISPLAY: ':0' },
    platform: 'linux',
    exists: (file) => present.has(file),
    readText: (file) => (file === path.join(electronDir, 'path.txt') && present.has(file) ? 'electron\n' : undefined),
    ...overrides,
  };
}
const everything = [
  path.join(electronDir, 'path.txt'),
  binary,
  path.join(root, desktopBundle),
  path.join(root, electronSqliteBuild),
];

describe('probeDesktop', () => {
  it('uses Electron when the binary, a display and the bundle are all there', () => {
    expect(probeDesktop(inputs(everything))).toEqual({ usable: true, electronPath: binary });
  });

  it.each<[string, DesktopProbeInputs, RegExp]>([
    [
      'the electron package is not installed',
      inputs(everything, { electronDir: undefined }),
      /electron package is not installed/,
    ],
    ['the binary was never downloaded (no path.txt)', inputs(everything.slice(1)), /path\.txt is missing/],
    [
      'path.txt points at a missing binary',
      inputs([everything[0] as string, everything[2] as string, everything[3] as string]),
      /binary is missing at \/repo\/node_modules\/electron\/dist\/electron/,
    ],
    ['there is no display on Linux', inputs(everything, { env: {} }), /no display/],
    ['DISPLAY is empty', inputs(everything, { env: { DISPLAY: '' } }), /no display/],
    [
      'the desktop bundle is not built',
      inputs([...everything.slice(0, 2), everything[3] as string]),
      /dist\/app\/main\.mjs is not built/,
    ],
    ['better-sqlite3 has no Electron build', inputs(everything.slice(0, 3)), /not built for Electron/],
  ])('runs headless, saying why, when %s', (_when, probeInputs, reason) => {
    const probe = probeDesktop(probeInputs);
    expect(probe.usable).toBe(false);
    expect(probe.usable === false && probe.reason).toMatch(reason);
  });

  it('accepts Wayland as a display', () => {
    expect(probeDesktop(inputs(everything, { env: { WAYLAND_DISPLAY: 'wayland-0' } })).usable).toBe(true);
  });
});

describe('displayAvailable', () => {
  it.each<[NodeJS.Platform, Record<string, string>, boolean]>([
    ['darwin', {}, true],
    ['win32', {}, true],
    ['linux', {}, false],
    ['linux', { DISPLAY: ':1' }, true],
    ['freebsd', { WAYLAND_DISPLAY: 'w' }, true],
  ])('on %s with %j is %s', (platform, env, expected) => {
    expect(displayAvailable(platform, env)).toBe(expected);
  });
});
