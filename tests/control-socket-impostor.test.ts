import { mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { controlSocketPath, sendControlRequest } from '../broker/host/index.js';
import { systemClock } from '../broker/ports/index.js';
import { openVault } from '../broker/vault/index.js';
import { runOnTerminal } from './support/operator-terminal.js';
import { runPostern, startDaemon, type RunningDaemon } from './support/postern-process.js';

/**
 * THREAT-MODEL 1 and 3, performed against a real daemon and the real CLI: a same-user agent moves the running broker's
 * `control.sock` aside and listens at its path, waiting for the person — `postern vault unlock` with the passphrase
 * typed on a terminal (which would let the agent replay it to the real socket as "a person", and open vault.sqlite
 * offline), or any other command. The CLI must write nothing to it: it asks the kernel who listens (SO_PEERCRED) and
 * who holds the data directory's lock (/proc/locks) before its first byte, and answers CONTROL_SOCKET_UNVERIFIED.
 * With the broker's socket put back, the same unlock reaches the broker: the check tells the two apart, it does not
 * refuse everything.
 */
const passphrase = 'CANARY-impostor-passphrase-7d1f (test only)';
const scratch = mkdtempSync(path.join(os.tmpdir(), 'pimp-'));
const dataDir = path.join(scratch, 'data');
const socketPath = controlSocketPath(dataDir);
const movedPath = `${socketPath}.moved`;
let daemon: RunningDaemon;

/** The agent's listener: it records every byte a client writes to it and never answers. */
async function listenInPlaceOfTheBroker(): Promise<{ server: Server; received: () => Buffer; close(): Promise<void> }> {
  const chunks: Buffer[] = [];
  const server = createServer((socket) => {
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', () => undefined);
  });
  renameSync(socketPath, movedPath);
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  return {
    server,
    received: () => Buffer.concat(chunks),
    close: async () => {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(socketPath, { force: true });
      renameSync(movedPath, socketPath);
    },
  };
}

beforeAll(async () => {
  mkdirSync(dataDir, { mode: 0o700 });
  const vault = await openVault({ dataDir, clock: systemClock, kdf: 'min', idleLockMs: 0 });
  await vault.init(Buffer.from(passphrase));
  await vault.close();
  daemon = await startDaemon(dataDir);
}, 60_000);

afterAll(async () => {
  await daemon?.process.stop();
  rmSync(scratch, { recursive: true, force: true });
});

describe('when an agent listens in place of the running broker’s control socket', { timeout: 60_000 }, () => {
  it('the CLI sends it nothing — not the passphrase typed for unlock, not a read — and says why', async () => {
    const impostor = await listenInPlaceOfTheBroker();
    try {
      const unlock = await runOnTerminal(['vault', 'unlock', '--data-dir', dataDir], passphrase);
      expect(unlock.prompted).toBe(true);
      expect(unlock.code).not.toBe(0);
      expect(unlock.screen).toContain('CONTROL_SOCKET_UNVERIFIED');
      expect(unlock.screen).not.toContain(passphrase);
      const list = await runPostern(['approvals', 'list', '--data-dir', dataDir]);
      expect(list.code).not.toBe(0);
      expect(list.stderr).toContain('postern: CONTROL_SOCKET_UNVERIFIED --data-dir:');
      expect(list.stderr).toContain(`pid ${process.pid} listens on it, but the lock is held by pid`);
      // `postern status` does not call the impostor the broker (it connects and writes nothing).
      const status = await runPostern(['status', '--json', '--data-dir', dataDir]);
      expect(JSON.parse(status.stdout)).toMatchObject({
        broker_running: false,
        control_socket_unverified: expect.stringContaining(`pid ${process.pid} listens on it`) as unknown,
      });
      expect((await runPostern(['status', '--data-dir', dataDir])).stdout).toContain('Broker: unverified:');
      // Nothing at all reached the agent's socket: no request line, so no passphrase and no proof.
      expect(impostor.received().length).toBe(0);
      expect(impostor.received().toString('utf8')).not.toContain(passphrase);
    } finally {
      await impostor.close();
    }
    expect(await sendControlRequest(socketPath, { op: 'vault_status' })).toMatchObject({
      ok: true,
      value: { state: 'locked' },
    });
  });

  it('with the broker’s socket back in place the same unlock reaches the broker', async () => {
    const unlock = await runOnTerminal(['vault', 'unlock', '--data-dir', dataDir], passphrase);
    expect(unlock.code).toBe(0);
    expect(unlock.screen).not.toContain('CONTROL_SOCKET_UNVERIFIED');
    expect(await sendControlRequest(socketPath, { op: 'vault_status' })).toMatchObject({
      ok: true,
      value: { state: 'unlocked' },
    });
  });

  it('a socket whose listener holds no lock at all (the broker gone, a stale path reused) is refused the same way', async () => {
    const other = path.join(scratch, 'no-broker');
    mkdirSync(other, { mode: 0o700 });
    const chunks: Buffer[] = [];
    const server = createServer((socket) => socket.on('data', (chunk: Buffer) => chunks.push(chunk)));
    await new Promise<void>((resolve) => server.listen(controlSocketPath(other), resolve));
    try {
      await expect(sendControlRequest(controlSocketPath(other), { op: 'vault_status' })).rejects.toMatchObject({
        code: 'CONTROL_SOCKET_UNVERIFIED',
        field: '--data-dir',
        message: expect.stringContaining('no process holds the data directory’s lock') as unknown,
      });
      expect(Buffer.concat(chunks).length).toBe(0);
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(controlSocketPath(other), { force: true });
    }
  });
});
