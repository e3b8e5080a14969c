import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { AgentBackendDeps } from '../actions/agent-backend-deps.js';
import { HttpChannel } from '../channels/http/index.js';
import type { PosternConfig } from '../config/index.js';
import { Journal, type ResultStore } from '../journal/index.js';
import { createRandomIdSource } from '../ports/index.js';
import { ApprovalQueue } from '../queue/approval-queue.js';
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
  /**
   * What the real agent backend runs on over `journal` in one of these runs (createAgentBackend's deps): this clock and
   * vault, `config`'s routes, an HTTP channel gated by the journal.
   */
  agentBackendDeps(
    journal: Journal,
    results: ResultStore,
    config: PosternConfig,
    peer: { readonly processAlive: () => boolean; readonly bootId: string },
  ): AgentBackendDeps;
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
    agentBackendDeps(journal, results, config, peer) {
      return {
        journal,
        results,
        queue: ApprovalQueue.open({ journal, clock, config }),
        config,
        clock,
        ids: createRandomIdSource(clock),
        vault,
        httpChannel: new HttpChannel({ gate: journal }),
        processAlive: peer.processAlive,
        sweepMs: 3_600_000,
        bootId: peer.bootId,
      };
    },
    async dispose() {
      await vault.close();
      dir.remove();
    },
  };
}
