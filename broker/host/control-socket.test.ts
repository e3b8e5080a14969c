import { spawn } from 'node:child_process';
import { statSync } from 'node:fs';
import { once } from 'node:events';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FakeClock } from '../testing/fake-clock.js';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import { openVault, type Vault } from '../vault/index.js';
import { brokerApiMethods } from '../contract/index.js';
import {
  controlAttemptsMax,
  controlConnectionsMax,
  controlLineBytesMax,
  controlReplyFlushGraceMs,
  controlSocketPath,
  sendControlRequest,
  startControlSocket,
  type ControlSocket,
} from './control-socket.js';
import type { OperatorCaller, OperatorHandlers } from './operator-handlers.js';
import type { UnattendedDecisions } from './control-proof.js';
import { lockDataDir, type DataDirLock } from './data-dir-lock.js';

const passphrase = 'control socket passphrase';
let dir: TempDir;
let vault: Vault;
let control: ControlSocket;
let clock: FakeClock;
let lock: DataDirLock;

beforeEach(async () => {
  dir = createTempDir('pcs-');
  // As a broker does before it listens: the CLI's client sends nothing to a listener that does not hold it.
  lock = lockDataDir(dir.path);
  clock = new FakeClock();
  vault = await openVault({ dataDir: dir.path, clock, idleLockMs: 0, kdf: 'min' });
  await vault.init(Buffer.from(passphrase));
  vault.lock('test setup');
  control = await startControlSocket({ dataDir: dir.path, vault, clock });
});

/** Restarts the socket with an operator API that records the caller of every call it admits. */
async function withRecordingApi(
  unattendedDecisions: boolean | (() => UnattendedDecisions),
  passphraseFromFile = false,
): Promise<Array<[string, OperatorCaller | undefined]>> {
  await control.close();
  const calls: Array<[string, OperatorCaller | undefined]> = [];
  const handlers = Object.fromEntries(
    brokerApiMethods.map((m) => [
      m,
      (_input: unknown, caller?: OperatorCaller) => (
        calls.push([m, caller]),
        Promise.resolve({ ok: true, value: { cards: [] } })
      ),
    ]),
  ) as unknown as OperatorHandlers;
  control = await startControlSocket({
    dataDir: dir.path,
    vault,
    clock,
    handlers,
    unattendedDecisions,
    passphraseFromFile,
  });
  return calls;
}
afterEach(async () => {
  await control.close();
  await vault.close();
  lock.release();
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
    expect(await sendControlRequest(control.path, { op: 'vault_status' })).toEqual({
      ok: true,
      value: { state: 'locked', credentials: 0 },
    });
    const wrong = await sendControlRequest(control.path, { op: 'unlock', passphrase: 'not it at all' });
    expect(wrong).toEqual({
      ok: false,
      error: { code: 'VAULT_PASSPHRASE_INVALID', message: expect.any(String), field: 'passphrase' },
    });
    expect(vault.state()).toBe('locked');
    expect(await sendControlRequest(control.path, { op: 'unlock', passphrase })).toEqual({
      ok: true,
      value: { state: 'unlocked' },
    });
    expect(vault.state()).toBe('unlocked');
    const reasons: string[] = [];
    vault.onLock((reason) => reasons.push(reason));
    expect(await sendControlRequest(control.path, { op: 'lock', proof: { passphrase } })).toEqual({
      ok: true,
      value: { state: 'locked' },
    });
    expect(reasons).toEqual(['operator']);
  });

  it('answers pipelined requests one at a time, in order', async () => {
    const lines = await exchange(
      `${JSON.stringify({ op: 'unlock', passphrase })}\n{"op":"vault_status"}\n${JSON.stringify({ op: 'lock', proof: { passphrase } })}\n`,
      3,
    );
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
    const [line] = await exchange(
      `${JSON.stringify({ op: 'unlock', passphrase: 'CANARY-typed-passphrase', extra: 1 })}\n`,
      1,
    );
    expect(line).not.toContain('CANARY');
  });

  it('closes a connection whose line exceeds the bound, with PAYLOAD_LIMIT', async () => {
    const lines = await exchange(Buffer.alloc(controlLineBytesMax + 10, 0x61), 1);
    expect(JSON.parse(lines[0] ?? '{}')).toMatchObject({ ok: false, error: { code: 'PAYLOAD_LIMIT' } });
  });

  it('refuses to start a second one on a data dir whose broker answers', async () => {
    await expect(startControlSocket({ dataDir: dir.path, vault })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      field: '--data-dir',
    });
  });

  it('replaces a stale socket file nobody answers on', async () => {
    await control.close();
    // A socket file left behind by a crashed broker: a child binds it and is SIGKILLed (no unlink).
    const child = spawn(
      process.execPath,
      [
        '-e',
        `require('node:net').createServer().listen(${JSON.stringify(controlSocketPath(dir.path))}, () => console.log('up'))`,
      ],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    await new Promise<void>((resolve) => child.stdout.once('data', () => resolve()));
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGKILL');
    await exited;
    expect(statSync(controlSocketPath(dir.path)).isSocket()).toBe(true);
    control = await startControlSocket({ dataDir: dir.path, vault });
    expect(await sendControlRequest(control.path, { op: 'vault_status' })).toMatchObject({ ok: true });
  });

  it('refuses a lock without proof and one with a wrong proof; the state does not change', async () => {
    await sendControlRequest(control.path, { op: 'unlock', passphrase });
    expect(await sendControlRequest(control.path, { op: 'lock' })).toMatchObject({
      ok: false,
      error: { code: 'OPERATOR_PROOF_REQUIRED', field: 'proof' },
    });
    expect(await sendControlRequest(control.path, { op: 'lock', proof: { passphrase: 'CANARY-wrong' } })).toMatchObject(
      {
        ok: false,
        error: { code: 'VAULT_PASSPHRASE_INVALID', field: 'proof' },
      },
    );
    expect(vault.state()).toBe('unlocked');
  });

  it('backs off after three wrong passphrases (1 s, then doubling), answering at once with retry_after_ms; a right one after the wait resets it', async () => {
    const wrong = { op: 'unlock', passphrase: 'wrong' } as const;
    const codes = [];
    for (let i = 0; i < 3; i += 1) codes.push(await sendControlRequest(control.path, wrong));
    expect(codes.map((r) => (r.ok ? 'ok' : r.error.code))).toEqual([
      'VAULT_PASSPHRASE_INVALID',
      'VAULT_PASSPHRASE_INVALID',
      'VAULT_PASSPHRASE_INVALID',
    ]);
    expect(codes[2]).toMatchObject({ ok: false, error: { retry_after_ms: 1_000 } });
    // Even the right passphrase is not checked while the gate is closed.
    expect(await sendControlRequest(control.path, { op: 'unlock', passphrase })).toMatchObject({
      ok: false,
      error: { code: 'PASSPHRASE_BACKOFF', retry_after_ms: 1_000 },
    });
    expect(vault.state()).toBe('locked');
    clock.advance(1_000);
    expect(await sendControlRequest(control.path, wrong)).toMatchObject({
      ok: false,
      error: { code: 'VAULT_PASSPHRASE_INVALID', retry_after_ms: 2_000 },
    });
    clock.advance(2_000);
    expect(await sendControlRequest(control.path, { op: 'unlock', passphrase })).toEqual({
      ok: true,
      value: { state: 'unlocked' },
    });
    expect(await sendControlRequest(control.path, wrong)).toMatchObject({
      ok: false,
      error: { code: 'VAULT_PASSPHRASE_INVALID' },
    });
    expect(await sendControlRequest(control.path, wrong)).not.toMatchObject({
      error: { retry_after_ms: expect.any(Number) },
    });
  });

  it('passes reads with no caller, refuses a decision without proof, and names a person only after the passphrase proved one', async () => {
    const calls = await withRecordingApi(false);
    expect(await sendControlRequest(control.path, { op: 'api', method: 'approvals.list' })).toMatchObject({ ok: true });
    expect(
      await sendControlRequest(control.path, { op: 'api', method: 'approvals.approve', input: { ticket: 1 } }),
    ).toMatchObject({
      ok: false,
      error: { code: 'OPERATOR_PROOF_REQUIRED', message: expect.stringContaining('unattended_decisions') },
    });
    expect(
      await sendControlRequest(control.path, {
        op: 'api',
        method: 'approvals.approve',
        input: { ticket: 1 },
        proof: { passphrase: 'nope' },
      }),
    ).toMatchObject({ ok: false });
    expect(
      await sendControlRequest(control.path, {
        op: 'api',
        method: 'approvals.approve',
        input: { ticket: 1 },
        proof: { passphrase },
      }),
    ).toMatchObject({ ok: true });
    expect(calls).toEqual([
      ['approvals.list', undefined],
      ['approvals.approve', { surface: 'cli', auth: 'vault_passphrase_tty' }],
    ]);
  });

  it('takes no passphrase as proof of a person when the broker was unlocked from a passphrase file, not even after an unlock over the socket', async () => {
    const calls = await withRecordingApi(false, true);
    const approve = {
      op: 'api',
      method: 'approvals.approve',
      input: { ticket: 1 },
      proof: { passphrase },
    } as const;
    const refused = await sendControlRequest(control.path, approve);
    expect(refused).toMatchObject({ ok: false, error: { code: 'OPERATOR_PROOF_REQUIRED', field: 'proof' } });
    const message = refused.ok ? '' : refused.error.message;
    for (const says of ['read from a file', 'any process of this user', 'operator UI', 'postern vault unlock'])
      expect(message).toContain(says);
    expect(message).toContain('unattended_decisions');
    expect(message).not.toContain(passphrase);
    // Without a proof the same: a person is told a passphrase cannot help here.
    expect(
      await sendControlRequest(control.path, { op: 'api', method: 'approvals.approve', input: { ticket: 1 } }),
    ).toMatchObject({ ok: false, error: { code: 'OPERATOR_PROOF_REQUIRED', message } });
    // An unlock (its own proof, as before) does not make the passphrase a person's: it is still in the file.
    expect(await sendControlRequest(control.path, { op: 'unlock', passphrase })).toMatchObject({ ok: true });
    expect(await sendControlRequest(control.path, approve)).toMatchObject({
      ok: false,
      error: { code: 'OPERATOR_PROOF_REQUIRED', message },
    });
    expect(await sendControlRequest(control.path, { op: 'lock', proof: { passphrase } })).toMatchObject({
      ok: false,
      error: { code: 'OPERATOR_PROOF_REQUIRED' },
    });
    expect(calls).toEqual([['vault.unlock', { surface: 'cli', auth: 'vault_passphrase_tty' }]]);
  });

  it('under the unattended opt-out, a broker unlocked from a passphrase file still admits a decision as the calling process', async () => {
    const calls = await withRecordingApi(true, true);
    expect(
      await sendControlRequest(control.path, { op: 'api', method: 'approvals.approve', input: { ticket: 1 } }),
    ).toMatchObject({ ok: true });
    expect(calls).toEqual([['approvals.approve', expect.objectContaining({ auth: 'unattended_opt_out' })]]);
  });

  it('under the unattended opt-out, admits a decision without proof as the calling process (the kernel names it), never a person', async () => {
    const calls = await withRecordingApi(true);
    expect(
      await sendControlRequest(control.path, { op: 'api', method: 'sessions.approve', input: { session_id: 'ses_x' } }),
    ).toMatchObject({ ok: true });
    expect(calls).toEqual([
      [
        'sessions.approve',
        { surface: 'cli', auth: 'unattended_opt_out', process: { exe: process.execPath, pid: process.pid } },
      ],
    ]);
  });

  it('does not honour an opt-out read from a configuration whose seal is not yet checked (a forged accepted copy), and honours it once verified', async () => {
    let now: UnattendedDecisions = 'unverified';
    const calls = await withRecordingApi(() => now);
    expect(
      await sendControlRequest(control.path, { op: 'api', method: 'approvals.approve', input: { ticket: 1 } }),
    ).toMatchObject({
      ok: false,
      error: { code: 'OPERATOR_PROOF_REQUIRED', message: expect.stringContaining('verified') },
    });
    expect(calls).toEqual([]);
    now = 'on';
    expect(
      await sendControlRequest(control.path, { op: 'api', method: 'approvals.approve', input: { ticket: 1 } }),
    ).toMatchObject({ ok: true });
    expect(calls).toEqual([['approvals.approve', expect.objectContaining({ auth: 'unattended_opt_out' })]]);
  });
});

describe('the control socket at its connection cap, and what the client sends again', () => {
  /** Restarts the socket with an operator API whose every call waits until `release` is called. */
  async function withHeldApi(): Promise<{ called: () => number; release: () => void }> {
    await control.close();
    let calls = 0;
    let release = (): void => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    const handlers = Object.fromEntries(
      brokerApiMethods.map((m) => [m, async () => ((calls += 1), await held, { ok: true, value: { cards: [] } })]),
    ) as unknown as OperatorHandlers;
    control = await startControlSocket({ dataDir: dir.path, vault, clock, handlers });
    return { called: () => calls, release };
  }

  /** Waits (bounded) until `condition` holds, yielding to the event loop between looks. */
  async function until(condition: () => boolean): Promise<void> {
    const deadline = Date.now() + 10_000;
    while (!condition()) {
      if (Date.now() > deadline) throw new Error('condition not reached');
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  it('when every connection has a request in progress, answers a newcomer CONTROL_SOCKET_BUSY unread; the client tries a few times, says so with the code, and gets in once one is answered', async () => {
    const api = await withHeldApi();
    const list = { op: 'api', method: 'approvals.list', input: {} } as const;
    const inProgress = Array.from({ length: controlConnectionsMax }, () => sendControlRequest(control.path, list));
    await until(() => api.called() === controlConnectionsMax);
    // A newcomer is told, not just cut off (it sends nothing here: the line is there before it could write).
    const line = await new Promise<string>((resolve, reject) => {
      const socket = createConnection(control.path);
      let text = '';
      socket.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
      socket.on('close', () => resolve(text));
      socket.on('error', reject);
    });
    expect(JSON.parse(line)).toMatchObject({ ok: false, error: { code: 'CONTROL_SOCKET_BUSY' } });
    // The client's request was never read: sent again a few times, then refused with the code.
    await expect(sendControlRequest(control.path, list)).rejects.toMatchObject({
      code: 'CONTROL_SOCKET_BUSY',
      message: expect.stringContaining(`${controlAttemptsMax} time(s)`),
    });
    expect(api.called()).toBe(controlConnectionsMax);
    api.release();
    expect(await Promise.all(inProgress)).toHaveLength(controlConnectionsMax);
    expect(await sendControlRequest(control.path, list)).toEqual({ ok: true, value: { cards: [] } });
    expect(api.called()).toBe(controlConnectionsMax + 1);
  });

  describe('with a reply larger than the socket can hold still being written', () => {
    /** A page far above a Unix socket's send buffer (~200 KiB): its reply is written over many turns of the loop. */
    const pageChars = 4 * 1024 * 1024;

    /** Restarts the socket: `activity.list` answers a large page at once, every other method waits for `release`. */
    async function withLargePage(): Promise<{ called: () => number; release: () => void }> {
      await control.close();
      let calls = 0;
      let release = (): void => undefined;
      const held = new Promise<void>((resolve) => (release = resolve));
      const handlers = Object.fromEntries(
        brokerApiMethods.map((m) => [
          m,
          m === 'activity.list'
            ? () => ((calls += 1), Promise.resolve({ ok: true, value: { page: 'x'.repeat(pageChars) } }))
            : async () => ((calls += 1), await held, { ok: true, value: { cards: [] } }),
        ]),
      ) as unknown as OperatorHandlers;
      control = await startControlSocket({ dataDir: dir.path, vault, clock, handlers });
      return { called: () => calls, release };
    }

    /** A connection that sends `line` (if any) and reads nothing until `read()`, which collects up to the first newline or the close. */
    async function reader(line?: string): Promise<{ read: () => Promise<string>; closed: () => boolean }> {
      const socket = createConnection(control.path);
      socket.pause();
      socket.on('error', () => undefined);
      let closed = false;
      socket.once('close', () => (closed = true));
      await once(socket, 'connect');
      if (line !== undefined) socket.write(line);
      return {
        closed: () => closed,
        read: () =>
          new Promise((resolve) => {
            let text = '';
            const done = (): void => {
              socket.destroy();
              resolve(text);
            };
            socket.on('data', (chunk: Buffer) => {
              text += chunk.toString('utf8');
              if (text.includes('\n')) done();
            });
            socket.once('close', done);
            socket.resume();
          }),
      };
    }

    /** A connection that sends nothing and keeps what it is told until the broker closes it. */
    function bystander(): Promise<{ said: () => string; closed: () => boolean }> {
      return new Promise((resolve, reject) => {
        const socket = createConnection(control.path);
        let text = '';
        let closed = false;
        socket.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
        socket.once('close', () => (closed = true));
        socket.once('error', reject);
        socket.once('connect', () => resolve({ said: () => text, closed: () => closed }));
      });
    }

    const page = `${JSON.stringify({ op: 'api', method: 'activity.list', input: {} })}\n`;

    it('a flood of new connections evicts the idle ones and never the one whose page is still being written: its reader gets the whole page, never CONTROL_SOCKET_BUSY', async () => {
      const api = await withLargePage();
      const slow = await reader(page);
      await until(() => api.called() === 1);
      await new Promise((resolve) => setTimeout(resolve, 50));
      // Twice the cap of newcomers that send nothing: each past the cap closes the least recently active idle one.
      const flood: Array<{ said: () => string; closed: () => boolean }> = [];
      for (let i = 0; i < 2 * controlConnectionsMax; i += 1) flood.push(await bystander());
      const evictions = 2 * controlConnectionsMax + 1 - controlConnectionsMax;
      // (Without the fix the page's connection is one of those closed, and this is never reached.)
      await until(() => flood.filter((c) => c.closed()).length >= evictions);
      await new Promise((resolve) => setTimeout(resolve, 100));
      const closed = flood.filter((c) => c.closed());
      expect(closed).toHaveLength(evictions);
      for (const c of closed)
        expect(JSON.parse(c.said())).toMatchObject({ ok: false, error: { code: 'CONTROL_SOCKET_BUSY' } });
      const text = await slow.read();
      expect(text).not.toContain('CONTROL_SOCKET_BUSY');
      expect(JSON.parse(text)).toEqual({ ok: true, value: { page: 'x'.repeat(pageChars) } });
    });

    it('a reader that does not take its page keeps its place only for the grace: then it is closed without CONTROL_SOCKET_BUSY (its request was read), and a newcomer gets in', async () => {
      const api = await withLargePage();
      const slow = await reader(page);
      await until(() => api.called() === 1);
      await new Promise((resolve) => setTimeout(resolve, 50));
      // Every other place has a request in progress.
      const list = { op: 'api', method: 'approvals.list', input: {} } as const;
      const inProgress = Array.from({ length: controlConnectionsMax - 1 }, () =>
        sendControlRequest(control.path, list),
      );
      await until(() => api.called() === controlConnectionsMax);
      // Within the grace the page's connection keeps its place: the newcomer is refused unread.
      const refused = await bystander();
      await until(() => refused.closed());
      expect(JSON.parse(refused.said())).toMatchObject({ ok: false, error: { code: 'CONTROL_SOCKET_BUSY' } });
      expect(slow.closed()).toBe(false);
      // Past it, a reader that never reads cannot hold the cap: it makes room, told nothing (its request was read).
      clock.advance(controlReplyFlushGraceMs);
      expect(await sendControlRequest(control.path, { op: 'vault_status' })).toMatchObject({ ok: true });
      const text = await slow.read();
      expect(text).not.toContain('CONTROL_SOCKET_BUSY');
      expect(text).not.toContain('\n');
      expect(text.length).toBeLessThan(pageChars);
      api.release();
      expect(await Promise.all(inProgress)).toHaveLength(controlConnectionsMax - 1);
    });
  });

  describe('against a listener that misbehaves (a scripted stand-in holding the data directory lock)', () => {
    let fake: Server | undefined;
    afterEach(async () => {
      await new Promise((resolve) => (fake === undefined ? resolve(undefined) : fake.close(resolve)));
      fake = undefined;
    });

    /** Replaces the control socket with `onConnection`'s listener; counts the connections it gets. */
    async function standIn(onConnection: (socket: Socket) => void): Promise<() => number> {
      await control.close();
      let connections = 0;
      const server = createServer((socket) => {
        connections += 1;
        socket.on('error', () => undefined);
        onConnection(socket);
      });
      fake = server;
      await new Promise<void>((resolve) => server.listen(controlSocketPath(dir.path), resolve));
      return () => connections;
    }

    it('takes a listener that answers CONTROL_SOCKET_BUSY for a live broker: a second one refuses to start over it', async () => {
      const busy = `${JSON.stringify({ ok: false, error: { code: 'CONTROL_SOCKET_BUSY', message: 'full' } })}\n`;
      await standIn((socket) => socket.end(busy).destroy());
      await expect(startControlSocket({ dataDir: dir.path, vault })).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
        field: '--data-dir',
      });
      expect(statSync(controlSocketPath(dir.path)).isSocket()).toBe(true);
    });

    it('never sends a request again once the broker may have read it: a connection closed after the whole line, without a reply, is an error', async () => {
      const lines: string[] = [];
      const connections = await standIn((socket) => {
        let text = '';
        socket.on('data', (chunk: Buffer) => {
          text += chunk.toString('utf8');
          if (text.includes('\n')) {
            lines.push(text);
            socket.destroy();
          }
        });
      });
      await expect(sendControlRequest(control.path, { op: 'unlock', passphrase: 'a guess' })).rejects.toMatchObject({
        code: 'INTERNAL',
        message: expect.stringContaining('without a reply'),
      });
      expect(connections()).toBe(1);
      expect(lines).toHaveLength(1);
    });

    it('gives up after a bounded number of connections closed before the request was read, with CONTROL_SOCKET_BUSY (never a raw socket error)', async () => {
      const connections = await standIn((socket) => socket.destroy());
      const started = performance.now();
      const error = await sendControlRequest(control.path, { op: 'vault_status' }).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'CONTROL_SOCKET_BUSY' });
      expect((error as Error).message).not.toMatch(/write EPIPE|read ECONNRESET/);
      expect(connections()).toBe(controlAttemptsMax);
      expect(performance.now() - started).toBeLessThan(2_000);
    });
  });
});
