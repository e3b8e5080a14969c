import { generateKeyPairSync } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FakeClock } from '../testing/fake-clock.js';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import { openVault, type Vault } from './index.js';

// The one secret form Node lets us wipe after use is bytes: the ssh_key Buffer. These are the
// paths where a wipe is easy to forget: a use that throws, and one that fails after an await.
// (The plain return is covered in vault.test.ts.)

let dir: TempDir;
let vault: Vault;

beforeEach(async () => {
  dir = createTempDir('postern-wipe-');
  vault = await openVault({ dataDir: dir.path, clock: new FakeClock(), idleLockMs: 0, kdf: 'min' });
  await vault.init(new TextEncoder().encode('correct horse battery staple'));
  const { privateKey } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    privateKeyEncoding: { type: 'pkcs1', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
  await vault.add({ name: 'k', kind: 'ssh_key', secret: new TextEncoder().encode(privateKey), bindings: ['host-a'] });
});

afterEach(async () => {
  await vault.close();
  dir.remove();
});

describe('when the use of an ssh_key fails', () => {
  it.each<[string, (key: Buffer) => Promise<never> | never]>([
    [
      'synchronously',
      () => {
        throw new Error('use failed');
      },
    ],
    [
      'after an await',
      async () => {
        await Promise.resolve();
        throw new Error('use failed');
      },
    ],
  ])('%s, the key buffer is zeroed before the error reaches the caller', async (_when, fail) => {
    let kept: Buffer | undefined;
    const outcome = vault.withSecret('k', (secret) => {
      if (secret.kind !== 'ssh_key') throw new Error('not an ssh key');
      kept = secret.privateKey;
      expect(kept.includes('PRIVATE KEY')).toBe(true);
      return fail(kept);
    });
    await expect(outcome).rejects.toThrow('use failed');
    expect(kept?.length).toBeGreaterThan(0);
    expect(kept?.every((byte) => byte === 0)).toBe(true);
  });
});
