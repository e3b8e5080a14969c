import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isCodedError } from '../contract/coded-error.js';
import { FakeClock } from '../testing/fake-clock.js';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import { openVault } from './index.js';
import { lockedVaultView } from './locked-vault-view.js';
import { readVaultListing } from './vault-listing.js';

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

describe('lockedVaultView', () => {
  it('says uninitialized where there is no vault, and refuses every use of a key', async () => {
    const view = lockedVaultView(readVaultListing(dir.path));
    expect(view.state()).toBe('uninitialized');
    expect(view.list()).toEqual([]);
    expect(codeOf(() => view.wrap('purpose', new Uint8Array(4)))).toBe('VAULT_LOCKED');
    await expect(view.withSecret('x', () => 1)).rejects.toMatchObject({ code: 'VAULT_LOCKED' });
  });

  it('says locked for a created vault, lists its names and bindings, and hands out no secret', async () => {
    const vault = await openVault({ dataDir: dir.path, clock: new FakeClock(), idleLockMs: 0, kdf: 'min' });
    await vault.init(Buffer.from('locked view passphrase'));
    await vault.add({ name: 'docs', kind: 'bearer', secret: Buffer.from('CANARY-locked-view'), bindings: ['api'] });
    const sealed = vault.wrap('purpose', Buffer.from('sealed bytes'));
    await vault.close();

    const view = lockedVaultView(readVaultListing(dir.path));
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
});
