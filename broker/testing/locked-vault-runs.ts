import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { Journal } from '../journal/index.js';
import { actionPaths } from './action-paths.js';
import { openVault, type Vault } from '../vault/index.js';
import { FakeClock } from './fake-clock.js';
import { createTempDir } from './temp-dir.js';

/**
 * One journal file reopened run after run, as successive broker runs open it, over one real vault initialised with
 * `passphrase` and locked before the first run opens: a run that never unlocks never has an audit key (its events are
 * sealed for good), one that unlocks seals its key, and a later locked run cannot read it until a person unlocks.
 */
export interface LockedVaultRuns {
  readonly clock: FakeClock;
  readonly vault: Vault;
  /** The temp directory everything is in (a socket can be put there too). */
  readonly dataDir: string;
  /** The journal file every run opens. */
  readonly path: string;
  /** One broker run: the journal opened over the vault (a second later than the last), `body`, then closed. */
  run(body: (journal: Journal) => Promise<void>): Promise<void>;
  /**
   * An HTTP action whose approval card is shown and waiting (actionPaths.expired cut after CARD_SHOWN, in its session
   * `ses_test`): nobody decided, so the next run's recovery closes it.
   */
  cardWaiting(journal: Journal, id: string): Promise<void>;
  /** Closes the vault and removes the directory. */
  dispose(): Promise<void>;
}

export async function openLockedVaultRuns(prefix: string, passphrase: Buffer): Promise<LockedVaultRuns> {
  const dir = createTempDir(prefix);
  const clock = new FakeClock();
  const path = join(dir.path, 'journal.sqlite');
  const vaultDir = join(dir.path, 'vault');
  mkdirSync(vaultDir, { mode: 0o700 });
  let vault: Vault;
  try {
    vault = await openVault({ dataDir: vaultDir, clock, kdf: 'min', idleLockMs: 0 });
    await vault.init(passphrase);
    vault.lock('operator');
  } catch (error) {
    dir.remove();
    throw error;
  }
  return {
    clock,
    vault,
    dataDir: dir.path,
    path,
    async run(body) {
      clock.advance(1_000);
      const journal = await Journal.open({ path, clock, vault });
      try {
        await body(journal);
      } finally {
        await journal.close();
      }
    },
    async cardWaiting(journal, id) {
      for (const event of actionPaths.expired(id).slice(0, 3)) {
        clock.advance(1_000);
        await journal.append(event);
      }
    },
    async dispose() {
      await vault.close();
      dir.remove();
    },
  };
}
