import type { BrokerStatus } from '../contract/index.js';
import type { OperatorBroker } from './operator-broker.js';

export interface BrokerRuntimeOptions {
  dataDir: string;
  mode: BrokerStatus['mode'];
  version: string;
  startedAtMs: number;
}

/** The running broker as its hosts (CLI daemon, Electron main) see it. */
export interface BrokerRuntime {
  readonly broker: OperatorBroker;
  close(): Promise<void>;
}

/**
 * THE seam where the broker's parts are composed for a data directory. Both composition roots
 * (`postern daemon` / `postern start` in broker/cli, and app/main) call only this.
 *
 * TODO(owner: broker core lead): open the journal here (broker/journal, in `dataDir`) and report
 * its real state, event count, last seq, schema version and recovery count plus the action counts
 * from its projection; close it in `close()`. Until then the journal section honestly says
 * `closed` with zero counts, which is NOT acceptable once the journal lands.
 */
export async function createBrokerRuntime(options: BrokerRuntimeOptions): Promise<BrokerRuntime> {
  const broker: OperatorBroker = {
    status: () => ({
      version: options.version,
      mode: options.mode,
      started_at_ms: options.startedAtMs,
      data_dir: options.dataDir,
      journal: { state: 'closed', events: 0, last_seq: 0, schema_version: 0, recovered_at_open: 0 },
      actions: { total: 0, in_flight: 0, unknown: 0 },
    }),
  };
  return {
    broker,
    close: () => Promise.resolve(),
  };
}

/** What `postern status` reports about a data directory without running a broker in it. */
export type DataDirStatus = Pick<BrokerStatus, 'data_dir' | 'journal' | 'actions'>;

/**
 * TODO(owner: broker core lead): open the journal in `dataDir` read-only (it may be held by a
 * running daemon; never migrate or recover from here) and report its real numbers. Until then this
 * says `closed` with zero counts, like createBrokerRuntime above.
 */
export async function readDataDirStatus(dataDir: string): Promise<DataDirStatus> {
  return {
    data_dir: dataDir,
    journal: { state: 'closed', events: 0, last_seq: 0, schema_version: 0, recovered_at_open: 0 },
    actions: { total: 0, in_flight: 0, unknown: 0 },
  };
}
