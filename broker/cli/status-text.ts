import type { BrokerStatus } from '../contract/index.js';
import { isoTime } from '../contract/time-words.js';

/** The journal's state, or "unknown" when read from the file while some process may hold it open. */
export interface JournalReport {
  /** Read from the file: dispatched_unrecorded, those of `unknown` dispatched with no outcome recorded (read-snapshot.ts). */
  actions: BrokerStatus['actions'] & { dispatched_unrecorded?: number };
  journal: Omit<BrokerStatus['journal'], 'state'> & { state: BrokerStatus['journal']['state'] | 'unknown' };
  read_from: 'broker' | 'file';
  /** Read from the file: whether there is one (a directory no broker ever opened has none). */
  journal_file?: boolean;
  /** No journal file, but this file of a broker's is here (broker.lock, the vault): the journal went missing. */
  used_by?: string;
  /** A verified broker runs but did not answer its status: why. */
  broker_silent?: string;
  /** No broker answers, but this process holds the data directory's lock (so may have the journal open). */
  lock_holder?: number;
}

/** What `postern status` found, before it is worded. */
export interface StatusFindings {
  dataDir: string;
  /** A verified broker answers on the control socket. */
  running: boolean;
  /** Another process listens on the control socket: why it is not taken for the broker. */
  impostor: string | undefined;
  /** No answer on the socket, and this process holds the data directory's lock. */
  holder: number | undefined;
  report: JournalReport;
}

/**
 * `postern status`'s text lines. The writer thread is named only when it failed to start (the commits then run on the
 * event loop for the rest of the run); `inline`, `starting` and `running` are the broker working as meant, left out.
 */
export function statusLines({ dataDir, running, impostor, holder, report }: StatusFindings): string[] {
  const { journal, actions } = report;
  const counts = `${journal.events} events, last seq ${journal.last_seq}, schema v${journal.schema_version}`;
  const writer = writerThreadWords(report);
  return [
    `Data directory: ${dataDir}`,
    `Broker: ${brokerWords(running, impostor, holder)}`,
    `Journal: ${journalWords(report, impostor !== undefined)}${counts})`,
    ...(writer === undefined ? [] : [`Writer thread: ${writer}`]),
    `Actions: ${actions.total} total, ${actions.in_flight} in flight, ${actions.unknown} unknown${unrecordedWords(report)}`,
  ];
}

/** Only for a writer thread that failed to start: its code, its detail (no file paths: journal.ts) and when. */
function writerThreadWords(report: JournalReport): string | undefined {
  const thread = report.journal.writer_thread;
  if (thread?.state !== 'failed_to_start') return undefined;
  const why =
    thread.error === undefined
      ? ''
      : ` (${thread.error.code}: ${thread.error.detail}) at ${isoTime(thread.error.at_ms)}`;
  return `failed to start${why}; commits run on the event loop`;
}

/**
 * Read from the file, the unknown actions that were dispatched with no outcome recorded: with nothing running, cut or
 * crashed (DESIGN §2: unknown; the next start records BROKER_RESTARTED), never in flight. With a process holding the
 * journal (a broker silent, starting or stopping, or an unverified listener) the file cannot say whether it still runs
 * them: said so.
 */
function unrecordedWords(report: JournalReport): string {
  const n = report.actions.dispatched_unrecorded ?? 0;
  if (report.read_from !== 'file' || n === 0) return '';
  const closed = report.journal.state === 'closed';
  return closed
    ? ` (${n} dispatched, no outcome recorded: no broker is running; its next start records ${n === 1 ? 'it' : 'them'} unknown)`
    : ` (${n} dispatched, no outcome recorded in the file: the process holding the journal may still be running ${n === 1 ? 'it' : 'them'})`;
}

/**
 * "open in the running broker (", "closed (no broker has it open; …" — the counts follow. `closing` is the broker
 * stopping: appends are refused JOURNAL_UNAVAILABLE, and what was accepted before still commits.
 */
function journalWords(report: JournalReport, unverified: boolean): string {
  if (report.read_from === 'broker' && report.journal.state === 'closing')
    return 'closing in the running broker (stopping: new actions are refused, accepted ones still commit; ';
  if (report.read_from === 'broker') return `${report.journal.state} in the running broker (`;
  if (unverified) return 'unknown: read from the file, the listener was not asked (';
  if (report.broker_silent !== undefined)
    return `held by the running broker, which did not answer (${report.broker_silent}); read from the file (`;
  if (report.lock_holder !== undefined)
    return `unknown: pid ${report.lock_holder} holds the data directory's lock and may have it open; read from the file (`;
  if (report.journal_file === false && report.used_by !== undefined)
    return `missing: no journal file, yet ${report.used_by} shows a broker used this directory (moved or deleted?); `;
  if (report.journal_file === false) return 'none yet (no broker has opened this directory: no journal file; ';
  return 'closed (no broker has it open; read from the file: ';
}

/** "running", "not running", or why neither can be said. */
function brokerWords(running: boolean, impostor: string | undefined, holder: number | undefined): string {
  if (impostor !== undefined) return `unverified: ${impostor}`;
  if (running) return 'running for this data directory';
  if (holder !== undefined)
    return `not answering for this data directory: pid ${holder} holds its lock but its control socket does not answer (a broker starting or stopping, or another process)`;
  return 'not running for this data directory';
}
