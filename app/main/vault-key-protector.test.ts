import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { createBrokerRuntime } from '../../broker/host/index.js';
import {
  chooseVaultKeyProtector,
  describeKeyProtectorChoice,
  keyProtectionFromEnv,
  protectedKeyBytesMax,
  runtimeKeyProtectorOptions,
  type SafeStorageLike,
} from './vault-key-protector.js';

/**
 * Electron's binary cannot run here, so safeStorage is a stand-in that really encrypts
 * (AES-256-GCM under a key only it holds, like the OS keyring's) and records what it was asked.
 */
function standInSafeStorage(
  options: { backend?: string | 'throws'; available?: boolean | 'throws' | 'never'; rotated?: boolean } = {},
) {
  const key = randomBytes(32);
  const asked: string[] = [];
  const storage: SafeStorageLike = {
    isAsyncEncryptionAvailable: () => {
      asked.push('available');
      if (options.available === 'never') return new Promise<boolean>(() => undefined);
      return options.available === 'throws'
        ? Promise.reject(new Error('no keyring'))
        : Promise.resolve(options.available ?? true);
    },
    getSelectedStorageBackend: () => {
      asked.push('backend');
      if (options.backend === 'throws') throw new Error('not ready');
      return options.backend ?? 'gnome_libsecret';
    },
    encryptStringAsync: (plainText) => {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      const body = Buffer.concat([cipher.update(plainText, 'utf8'), cipher.final()]);
      return Promise.resolve(Buffer.concat([iv, cipher.getAuthTag(), body]));
    },
    decryptStringAsync: (encrypted) => {
      const decipher = createDecipheriv('aes-256-gcm', key, encrypted.subarray(0, 12));
      decipher.setAuthTag(encrypted.subarray(12, 28));
      const result = Buffer.concat([decipher.update(encrypted.subarray(28)), decipher.final()]).toString('utf8');
      return Promise.resolve({ result, shouldReEncrypt: options.rotated ?? false });
    },
  };
  return { storage, asked };
}

/** Stands for the vault's sealed data key: a canary, so a leak into the blob is visible. */
const wrappedKey = new Uint8Array(Buffer.from('CANARY-sealed-data-key-0123456789abcdef'));

describe('when the platform has a keyring Postern trusts', () => {
  it.each([
    ['darwin', 'keychain'],
    ['win32', 'dpapi'],
    ['linux', 'gnome_libsecret'],
    ['linux', 'kwallet6'],
  ])('%s (%s): safeStorage wraps the sealed key and gives it back', async (platform, backend) => {
    const { storage } = standInSafeStorage({ backend });
    const choice = await chooseVaultKeyProtector(platform, storage);
    expect(choice).toMatchObject({ use: true, backend });
    if (!choice.use) return;
    const blob = await choice.protector.protect(wrappedKey);
    expect(Buffer.from(blob).includes(Buffer.from(wrappedKey))).toBe(false);
    expect(Buffer.from(blob).includes(Buffer.from(Buffer.from(wrappedKey).toString('base64')))).toBe(false);
    expect(await choice.protector.unprotect(blob)).toEqual({ wrappedKey, reprotect: false });
  });

  it('asks Linux for its backend, and never asks macOS or Windows (the call is Linux-only)', async () => {
    const linux = standInSafeStorage();
    await chooseVaultKeyProtector('linux', linux.storage);
    expect(linux.asked).toContain('backend');
    const mac = standInSafeStorage();
    await chooseVaultKeyProtector('darwin', mac.storage);
    expect(mac.asked).not.toContain('backend');
  });

  it('a tampered blob is refused, never turned into a key', async () => {
    const choice = await chooseVaultKeyProtector('linux', standInSafeStorage().storage);
    if (!choice.use) throw new Error('expected a protector');
    const blob = await choice.protector.protect(wrappedKey);
    blob[blob.length - 1] = (blob[blob.length - 1] ?? 0) ^ 1;
    await expect(choice.protector.unprotect(blob)).rejects.toThrow();
  });

  it('says when the OS rotated its key and the blob should be rewritten', async () => {
    const choice = await chooseVaultKeyProtector('win32', standInSafeStorage({ rotated: true }).storage);
    if (!choice.use) throw new Error('expected a protector');
    expect((await choice.protector.unprotect(await choice.protector.protect(wrappedKey))).reprotect).toBe(true);
  });

  it.each([0, protectedKeyBytesMax + 1])('refuses a %i-byte key (a bound, not a document store)', async (size) => {
    const choice = await chooseVaultKeyProtector('darwin', standInSafeStorage().storage);
    if (!choice.use) throw new Error('expected a protector');
    await expect(choice.protector.protect(new Uint8Array(size))).rejects.toThrow(RangeError);
  });
});

describe('when safeStorage would protect nothing or cannot work', () => {
  it.each([
    ['linux', { backend: 'basic_text' }, /hard-coded password/],
    ['linux', { backend: 'unknown' }, /not one we can trust/],
    ['freebsd', {}, /"unknown"/],
    ['linux', { available: false }, /cannot encrypt/],
    ['darwin', { available: 'throws' as const }, /cannot encrypt/],
    ['linux', { backend: 'throws' }, /"unknown"/],
  ])('%s %j: the passphrase alone, with the reason', async (platform, options, reason) => {
    const choice = await chooseVaultKeyProtector(platform, standInSafeStorage(options).storage);
    expect(choice.use).toBe(false);
    if (choice.use) return;
    expect(choice.reason).toMatch(reason);
    expect(describeKeyProtectorChoice(choice)).toContain('passphrase alone');
  });

  it('a keyring that never answers is given up on after the bound, not waited for', async () => {
    const choice = await chooseVaultKeyProtector('linux', standInSafeStorage({ available: 'never' }).storage, {
      availabilityWaitMs: 20,
    });
    expect(choice).toMatchObject({ use: false, reason: expect.stringMatching(/did not answer in time/) });
  });

  it('never asks basic_text whether it can encrypt', async () => {
    const { storage, asked } = standInSafeStorage({ backend: 'basic_text' });
    await chooseVaultKeyProtector('linux', storage);
    expect(asked).not.toContain('available');
  });
});

describe('what main passes to the runtime', () => {
  it.each([
    [{}, 'apply'],
    [{ POSTERN_VAULT_KEY_PROTECTION: '' }, 'apply'],
    [{ POSTERN_VAULT_KEY_PROTECTION: 'apply' }, 'apply'],
    [{ POSTERN_VAULT_KEY_PROTECTION: 'remove' }, 'remove'],
  ])('POSTERN_VAULT_KEY_PROTECTION in %j → %s', (env, protection) => {
    expect(keyProtectionFromEnv(env)).toBe(protection);
  });

  it('refuses any other value rather than guess', () => {
    expect(() => keyProtectionFromEnv({ POSTERN_VAULT_KEY_PROTECTION: 'off' })).toThrow(/"apply" or "remove"/);
  });

  it('a protector only when the choice says to use it, and the log line says what happens', async () => {
    const yes = await chooseVaultKeyProtector('darwin', standInSafeStorage().storage);
    const no = await chooseVaultKeyProtector('linux', standInSafeStorage({ backend: 'basic_text' }).storage);
    expect(runtimeKeyProtectorOptions(yes, 'apply')).toEqual({
      vaultKeyProtector: yes.use ? yes.protector : undefined,
      vaultKeyProtection: 'apply',
    });
    expect(runtimeKeyProtectorOptions(no, 'remove')).toEqual({});
    expect(describeKeyProtectorChoice(yes)).toContain('safeStorage (keychain) protects the vault key');
    expect(describeKeyProtectorChoice(yes, 'remove')).toContain('taken off the vault key at its next unlock');
  });
});

describe('when the desktop runtime gets the protector (the same call main makes)', () => {
  it('creates a protected vault that the desktop unlocks and a headless runtime refuses with VAULT_KEY_PROTECTED', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'postern-desktop-protect-'));
    const base = { dataDir, version: '0.0.0-test', startedAtMs: 1, vaultKdf: 'min' as const };
    const passphrase = 'desktop vault passphrase';
    const safeStorage = standInSafeStorage().storage;
    try {
      const choice = await chooseVaultKeyProtector('darwin', safeStorage);
      const desktop = await createBrokerRuntime({
        ...base,
        mode: 'desktop',
        ...runtimeKeyProtectorOptions(choice, keyProtectionFromEnv({})),
      });
      await desktop.vault.init(Buffer.from(passphrase));
      await desktop.close();
      const files = Buffer.concat(
        readdirSync(dataDir)
          .filter((f) => f.startsWith('vault.sqlite'))
          .map((f) => readFileSync(path.join(dataDir, f))),
      );
      expect(files.includes(Buffer.from('keychain'))).toBe(true);

      await expect(
        createBrokerRuntime({ ...base, mode: 'headless', vaultPassphrase: Buffer.from(passphrase) }),
      ).rejects.toMatchObject({
        code: 'VAULT_KEY_PROTECTED',
      });
      const again = await createBrokerRuntime({
        ...base,
        mode: 'desktop',
        ...runtimeKeyProtectorOptions(await chooseVaultKeyProtector('darwin', safeStorage), 'apply'),
      });
      try {
        await again.vault.unlock(Buffer.from(passphrase));
        expect(again.vault.state()).toBe('unlocked');
      } finally {
        await again.close();
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
