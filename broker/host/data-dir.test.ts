import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync, chmodSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CodedError } from '../contract/index.js';
import { ensureDataDir, resolveDataDir, type DataDirInputs } from './data-dir.js';

const linux: DataDirInputs = { flag: undefined, env: {}, platform: 'linux', home: '/home/ann', cwd: '/work' };

describe('resolveDataDir', () => {
  it.each<[string, Partial<DataDirInputs>, string]>([
    ['the flag wins over POSTERN_DATA_DIR', { flag: '/flag', env: { POSTERN_DATA_DIR: '/env' } }, '/flag'],
    ['a relative flag resolves against the working directory', { flag: 'data' }, '/work/data'],
    [
      'POSTERN_DATA_DIR wins over the platform default',
      { env: { POSTERN_DATA_DIR: '/env', XDG_DATA_HOME: '/xdg' } },
      '/env',
    ],
    ['an empty POSTERN_DATA_DIR is ignored', { env: { POSTERN_DATA_DIR: '' } }, '/home/ann/.local/share/postern'],
    ['Linux uses XDG_DATA_HOME', { env: { XDG_DATA_HOME: '/xdg' } }, '/xdg/postern'],
    ['Linux ignores a relative XDG_DATA_HOME', { env: { XDG_DATA_HOME: 'rel' } }, '/home/ann/.local/share/postern'],
    ['Linux falls back to ~/.local/share', {}, '/home/ann/.local/share/postern'],
    ['FreeBSD follows XDG too', { platform: 'freebsd' }, '/home/ann/.local/share/postern'],
    [
      'macOS uses Application Support',
      { platform: 'darwin', home: '/Users/ann', env: { XDG_DATA_HOME: '/xdg' } },
      '/Users/ann/Library/Application Support/Postern',
    ],
    [
      'Windows uses APPDATA',
      { platform: 'win32', home: 'C:\\Users\\ann', env: { APPDATA: 'C:\\Users\\ann\\AppData\\Roaming' } },
      'C:\\Users\\ann\\AppData\\Roaming\\Postern',
    ],
    [
      'Windows without APPDATA derives it from home',
      { platform: 'win32', home: 'C:\\Users\\ann' },
      'C:\\Users\\ann\\AppData\\Roaming\\Postern',
    ],
    [
      'Windows resolves a relative flag with Windows paths',
      { platform: 'win32', flag: 'data', cwd: 'C:\\work' },
      'C:\\work\\data',
    ],
  ])('when %s', (_when, overrides, expected) => {
    expect(resolveDataDir({ ...linux, ...overrides })).toBe(expected);
  });

  it.each<[string, Partial<DataDirInputs>]>([
    ['the flag is empty', { flag: '' }],
    ['the flag is blank', { flag: '   ' }],
    ['there is no home directory to derive a default from', { home: '' }],
  ])('refuses with INVALID_ARGUMENT naming --data-dir when %s', (_when, overrides) => {
    const attempt = () => resolveDataDir({ ...linux, ...overrides });
    expect(attempt).toThrow(CodedError);
    expect(attempt).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT', field: '--data-dir' }));
  });
});

describe('ensureDataDir', () => {
  beforeEach((ctx) => {
    if (process.platform === 'win32') ctx.skip('POSIX modes and owners do not apply on Windows');
  });
  let scratch: string | undefined;
  const makeScratch = (): string => (scratch = mkdtempSync(path.join(os.tmpdir(), 'postern-datadir-')));
  afterEach(() => {
    if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
  });

  it('creates missing directories, the data dir itself with mode 0700 whatever the umask', () => {
    const dir = path.join(makeScratch(), 'a', 'b', 'postern');
    const previous = process.umask(0o000);
    try {
      ensureDataDir(dir);
    } finally {
      process.umask(previous);
    }
    expect(statSync(dir).mode & 0o777).toBe(0o700);
  });

  it('accepts an existing private directory', () => {
    const dir = path.join(makeScratch(), 'postern');
    mkdirSync(dir, { mode: 0o700 });
    chmodSync(dir, 0o700);
    expect(() => ensureDataDir(dir)).not.toThrow();
  });

  it('refuses an existing directory other users can read, and leaves its mode alone', () => {
    const dir = path.join(makeScratch(), 'shared');
    mkdirSync(dir);
    chmodSync(dir, 0o755);
    expect(() => ensureDataDir(dir)).toThrow(
      expect.objectContaining({
        code: 'INVALID_ARGUMENT',
        field: '--data-dir',
        message: expect.stringContaining('0755'),
      }),
    );
    expect(statSync(dir).mode & 0o777).toBe(0o755);
  });

  it('refuses a path that is a file', () => {
    const file = path.join(makeScratch(), 'file');
    writeFileSync(file, 'x');
    expect(() => ensureDataDir(file)).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', field: '--data-dir' }),
    );
  });
});
