import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isCodedError } from '../contract/coded-error.js';
import { FakeClock } from '../testing/fake-clock.js';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import { openVault, vaultFileName } from './index.js';
import { lockedVaultView } from './locked-vault-view.js';
import { OlderVaultSchema, readVaultListing, readVaultState, vaultFileHoldsData } from './vault-listing.js';

// The vault `postern config pending` sees with no broker: the file read without a key, never unlocking.
let dir: TempDir;

beforeEach(() => {
  dir = createTempDir('postern-locked-view-');
});

afterEach(() => dir.remove());

const codeOf = (run: () => unknown): string | undefined => {
  try {
    run();
  } catch (error) {
    return isCodedError(error) ? error.code : 'not coded';
  }
  return undefined;
};

async function createdVault(): Promise<Uint8Array> {
  const vault = await openVault({ dataDir: dir.path, clock: new FakeClock(), idleLockMs: 0, kdf: 'min' });
  await vault.init(Buffer.from('locked view passphrase'));
  await vault.add({ name: 'docs', kind: 'bearer', secret: Buffer.from('CANARY-locked-view'), bindings: ['api'] });
  const sealed = vault.wrap('purpose', Buffer.from('sealed bytes'));
  await vault.close();
  return sealed;
}

function onFile(change: (db: Database.Database) => void): void {
  const db = new Database(path.join(dir.path, vaultFileName));
  try {
    change(db);
  } finally {
    db.close();
  }
}

describe('lockedVaultView over the vault file', () => {
  it('says uninitialized where there is no vault, and refuses every use of a key', async () => {
    expect(vaultFileHoldsData(dir.path)).toBe(false);
    const view = lockedVaultView(readVaultState(dir.path), () => readVaultListing(dir.path).credentials);
    expect(view.state()).toBe('uninitialized');
    expect(view.list()).toEqual([]);
    expect(codeOf(() => view.wrap('purpose', new Uint8Array(4)))).toBe('VAULT_LOCKED');
    await expect(view.withSecret('x', () => 1)).rejects.toMatchObject({ code: 'VAULT_LOCKED' });
  });

  it('says locked for a created vault, lists its names and bindings when asked, and hands out no secret', async () => {
    const sealed = await createdVault();
    expect(vaultFileHoldsData(dir.path)).toBe(true);
    const view = lockedVaultView(readVaultState(dir.path), () => readVaultListing(dir.path).credentials);
    expect(view.state()).toBe('locked');
    expect(view.list().map((c) => [c.name, c.kind, c.bindings])).toEqual([['docs', 'bearer', ['api']]]);
    expect(view.describe('docs')?.bindings).toEqual(['api']);
    expect(view.describe('nope')).toBeUndefined();
    let used = false;
    await expect(
      view.withSecret('docs', () => {
        used = true;
      }),
    ).rejects.toMatchObject({ code: 'VAULT_LOCKED' });
    expect(used).toBe(false);
    expect(codeOf(() => view.unwrap('purpose', sealed))).toBe('VAULT_LOCKED');
    // It never unlocks: a listener is taken and never called.
    let unlocked = false;
    view.onUnlock(() => {
      unlocked = true;
    })();
    expect(unlocked).toBe(false);
    expect(JSON.stringify(view.list())).not.toContain('CANARY');
  });

  it('reads the state from the key row alone: a damaged credential row (planted) stops only a reader of the list', async () => {
    await createdVault();
    onFile((db) => db.prepare("UPDATE credentials SET kind = 'planted'").run());
    expect(codeOf(() => readVaultListing(dir.path))).toBe('VAULT_CORRUPT');
    let listed = 0;
    const view = lockedVaultView(readVaultState(dir.path), () => {
      listed += 1;
      return readVaultListing(dir.path).credentials;
    });
    expect(view.state()).toBe('locked');
    expect(listed).toBe(0);
    expect(codeOf(() => view.list())).toBe('VAULT_CORRUPT');
  });

  it('refuses a vault file of an older schema with OlderVaultSchema (a caller may open the vault instead)', async () => {
    await createdVault();
    onFile((db) => db.pragma('user_version = 1'));
    let refusal: unknown;
    try {
      readVaultState(dir.path);
    } catch (error) {
      refusal = error;
    }
    expect(refusal).toBeInstanceOf(OlderVaultSchema);
    expect(refusal).toMatchObject({ code: 'INVALID_ARGUMENT', field: '--data-dir' });
  });
});
