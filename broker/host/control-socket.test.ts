import { spawn } from 'node:child_process';
import { statSync } from 'node:fs';
import { createConnection } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FakeClock } from '../testing/fake-clock.js';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import { openVault, type Vault } from '../vault/index.js';
import { controlLineBytesMax, controlSocketPath, sendControlRequest, startControlSocket, type ControlSocket } from './control-socket.js';

const passphrase = 'control socket passphrase';
let dir: TempDir;
let vault: Vault;
let control: ControlSocket;

beforeEach(async () => {
  dir = createTempDir('pcs-');
  vault = await openVault({ dataDir: dir.path, clock: new FakeClock(), idleLockMs: 0, kdf: 'min' });
  await vault.init(Buffer.from(passphrase));
  vault.lock('test setup');
  control = await startControlSocket({ dataDir: dir.path, vault });
});
afterEach(async () => {
  await control.close();
  await vault.close();
  dir.remove();
});

/** Writes raw bytes and collects reply lines until `count` arrived or the server closed. */
function exchange(raw: string | Buffer, count: number): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const socket = createConnection(control.path);
    let text = '';
    const done = (): void => {
      socket.destroy();
      resolve(text.split('\n').filter((l) => l !== ''));
    };
    socket.on('connect', () => socket.write(raw));
    socket.on('data', (chunk) => {
      text += chunk.toString('utf8');
      if (text.split('\n').length > count) done();
    });
    socket.on('close', done);
    socket.on('error', reject);
  });
}

describe('the control socket', () => {
  it('is a socket file with mode 0600 in the data dir', () => {
    const stat = statSync(controlSocketPath(dir.path));
    expect(stat.isSocket()).toBe(true);
    expect(stat.mode & 0o777).toBe(0o600);
  });

  it('unlocks with the right passphrase, refuses a wrong one without changing the state, locks, and reports status', async () => {
    expect(await sendControlRequest(control.path, { op: 'vault_status' })).toEqual({ ok: true, value: { state: 'locked', credentials: 0 } });
    const wrong = await sendControlRequest(control.path, { op: 'unlock', passphrase: 'not it at all' });
    expect(wrong).toEqual({ ok: false, error: { code: 'VAULT_PASSPHRASE_INVALID', message: expect.any(String), field: 'passphrase' } });
    expect(vault.state()).toBe('locked');
    expect(await sendControlRequest(control.path, { op: 'unlock', passphrase })).toEqual({ ok: true, value: { state: 'unlocked' } });
    expect(vault.state()).toBe('unlocked');
    const reasons: string[] = [];
    vault.onLock((reason) => reasons.push(reason));
    expect(await sendControlRequest(control.path, { op: 'lock' })).toEqual({ ok: true, value: { state: 'locked' } });
    expect(reasons).toEqual(['operator']);
  });

  it('answers pipelined requests one at a time, in order', async () => {
    const lines = await exchange(`${JSON.stringify({ op: 'unlock', passphrase })}\n{"op":"vault_status"}\n{"op":"lock"}\n`, 3);
    expect(lines.map((l) => JSON.parse(l) as unknown)).toEqual([
      { ok: true, value: { state: 'unlocked' } },
      { ok: true, value: { state: 'unlocked', credentials: 0 } },
      { ok: true, value: { state: 'locked' } },
    ]);
  });

  it.each<[string, string, string, string]>([
    ['not JSON', 'hello\n', 'INVALID_ARGUMENT', 'request'],
    ['an unknown op', '{"op":"dump_secrets"}\n', 'INVALID_ARGUMENT', 'op'],
    ['an extra field', '{"op":"lock","name":"x"}\n', 'INVALID_ARGUMENT', ''],
    ['an unlock without a passphrase', '{"op":"unlock"}\n', 'INVALID_ARGUMENT', 'passphrase'],
  ])('refuses %s with a coded error', async (_what, raw, code, field) => {
    const [line] = await exchange(raw, 1);
    const reply = JSON.parse(line ?? '{}') as { ok: boolean; error: { code: string; field?: string; message: string } };
    expect(reply.ok).toBe(false);
    expect(reply.error.code).toBe(code);
    if (field !== '') expect(reply.error.field).toBe(field);
  });

  it('never quotes a rejected passphrase back', async () => {
    const [line] = await exchange(`${JSON.stringify({ op: 'unlock', passphrase: 'CANARY-typed-passphrase', extra: 1 })}\n`, 1);
    expect(line).not.toContain('CANARY');
  });

  it('closes a connection whose line exceeds the bound, with PAYLOAD_LIMIT', async () => {
    const lines = await exchange(Buffer.alloc(controlLineBytesMax + 10, 0x61), 1);
    expect(JSON.parse(lines[0] ?? '{}')).toMatchObject({ ok: false, error: { code: 'PAYLOAD_LIMIT' } });
  });

  it('refuses to start a second one on a data dir whose broker answers', async () => {
    await expect(startControlSocket({ dataDir: dir.path, vault })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', field: '--data-dir' });
  });

  it('replaces a stale socket file nobody answers on', async () => {
    await control.close();
    // A socket file left behind by a crashed broker: a child binds it and is SIGKILLed (no unlink).
    const child = spawn(process.execPath, ['-e', `require('node:net').createServer().listen(${JSON.stringify(controlSocketPath(dir.path))}, () => console.log('up'))`], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    await new Promise<void>((resolve) => child.stdout.once('data', () => resolve()));
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGKILL');
    await exited;
    expect(statSync(controlSocketPath(dir.path)).isSocket()).toBe(true);
    control = await startControlSocket({ dataDir: dir.path, vault });
    expect(await sendControlRequest(control.path, { op: 'vault_status' })).toMatchObject({ ok: true });
  });
});
