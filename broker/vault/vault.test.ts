import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { copyFileSync, existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { isCodedError, type ErrorCode } from '../contract/index.js';
import type { SecretMaterial } from '../ports/index.js';
import { systemClock } from '../ports/index.js';
import { privateReadsMax } from '../ports/private-snapshot.js';
import { FakeClock } from '../testing/fake-clock.js';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import { openVault, vaultFileName, type Vault } from './index.js';

const text = (value: string): Uint8Array => new TextEncoder().encode(value);
const passphrase = (): Uint8Array => text('correct horse battery staple');

async function codeOf(
  promise: Promise<unknown> | (() => unknown),
): Promise<{ code: ErrorCode; field: string | undefined; message: string }> {
  try {
    await (typeof promise === 'function' ? promise() : promise);
  } catch (error) {
    if (!isCodedError(error)) throw error;
    return { code: error.code, field: error.field, message: error.message };
  }
  throw new Error('expected a CodedError, got success');
}

/** Every byte of every file in the data dir (vault.sqlite, -wal, -shm), to search for plaintext. */
function allBytes(dir: string): Buffer {
  return Buffer.concat(readdirSync(dir).map((name) => readFileSync(path.join(dir, name))));
}

let dir: TempDir;
let clock: FakeClock;
const opened: Vault[] = [];
async function open(
  options: { idleLockMs?: number; kdf?: 'min' | 'interactive'; real?: boolean } = {},
): Promise<Vault> {
  const vault = await openVault({
    dataDir: dir.path,
    clock: options.real === true ? systemClock : clock,
    idleLockMs: options.idleLockMs ?? 0,
    kdf: options.kdf ?? 'min',
  });
  opened.push(vault);
  return vault;
}

beforeEach(() => {
  dir = createTempDir('postern-vault-');
  clock = new FakeClock();
});
afterEach(async () => {
  for (const vault of opened.splice(0)) await vault.close();
  dir.remove();
});

describe('the state machine', () => {
  it('goes uninitialized → unlocked (init) → locked (lock) → unlocked (unlock), and a reopened file starts locked', async () => {
    const vault = await open();
    expect(vault.state()).toBe('uninitialized');
    expect((await codeOf(vault.unlock(passphrase()))).code).toBe('VAULT_NOT_INITIALIZED');
    await vault.init(passphrase());
    expect(vault.state()).toBe('unlocked');
    expect((await codeOf(vault.init(passphrase()))).code).toBe('VAULT_ALREADY_INITIALIZED');
    vault.lock('operator');
    expect(vault.state()).toBe('locked');
    await vault.unlock(passphrase());
    expect(vault.state()).toBe('unlocked');
    await vault.close();
    const again = await open();
    expect(again.state()).toBe('locked');
  });

  it('creates vault.sqlite with mode 0600, separate from the journal', async () => {
    const vault = await open();
    await vault.init(passphrase());
    const file = path.join(dir.path, vaultFileName);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    for (const name of readdirSync(dir.path)) expect(statSync(path.join(dir.path, name)).mode & 0o077).toBe(0);
    expect(existsSync(path.join(dir.path, 'journal.sqlite'))).toBe(false);
  });

  it('stores the Argon2id parameters with the wrapped key and uses WAL with synchronous FULL', async () => {
    const vault = await open({ kdf: 'interactive' });
    await vault.init(passphrase());
    const db = new Database(path.join(dir.path, vaultFileName), { readonly: true });
    try {
      const row = db
        .prepare(
          'SELECT kdf_alg, length(salt) AS salt, opslimit, memlimit, length(nonce) AS nonce, length(wrapped_key) AS wrapped FROM vault_key',
        )
        .get();
      // interactive = ops 2, 64 MiB; the data key (32 bytes) + the Poly1305 tag (16).
      expect(row).toEqual({
        kdf_alg: 'argon2id13',
        salt: 16,
        opslimit: 2,
        memlimit: 64 * 2 ** 20,
        nonce: 24,
        wrapped: 48,
      });
      expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
    } finally {
      db.close();
    }
    vault.lock('test');
    await vault.unlock(passphrase());
    expect(vault.state()).toBe('unlocked');
  });

  it('refuses a passphrase shorter than 8 bytes, or not UTF-8, at init, naming the field', async () => {
    const vault = await open();
    expect(await codeOf(vault.init(text('short')))).toMatchObject({ code: 'INVALID_ARGUMENT', field: 'passphrase' });
    expect(await codeOf(vault.init(new Uint8Array([0xff, 0xfe, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41])))).toMatchObject({
      code: 'INVALID_ARGUMENT',
      field: 'passphrase',
    });
    expect(vault.state()).toBe('uninitialized');
  });
});

describe('when the passphrase is wrong', () => {
  it('says VAULT_PASSPHRASE_INVALID naming the field and changes nothing: not the state, not a byte of any file', async () => {
    const vault = await open();
    await vault.init(passphrase());
    await vault.add({ name: 'api', kind: 'bearer', secret: text('tok-123'), bindings: ['api.example.com'] });
    vault.lock('test');
    // The -shm file is SQLite's shared-memory index: every read updates its read marks, so it is
    // compared by name only; the database and its WAL (where data lives) must be byte-identical.
    const snapshot = () =>
      readdirSync(dir.path).map(
        (name) => [name, name.endsWith('-shm') ? 'shm' : readFileSync(path.join(dir.path, name))] as const,
      );
    const before = snapshot();
    expect(await codeOf(vault.unlock(text('not the passphrase')))).toMatchObject({
      code: 'VAULT_PASSPHRASE_INVALID',
      field: 'passphrase',
    });
    expect(vault.state()).toBe('locked');
    expect(snapshot()).toEqual(before);
  });

  it('leaves an unlocked vault unlocked', async () => {
    const vault = await open();
    await vault.init(passphrase());
    expect((await codeOf(vault.unlock(text('wrong wrong wrong')))).code).toBe('VAULT_PASSPHRASE_INVALID');
    expect(vault.state()).toBe('unlocked');
  });
});

describe('when another process rewrites the key row after the vault opened (THREAT-MODEL 3)', () => {
  const keyColumns = ['kdf_alg', 'salt', 'opslimit', 'memlimit', 'nonce', 'wrapped_key', 'protected_by'];

  it('unlock and a passphrase proof open the row read at open: a passphrase that opens the new row opens nothing', async () => {
    const vault = await open();
    await vault.init(passphrase());
    vault.lock('operator');
    // Another vault, with the attacker's passphrase; its key row written over this one's.
    const other = createTempDir('postern-vault-other-');
    try {
      const theirs = await openVault({ dataDir: other.path, clock, idleLockMs: 0, kdf: 'min' });
      await theirs.init(text('the attacker chose this'));
      await theirs.close();
      const source = new Database(path.join(other.path, vaultFileName), { readonly: true });
      const row = source.prepare(`SELECT ${keyColumns.join(', ')} FROM vault_key WHERE id = 1`).get();
      source.close();
      const db = new Database(path.join(dir.path, vaultFileName));
      db.prepare(`UPDATE vault_key SET ${keyColumns.map((c) => `${c} = @${c}`).join(', ')} WHERE id = 1`).run(row);
      db.close();
    } finally {
      other.remove();
    }
    // A vault opened now reads the rewritten row: the attacker's passphrase opens it.
    const later = await open();
    expect(await later.verifyPassphrase(text('the attacker chose this'))).toBe(true);

    expect(await vault.verifyPassphrase(text('the attacker chose this'))).toBe(false);
    expect((await codeOf(vault.unlock(text('the attacker chose this')))).code).toBe('VAULT_PASSPHRASE_INVALID');
    expect(vault.state()).toBe('locked');
    expect(await vault.verifyPassphrase(passphrase())).toBe(true);
    await vault.unlock(passphrase());
    expect(vault.state()).toBe('unlocked');
  });

  it('a key row deleted after open leaves the vault initialized: state and init keep the row read at open', async () => {
    const vault = await open();
    await vault.init(passphrase());
    vault.lock('operator');
    const db = new Database(path.join(dir.path, vaultFileName));
    db.prepare('DELETE FROM vault_key').run();
    db.close();
    expect(vault.state()).toBe('locked');
    expect((await codeOf(vault.init(text('a new passphrase of the attacker')))).code).toBe('VAULT_ALREADY_INITIALIZED');
    await vault.unlock(passphrase());
    expect(vault.state()).toBe('unlocked');
  });
});

describe('auto-lock', () => {
  it('when the injected clock passes the idle time, the vault locks and onLock hears "idle"', async () => {
    const vault = await open({ idleLockMs: 60_000 });
    const reasons: string[] = [];
    vault.onLock((reason) => reasons.push(reason));
    await vault.init(passphrase());
    clock.advance(59_999);
    expect(vault.state()).toBe('unlocked');
    vault.touch();
    clock.advance(59_999);
    expect(vault.state()).toBe('unlocked');
    clock.advance(1);
    expect((await codeOf(vault.withSecret('x', () => undefined))).code).toBe('VAULT_LOCKED');
    expect(vault.state()).toBe('locked');
    expect(reasons).toEqual(['idle']);
  });

  it('with a short real idle time, the timer locks it on its own (waiting on the onLock event)', async () => {
    const vault = await open({ idleLockMs: 30, real: true });
    const locked = new Promise<string>((resolve) => vault.onLock(resolve));
    await vault.init(passphrase());
    expect(await locked).toBe('idle');
    expect(vault.state()).toBe('locked');
  });

  it('never locks by itself with idleLockMs 0', async () => {
    const vault = await open({ idleLockMs: 0 });
    await vault.init(passphrase());
    clock.advance(365 * 24 * 3_600_000);
    expect(vault.state()).toBe('unlocked');
  });

  it('lock fires onLock with the reason once, and an unsubscribed listener hears nothing', async () => {
    const vault = await open();
    const heard: string[] = [];
    const gone: string[] = [];
    vault.onLock((reason) => heard.push(reason));
    const off = vault.onLock((reason) => gone.push(reason));
    off();
    let unlocks = 0;
    vault.onUnlock(() => (unlocks += 1));
    await vault.init(passphrase());
    vault.lock('operator');
    vault.lock('again');
    expect(heard).toEqual(['operator']);
    expect(gone).toEqual([]);
    expect(unlocks).toBe(1);
  });
});

const kinds: [string, Parameters<Vault['add']>[0], SecretMaterial][] = [
  [
    'bearer',
    { name: 'gh', kind: 'bearer', secret: text('ghp_abc'), bindings: ['api.github.com'] },
    { kind: 'bearer', token: 'ghp_abc' },
  ],
  [
    'header with a template',
    {
      name: 'dd',
      kind: 'header',
      secret: text('k3y'),
      bindings: ['api.datadoghq.com'],
      header: 'DD-API-KEY',
      template: 'Key {secret}',
    },
    { kind: 'header', header: 'DD-API-KEY', value: 'Key k3y', secret: 'k3y' },
  ],
  [
    'basic, split at the first colon',
    { name: 'reg', kind: 'basic', secret: text('ann:pa:ss'), bindings: ['registry.local'] },
    { kind: 'basic', user: 'ann', password: 'pa:ss' },
  ],
  [
    'query parameter',
    { name: 'maps', kind: 'query', secret: text('q-secret'), bindings: ['maps.example.com'], param: 'key' },
    { kind: 'query', param: 'key', value: 'q-secret' },
  ],
];

describe('each kind round-trips through withSecret', () => {
  it.each(kinds)('%s', async (_kind, input, material) => {
    const vault = await open();
    await vault.init(passphrase());
    const info = await vault.add(input);
    expect(info).toMatchObject({ name: input.name, kind: input.kind, bindings: input.bindings });
    expect(info.id).toMatch(/^cred_[0-9a-f]{24}$/);
    expect(info.version_tag).toMatch(/^v1-[0-9a-f]{8}$/);
    expect(vault.describe(input.name)).toEqual(info);
    expect(vault.list()).toEqual([info]);
    const seen = await vault.withSecret(input.name, (secret, given) => {
      expect(given).toEqual(info);
      return secret;
    });
    expect(seen).toEqual(material);
  });

  it('defaults a header template to {secret}', async () => {
    const vault = await open();
    await vault.init(passphrase());
    await vault.add({ name: 'h', kind: 'header', secret: text('v'), bindings: [], header: 'X-Api-Key' });
    expect(await vault.withSecret('h', (s) => s)).toEqual({
      kind: 'header',
      header: 'X-Api-Key',
      value: 'v',
      secret: 'v',
    });
  });
});

describe('bad input is a coded error naming the field, before anything is stored', () => {
  const base = { name: 'ok', kind: 'bearer' as const, secret: text('s'), bindings: ['h.example'] };
  it.each<[string, Parameters<Vault['add']>[0], string]>([
    ['a name with a slash', { ...base, name: 'a/b' }, 'name'],
    ['an empty name', { ...base, name: '' }, 'name'],
    ['a name of 65 characters', { ...base, name: 'a'.repeat(65) }, 'name'],
    ['an unknown kind', { ...base, kind: 'cookie' as never }, 'kind'],
    ['a template without {secret}', { ...base, kind: 'header', header: 'X-K', template: 'Key' }, 'template'],
    [
      'a template with {secret} twice',
      { ...base, kind: 'header', header: 'X-K', template: '{secret}{secret}' },
      'template',
    ],
    ['a Host header', { ...base, kind: 'header', header: 'Host' }, 'header'],
    ['a header name with a space', { ...base, kind: 'header', header: 'X K' }, 'header'],
    ['a header kind without a header', { ...base, kind: 'header' }, 'header'],
    ['a query kind without a param', { ...base, kind: 'query' }, 'param'],
    ['a param on a bearer', { ...base, param: 'p' }, 'param'],
    ['basic without a colon', { ...base, kind: 'basic', secret: text('annpw') }, 'secret'],
    ['basic with an empty user', { ...base, kind: 'basic', secret: text(':pw') }, 'secret'],
    ['a secret with a newline (header smuggling)', { ...base, secret: text('a\r\nX-Evil: 1') }, 'secret'],
    ['an empty secret', { ...base, secret: new Uint8Array(0) }, 'secret'],
    ['a secret over 64 KiB', { ...base, secret: new Uint8Array(64 * 1024 + 1).fill(65) }, 'secret'],
    ['a binding with a slash', { ...base, bindings: ['h.example/path'] }, 'bindings[0]'],
    ['a key passphrase on a bearer', { ...base, sshKeyPassphrase: text('x') }, 'sshKeyPassphrase'],
  ])('%s', async (_when, input, field) => {
    const vault = await open();
    await vault.init(passphrase());
    const error = await codeOf(vault.add(input));
    expect(error.field).toBe(field);
    expect(['INVALID_ARGUMENT', 'PAYLOAD_LIMIT']).toContain(error.code);
    expect(vault.list()).toEqual([]);
  });

  it('refuses a second credential of the same name', async () => {
    const vault = await open();
    await vault.init(passphrase());
    await vault.add(base);
    expect(await codeOf(vault.add(base))).toMatchObject({ code: 'CREDENTIAL_EXISTS', field: 'name' });
  });
});

describe('withSecret', () => {
  it('says VAULT_LOCKED when locked or uninitialized, and UNKNOWN_CREDENTIAL without echoing the name', async () => {
    const vault = await open();
    expect((await codeOf(vault.withSecret('any', () => 1))).code).toBe('VAULT_LOCKED');
    await vault.init(passphrase());
    const unknown = await codeOf(vault.withSecret('prod-payments-root', () => 1));
    expect(unknown.code).toBe('UNKNOWN_CREDENTIAL');
    expect(unknown.message).not.toContain('prod-payments-root');
    await vault.add({ name: 'a', kind: 'bearer', secret: text('t'), bindings: [] });
    vault.lock('test');
    expect((await codeOf(vault.withSecret('a', () => 1))).code).toBe('VAULT_LOCKED');
  });

  it('zeroes the SSH key buffer it handed out once use returns', async () => {
    const vault = await open();
    await vault.init(passphrase());
    await vault.add({ name: 'k', kind: 'ssh_key', secret: text(generatedRsaKey()), bindings: ['host-a'] });
    let kept: Buffer | undefined;
    await vault.withSecret('k', (secret) => {
      if (secret.kind !== 'ssh_key') throw new Error('not an ssh key');
      expect(secret.privateKey.toString('utf8')).toContain('PRIVATE KEY');
      kept = secret.privateKey;
    });
    expect(kept?.every((byte) => byte === 0)).toBe(true);
  });
});

describe('rotation', () => {
  it('changes version_tag, keeps the id, and the old secret is gone', async () => {
    const vault = await open();
    await vault.init(passphrase());
    const old = `CANARY-old-${randomBytes(8).toString('hex')}`;
    const first = await vault.add({ name: 'svc', kind: 'bearer', secret: text(old), bindings: ['svc.example'] });
    const second = await vault.rotate('svc', text('new-token'));
    expect(second.id).toBe(first.id);
    expect(second.version_tag).not.toBe(first.version_tag);
    expect(second.version_tag).toMatch(/^v2-/);
    expect(vault.describe('svc')).toEqual(second);
    expect(await vault.withSecret('svc', (s) => s)).toEqual({ kind: 'bearer', token: 'new-token' });
    await vault.close();
    expect(allBytes(dir.path).includes(old)).toBe(false);
    expect((await codeOf((await open()).rotate('nope', text('x')))).code).toBe('VAULT_LOCKED');
  });

  it('rebind replaces the bindings, seals the same secret under them, and changes the tag but not its rotation number', async () => {
    const vault = await open();
    await vault.init(passphrase());
    const first = await vault.add({
      name: 'svc',
      kind: 'bearer',
      secret: text('kept-token'),
      bindings: ['old.example'],
    });
    const rebound = await vault.rebind('svc', ['new.example', 'svc-route', 'new.example']);
    expect(rebound).toMatchObject({ id: first.id, bindings: ['new.example', 'svc-route'] });
    expect(rebound.version_tag).not.toBe(first.version_tag);
    expect(rebound.version_tag).toMatch(/^v1-/);
    expect(vault.describe('svc')).toEqual(rebound);
    expect(await vault.withSecret('svc', (s) => s)).toEqual({ kind: 'bearer', token: 'kept-token' });
    expect(await codeOf(vault.rebind('svc', ['good.example', 'not a host/']))).toMatchObject({
      code: 'INVALID_ARGUMENT',
      field: 'bindings[1]',
    });
    expect((await codeOf(vault.rebind('nope', ['a.example']))).code).toBe('UNKNOWN_CREDENTIAL');
    vault.lock('test');
    expect((await codeOf(vault.rebind('svc', ['a.example']))).code).toBe('VAULT_LOCKED');
    expect(vault.describe('svc')?.bindings).toEqual(['new.example', 'svc-route']);
  });

  it('a row rolled back to its old bindings after a rebind no longer decrypts', async () => {
    const vault = await open();
    await vault.init(passphrase());
    await vault.add({ name: 'svc', kind: 'bearer', secret: text('t0'), bindings: ['evil.example'] });
    const db = new Database(path.join(dir.path, vaultFileName));
    const before = db.prepare("SELECT nonce, sealed FROM credentials WHERE name = 'svc'").get() as {
      nonce: Buffer;
      sealed: Buffer;
    };
    db.close();
    await vault.rebind('svc', ['good.example']);
    const restore = new Database(path.join(dir.path, vaultFileName));
    restore
      .prepare(`UPDATE credentials SET bindings = '["evil.example"]', nonce = ?, sealed = ? WHERE name = 'svc'`)
      .run(before.nonce, before.sealed);
    restore.close();
    expect((await codeOf(vault.withSecret('svc', () => 1))).code).toBe('VAULT_CORRUPT');
  });

  it('remove deletes it; a removed name is unknown', async () => {
    const vault = await open();
    await vault.init(passphrase());
    await vault.add({ name: 'svc', kind: 'bearer', secret: text('t'), bindings: [] });
    await vault.remove('svc');
    expect(vault.list()).toEqual([]);
    expect((await codeOf(vault.withSecret('svc', () => 1))).code).toBe('UNKNOWN_CREDENTIAL');
    expect((await codeOf(vault.remove('svc'))).code).toBe('UNKNOWN_CREDENTIAL');
  });
});

describe('sealed rows are bound to their id, version and metadata', () => {
  async function twoCredentials(): Promise<Vault> {
    const vault = await open();
    await vault.init(passphrase());
    await vault.add({ name: 'one', kind: 'bearer', secret: text('secret-one'), bindings: ['a.example'] });
    await vault.add({ name: 'two', kind: 'bearer', secret: text('secret-two'), bindings: ['b.example'] });
    return vault;
  }
  /** Another process edits the file: what it did can reach this one only on a later turn (VaultStore.dataVersion). */
  async function edit(sql: string): Promise<void> {
    const db = new Database(path.join(dir.path, vaultFileName));
    try {
      db.exec(sql);
    } finally {
      db.close();
    }
    await new Promise((resolve) => setImmediate(resolve));
  }

  it('when two sealed rows are swapped in the file, decryption fails with VAULT_CORRUPT, not garbage', async () => {
    const vault = await twoCredentials();
    await edit(`CREATE TEMP TABLE s AS SELECT name, nonce, sealed FROM credentials;
          UPDATE credentials SET nonce = (SELECT nonce FROM s WHERE s.name <> credentials.name), sealed = (SELECT sealed FROM s WHERE s.name <> credentials.name);`);
    expect((await codeOf(vault.withSecret('one', () => 1))).code).toBe('VAULT_CORRUPT');
    expect((await codeOf(vault.withSecret('two', () => 1))).code).toBe('VAULT_CORRUPT');
  });

  it('when an id or version tag is edited in the file past its bound, the row is refused before it can reach an event', async () => {
    const vault = await twoCredentials();
    // describe() opens no sealed secret: it is what admission binds an action's credential from.
    expect(vault.describe('one')).toMatchObject({ name: 'one' });
    await edit(`UPDATE credentials SET id = 'cred_' || replace(hex(zeroblob(300)), '00', 'x') WHERE name = 'one'`);
    expect((await codeOf(() => vault.describe('one'))).code).toBe('VAULT_CORRUPT');
    await edit(`UPDATE credentials SET version_tag = replace(hex(zeroblob(201)), '00', 'v') WHERE name = 'two'`);
    expect((await codeOf(() => vault.describe('two'))).code).toBe('VAULT_CORRUPT');
  });

  it('when a binding is edited in the file (to redirect the secret), it no longer decrypts', async () => {
    const vault = await twoCredentials();
    await edit(`UPDATE credentials SET bindings = '["evil.example"]' WHERE name = 'one'`);
    expect((await codeOf(vault.withSecret('one', () => 1))).code).toBe('VAULT_CORRUPT');
    expect(await vault.withSecret('two', (s) => s)).toEqual({ kind: 'bearer', token: 'secret-two' });
  });

  it('when an old version is restored beside a newer tag, it fails', async () => {
    const vault = await twoCredentials();
    const db = new Database(path.join(dir.path, vaultFileName));
    const before = db.prepare("SELECT nonce, sealed FROM credentials WHERE name = 'one'").get() as {
      nonce: Buffer;
      sealed: Buffer;
    };
    db.close();
    await vault.rotate('one', text('rotated'));
    const restore = new Database(path.join(dir.path, vaultFileName));
    restore.prepare("UPDATE credentials SET nonce = ?, sealed = ? WHERE name = 'one'").run(before.nonce, before.sealed);
    restore.close();
    expect((await codeOf(vault.withSecret('one', () => 1))).code).toBe('VAULT_CORRUPT');
  });
});

describe('wrap and unwrap', () => {
  it('round-trips under the data key, bound to the purpose, and needs unlock', async () => {
    const vault = await open();
    expect(await codeOf(() => vault.wrap('audit-signing-key', text('k')))).toMatchObject({ code: 'VAULT_LOCKED' });
    await vault.init(passphrase());
    const sealed = vault.wrap('audit-signing-key', text('signing key bytes'));
    expect(Buffer.from(sealed).includes('signing key bytes')).toBe(false);
    expect(new TextDecoder().decode(vault.unwrap('audit-signing-key', sealed))).toBe('signing key bytes');
    expect((await codeOf(() => vault.unwrap('other-purpose', sealed))).code).toBe('VAULT_CORRUPT');
    const flipped = new Uint8Array(sealed);
    flipped[flipped.length - 1] = (flipped[flipped.length - 1] ?? 0) ^ 1;
    expect((await codeOf(() => vault.unwrap('audit-signing-key', flipped))).code).toBe('VAULT_CORRUPT');
    expect((await codeOf(() => vault.wrap('', text('x')))).field).toBe('purpose');
    vault.lock('test');
    expect((await codeOf(() => vault.unwrap('audit-signing-key', sealed))).code).toBe('VAULT_LOCKED');
    await vault.unlock(passphrase());
    expect(new TextDecoder().decode(vault.unwrap('audit-signing-key', sealed))).toBe('signing key bytes');
  });
});

describe('opened read-only (postern audit verify --check-key)', () => {
  const readOnly = () => openVault({ dataDir: dir.path, clock, idleLockMs: 0, readOnly: true });

  it('unlocks and unwraps, writes nothing (SQLite refuses a write), and creates no vault where there is none', async () => {
    expect(await codeOf(readOnly())).toMatchObject({ code: 'VAULT_NOT_INITIALIZED' });
    expect(existsSync(path.join(dir.path, vaultFileName))).toBe(false);
    const writer = await open();
    await writer.init(passphrase());
    const sealed = writer.wrap('audit_sign', text('signing key bytes'));
    await writer.close();
    const file = path.join(dir.path, vaultFileName);
    const before = { bytes: readFileSync(file), stat: statSync(file) };

    const vault = await readOnly();
    opened.push(vault);
    expect(await codeOf(vault.unlock(text('not the passphrase')))).toMatchObject({ code: 'VAULT_PASSPHRASE_INVALID' });
    await vault.unlock(passphrase());
    expect(new TextDecoder().decode(vault.unwrap('audit_sign', sealed))).toBe('signing key bytes');
    await expect(
      vault.add({ name: 'docs', kind: 'bearer', secret: text('s3cr3t'), bindings: ['docs.example.com'] }),
    ).rejects.toThrow(/readonly/i);
    await vault.close();
    const after = statSync(file);
    expect(readFileSync(file).equals(before.bytes)).toBe(true);
    expect([after.mtimeMs, after.ctimeMs, after.mode]).toEqual([
      before.stat.mtimeMs,
      before.stat.ctimeMs,
      before.stat.mode,
    ]);
  });

  it('refuses a vault file older than this Postern with a coded error, and does not upgrade it', async () => {
    const writer = await open();
    await writer.init(passphrase());
    await writer.close();
    const db = new Database(path.join(dir.path, vaultFileName));
    db.pragma('user_version = 1');
    db.close();
    expect(await codeOf(readOnly())).toMatchObject({ code: 'INVALID_ARGUMENT', field: '--data-dir' });
    const check = new Database(path.join(dir.path, vaultFileName), { readonly: true });
    expect(check.pragma('user_version', { simple: true })).toBe(1);
    check.close();
  });
});

describe('opened read-only, beside a file it must leave as it is', () => {
  const listing = (at: string) => readdirSync(at).sort();
  const names = (vault: Vault) => vault.list().map((c) => c.name);
  const ownCopies = () => readdirSync(tmpdir()).filter((n) => n.startsWith(`postern-verify-${process.pid}-`));
  const readOnlyAt = async (dataDir: string) => {
    const vault = await openVault({ dataDir, clock, idleLockMs: 0, readOnly: true });
    opened.push(vault);
    return vault;
  };
  const add = (vault: Vault, name: string) =>
    vault.add({ name, kind: 'bearer', secret: text(`${name}-token`), bindings: [] });

  it('leaves no -wal or -shm beside a closed vault, and reads a copy whose newest rows are only in its -wal', async () => {
    const writer = await open();
    await writer.init(passphrase());
    await add(writer, 'closed');
    await writer.close();
    const before = listing(dir.path);
    expect(before).toEqual([vaultFileName]);
    const vault = await readOnlyAt(dir.path);
    await vault.unlock(passphrase());
    expect(names(vault)).toEqual(['closed']);
    await vault.close();
    expect(listing(dir.path)).toEqual(before);

    // A running vault's two files copied (no -shm): the row only in the WAL is read, through a private copy removed at close.
    const running = await open();
    await running.unlock(passphrase());
    await add(running, 'only-in-wal');
    const copy = createTempDir('postern-vault-copy-');
    try {
      for (const name of [vaultFileName, `${vaultFileName}-wal`])
        copyFileSync(path.join(dir.path, name), path.join(copy.path, name));
      const copied = await readOnlyAt(copy.path);
      await copied.unlock(passphrase());
      expect(names(copied)).toEqual(['closed', 'only-in-wal']);
      expect(ownCopies()).toHaveLength(1);
      await copied.close();
      expect(listing(copy.path)).toEqual([vaultFileName, `${vaultFileName}-wal`]);
      expect(ownCopies()).toEqual([]);
    } finally {
      copy.remove();
    }
  });

  it('a write while it is open: the next read answers the file as it is now, not the snapshot it opened over', async () => {
    const writer = await open();
    await writer.init(passphrase());
    await add(writer, 'first');
    await writer.close();
    const vault = await readOnlyAt(dir.path);
    expect(names(vault)).toEqual(['first']);
    expect(vault.describe('first')?.name).toBe('first');

    const other = await open();
    await other.unlock(passphrase());
    await add(other, 'second');
    await other.remove('first');
    await other.close();
    expect(names(vault)).toEqual(['second']);
    expect(vault.describe('first')).toBeUndefined();
    await vault.unlock(passphrase());
    await vault.close();
    expect(listing(dir.path)).toEqual([vaultFileName]);
  });

  it('a file that keeps moving is read under SQLite locking after a bounded number of snapshots, still as it is', async () => {
    const writer = await open();
    await writer.init(passphrase());
    await writer.close();
    const vault = await readOnlyAt(dir.path);
    const expected: string[] = [];
    for (let n = 0; n <= privateReadsMax + 1; n += 1) {
      const other = await open();
      await other.unlock(passphrase());
      await add(other, `c${n}`);
      await other.close();
      expected.push(`c${n}`);
      expect(names(vault)).toEqual(expected);
    }
    // While a broker holds it (both sidecars there), the locking read sees its newest rows.
    const live = await open();
    await live.unlock(passphrase());
    await add(live, 'live');
    expect(names(vault)).toEqual([...expected, 'live']);
  });
});

describe('two processes (connections) on one file', () => {
  it('a credential added through one vault is listed and usable through the other at once', async () => {
    const daemon = await open();
    await daemon.init(passphrase());
    const cli = await open();
    expect(cli.state()).toBe('locked');
    await cli.unlock(passphrase());
    await cli.add({ name: 'late', kind: 'bearer', secret: text('late-token'), bindings: [] });
    await cli.close();
    expect(daemon.list().map((c) => c.name)).toEqual(['late']);
    expect(await daemon.withSecret('late', (s) => s)).toEqual({ kind: 'bearer', token: 'late-token' });
  });

  it('a credential the daemon has used is seen rotated, rebound and removed by the other at once (no stale row)', async () => {
    const daemon = await open();
    await daemon.init(passphrase());
    await daemon.add({ name: 'api', kind: 'bearer', secret: text('first-token'), bindings: ['a.example'] });
    // Used twice first: the second read is the one a kept row would answer.
    expect(await daemon.withSecret('api', (s) => s)).toEqual({ kind: 'bearer', token: 'first-token' });
    const before = daemon.describe('api');
    expect(await daemon.withSecret('api', (s) => s)).toEqual({ kind: 'bearer', token: 'first-token' });
    const cli = await open();
    await cli.unlock(passphrase());
    await cli.rotate('api', text('second-token'));
    expect(await daemon.withSecret('api', (s) => s)).toEqual({ kind: 'bearer', token: 'second-token' });
    expect(daemon.describe('api')?.version_tag).not.toBe(before?.version_tag);
    await cli.rebind('api', ['b.example']);
    expect(daemon.describe('api')?.bindings).toEqual(['b.example']);
    await cli.remove('api');
    expect(daemon.describe('api')).toBeUndefined();
    expect((await codeOf(daemon.withSecret('api', (s) => s))).code).toBe('UNKNOWN_CREDENTIAL');
  });

  it('a caller changing the info it was given changes nothing the next caller reads', async () => {
    const vault = await open();
    await vault.init(passphrase());
    await vault.add({ name: 'api', kind: 'bearer', secret: text('token'), bindings: ['a.example'] });
    const info = vault.describe('api');
    (info?.bindings as string[] | undefined)?.push('evil.example');
    await vault.withSecret('api', (_s, given) => {
      (given.bindings as string[]).push('evil.example');
    });
    expect(vault.describe('api')?.bindings).toEqual(['a.example']);
  });

  it('a vault opened uninitialized sees another connection initialize it', async () => {
    const daemon = await open();
    expect(daemon.state()).toBe('uninitialized');
    const cli = await open();
    await cli.init(passphrase());
    expect(daemon.state()).toBe('locked');
  });
});

describe('when finds run in one synchronous stretch and another process commits', () => {
  /** Counts `PRAGMA data_version` executions on every connection of this process (the statement's own get). */
  function countDataVersionReads(): { readonly count: () => number } {
    const scratch = new Database(':memory:');
    const statement = Object.getPrototypeOf(scratch.prepare('SELECT 1')) as Database.Statement;
    scratch.close();
    let count = 0;
    const original = statement.get;
    const counted = vi.spyOn(statement, 'get').mockImplementation(function (this: Database.Statement, ...params) {
      if (this.source === 'PRAGMA data_version') count += 1;
      return original.apply(this, params);
    });
    restores.push(() => counted.mockRestore());
    return { count: () => count };
  }
  const restores: (() => void)[] = [];
  afterEach(() => {
    for (const restore of restores.splice(0)) restore();
  });

  /** A later turn of the event loop, as an I/O callback (a person's request, the CLI's reply) would come in. */
  const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

  /** The CLI's own connection to vault.sqlite: another process's commits, which no store in this one counts. */
  function otherProcess(): Database.Database {
    const db = new Database(path.join(dir.path, vaultFileName), { timeout: 2_000 });
    closers.push(() => db.close());
    return db;
  }
  const closers: (() => void)[] = [];
  afterEach(() => {
    for (const close of closers.splice(0)) close();
  });

  async function daemonWith(...names: string[]): Promise<Vault> {
    const daemon = await open();
    await daemon.init(passphrase());
    for (const name of names)
      await daemon.add({ name, kind: 'bearer', secret: text(`${name}-token`), bindings: ['a.example'] });
    return daemon;
  }

  it('reads data_version once for every find of the stretch, and again in the next turn', async () => {
    const daemon = await daemonWith('api', 'other');
    await nextTurn();
    const reads = countDataVersionReads();
    expect(daemon.describe('api')?.name).toBe('api');
    expect(daemon.describe('other')?.name).toBe('other');
    const used = daemon.withSecret('api', (secret) => secret);
    expect(daemon.describe('api')?.name).toBe('api');
    expect(reads.count()).toBe(1);
    expect(await used).toEqual({ kind: 'bearer', token: 'api-token' });
    await nextTurn();
    expect(daemon.describe('api')?.name).toBe('api');
    expect(daemon.describe('other')?.name).toBe('other');
    expect(reads.count()).toBe(2);
  });

  it('a removal another connection committed is seen by the first find of a later turn', async () => {
    const daemon = await daemonWith('api');
    const cli = otherProcess();
    await nextTurn();
    expect(daemon.describe('api')?.name).toBe('api');
    expect(cli.prepare('DELETE FROM credentials WHERE name = ?').run('api').changes).toBe(1);
    // Later in the same stretch: answered as of the stretch's first read, which nothing here can tell from before it.
    expect(daemon.describe('api')?.name).toBe('api');
    await nextTurn();
    expect(daemon.describe('api')).toBeUndefined();
    expect((await codeOf(daemon.withSecret('api', (s) => s))).code).toBe('UNKNOWN_CREDENTIAL');
  });

  it('a rotation another connection committed is used by the first find of a later turn', async () => {
    const daemon = await daemonWith('api');
    expect(await daemon.withSecret('api', (s) => s)).toEqual({ kind: 'bearer', token: 'api-token' });
    const before = daemon.describe('api');
    // The rotated row, sealed by a vault on a copy of the file: what the CLI's rotate writes, columns and all.
    const copy = createTempDir('postern-vault-copy-');
    try {
      for (const name of [vaultFileName, `${vaultFileName}-wal`])
        if (existsSync(path.join(dir.path, name))) copyFileSync(path.join(dir.path, name), path.join(copy.path, name));
      const copied = await openVault({ dataDir: copy.path, clock, idleLockMs: 0, kdf: 'min' });
      await copied.unlock(passphrase());
      await copied.rotate('api', text('rotated-token'));
      await copied.close();
      const rotated = new Database(path.join(copy.path, vaultFileName), { readonly: true });
      const row = rotated.prepare('SELECT version_tag, nonce, sealed FROM credentials WHERE name = ?').get('api') as {
        version_tag: string;
        nonce: Buffer;
        sealed: Buffer;
      };
      rotated.close();
      const cli = otherProcess();
      await nextTurn();
      expect(await daemon.withSecret('api', (s) => s)).toEqual({ kind: 'bearer', token: 'api-token' });
      const update = cli.prepare('UPDATE credentials SET version_tag = ?, nonce = ?, sealed = ? WHERE name = ?');
      expect(update.run(row.version_tag, row.nonce, row.sealed, 'api').changes).toBe(1);
      await nextTurn();
      expect(await daemon.withSecret('api', (s) => s)).toEqual({ kind: 'bearer', token: 'rotated-token' });
      expect(daemon.describe('api')?.version_tag).toBe(row.version_tag);
      expect(row.version_tag).not.toBe(before?.version_tag);
    } finally {
      copy.remove();
    }
  });

  it('a write through another store of this process is seen in the same stretch (it is counted, not awaited)', async () => {
    const daemon = await daemonWith('api');
    const cli = await open();
    await cli.unlock(passphrase());
    await nextTurn();
    expect(daemon.describe('api')?.name).toBe('api');
    const removed = cli.remove('api');
    expect(daemon.describe('api')).toBeUndefined();
    await removed;
  });
});

describe('at rest', () => {
  it('no secret appears in plaintext in any file of the data dir (incl. -wal/-shm), while open and after close', async () => {
    const canary = `CANARY-vault-${randomBytes(12).toString('hex')}`;
    const vault = await open();
    await vault.init(passphrase());
    await vault.add({ name: 'c1', kind: 'bearer', secret: text(canary), bindings: [] });
    await vault.add({ name: 'c2', kind: 'basic', secret: text(`user:${canary}`), bindings: [] });
    await vault.add({ name: 'c3', kind: 'header', secret: text(canary), bindings: [], header: 'X-K' });
    await vault.rotate('c1', text(`${canary}-2`));
    expect(readdirSync(dir.path).some((name) => name.endsWith('-wal'))).toBe(true);
    expect(allBytes(dir.path).includes(canary)).toBe(false);
    expect(allBytes(dir.path).includes(Buffer.from(passphrase()))).toBe(false);
    await vault.close();
    expect(allBytes(dir.path).includes(canary)).toBe(false);
  });
});

/** An unencrypted RSA key in PEM from ssh-keygen (the SSH kinds are tested in ssh-key-import.test.ts). */
function generatedRsaKey(): string {
  return keyFrom(['-t', 'rsa', '-b', '2048', '-m', 'PEM', '-N', '']);
}

function keyFrom(args: string[]): string {
  const file = path.join(dir.path, `key-${randomBytes(4).toString('hex')}`);
  execFileSync('ssh-keygen', ['-q', ...args, '-C', 'test', '-f', file]);
  return readFileSync(file, 'utf8');
}
