import { chmodSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { brokerStatusSchema } from '../broker/contract/index.js';
import { PosternProcess, signInAsProgram, startDaemon } from './support/postern-process.js';

/** `postern` as a real subprocess: node bin/postern.mjs, tsx, commander, the host, real sockets. */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'postern-cli-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
let dirs = 0;
const freshDir = (): string => path.join(scratch, `data-${(dirs += 1)}`);

async function run(args: readonly string[], env: Record<string, string | undefined> = {}) {
  const proc = new PosternProcess(args, env);
  const exit = await proc.exitWithin();
  return { code: exit.code, stdout: proc.stdout, stderr: proc.stderr };
}

describe.concurrent('postern with bad arguments', () => {
  it.each<[string, string[], string]>([
    ['a non-numeric port', ['daemon', '--port', 'abc'], 'INVALID_ARGUMENT --port:'],
    ['a port out of range', ['daemon', '--port', '70000'], 'INVALID_ARGUMENT --port:'],
    ['a negative port', ['start', '--port', '-1'], 'INVALID_ARGUMENT --port:'],
    ['an unknown option', ['status', '--bogus'], 'INVALID_ARGUMENT --bogus:'],
    ['a missing option value', ['status', '--data-dir'], 'INVALID_ARGUMENT --data-dir:'],
    ['an empty data dir', ['status', '--data-dir', ''], 'INVALID_ARGUMENT --data-dir:'],
    ['an unknown command', ['frobnicate'], 'INVALID_ARGUMENT command:'],
    ['no command', [], 'INVALID_ARGUMENT command: a command is required'],
    ['an extra argument', ['status', 'extra'], 'INVALID_ARGUMENT arguments:'],
    [
      'a zero search bound (tests only)',
      ['daemon', '--test-action-list-scan-rows', '0'],
      'INVALID_ARGUMENT --test-action-list-scan-rows: must be an integer from 1 to 10000',
    ],
    [
      'a search bound above the default (it may only lower it)',
      ['daemon', '--test-action-list-scan-rows', '10001'],
      'INVALID_ARGUMENT --test-action-list-scan-rows:',
    ],
    ['the search bound on start (daemon only)', ['start', '--test-action-list-scan-rows', '5'], 'INVALID_ARGUMENT'],
  ])('exits 2 with a coded error naming the option for %s', async (_when, args, expected) => {
    const result = await run(args);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(`postern: ${expected}`);
    expect(result.stdout).not.toContain('Operator UI');
  });

  it('exits 2 naming --data-dir when the directory is readable by others', async () => {
    const shared = freshDir();
    mkdirSync(shared);
    chmodSync(shared, 0o755);
    const result = await run(['daemon', '--data-dir', shared]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/postern: INVALID_ARGUMENT --data-dir: .* accessible to other users \(mode 0755\)/);
  });

  it('exits 2 naming --port when the port is taken', async () => {
    const blocker: Server = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const address = blocker.address();
    const port = typeof address === 'object' && address !== null ? address.port : 0;
    try {
      const result = await run(['daemon', '--data-dir', freshDir(), '--port', String(port)]);
      expect(result.code).toBe(2);
      expect(result.stderr).toContain(`postern: INVALID_ARGUMENT --port: port ${port} is already in use`);
    } finally {
      blocker.close();
    }
  });

  it('exits 2 naming --port and ::1 when another program holds the port on the IPv6 loopback', async (ctx) => {
    // A program that holds [::1]:PORT would answer `localhost:PORT` in a browser that tries ::1 first.
    const blocker: Server = createServer();
    const listening = await new Promise<boolean>((resolve) => {
      blocker.once('error', () => resolve(false));
      blocker.listen({ port: 0, host: '::1', ipv6Only: true }, () => resolve(true));
    });
    if (!listening) {
      ctx.skip('skipped: this machine has no IPv6 loopback (::1), so no program can hold it');
      return;
    }
    const address = blocker.address();
    const port = typeof address === 'object' && address !== null ? address.port : 0;
    try {
      const result = await run(['daemon', '--data-dir', freshDir(), '--port', String(port)]);
      expect(result.code).toBe(2);
      expect(result.stderr).toContain(`postern: INVALID_ARGUMENT --port: port ${port} is already in use on ::1`);
      expect(result.stdout).not.toContain('Operator UI');
    } finally {
      blocker.close();
    }
  });

  it('prints help and exits 0 for --help', async () => {
    const result = await run(['--help']);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/Usage: postern/);
    expect(result.stdout).toMatch(/daemon/);
  });
});

describe.concurrent('postern status', () => {
  it('says a data directory that does not exist has nothing yet, and does not create it', async () => {
    const dir = freshDir();
    const result = await run(['status', '--data-dir', dir]);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(`Data directory: ${dir} (does not exist`);
    expect(() => statSync(dir)).toThrow();
  });

  it('prints the journal section as JSON for an existing directory', async () => {
    const dir = freshDir();
    mkdirSync(dir, { mode: 0o700 });
    const result = await run(['status', '--data-dir', dir, '--json']);
    expect(result.code).toBe(0);
    const printed = JSON.parse(result.stdout) as Record<string, unknown>;
    expect(printed).toMatchObject({ data_dir: dir, exists: true });
    expect(brokerStatusSchema.shape.journal.parse(printed['journal'])).toBeDefined();
    expect(brokerStatusSchema.shape.actions.parse(printed['actions'])).toBeDefined();
  });

  it('takes the data directory from POSTERN_DATA_DIR when there is no flag', async () => {
    const dir = freshDir();
    const result = await run(['status', '--json'], { POSTERN_DATA_DIR: dir });
    expect(JSON.parse(result.stdout)).toMatchObject({ data_dir: dir });
  });

  it('prefers --data-dir over POSTERN_DATA_DIR', async () => {
    const dir = freshDir();
    const result = await run(['status', '--json', '--data-dir', dir], { POSTERN_DATA_DIR: '/somewhere/else' });
    expect(JSON.parse(result.stdout)).toMatchObject({ data_dir: dir });
  });

  it('falls back to XDG_DATA_HOME/postern on Linux', async (ctx) => {
    if (process.platform !== 'linux') ctx.skip('XDG_DATA_HOME applies on Linux only');
    const xdg = freshDir();
    const result = await run(['status', '--json'], { POSTERN_DATA_DIR: undefined, XDG_DATA_HOME: xdg });
    expect(JSON.parse(result.stdout)).toMatchObject({ data_dir: path.join(xdg, 'postern') });
  });
});

describe.concurrent('postern daemon', () => {
  it.each(['SIGTERM', 'SIGINT'] as const)(
    'serves a schema-valid status behind its token and stops cleanly on %s',
    async (signal) => {
      const dir = freshDir();
      const daemon = await startDaemon(dir);
      expect(daemon.ready).toMatchObject({
        event: 'ready',
        mode: 'headless',
        origin: daemon.origin,
        port: daemon.port,
        data_dir: dir,
      });
      expect(daemon.origin).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(statSync(dir).mode & 0o777).toBe(0o700);

      const denied = await fetch(`${daemon.origin}/api/status`);
      expect(denied.status).toBe(401);
      // The printed token and the code printed beside it sign in once, for a session secret; only that opens the API.
      const value = { session: await signInAsProgram(daemon) };
      expect(
        (await fetch(`${daemon.origin}/api/status`, { headers: { Authorization: `Bearer ${daemon.token}` } })).status,
      ).toBe(401);
      const answer = await fetch(`${daemon.origin}/api/status`, {
        headers: { Authorization: `Bearer ${value.session}` },
      });
      expect(answer.status).toBe(200);
      const reply = (await answer.json()) as { ok: boolean; value: unknown };
      expect(brokerStatusSchema.parse(reply.value)).toMatchObject({ mode: 'headless', data_dir: dir });

      const exit = await daemon.process.stop(signal);
      expect(exit).toEqual({ code: 0, signal: null });
      expect(
        daemon.process.stdoutLines
          .map((line) => (line.startsWith('{') ? (JSON.parse(line) as { event: string }).event : null))
          .filter(Boolean),
      ).toEqual(['ready', 'stopping', 'stopped']);
      await expect(fetch(`${daemon.origin}/api/status`)).rejects.toThrow();
    },
  );

  it('prints the token exactly once, in the operator URL line, and the code once, beside it and never in it; neither on stderr; so is the next pair a sign-in prints', async () => {
    const daemon = await startDaemon(freshDir());
    await signInAsProgram(daemon);
    const nextLine = await daemon.process.waitForLine(
      (line) => line.startsWith('Sign-in code (next sign-in): '),
      'the next sign-in code',
    );
    await daemon.process.stop();
    const everything = `${daemon.process.stdout}\n${daemon.process.stderr}`;
    expect(everything.split(daemon.token).length - 1).toBe(1);
    expect(daemon.process.stdoutLines.filter((line) => line.includes(daemon.token))).toEqual([
      `Operator UI: ${daemon.operatorUrl}`,
    ]);
    expect(daemon.signInCode).toMatch(/^\d{4}-\d{4}$/);
    expect(everything.split(daemon.signInCode).length - 1).toBe(1);
    expect(daemon.operatorUrl).not.toContain(daemon.signInCode.replace('-', ''));
    const urlLine = daemon.process.stdoutLines.indexOf(`Operator UI: ${daemon.operatorUrl}`);
    const nextUrl = daemon.process.stdoutLines.find((line) => line.startsWith('Operator UI (next sign-in): ')) ?? '';
    const nextToken = new URL(nextUrl.slice('Operator UI (next sign-in): '.length)).searchParams.get('token') ?? '';
    const nextCode = nextLine.slice('Sign-in code (next sign-in): '.length);
    expect(nextToken).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(nextCode).toMatch(/^\d{4}-\d{4}$/);
    expect(everything.split(nextToken).length - 1).toBe(1);
    expect(everything.split(nextCode).length - 1).toBe(1);
    expect(nextUrl).not.toContain(nextCode.replace('-', ''));
    expect(daemon.process.stdoutLines[urlLine + 1]).toMatch(
      new RegExp(`^Sign-in code: ${daemon.signInCode} \\(type it on the page, do not copy it: it is not in the URL`),
    );
  });

  it('mints a different token on every run', async () => {
    const dir = freshDir();
    const first = await startDaemon(dir);
    await first.process.stop();
    const second = await startDaemon(dir);
    await second.process.stop();
    expect(second.token).not.toBe(first.token);
  });
});

describe.concurrent('postern start without Electron', () => {
  it('says in one line why Electron was not used and runs headless', async () => {
    const daemon = await startDaemon(freshDir(), { command: 'start', env: { DISPLAY: '', WAYLAND_DISPLAY: '' } });
    expect(daemon.ready).toMatchObject({ mode: 'headless' });
    const reasons = daemon.process.stdoutLines.filter((line) => line.startsWith('Electron not used: '));
    expect(reasons).toHaveLength(1);
    expect(reasons[0]).toMatch(/Running headless\.$/);
    expect((await daemon.process.stop()).code).toBe(0);
  });
});
