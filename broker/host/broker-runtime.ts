import type { BrokerStatus } from '../contract/index.js';
import { loadConfig, type PosternConfig } from '../config/index.js';
import { Journal, readJournalSnapshot } from '../journal/index.js';
import { systemClock, type Clock, type DispatchGate } from '../ports/index.js';
import { openVault, type KdfStrength, type Vault } from '../vault/index.js';
import { refuseIfBrokerRunning, startControlSocket } from './control-socket.js';
import type { OperatorBroker } from './operator-broker.js';

export interface BrokerRuntimeOptions {
  dataDir: string;
  mode: BrokerStatus['mode'];
  version: string;
  startedAtMs: number;
  clock?: Clock;
  /** Unlock the vault at start (`--passphrase-file`); a wrong passphrase fails the start. The caller zeroes it. */
  vaultPassphrase?: Uint8Array;
  /** Vault idle lock (default 15 min, 0 = never) and Argon2id cost for a new vault ('min' in tests only). */
  vaultIdleLockMs?: number;
  vaultKdf?: KdfStrength;
}

/** The running broker as its hosts (CLI daemon, Electron main) see it. */
export interface BrokerRuntime {
  readonly broker: OperatorBroker;
  readonly journal: Journal;
  /** The journal as channels see it: observations and the durable dispatch boundary. */
  readonly gate: DispatchGate;
  /** The credential vault (vault.sqlite beside the journal); `postern vault unlock` reaches it through control.sock. */
  readonly vault: Vault;
  /** The routes from `postern.yaml` in the data directory, checked at start (none if the file is absent). */
  readonly config: PosternConfig;
  close(): Promise<void>;
}

/**
 * THE seam where the broker's parts are composed for a data directory. Both composition roots
 * (`postern daemon` / `postern start` in broker/cli, and app/main) call only this. Opening the
 * journal runs its migrations and recovery before anything else can append.
 */
export async function createBrokerRuntime(options: BrokerRuntimeOptions): Promise<BrokerRuntime> {
  // Before the journal: opening it runs recovery, which must never happen under a live broker.
  await refuseIfBrokerRunning(options.dataDir);
  // A bad configuration refuses the start (CONFIG_INVALID naming the field) before anything opens.
  const config = loadConfig({ dataDir: options.dataDir });
  const journal = await Journal.open({ dataDir: options.dataDir, clock: options.clock ?? systemClock });
  const { vault, closeVault } = await openRuntimeVault(options, journal);
  const broker: OperatorBroker = {
    status: () => {
      const stats = journal.stats();
      const counts = stats.state === 'closed' ? { total: 0, in_flight: 0, unknown: 0 } : journal.actionCounts();
      return {
        version: options.version,
        mode: options.mode,
        started_at_ms: options.startedAtMs,
        data_dir: options.dataDir,
        journal: {
          state: stats.state,
          events: stats.events,
          last_seq: stats.last_seq,
          schema_version: stats.schema_version,
          recovered_at_open: stats.recovered_at_open,
        },
        actions: { ...counts },
        vault: { state: vault.state() },
      };
    },
  };
  return { broker, journal, gate: journal, vault, config, close: () => closeVault().finally(() => journal.close()) };
}

/**
 * The vault and its control socket, opened after the journal. If any step fails, what was opened
 * is closed again (the journal included) before the error goes up.
 */
async function openRuntimeVault(options: BrokerRuntimeOptions, journal: Journal): Promise<{ vault: Vault; closeVault: () => Promise<void> }> {
  let vault: Vault | undefined;
  try {
    vault = await openVault({ dataDir: options.dataDir, clock: options.clock ?? systemClock, idleLockMs: options.vaultIdleLockMs, kdf: options.vaultKdf });
    // Before unlock: the journal signs checkpoints while unlocked and one last one at each lock.
    journal.attachVault(vault);
    if (options.vaultPassphrase !== undefined) await vault.unlock(options.vaultPassphrase);
    const control = await startControlSocket({ dataDir: options.dataDir, vault });
    const opened = vault;
    return { vault: opened, closeVault: () => control.close().finally(() => opened.close()) };
  } catch (error) {
    await vault?.close();
    await journal.close();
    throw error;
  }
}

/** What `postern status` reports about a data directory without running a broker in it. */
export type DataDirStatus = Pick<BrokerStatus, 'data_dir' | 'journal' | 'actions'>;

/**
 * Reads the data directory's journal read-only: a running daemon may hold it, and only the writer
 * migrates or recovers. `closed` means "not open in this process", which is true here.
 */
export async function readDataDirStatus(dataDir: string): Promise<DataDirStatus> {
  const snapshot = readJournalSnapshot(dataDir);
  return Promise.resolve({
    data_dir: dataDir,
    journal: {
      state: 'closed',
      events: snapshot.events,
      last_seq: snapshot.last_seq,
      schema_version: snapshot.schema_version,
      recovered_at_open: 0,
    },
    actions: { ...snapshot.actions },
  });
}
