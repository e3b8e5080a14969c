import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createMemoryVault, type MemoryVault } from '../../testing/memory-vault.js';
import { createTempDir, type TempDir } from '../../testing/temp-dir.js';
import { KnownHostsStore, KnownHostsUntrusted, type KnownHostsRefusal } from './known-hosts-store.js';

const legit = 'SHA256:LegitLegitLegitLegitLegitLegitLegitLegit123';
const impostor = 'SHA256:ImpostorImpostorImpostorImpostorImpostor12';

let dir: TempDir;
let vault: MemoryVault;
let store: KnownHostsStore;
beforeEach(async () => {
  dir = createTempDir();
  vault = await createMemoryVault();
  store = new KnownHostsStore(dir.path, vault);
});
afterEach(() => dir.remove());

function refusalOf(run: () => unknown): KnownHostsRefusal | 'none' {
  try {
    run();
    return 'none';
  } catch (error) {
    if (error instanceof KnownHostsUntrusted) return error.reason;
    throw error;
  }
}

interface Sealed {
  version: number;
  hosts: Record<string, { fingerprint: string; endpoint: string; stored_at_ms: number }>;
  key: string;
  mac: string;
}
const fileOf = (): Sealed => JSON.parse(readFileSync(store.path, 'utf8')) as Sealed;

describe('when accept_new remembers host keys', () => {
  it('stores by entry and endpoint, mode 0600, sealed with a MAC, and reads back what it stored', () => {
    expect(store.lookup('lab', 'u@h:22')).toBeUndefined();
    expect(store.storeNew('lab', 'u@h:22', legit, 1)).toEqual({ kind: 'stored' });
    expect(store.lookup('lab', 'u@h:22')).toBe(legit);
    expect(store.lookup('lab', 'u@h:2222')).toBeUndefined();
    expect(statSync(store.path).mode & 0o777).toBe(0o600);
    expect(fileOf()).toMatchObject({
      version: 1,
      hosts: { 'lab u@h:22': { fingerprint: legit, endpoint: 'u@h:22', stored_at_ms: 1 } },
      mac: expect.stringMatching(/^[0-9a-f]{64}$/) as unknown,
    });
    // A second store keeps the first entry under the new MAC.
    store.storeNew('other', 'u@g:22', impostor, 2);
    expect(store.lookup('lab', 'u@h:22')).toBe(legit);
    expect(store.lookup('other', 'u@g:22')).toBe(impostor);
  });
});

describe('when the agent changes the file (it can write it: same user)', () => {
  const tampers: Array<[string, (f: Sealed) => unknown, KnownHostsRefusal]> = [
    [
      'the stored key replaced by its own',
      (f) => {
        (f.hosts['lab u@h:22'] as { fingerprint: string }).fingerprint = impostor;
        return f;
      },
      'mac_failed',
    ],
    [
      'the entry deleted (first use again, for its own server)',
      (f) => {
        delete f.hosts['lab u@h:22'];
        return f;
      },
      'mac_failed',
    ],
    ['a forged file in the older plain form', () => ({ 'lab u@h:22': { fingerprint: impostor } }), 'unsealed'],
    [
      'a forged file with a made-up key and MAC',
      (f) => ({ ...f, hosts: {}, key: Buffer.alloc(72, 7).toString('base64'), mac: 'ab'.repeat(32) }),
      'mac_failed',
    ],
    ['a damaged file', () => '{"version": 1, "hosts": ', 'damaged'],
  ];

  it.each(tampers)('%s: nothing in it is trusted, and storing writes nothing over it', (_name, tamper, reason) => {
    store.storeNew('lab', 'u@h:22', legit, 1);
    store.storeNew('other', 'u@g:22', legit, 1);
    const changed = tamper(fileOf());
    writeFileSync(store.path, typeof changed === 'string' ? changed : JSON.stringify(changed));
    const before = readFileSync(store.path);
    expect(refusalOf(() => store.lookup('lab', 'u@h:22'))).toBe(reason);
    // Every entry goes with the file: an untouched one is not vouched for by a file that fails.
    expect(refusalOf(() => store.lookup('other', 'u@g:22'))).toBe(reason);
    expect(refusalOf(() => store.storeNew('lab', 'u@h:22', impostor, 2))).toBe(reason);
    expect(readFileSync(store.path)).toEqual(before);
  });

  it('a file sealed under another vault fails its MAC', async () => {
    store.storeNew('lab', 'u@h:22', legit, 1);
    const other = new KnownHostsStore(dir.path, await createMemoryVault());
    expect(refusalOf(() => other.lookup('lab', 'u@h:22'))).toBe('mac_failed');
  });
});

describe('when the vault is locked', () => {
  it('nothing is looked up or stored, not even first use with no file at all', () => {
    vault.lock();
    expect(refusalOf(() => store.lookup('lab', 'u@h:22'))).toBe('vault_locked');
    expect(refusalOf(() => store.storeNew('lab', 'u@h:22', legit, 1))).toBe('vault_locked');
    vault.unlock();
    store.storeNew('lab', 'u@h:22', legit, 1);
    vault.lock();
    expect(refusalOf(() => store.lookup('lab', 'u@h:22'))).toBe('vault_locked');
  });
});

describe('when an entry for the host appeared since the lookup (two first uses raced)', () => {
  it('storeNew leaves it as it is and answers with it', () => {
    expect(store.lookup('lab', 'u@h:22')).toBeUndefined();
    // The other action's first use lands between this one's lookup and its store.
    new KnownHostsStore(dir.path, vault).storeNew('lab', 'u@h:22', legit, 1);
    const before = readFileSync(store.path);
    expect(store.storeNew('lab', 'u@h:22', impostor, 2)).toEqual({ kind: 'present', fingerprint: legit });
    expect(readFileSync(store.path)).toEqual(before);
    expect(store.lookup('lab', 'u@h:22')).toBe(legit);
  });
});
