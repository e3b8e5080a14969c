import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../ports/index.js';
import { createTempDir, type TempDir } from '../../testing/temp-dir.js';
import { openVault, vaultFileName } from '../index.js';
import { vaultMigration001Initial } from './001-initial.js';

const passphrase = (): Uint8Array => new TextEncoder().encode('correct horse battery staple');
const canary = 'CANARY-migrated-secret-88a1';

let source: TempDir;
let target: TempDir;
beforeEach(() => {
  source = createTempDir('postern-vault-v2-');
  target = createTempDir('postern-vault-v1-');
});
afterEach(() => {
  source.remove();
  target.remove();
});

/**
 * A version 1 file, as the release before this step wrote it: 001's schema with the key and a
 * credential copied from a real vault (so the passphrase really opens it), and no protected_by.
 */
async function version1File(): Promise<string> {
  const vault = await openVault({ dataDir: source.path, clock: systemClock, idleLockMs: 0, kdf: 'min' });
  await vault.init(passphrase());
  await vault.add({ name: 'api', kind: 'bearer', bindings: ['route:api'], secret: new TextEncoder().encode(canary) });
  await vault.close();
  const from = new Database(path.join(source.path, vaultFileName), { readonly: true });
  const file = path.join(target.path, vaultFileName);
  const to = new Database(file);
  try {
    vaultMigration001Initial.up(to);
    to.pragma('user_version = 1');
    const key = from
      .prepare('SELECT kdf_alg, salt, opslimit, memlimit, nonce, wrapped_key, created_at_ms FROM vault_key')
      .get() as Record<string, unknown>;
    to.prepare(
      'INSERT INTO vault_key VALUES (1, @kdf_alg, @salt, @opslimit, @memlimit, @nonce, @wrapped_key, @created_at_ms)',
    ).run(key);
    for (const row of from.prepare('SELECT * FROM credentials').all() as Array<Record<string, unknown>>) {
      to.prepare(
        'INSERT INTO credentials VALUES (@id, @name, @kind, @version_tag, @bindings, @header, @param, @template, @nonce, @sealed, @updated_at_ms)',
      ).run(row);
    }
  } finally {
    from.close();
    to.close();
  }
  return file;
}

function snapshot(file: string): { version: number; key: unknown; credentials: unknown } {
  const db = new Database(file, { readonly: true });
  try {
    return {
      version: Number(db.pragma('user_version', { simple: true })),
      key: db
        .prepare('SELECT kdf_alg, salt, opslimit, memlimit, nonce, wrapped_key, created_at_ms FROM vault_key')
        .get(),
      credentials: db.prepare('SELECT * FROM credentials').all(),
    };
  } finally {
    db.close();
  }
}

describe('when a version 1 vault with a key and a credential is opened by this Postern', () => {
  it('migrates to 2, keeps every row, marks the key unprotected, and the passphrase still opens it', async () => {
    const file = await version1File();
    const before = snapshot(file);
    expect(before.version).toBe(1);
    const vault = await openVault({ dataDir: target.path, clock: systemClock, idleLockMs: 0, kdf: 'min' });
    try {
      const after = snapshot(file);
      expect(after).toEqual({ ...before, version: 2 });
      const db = new Database(file, { readonly: true });
      expect(db.prepare('SELECT protected_by FROM vault_key').get()).toEqual({ protected_by: null });
      db.close();
      await vault.unlock(passphrase());
      expect(await vault.withSecret('api', (m) => (m.kind === 'bearer' ? m.token : ''))).toBe(canary);
    } finally {
      await vault.close();
    }
  });

  it('a file from a newer Postern is refused, not guessed at', async () => {
    const file = path.join(target.path, vaultFileName);
    const db = new Database(file);
    db.pragma('user_version = 3');
    db.close();
    await expect(openVault({ dataDir: target.path, clock: systemClock, kdf: 'min' })).rejects.toMatchObject({
      code: 'VAULT_CORRUPT',
    });
  });
});
