import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import type { CliIo } from './cli-io.js';
import { launchDesktop, type DesktopLaunch } from './launch-desktop.js';

/**
 * The Electron binary cannot run here, so a stand-in executable records what it was started with
 * and exits with a chosen code: the launch contract (argv, env, exit code) is what is tested.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'postern-desktop-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const errors: string[] = [];
const io: CliIo = { out: () => undefined, err: (line) => errors.push(line), event: () => undefined };

function fakeElectron(exitCode: number): { binary: string; record: string } {
  const record = path.join(scratch, `record-${exitCode}.json`);
  const binary = path.join(scratch, `electron-${exitCode}`);
  writeFileSync(
    binary,
    `#!${process.execPath}\nrequire('node:fs').writeFileSync(${JSON.stringify(record)}, JSON.stringify({ argv: process.argv.slice(2), dataDir: process.env.POSTERN_DATA_DIR, runAsNode: process.env.ELECTRON_RUN_AS_NODE ?? null, passphraseFile: process.env.POSTERN_PASSPHRASE_FILE ?? null }));\nprocess.exit(${exitCode});\n`,
  );
  chmodSync(binary, 0o755);
  return { binary, record };
}

describe('launchDesktop', () => {
  beforeEach((ctx) => {
    if (process.platform === 'win32') ctx.skip('the stand-in binary is a POSIX script');
  });

  it('runs Electron on the package root with the data directory in POSTERN_DATA_DIR, and mirrors its exit code', async () => {
    const { binary, record } = fakeElectron(3);
    const env = { ...process.env, ELECTRON_RUN_AS_NODE: '1' };
    const code = await launchDesktop({ electronPath: binary, packageRoot: '/repo', dataDir: '/data/postern', io, env });
    expect(code).toBe(3);
    expect(JSON.parse(readFileSync(record, 'utf8'))).toEqual({
      argv: ['--inspect-port=192.0.2.1:9229', '/repo'],
      dataDir: '/data/postern',
      runAsNode: null,
      passphraseFile: null,
    });
  });

  it('says that POSTERN_PASSPHRASE_FILE is not read by the window, and does not hand it to Electron', async () => {
    const { binary, record } = fakeElectron(4);
    const env = { ...process.env, POSTERN_PASSPHRASE_FILE: '/home/me/.postern-pass' };
    errors.length = 0;
    expect(await launchDesktop({ electronPath: binary, packageRoot: '/repo', dataDir: '/d', io, env })).toBe(4);
    expect(errors).toEqual([
      'warning: POSTERN_PASSPHRASE_FILE is set, but the desktop app does not read it (only `postern daemon` and a ' +
        'headless `postern start` do): the vault starts locked; unlock it in the window.',
    ]);
    expect(JSON.parse(readFileSync(record, 'utf8'))).toMatchObject({ passphraseFile: null });
    // Unset or empty: nothing to say.
    errors.length = 0;
    await launchDesktop({
      electronPath: binary,
      packageRoot: '/repo',
      dataDir: '/d',
      io,
      env: { POSTERN_PASSPHRASE_FILE: '' },
    });
    expect(errors).toEqual([]);
  });

  it("refuses start's headless-only options, naming them, and never starts Electron (the window would drop them)", () => {
    const { binary, record } = fakeElectron(0);
    const launch = (given: DesktopLaunch['given']) => () =>
      launchDesktop({ electronPath: binary, packageRoot: '/repo', dataDir: '/d', io, env: {}, given });
    expect(launch(['--config'])).toThrow(
      expect.objectContaining({
        code: 'INVALID_ARGUMENT',
        field: '--config',
        message: expect.stringContaining('the desktop app does not take --config (only the headless broker does)'),
      }),
    );
    expect(launch(['--port', '--passphrase-file'])).toThrow(
      expect.objectContaining({ field: '--port', message: expect.stringContaining('--port, --passphrase-file') }),
    );
    expect(existsSync(record)).toBe(false);
  });

  it('reports a binary that cannot be started and exits 1', async () => {
    const code = await launchDesktop({
      electronPath: path.join(scratch, 'missing'),
      packageRoot: '/repo',
      dataDir: '/d',
      io,
      env: {},
    });
    expect(code).toBe(1);
    expect(errors.at(-1)).toMatch(/could not start Electron at .*missing/);
  });
});
