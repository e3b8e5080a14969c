import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isCodedError, type ErrorCode } from '../contract/index.js';
import { systemClock, type VaultKeyProtection, type VaultKeyProtector } from '../ports/index.js';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import { openVault, vaultFileName, type Vault } from './index.js';
import { deriveKek, open as openSealed } from './vault-crypto.js';
import { sealedKeyFromBytes } from './vault-store.js';

/**
 * The vault with a key protector (the desktop's safeStorage). Electron cannot run here, so the
 * protector is a stand-in that really encrypts: AES-256-GCM under a random key only it holds, like
 * the OS keyring's, with switches for a locked keyring and a rotated OS key.
 */
/** What a keyring's own error might carry (an account, a path); never copied into our errors. */
const keyringDetail = 'CANARY-keyring-detail /home/someone/.local/share/keyrings';

function standInProtector(backend = 'gnome_libsecret') {
  const key = randomBytes(32);
  const switches = { locked: false, rotated: false, calls: [] as string[] };
  const protector: VaultKeyProtector = {
    backend,
    protect(wrappedKey) {
      switches.calls.push('protect');
      if (switches.locked) return Promise.reject(new Error(keyringDetail));
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      const body = Buffer.concat([cipher.update(wrappedKey), cipher.final()]);
      return Promise.resolve(new Uint8Array(Buffer.concat([iv, cipher.getAuthTag(), body])));
    },
    unprotect(blob) {
      switches.calls.push('unprotect');
      if (switches.locked) return Promise.reject(new Error(keyringDetail));
      const bytes = Buffer.from(blob);
      const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(0, 12));
      decipher.setAuthTag(bytes.subarray(12, 28));
      const wrappedKey = new Uint8Array(Buffer.concat([decipher.update(bytes.subarray(28)), decipher.final()]));
      return Promise.resolve({ wrappedKey, reprotect: switches.rotated });
    },
  };
  return { protector, switches };
}

const passphrase = (): Uint8Array => new TextEncoder().encode('correct horse battery staple');
const canary = 'CANARY-protected-vault-secret-6f1c';

async function codeOf(promise: Promise<unknown>): Promise<{ code: ErrorCode; message: string }> {
  try {
    await promise;
  } catch (error) {
    if (!isCodedError(error)) throw error;
    return { code: error.code, message: error.message };
  }
  throw new Error('expected a CodedError, got success');
}

let dir: TempDir;
const opened: Vault[] = [];
async function open(protector?: VaultKeyProtector, keyProtection?: VaultKeyProtection): Promise<Vault> {
  const vault = await openVault({
    dataDir: dir.path,
    clock: systemClock,
    idleLockMs: 0,
    kdf: 'min',
    ...(protector === undefined ? {} : { keyProtector: protector }),
    ...(keyProtection === undefined ? {} : { keyProtection }),
  });
  opened.push(vault);
  return vault;
}

async function closeAll(): Promise<void> {
  for (const vault of opened.splice(0)) await vault.close();
}

interface KeyRow {
  kdf_alg: string;
  salt: Buffer;
  opslimit: number;
  memlimit: number;
  nonce: Buffer;
  wrapped_key: Buffer;
  protected_by: string | null;
}

/** The stored key row as SQLite has it, read with a connection of its own (the file, not the vault's view). */
function keyRow(): KeyRow {
  const row = storedKeyRow();
  if (row === undefined) throw new Error('the vault has no key row');
  return row;
}

function storedKeyRow(): KeyRow | undefined {
  const db = new Database(path.join(dir.path, vaultFileName), { readonly: true });
  try {
    return db.prepare('SELECT * FROM vault_key WHERE id = 1').get() as KeyRow | undefined;
  } finally {
    db.close();
  }
}

function writeKeyBlob(blob: Buffer): void {
  const db = new Database(path.join(dir.path, vaultFileName));
  try {
    db.prepare('UPDATE vault_key SET wrapped_key = ? WHERE id = 1').run(blob);
  } finally {
    db.close();
  }
}

/** Every byte of every file in the data dir (vault.sqlite, -wal, -shm). */
function allBytes(): Buffer {
  return Buffer.concat(readdirSync(dir.path).map((name) => readFileSync(path.join(dir.path, name))));
}

/** A vault initialized (protected or not) holding one credential, then closed. */
async function initialized(protector?: VaultKeyProtector): Promise<void> {
  const vault = await open(protector);
  await vault.init(passphrase());
  await vault.add({ name: 'api', kind: 'bearer', bindings: ['route:api'], secret: new TextEncoder().encode(canary) });
  await closeAll();
}

async function secretOf(vault: Vault): Promise<string> {
  return vault.withSecret('api', (material) => (material.kind === 'bearer' ? material.token : ''));
}

beforeEach(() => {
  dir = createTempDir('postern-vault-protect-');
});
afterEach(async () => {
  await closeAll();
  dir.remove();
});

describe('when a vault is created with a key protector', () => {
  it('stores only the protector blob, names the backend, and unlocks again (unprotect before Argon2id)', async () => {
    const { protector, switches } = standInProtector('keychain');
    await initialized(protector);
    const row = keyRow();
    expect(row.protected_by).toBe('keychain');
    expect(row.nonce.length).toBe(0);
    const vault = await open(protector);
    expect(vault.state()).toBe('locked');
    switches.calls.length = 0;
    await vault.unlock(passphrase());
    expect(switches.calls).toEqual(['unprotect']);
    expect(vault.state()).toBe('unlocked');
    expect(await secretOf(vault)).toBe(canary);
    // An unlock that changes nothing leaves the row as it was.
    expect(keyRow()).toEqual(row);
  });

  it('holds neither the data key nor the passphrase-sealed key anywhere in the data directory', async () => {
    const { protector } = standInProtector();
    await initialized(protector);
    const row = keyRow();
    const sealedBytes = (await protector.unprotect(new Uint8Array(row.wrapped_key))).wrappedKey;
    const sealed = sealedKeyFromBytes(sealedBytes);
    if (sealed === undefined) throw new Error('the protector did not give back a sealed key');
    const kdf = {
      alg: 'argon2id13' as const,
      salt: new Uint8Array(row.salt),
      opslimit: row.opslimit,
      memlimit: row.memlimit,
    };
    const dataKey = openSealed(deriveKek(passphrase(), kdf), sealed, 'postern-vault-data-key:v1');
    expect(dataKey?.length).toBe(32);
    const bytes = allBytes();
    expect(bytes.includes(Buffer.from(dataKey ?? []))).toBe(false);
    expect(bytes.includes(Buffer.from(sealed.ciphertext))).toBe(false);
    expect(bytes.includes(Buffer.from(sealed.nonce))).toBe(false);
    expect(bytes.includes(Buffer.from(canary))).toBe(false);
  });

  it('still refuses a wrong passphrase, and the row stays as it was', async () => {
    const { protector } = standInProtector();
    await initialized(protector);
    const before = keyRow();
    const vault = await open(protector);
    expect((await codeOf(vault.unlock(new TextEncoder().encode('not the passphrase')))).code).toBe(
      'VAULT_PASSPHRASE_INVALID',
    );
    expect(await vault.verifyPassphrase(new TextEncoder().encode('not the passphrase'))).toBe(false);
    expect(await vault.verifyPassphrase(passphrase())).toBe(true);
    expect(vault.state()).toBe('locked');
    expect(keyRow()).toEqual(before);
  });

  it('when the keyring is locked at init, stores nothing (VAULT_KEY_PROTECTOR_FAILED) and stays uninitialized', async () => {
    const { protector, switches } = standInProtector();
    switches.locked = true;
    const vault = await open(protector);
    const refused = await codeOf(vault.init(passphrase()));
    expect(refused.code).toBe('VAULT_KEY_PROTECTOR_FAILED');
    expect(refused.message).not.toContain(keyringDetail);
    expect(vault.state()).toBe('uninitialized');
    expect(storedKeyRow()).toBeUndefined();
  });
});

describe('when a protected vault is opened without a protector (the headless daemon, the CLI)', () => {
  it('refuses to unlock or verify with VAULT_KEY_PROTECTED naming the backend and the desktop app, and changes nothing', async () => {
    const { protector } = standInProtector('kwallet6');
    await initialized(protector);
    const before = keyRow();
    const vault = await open();
    const refused = await codeOf(vault.unlock(passphrase()));
    expect(refused.code).toBe('VAULT_KEY_PROTECTED');
    expect(refused.message).toContain('kwallet6');
    expect(refused.message).toContain('desktop app');
    expect((await codeOf(vault.verifyPassphrase(passphrase()))).code).toBe('VAULT_KEY_PROTECTED');
    expect(vault.state()).toBe('locked');
    await closeAll();
    expect(keyRow()).toEqual(before);
    // The protection was not dropped: the desktop still opens it.
    const desktop = await open(protector);
    await desktop.unlock(passphrase());
    expect(await secretOf(desktop)).toBe(canary);
  });
});

describe('when the stored blob or the keyring misbehaves', () => {
  it('a tampered blob is refused (VAULT_KEY_PROTECTOR_FAILED), the vault stays locked and the row is not rewritten', async () => {
    const { protector } = standInProtector();
    await initialized(protector);
    const blob = Buffer.from(keyRow().wrapped_key);
    blob[blob.length - 1] = (blob[blob.length - 1] ?? 0) ^ 0x01;
    writeKeyBlob(blob);
    const vault = await open(protector);
    expect((await codeOf(vault.unlock(passphrase()))).code).toBe('VAULT_KEY_PROTECTOR_FAILED');
    expect(vault.state()).toBe('locked');
    expect(keyRow().wrapped_key).toEqual(blob);
  });

  it('a blob the keyring opens but that is no sealed key is VAULT_CORRUPT', async () => {
    const { protector } = standInProtector();
    await initialized(protector);
    writeKeyBlob(Buffer.from(await protector.protect(new Uint8Array(randomBytes(20)))));
    const vault = await open(protector);
    expect((await codeOf(vault.unlock(passphrase()))).code).toBe('VAULT_CORRUPT');
  });

  it('a locked keyring at unlock is VAULT_KEY_PROTECTOR_FAILED with no state change; unlocked again, it opens', async () => {
    const { protector, switches } = standInProtector();
    await initialized(protector);
    const before = keyRow();
    const vault = await open(protector);
    switches.locked = true;
    expect((await codeOf(vault.unlock(passphrase()))).code).toBe('VAULT_KEY_PROTECTOR_FAILED');
    expect(vault.state()).toBe('locked');
    expect(keyRow()).toEqual(before);
    switches.locked = false;
    await vault.unlock(passphrase());
    expect(vault.state()).toBe('unlocked');
  });

  it('when the OS rotated its key, the blob is rewritten at unlock and still opens', async () => {
    const { protector, switches } = standInProtector();
    await initialized(protector);
    const before = keyRow();
    switches.rotated = true;
    await (await open(protector)).unlock(passphrase());
    await closeAll();
    const after = keyRow();
    expect(after.protected_by).toBe(before.protected_by);
    expect(after.wrapped_key.equals(before.wrapped_key)).toBe(false);
    switches.rotated = false;
    const vault = await open(protector);
    await vault.unlock(passphrase());
    expect(await secretOf(vault)).toBe(canary);
  });
});

describe('when an unprotected vault is opened with a protector', () => {
  it('is protected at its next successful unlock, not before and not by a wrong passphrase', async () => {
    await initialized();
    const unprotected = keyRow();
    expect(unprotected.protected_by).toBeNull();
    const { protector } = standInProtector('dpapi');
    const vault = await open(protector);
    expect(keyRow()).toEqual(unprotected);
    expect((await codeOf(vault.unlock(new TextEncoder().encode('not the passphrase')))).code).toBe(
      'VAULT_PASSPHRASE_INVALID',
    );
    expect(keyRow()).toEqual(unprotected);
    await vault.unlock(passphrase());
    // Gone from every file while the vault is still open (secure_delete and a checkpoint), not only after close.
    expect(allBytes().includes(unprotected.wrapped_key)).toBe(false);
    await closeAll();
    const upgraded = keyRow();
    expect(upgraded.protected_by).toBe('dpapi');
    expect(upgraded.salt).toEqual(unprotected.salt);
    expect(allBytes().includes(unprotected.wrapped_key)).toBe(false);
    expect((await codeOf((await open()).unlock(passphrase()))).code).toBe('VAULT_KEY_PROTECTED');
    const again = await open(protector);
    await again.unlock(passphrase());
    expect(await secretOf(again)).toBe(canary);
  });

  it('when the keyring fails during the upgrade, the unlock fails (VAULT_KEY_PROTECTOR_FAILED) and the vault stays as it was', async () => {
    await initialized();
    const unprotected = keyRow();
    const { protector, switches } = standInProtector();
    switches.locked = true;
    const vault = await open(protector);
    expect((await codeOf(vault.unlock(passphrase()))).code).toBe('VAULT_KEY_PROTECTOR_FAILED');
    expect(vault.state()).toBe('locked');
    expect(keyRow()).toEqual(unprotected);
  });
});

describe("when the protection is removed (keyProtection 'remove', to move the vault)", () => {
  it('unprotects at the next unlock, after which the headless daemon opens it with the passphrase alone', async () => {
    const { protector } = standInProtector();
    await initialized(protector);
    const removing = await open(protector, 'remove');
    await removing.unlock(passphrase());
    await closeAll();
    const row = keyRow();
    expect(row.protected_by).toBeNull();
    expect(row.nonce.length).toBe(24);
    const headless = await open();
    await headless.unlock(passphrase());
    expect(await secretOf(headless)).toBe(canary);
  });

  it('creates a new vault unprotected', async () => {
    const { protector, switches } = standInProtector();
    const vault = await open(protector, 'remove');
    await vault.init(passphrase());
    expect(keyRow().protected_by).toBeNull();
    expect(switches.calls).toEqual([]);
  });
});
