import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import ssh2 from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isCodedError } from '../contract/index.js';
import { FakeClock } from '../testing/fake-clock.js';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import { openVault, type Vault } from './index.js';

/** Real keys from ssh-keygen (openssh-client), one per format the vault must take. */
const keyPassphrase = 'key-pass-123';
let dir: TempDir;
let vault: Vault;
const keys: Record<string, { private: Buffer; public: string; encrypted: boolean }> = {};

function generate(name: string, args: string[], encrypted: boolean): void {
  const file = path.join(dir.path, name);
  execFileSync('ssh-keygen', ['-q', ...args, '-N', encrypted ? keyPassphrase : '', '-C', `${name}@test`, '-f', file]);
  keys[name] = { private: readFileSync(file), public: readFileSync(`${file}.pub`, 'utf8'), encrypted };
}

beforeAll(async () => {
  dir = createTempDir('postern-sshkeys-');
  generate('ed25519', ['-t', 'ed25519'], false);
  generate('ed25519-encrypted', ['-t', 'ed25519'], true);
  generate('rsa', ['-t', 'rsa', '-b', '2048'], false);
  generate('rsa-pem-encrypted', ['-t', 'rsa', '-b', '2048', '-m', 'PEM'], true);
  generate('ecdsa-encrypted', ['-t', 'ecdsa', '-b', '256'], true);
  vault = await openVault({ dataDir: dir.path, clock: new FakeClock(), idleLockMs: 0, kdf: 'min' });
  await vault.init(new TextEncoder().encode('vault passphrase'));
});
afterAll(async () => {
  await vault.close();
  dir.remove();
});

function fieldOf(error: unknown): [string, string | undefined] {
  if (!isCodedError(error)) throw error;
  return [error.code, error.field];
}

describe('SSH private keys', () => {
  it.each(['ed25519', 'ed25519-encrypted', 'rsa', 'rsa-pem-encrypted', 'ecdsa-encrypted'])(
    '%s: imported, stored without its passphrase, and usable by ssh2 as given by withSecret (signs, verifies with the .pub)',
    async (name) => {
      const key = keys[name];
      if (key === undefined) throw new Error(name);
      const passphrase = key.encrypted ? Buffer.from(keyPassphrase) : undefined;
      await vault.add({
        name,
        kind: 'ssh_key',
        secret: key.private,
        bindings: ['host-a'],
        sshKeyPassphrase: passphrase,
      });
      const data = Buffer.from('challenge');
      await vault.withSecret(name, (secret) => {
        if (secret.kind !== 'ssh_key') throw new Error('wrong kind');
        // No passphrase: what the vault hands out is the decrypted key.
        const parsed = ssh2.utils.parseKey(secret.privateKey);
        if (parsed instanceof Error) throw parsed;
        expect(parsed.isPrivateKey()).toBe(true);
        const publicKey = ssh2.utils.parseKey(key.public);
        if (publicKey instanceof Error) throw publicKey;
        expect(parsed.getPublicSSH().equals(publicKey.getPublicSSH())).toBe(true);
        expect(publicKey.verify(data, parsed.sign(data))).toBe(true);
        if (key.encrypted) expect(secret.privateKey.includes(keyPassphrase)).toBe(false);
      });
    },
  );

  it('an encrypted key without its passphrase names sshKeyPassphrase', async () => {
    const error = await vault
      .add({
        name: 'nopass',
        kind: 'ssh_key',
        secret: keys['ed25519-encrypted']?.private ?? Buffer.alloc(0),
        bindings: [],
      })
      .catch((e: unknown) => e);
    expect(fieldOf(error)).toEqual(['INVALID_ARGUMENT', 'sshKeyPassphrase']);
  });

  it.each(['ed25519-encrypted', 'rsa-pem-encrypted'])(
    '%s with a wrong passphrase names sshKeyPassphrase and carries no ssh2 cause',
    async (name) => {
      const error = await vault
        .add({
          name: 'wrong',
          kind: 'ssh_key',
          secret: keys[name]?.private ?? Buffer.alloc(0),
          bindings: [],
          sshKeyPassphrase: Buffer.from('nope-nope'),
        })
        .catch((e: unknown) => e);
      expect(fieldOf(error)).toEqual(['INVALID_ARGUMENT', 'sshKeyPassphrase']);
      expect((error as Error).cause).toBeUndefined();
      expect(vault.describe('wrong')).toBeUndefined();
    },
  );

  it.each<[string, () => Buffer]>([
    ['garbage', () => Buffer.from('not a key at all')],
    ['a public key', () => Buffer.from(keys['rsa']?.public ?? '')],
    ['a truncated OpenSSH key', () => (keys['ed25519']?.private ?? Buffer.alloc(0)).subarray(0, 200)],
  ])('%s names the secret, quotes none of it and carries no cause', async (_what, bytes) => {
    const secret = bytes();
    const error = await vault.add({ name: 'bad', kind: 'ssh_key', secret, bindings: [] }).catch((e: unknown) => e);
    expect(fieldOf(error)).toEqual(['INVALID_ARGUMENT', 'secret']);
    expect((error as Error).cause).toBeUndefined();
    expect((error as Error).message).not.toContain(secret.subarray(0, 12).toString('utf8'));
  });

  it('rotation of an SSH key takes the new key passphrase and changes the version', async () => {
    const before = vault.describe('rsa');
    const after = await vault.rotate('rsa', keys['ecdsa-encrypted']?.private ?? Buffer.alloc(0), {
      sshKeyPassphrase: Buffer.from(keyPassphrase),
    });
    expect(after.version_tag).not.toBe(before?.version_tag);
    const type = await vault.withSecret('rsa', (secret) =>
      secret.kind === 'ssh_key' ? (ssh2.utils.parseKey(secret.privateKey) as ssh2.ParsedKey).type : '',
    );
    expect(type).toBe('ecdsa-sha2-nistp256');
  });
});
