import { existsSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { systemClock } from '../ports/index.js';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import { openVault } from '../vault/index.js';
import { createBrokerRuntime } from './broker-runtime.js';
import { controlSocketPath, sendControlRequest } from './control-socket.js';

let dir: TempDir;
afterEach(() => dir.remove());

const options = { mode: 'headless' as const, version: '0.0.0-test', startedAtMs: 1 };
const passphrase = 'runtime vault passphrase';

async function initializedDir(): Promise<string> {
  dir = createTempDir('prv-');
  const vault = await openVault({ dataDir: dir.path, clock: systemClock, kdf: 'min' });
  await vault.init(Buffer.from(passphrase));
  await vault.close();
  return dir.path;
}

describe('the broker runtime and its vault', () => {
  it('opens the vault beside the journal, unlocks it at start with the passphrase, serves control.sock, and removes it on close', async () => {
    const dataDir = await initializedDir();
    const runtime = await createBrokerRuntime({ dataDir, ...options, vaultPassphrase: Buffer.from(passphrase) });
    expect(runtime.status().vault).toEqual({ state: 'unlocked', auto_lock_minutes: 15, last_lock: null });
    // Locking is a decision: refused without a person's proof; and a start passphrase came from a file any process of
    // the user can read, so presenting it proves no person either.
    expect(await sendControlRequest(controlSocketPath(dataDir), { op: 'lock' })).toMatchObject({
      ok: false,
      error: { code: 'OPERATOR_PROOF_REQUIRED' },
    });
    expect(await sendControlRequest(controlSocketPath(dataDir), { op: 'lock', proof: { passphrase } })).toMatchObject({
      ok: false,
      error: { code: 'OPERATOR_PROOF_REQUIRED', field: 'proof' },
    });
    expect(runtime.vault.state()).toBe('unlocked');
    await runtime.close();
    expect(existsSync(controlSocketPath(dataDir))).toBe(false);
  });

  it('started locked and unlocked over control.sock, it takes the passphrase as the proof of a lock', async () => {
    const dataDir = await initializedDir();
    const runtime = await createBrokerRuntime({ dataDir, ...options });
    try {
      expect(await sendControlRequest(controlSocketPath(dataDir), { op: 'unlock', passphrase })).toMatchObject({
        ok: true,
      });
      expect(await sendControlRequest(controlSocketPath(dataDir), { op: 'lock', proof: { passphrase } })).toEqual({
        ok: true,
        value: { state: 'locked' },
      });
      expect(runtime.vault.state()).toBe('locked');
    } finally {
      await runtime.close();
    }
  });

  it('when the start passphrase is wrong, it fails with VAULT_PASSPHRASE_INVALID and leaves nothing open (a new runtime starts)', async () => {
    const dataDir = await initializedDir();
    await expect(
      createBrokerRuntime({ dataDir, ...options, vaultPassphrase: Buffer.from('wrong passphrase') }),
    ).rejects.toMatchObject({
      code: 'VAULT_PASSPHRASE_INVALID',
    });
    expect(existsSync(controlSocketPath(dataDir))).toBe(false);
    const runtime = await createBrokerRuntime({ dataDir, ...options });
    expect(runtime.status().vault).toEqual({ state: 'locked', auto_lock_minutes: 15, last_lock: null });
    await runtime.close();
  });

  it('when a broker already runs on the data dir, a second refuses before opening the journal', async () => {
    const dataDir = await initializedDir();
    const runtime = await createBrokerRuntime({ dataDir, ...options });
    try {
      await expect(createBrokerRuntime({ dataDir, ...options })).rejects.toMatchObject({
        code: 'BROKER_ALREADY_RUNNING',
        field: '--data-dir',
        message: expect.stringContaining(`pid ${process.pid}`),
      });
    } finally {
      await runtime.close();
    }
  });
});
