import { closeSync, mkdirSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { isDeepStrictEqual } from 'node:util';
import type Database from 'better-sqlite3';
import { openDatabase } from '../ports/open-database.js';
import {
  CodedError,
  isCodedError,
  type ActionState,
  eventWaitsForDisk,
  type EventKind,
  type JournalEvent,
  type NewEvent,
  type SessionRecordCheck,
  type SessionState,
  TransitionRefused,
  type TransitionRefusal,
} from '../contract/index.js';
import {
  projectCredentialRequests,
  type ActionTimeline,
  type BoundIdempotencyKey,
  type CredentialRequestState,
  type OutcomeCountRow,
  type RecoveredJournal,
  project,
  projectSessions,
} from '../core/index.js';
import type { Clock } from '../ports/clock.js';
import {
  AuditWriter,
  checkpointEveryEventsDefault,
  sealedForGood,
  eventHeaderOf,
  type AuditVault,
  type RowCipher,
  type SignedHead,
} from './audit-writer.js';
import {
  readDurability,
  requireDurableConnection,
  syncModeFor,
  type DurabilityReadBack,
  type SyncMode,
} from './durability.js';
import { JournalStore, type ActionCounts, type CountedSession, type EventHeaderFilter } from './journal-store.js';
import {
  ActionListQuery,
  actionListScanRowsMax,
  type ActionListPage,
  type ActionListFilter,
  type LaneTicketRow,
} from './action-list-query.js';
import { sodiumReady } from './event-cipher.js';
import { migrate, schemaVersion } from './migrate.js';
import { migration009SealedResults, truncateWal } from './migrations/009-sealed-results.js';
import { migration010ActionList } from './migrations/010-action-list.js';
import type { Migration } from './migration.js';
import {
  planUnit,
  type Appended,
  type AppendedConfig,
  type AppendedCredentialRequest,
  type AppendedSession,
  type PlanResult,
} from './plan-unit.js';
import {
  recoveryEvent,
  refutedRowState,
  restartRetryRestsOnRow,
  rowRefutation,
  withoutUnprovenRetry,
  unfoldableRecoveryEvent,
  logHoldsWords,
  type LogFacts,
  type LogHolds,
} from './recovery.js';
import { eventChecksFromEnv, NewEventChecker, validateNewEvent, type EventChecks } from './validate-new-event.js';
import { CommitOverlay } from './commit-overlay.js';
import { JournalWriter, type SealFault, type WriteAck, type WriteBatch, type WriterOp } from './journal-writer.js';
import type { BesideOp, BesideResult, BesideWriter } from './beside-rows.js';
import { WriterThread, type WriterThreadOptions } from './writer-thread.js';
import { AnchorStore, type AnchorFacts, type AnchorRecord, type CheckpointSink } from './anchor-store.js';
import { endedSessionsKept, SessionBook } from './session-book.js';
import { IdempotencyBook, liveBindingsFromMs } from './idempotency-book.js';
import { RecentCache, StateCache } from './state-cache.js';
import { LaneTickets } from './lane-tickets.js';
import { WalSync } from './wal-sync.js';
import { WalCheckpointer } from './wal-checkpointer.js';
import {
  forgetPlannedResults,
  newPlannedResults,
  resultRowsClash,
  type PlannedResults,
  type ResultRows,
} from './result-rows.js';

import { journalFileName } from './journal-file-name.js';

export { journalFileName };
/** Events in one transaction: bounds how long one commit holds the event loop. */
export const batchEventsMaxDefault = 256;
/**
 * Commits in a run before the WAL checkpointer's thread starts: a short-lived journal (a CLI command, most tests) never
 * needs one; its WAL is checkpointed when its connection closes, as SQLite always does.
 */
const checkpointerStartCommits = 32;
/** How long an observation queued by appendLater waits for a commit to ride in before it gets one of its own. */
export const laterFlushMsDefault = 5;
/**
 * JournalOpenOptions.threadBatchEventsMin's default: one caller's commit (an action's admission, dispatch or settlement:
 * 2–5 events) stays on the loop, where the hop to the thread and back would only add to its wait; a turn's worth of
 * several callers' units goes to the thread.
 */
export const threadBatchEventsMinDefault = 12;
/**
 * Batches posted to the writer thread and not yet acked: while the thread writes one, the loop plans the next over it
 * (docs/journal-writer-thread.md, phase 3).
 */
export const writerBatchesInFlightMax = 2;
/** JournalOpenOptions.writerThreadIdleMs's default: an 'on-demand' writer thread ends after this long without work. */
export const writerThreadIdleMsDefault = 30_000;
/** Events waiting for a commit; beyond this appends are refused instead of queueing without end. */
export const pendingEventsMaxDefault = 16_384;
/** The database may not grow past this (PRAGMA max_page_count); a full journal fails closed. */
export const journalBytesMaxDefault = 64 * 2 ** 30;
/** The journal is the only writer; a lock held longer than this means something is wrong. */
export const busyTimeoutMsDefault = 2_000;
/**
 * The checkpointer's reset write (WalCheckpointerOptions.resetWrite): a counter in `meta` no reader uses, so the WAL
 * restarts — and SQLite syncs its new header — on the checkpointer's thread, never inside a COMMIT on the loop.
 */
export const walResetWrite = `INSERT INTO meta (key, value) VALUES ('wal_resets', 1) ON CONFLICT (key) DO UPDATE SET value = value + 1`;
const eventsPageMax = 512;
/** The most events Journal.sealedAction folds for one action (each is opened: ~20 µs). */
const sealedActionEventsMax = 16 * eventsPageMax;
const listActionsMax = 1_000;

export interface JournalOpenOptions {
  /** The database file; or `dataDir`, in which the journal is `journal.sqlite`. */
  readonly path?: string;
  readonly dataDir?: string;
  readonly clock: Clock;
  /** false: one transaction per append (or per batch), for the benchmark's comparison. */
  readonly groupCommit?: boolean;
  readonly batchEventsMax?: number;
  /** appendLater's wait for a commit to ride in (ms). */
  readonly laterFlushMs?: number;
  readonly pendingEventsMax?: number;
  readonly journalBytesMax?: number;
  readonly busyTimeoutMs?: number;
  /** Which platform's durability rules to apply; defaults to process.platform. */
  readonly platform?: NodeJS.Platform;
  /** Defaults to the numbered files in ./migrations; tests pass their own list. */
  readonly migrations?: readonly Migration[];
  /**
   * Wraps the audit secrets and says when they may be used. Without it (or while it is locked)
   * the journal still appends (write-blind) but signs no checkpoint and reads only this run.
   */
  readonly vault?: AuditVault;
  /** Sign a checkpoint at least every this many events (besides lock and shutdown). */
  readonly checkpointEveryEvents?: number;
  /**
   * Test seam: sealing an event that matches it throws, a sealing failure (journal-writer.ts SealFault). Data, so
   * that it can cross to a writer thread.
   */
  readonly sealFault?: SealFault;
  /** Who makes a commit durable (durability.ts SyncMode); defaults to the platform's. */
  readonly syncMode?: SyncMode;
  /** Test seam (broker/testing/disk-sync-gate.ts): runs before each fdatasync of the log; a rejection fails it. */
  readonly beforeSync?: () => Promise<void>;
  /**
   * Judges the journal as found, after migrations and before recovery, reading only (`anchorFacts`; no vault): the
   * integrity anchor's check (broker/host/integrity-anchor.ts). `quarantined`: recovery claims no not_attempted, since
   * the log may lack a DISPATCH_STARTED it once held (classify-restart.ts). A throw fails the open. Default: trusted.
   */
  readonly judgeBeforeRecovery?: (journal: Journal) => RecoveredJournal;
  /**
   * How each new event is checked against the contract (validate-new-event.ts, EventChecks). Default:
   * eventChecksFromEnv() — `shapes`, or what POSTERN_EVENT_CHECKS names (the test suites set `both`).
   */
  readonly eventChecks?: EventChecks;
  /**
   * Writes on a writer thread (docs/journal-writer-thread.md, phase 2): after recovery, the commits' writes (sealing,
   * the SQL, COMMIT) of large batches and the audit writes run on a worker thread that owns a write connection, while
   * the loop plans (up to writerBatchesInFlightMax batches ahead), keeps the caches and syncs; small batches still
   * commit on the loop (threadBatchEventsMin). true: started at open, for the journal's life; 'on-demand': started by
   * load and ended when idle (writerThreadIdleMs), as the daemon runs it. Default: inline, on the loop (short-lived
   * journals, most tests).
   */
  readonly writerThread?: boolean | 'on-demand';
  /**
   * writerThread 'on-demand': the thread starts with the first batch that would go to it (those before commit inline
   * while it opens), and ends after this long without a batch for it (its memory back while the broker idles).
   */
  readonly writerThreadIdleMs?: number;
  /**
   * The loop time one sessions.list, or one turn of the session confirmer, gives to confirming an earlier run's
   * sessions after the first (sessionsConfirmBudgetMsDefault; tests that count confirmations pass a large one).
   */
  readonly sessionsConfirmBudgetMs?: number;
  /**
   * With a writer thread: a batch of fewer events than this commits on the loop, as without one (a lone caller's
   * commit would only wait for the hop); a larger one, what many callers queued in one turn, goes to the thread.
   */
  readonly threadBatchEventsMin?: number;
  /**
   * Test seam (crash test): with a writer thread, the batch that reaches this seq commits on the thread and its ack is
   * never sent, so the process can be killed between the writer's COMMIT and the loop hearing of it.
   */
  readonly writerAckHeldFromSeq?: number;
  /**
   * Test seam: the file the writer thread loads better-sqlite3's native module from, instead of the runtime's own
   * (open-database.ts sqliteNativeBinding). One that does not load makes the thread's start fail, as a broken build's
   * would: the journal stays inline and stats() says so (writer_thread).
   */
  readonly writerThreadNativeBinding?: string;
  /**
   * Told once when the writer thread fails to start (the journal has no logger; the daemon logs it): the same code,
   * path-free first line and time `stats().writer_thread.error` then carries. A throw from it is ignored.
   */
  readonly onWriterThreadStartFailure?: (failure: WriterThreadStartFailure) => void;
  /**
   * Told when a session read from the table at open is refuted by its own sealed events (getSession): the row says
   * `row_status` (null: the log has no such session, or it does not fold: `folds` false) where the events say
   * `status`. Evidence that another process edited the table while no broker ran; the events decide. A throw is ignored.
   */
  readonly onSessionRowRefuted?: (report: SessionRowRefuted) => void;
  /**
   * Told at open when recovery finds an action's row saying it was never dispatched where the log's plaintext headers
   * hold its DISPATCH_STARTED (Journal.recover): the row is not what the journal wrote, so that action is not recovered
   * from it (never not_attempted) but held, and recovered from its own sealed events once the vault unlocks
   * (Journal.onHeldRecovered). A throw is ignored.
   */
  readonly onActionRowRefuted?: (report: ActionRowRefuted) => void;
}

/** What onActionRowRefuted is told (ids and names only). */
export interface ActionRowRefuted {
  readonly action_id: string;
  /** The stage the row claims (null: the row is gone). */
  readonly row_stage: ActionState['stage'] | null;
  /** What the log's headers hold that the row denies (recovery.ts LogHolds). */
  readonly log_holds: LogHolds;
  /** Found by a read after the start (Journal.checkedRow), not by recovery: not held, only read as the log allows. */
  readonly on_read?: true;
  /**
   * Told a second time, at the unlock, when the action's own events do not fold (or never will): false. It is then
   * closed unknown over the row, as in a quarantined journal (Journal.recoverHeld).
   */
  readonly events_fold?: false;
  /**
   * An action whose restart record was deferred to the unlock (Journal.deferredRecoveries), not held: its row agreed
   * with the headers, and `log_holds` says what its own events, opened at the unlock, found.
   */
  readonly deferred?: true;
  /**
   * An earlier run's action laned from its row at open, re-folded at the unlock (Journal.refoldEarlierLaned): its events
   * do not fold, so its lane entry keeps no retry basis nothing proves.
   */
  readonly laned?: true;
}

/** What onSessionRowRefuted is told (ids and statuses only). */
export interface SessionRowRefuted {
  readonly session_id: string;
  readonly row_status: SessionState['status'] | null;
  readonly status: SessionState['status'] | null;
  /** false: its events opened but do not fold (an inserted row that does not authenticate, a refused fold). */
  readonly folds: boolean;
}

/** `closing`: close() began; new appends are refused, and what was accepted before still commits and is answered. */
export type JournalState = 'open' | 'closing' | 'failed' | 'closed';

/**
 * Where commits are written now: `inline` on the loop (no thread: none asked for, or an 'on-demand' one not running),
 * `starting` (opening; batches commit inline meanwhile), `running`, or `failed_to_start` (the journal stays inline for
 * the rest of the run; never retried).
 */
export type WriterThreadState = 'inline' | 'starting' | 'running' | 'failed_to_start';

export interface WriterThreadStats {
  readonly state: WriterThreadState;
  /**
   * failed_to_start: what the start met: its code (a Node or SQLite code; INTERNAL without one), its message's first
   * line with file paths left out, and when.
   */
  readonly error?: WriterThreadStartFailure;
}

/** What a writer thread's failed start met: its code (INTERNAL without one), its message's first line with file paths left out, and when. */
export interface WriterThreadStartFailure {
  readonly code: string;
  readonly detail: string;
  readonly at_ms: number;
}

/** A row the journal cannot open now (an earlier run's key while the vault is locked). */
export interface SealedEventHeader {
  readonly sealed: true;
  readonly seq: number;
  readonly at_ms: number;
  readonly kind: string;
  readonly action_id: string;
  readonly session_id: string | null;
  readonly ticket: number | null;
  readonly lane: string | null;
}

export interface JournalStats {
  readonly state: JournalState;
  readonly events: number;
  readonly last_seq: number;
  readonly schema_version: number;
  /**
   * Actions that recovery at open classified (DESIGN.md §2 restart rules), those it deferred to the unlock (their retry
   * resting on their own sealed events: recovery.ts restartRetryRestsOnRow) counted from the unlock that records them.
   */
  readonly recovered_at_open: number;
  /** Transactions that made at least one event durable. */
  readonly commits: number;
  readonly pending_events: number;
  /** WAL checkpoints the checkpointer's thread ran in this run (none run on the event loop). */
  readonly wal_checkpoints: number;
  /** JournalOpenOptions.writerThread: whether commits go to the writer thread now, or why they cannot. */
  readonly writer_thread: WriterThreadStats;
}

export interface DispatchConnection {
  readonly connection: 'fresh' | 'reused';
  readonly connection_id?: string;
  readonly peer_identity?: string;
  readonly peer_trust?: 'pinned' | 'ca_verified' | 'known_host' | 'accepted_new';
  /** The retry lease generation (RETRY_LEASED) this attempt runs under. */
  readonly generation?: number;
}

type AnyAppended = Appended | AppendedSession | AppendedConfig | AppendedCredentialRequest;
/** Which append path a unit came through; each takes only its own kind of subject id. */
type Subject = 'action' | 'session' | 'config' | 'credential_request';
const subjectPrefixes: Readonly<Record<Subject, string>> = {
  action: 'act_',
  session: 'ses_',
  config: 'cfg_',
  credential_request: 'crq_',
};
const wrongPath: Readonly<Record<Subject, string>> = {
  action: 'session, configuration and credential request events go through their own append paths',
  session: 'appendSession takes SESSION_* events only',
  config: 'appendConfig takes CONFIG_* events only',
  credential_request: 'tryAppendCredentialRequest takes credential request events only',
};
/** The newest credential requests a restart rebuilds its waiters and expiry timers from. */
const credentialRequestsRecentMax = 1_000;

/** What a commit made durable, as the change feed needs it: no payload, no subject. */
export interface JournalCommit {
  readonly last_seq: number;
  readonly kinds: readonly EventKind[];
}

/**
 * What a try-append answers: the durable events, or the typed refusal of a lost race (another
 * decision, a dispatch, a settlement, a lease landed first), which the caller switches on.
 */
export type AppendResult<T> =
  { readonly ok: true; readonly appended: T } | { readonly ok: false; readonly refusal: TransitionRefusal };

/**
 * Rows another store of the journal's file writes in the transaction of a unit's events (ResultStore.rowsOf: a
 * result and the RESULT_COMMITTED naming it), only if the unit is accepted; sealed before, never under the lock. Plain
 * data (result-rows.ts), written by writeResultRows.
 */
export type UnitRows = ResultRows;

interface Unit {
  readonly events: readonly NewEvent[];
  readonly rows?: UnitRows;
  /** appendLater: flushed by the next unit that is not, by a read, by durable(), or after laterFlushMs. */
  readonly later: boolean;
  /** Settled only once a sync covers the commit (event-durability.ts); otherwise once COMMIT returns. */
  readonly waits: boolean;
  /**
   * AppendOptions.withHeld: the same action's appendLater units queued before this one. They are planned first (FIFO,
   * in this transaction or an earlier one); if one was refused, this unit is refused with the same refusal.
   */
  readonly after?: readonly Unit[];
  /** Set when the unit is refused, for the units that name it in `after`. */
  refusal?: UnitRefusal;
  /** Committed, or refused as a value; reject is for everything else (a malformed event, a bug, a failed journal). */
  resolve(result: AppendResult<AnyAppended[]>): void;
  reject(error: unknown): void;
}

/** Why a unit was not committed: a lost race (a value, resolved) or a fault of its own events (rejected). */
type UnitRefusal = { readonly ok: false; readonly refusal: TransitionRefusal } | { readonly error: unknown };

export interface AppendOptions {
  /**
   * The event settles what this action's appendLater observations held before it (a RESULT_COMMITTED after the HTTP
   * channel's REQUEST_SENT, REMOTE_RESPONSE_*): they ride in its commit, and if one of them is refused this event is
   * refused too, with that refusal, so a settlement is never recorded over an observation the log does not hold.
   * Held units already settled when this is queued are the caller's to check (settle.ts).
   */
  readonly withHeld?: boolean;
}

/**
 * One transaction's units as planned: accepted (their writes in `batch`, none when nothing was accepted), or refused in
 * unit order (a lost race, or a fault of its own).
 */
interface Planned {
  readonly accepted: Array<{ unit: Unit; appended: readonly AnyAppended[] }>;
  readonly refused: Array<{ unit: Unit; refusal: UnitRefusal }>;
  readonly overlay: CommitOverlay;
  readonly batch: WriteBatch | undefined;
  /** Where the planned events end (seq, ticket), and the results they hold: what a batch planned next continues. */
  readonly lastSeq: number;
  readonly lastTicket: number;
  readonly results: PlannedResults | undefined;
}

/**
 * A batch posted to the writer thread and not yet acked: what the batches planned after it are planned over (its
 * overlay, where its events end, the results it holds), and the refusal-only plans made while it was in flight, which
 * answer only once it (and so everything they were planned over) has committed.
 */
interface InFlightBatch {
  readonly overlay: CommitOverlay;
  readonly events: number;
  readonly lastSeq: number;
  readonly lastTicket: number;
  readonly results: PlannedResults;
  readonly refusalsAfter: Planned[];
}

/**
 * The write-ahead journal: the append-only event log and the current-state tables, written in one
 * transaction per commit on a WAL database with synchronous=FULL.
 *
 * Group commit: appends are queued and flushed on setImmediate, so every append requested in the
 * same turn of the event loop (typically all dispatchers woken by the previous commit) shares one
 * transaction and one fsync. A promise settles only after COMMIT has returned, i.e. after its row
 * is durable. Events are folded through broker/core applyEvent against an overlay of the states
 * planned so far in the transaction; an event the projection or the contract refuses is rejected
 * on its own (its unit, for appendBatch) and the rest of the batch commits.
 *
 * Fail closed: if SQLite fails a write or the commit (disk full, I/O error, lock timeout), the
 * journal becomes `failed` and every pending and later append rejects with JOURNAL_UNAVAILABLE. It
 * never retries and carries on: a dispatcher must not send on a record it could not keep.
 *
 * Secrets never reach this layer: events hold ids, version tags, injection modes, sanitized
 * targets, fingerprints and digests. The contract's strict payload schemas refuse anything else,
 * and only the parsed event is stored.
 */
export class Journal implements BesideWriter {
  private readonly store: JournalStore;
  private readonly listQuery: ActionListQuery;
  private readonly groupCommit: boolean;
  private readonly batchEventsMax: number;
  private readonly pendingEventsMax: number;
  private queue: Unit[] = [];
  private pendingEvents = 0;
  private flushScheduled = false;
  /** When the scheduled flush first found the write lock taken (performance.now()); undefined while it is not. */
  private lockBusySinceMs: number | undefined = undefined;
  private readonly busyTimeoutMs: number;
  /** PRAGMA busy_timeout statements: off around the scheduled flush's BEGIN, back to busyTimeoutMs after it. */
  private readonly busyHandler: { readonly off: Database.Statement; readonly on: Database.Statement };
  /** A deferred read transaction around the writer thread's planning (planInSnapshot): prepared once, not parsed each time. */
  private readonly planSnapshot: { readonly begin: Database.Statement; readonly commit: Database.Statement };
  private laterTimer: NodeJS.Timeout | undefined = undefined;
  private readonly laterFlushMs: number;
  private state: JournalState = 'open';
  /** close()'s one run: a second call answers when the first has closed. */
  private closeDone: Promise<void> | undefined = undefined;
  private failure: unknown = undefined;
  private eventCount: number;
  private lastSeq: number;
  private commits = 0;
  private recoveredAtOpen = 0;
  /**
   * The actions whose lane entries were loaded from their rows at open (after recovery), not folded from their events
   * yet: refoldEarlierLaned's, at the unlock. Kept in memory, never decided from a row's column (a forged `first_seq`
   * would otherwise make an earlier run's head read as this run's). Bounded by the unresolved tickets at open.
   */
  private readonly earlierLaned = new Set<string>();
  /** What the start judged of the journal before recovery (recover): recoverHeld classifies under the same. */
  private recoveredJournal: RecoveredJournal = 'trusted';
  /**
   * Actions left open whose rows the log refuted at open (rowTrustedForRecovery): not recovered from the row, and no
   * commit folds over it (planUnits); recoverHeld recovers each from its own sealed events once they open.
   */
  private readonly heldAtOpen = new Map<string, LogHolds>();
  private readonly heldListeners = new Set<(actionIds: readonly string[]) => void>();
  /**
   * Held actions the log had settled, as their own events fold (recoverHeld appends nothing for them, so their rows
   * still read what another process wrote): what getAction answers for them in this run. A handful at most.
   */
  private readonly heldFolds = new Map<string, ActionState>();
  /**
   * Held actions (heldAtOpen) with a row: what they read as until the unlock (recovery.ts refutedRowState, what the
   * log's headers establish over the row), in getAction and in their lanes. A handful at most.
   */
  private readonly heldStates = new Map<string, ActionState>();
  /**
   * Held actions whose events never fold, and deferred ones (deferredAtOpen), while recoverHeld's record of them
   * commits: the state it folds over.
   */
  private readonly heldClosing = new Map<string, ActionState>();
  /**
   * Actions a previous run left in flight whose restart record waits for their own sealed events (recover): their rows
   * agree with the log, but the retry they would be advised rests on columns no header proves (recovery.ts
   * restartRetryRestsOnRow). recoverHeld records them at the unlock; until then they read as their rows do, in flight.
   * Each with its state as recovery checked it at open: what its lane holds, and what it closes over if its events never
   * fold (never its row as it reads at the unlock: another process can rewrite that while the broker runs).
   */
  private readonly deferredAtOpen = new Map<string, ActionState>();
  /** What the last unlock's recovery appended, settled: Journal.open waits for it when the vault opened unlocked. */
  private unlockRecoveries: Promise<unknown> = Promise.resolve();
  /** Rows a read found refuted (checkedRow), told once each. Bounded below. */
  private readonly refutedOnRead = new Set<string>();
  /**
   * What checkedRow answered for actions past the state cache, so a repeated read does not fold again: dropped for an
   * action a commit writes (the state cache answers it from then on) and all at once when the vault opens or locks.
   */
  private readonly checkedRows = new RecentCache<ActionState>(checkedRowsKept);
  private readonly audit: AuditWriter;
  /** A commit's writes (JournalWriter): inline, inside the transaction commitUnits begins (and recovery's, always). */
  private readonly writer: JournalWriter;
  /** JournalOpenOptions.writerThread: the writer thread while it runs (large batches and the audit writes go to it). */
  private thread: WriterThread | undefined = undefined;
  /** How the writer thread runs, if at all; whether one is opening; and the timer that ends an idle 'on-demand' one. */
  private readonly threadMode: false | 'eager' | 'on-demand';
  private threadOptions: Omit<WriterThreadOptions, 'start'> | undefined = undefined;
  private threadSealFault: SealFault | undefined;
  private threadOpening: Promise<void> | undefined = undefined;
  private threadIdleTimer: NodeJS.Timeout | undefined = undefined;
  /** When a batch was last posted to the thread (performance.now()): the idle timer measures from it. */
  private threadUsedAtMs = 0;
  private readonly threadIdleMs: number;
  private readonly sessionsConfirmBudgetMs: number;
  /** Checks each new event against the contract (JournalOpenOptions.eventChecks). */
  private readonly eventChecker: NewEventChecker;
  /** With a writer thread: the batches posted whose ack is not yet heard, oldest first (writerBatchesInFlightMax). */
  private inFlight: InFlightBatch[] = [];
  private readonly threadBatchEventsMin: number;
  /** Why the writer thread could not start, if it could not (the journal then stays inline), and when. */
  private threadStartFailure: unknown = undefined;
  private threadStartFailedAtMs = 0;
  private readonly onThreadStartFailure: JournalOpenOptions['onWriterThreadStartFailure'];
  private readonly onSessionRowRefuted: JournalOpenOptions['onSessionRowRefuted'];
  private readonly onActionRowRefuted: JournalOpenOptions['onActionRowRefuted'];
  /** Earlier-run sessions left unconfirmed for the rest of the run: their events do not fold. Told once each. */
  private readonly sessionsRefutedForGood = new Set<string>();
  /** Earlier-run sessions whose row named another process than their events: approvals not acted on in this run. */
  private readonly sessionApprovalsRefused = new Set<string>();
  /** Ended sessions the book does not hold, as their events fold (sessionFromLog), at most endedFromLogKept. */
  private readonly endedFromLog = new Map<string, SessionState>();
  /** Earlier-run sessions whose events did not open (the vault locked): not tried again until the vault unlocks. */
  private readonly sessionsLockedOut = new Set<string>();
  /** The thread committed last: the loop's sealer goes back to the committed head before it seals again. */
  private threadWroteLast = false;
  /** The loop committed since the thread last did: the next batch posted names the head it extends. */
  private loopWroteLast = false;
  /** With a writer thread, inside auditWrite: its operations, sent as one transaction when it returns. */
  private opBuffer: WriterOp[] | undefined = undefined;
  /** Writes beside the journal (writeBeside) posted to the writer thread and not yet answered. */
  private besideInFlight = 0;
  /** Units ever queued, and units settled (FIFO): durable() waits until what was queued before it is settled. */
  private unitsQueued = 0;
  private unitsSettled = 0;
  /** Inside readCurrent's read: requireCurrent commits nothing more (what queued after the call is not that read's). */
  private currentReads = 0;
  private settledWaiters: Array<{ through: number; resolve: () => void; reject: (error: unknown) => void }> = [];
  private readonly unsubscribe: Array<() => void> = [];
  private readonly commitListeners = new Set<(commit: JournalCommit) => void>();
  private readonly walSync: WalSync;
  /** Copies the WAL into the database file on its own thread (autocheckpoint is off on this connection). */
  private checkpointer: WalCheckpointer | undefined;
  private readonly platform: NodeJS.Platform;
  private readonly stateCache = new StateCache();
  /** Every session, loaded as the journal opens and moved by its commits: sessions are never read from the table again. */
  private readonly sessionBook: SessionBook;
  /** What a commit folds a session event over: an earlier run's session confirmed from its events where they open. */
  private readonly sessionsForCommit = {
    get: (id: string) => this.bookedSession(id),
    isUnconfirmed: (id: string) => this.sessionBook.isUnconfirmed(id),
  };
  /** Idempotency-key bindings within retention, read at open and moved only by this journal's commits. */
  private readonly keyBook: IdempotencyBook;
  /** Loaded by the first lane read (a journal no dispatcher reads never scans for it), then moved by every commit. */
  private laneTickets: LaneTickets | undefined = undefined;

  private constructor(
    private readonly db: Database.Database,
    private readonly clock: Clock,
    private readonly schemaVersion: number,
    options: JournalOpenOptions,
  ) {
    this.store = new JournalStore(db);
    this.listQuery = new ActionListQuery(db);
    this.groupCommit = options.groupCommit ?? true;
    this.batchEventsMax = positive(options.batchEventsMax ?? batchEventsMaxDefault, 'batchEventsMax');
    this.pendingEventsMax = positive(options.pendingEventsMax ?? pendingEventsMaxDefault, 'pendingEventsMax');
    this.laterFlushMs = positive(options.laterFlushMs ?? laterFlushMsDefault, 'laterFlushMs');
    this.threadMode =
      options.writerThread === true ? 'eager' : options.writerThread === 'on-demand' ? 'on-demand' : false;
    this.threadIdleMs = positive(options.writerThreadIdleMs ?? writerThreadIdleMsDefault, 'writerThreadIdleMs');
    this.sessionsConfirmBudgetMs = options.sessionsConfirmBudgetMs ?? sessionsConfirmBudgetMsDefault;
    this.eventChecker = new NewEventChecker(options.eventChecks ?? eventChecksFromEnv());
    this.threadBatchEventsMin = positive(
      options.threadBatchEventsMin ?? threadBatchEventsMinDefault,
      'threadBatchEventsMin',
    );
    this.busyTimeoutMs = positive(options.busyTimeoutMs ?? busyTimeoutMsDefault, 'busyTimeoutMs');
    this.onThreadStartFailure = options.onWriterThreadStartFailure;
    this.onSessionRowRefuted = options.onSessionRowRefuted;
    this.onActionRowRefuted = options.onActionRowRefuted;
    this.busyHandler = {
      off: db.prepare('PRAGMA busy_timeout = 0'),
      on: db.prepare(`PRAGMA busy_timeout = ${this.busyTimeoutMs}`),
    };
    this.planSnapshot = { begin: db.prepare('BEGIN'), commit: db.prepare('COMMIT') };
    this.eventCount = this.store.countEvents();
    this.lastSeq = this.store.lastSeq();
    this.sessionBook = new SessionBook(this.store.openingSessions(endedSessionsKept), {
      fromLog: (id) => this.sessionFromLog(id),
    });
    this.keyBook = new IdempotencyBook(this.store.idempotencyKeysExpiringAfter(liveBindingsFromMs(clock.nowMs())), () =>
      clock.nowMs(),
    );
    this.audit = new AuditWriter(
      this.store,
      clock,
      positive(options.checkpointEveryEvents ?? checkpointEveryEventsDefault, 'checkpointEveryEvents'),
      (op) => this.writeOp(op),
    );
    this.writer = new JournalWriter(db, this.store, {
      sealer: this.audit.sealerStart(),
      sealFault: options.sealFault,
    });
    this.platform = options.platform ?? process.platform;
    this.walSync = new WalSync(
      options.syncMode ?? syncModeFor(options.platform ?? process.platform),
      `${db.name}-wal`,
      this.lastSeq,
      (cause) => this.fail(cause, []),
      options.beforeSync,
    );
  }

  /**
   * Opens (creating if needed) the journal, refuses a connection without WAL + synchronous=FULL,
   * migrates the schema, then runs recovery before any new append can be made.
   */
  static async open(options: JournalOpenOptions): Promise<Journal> {
    await sodiumReady();
    const journal = Journal.openNow(options);
    if (journal.threadMode === 'eager') {
      try {
        await journal.openWriterThread();
        if (journal.thread === undefined)
          throw journal.threadStartFailure ?? new Error('the journal writer thread did not start');
        if (options.vault !== undefined) journal.attachVault(options.vault);
      } catch (error) {
        await journal.close();
        throw error;
      }
    }
    // A vault unlocked already: the records recovery deferred to it are durable before anyone reads.
    await journal.unlockRecoveries;
    return journal;
  }

  private static openNow(options: JournalOpenOptions): Journal {
    const db = openDatabase(journalPath(options));
    let journal: Journal | undefined;
    try {
      const platform = options.platform ?? process.platform;
      requireDurableConnection(db, platform, options.syncMode ?? syncModeFor(platform));
      // Checkpoints copy pages into the database file and fsync it: on a worker thread (wal-checkpointer.ts), never
      // inside a COMMIT on the event loop.
      db.pragma('wal_autocheckpoint = 0');
      if (Number(db.pragma('wal_autocheckpoint', { simple: true })) !== 0)
        throw new CodedError('JOURNAL_NOT_DURABLE', 'the journal could not turn off automatic checkpoints');
      db.pragma(`busy_timeout = ${positive(options.busyTimeoutMs ?? busyTimeoutMsDefault, 'busyTimeoutMs')}`);
      const pageBytes = Number(db.pragma('page_size', { simple: true }));
      const journalBytesMax = positive(options.journalBytesMax ?? journalBytesMaxDefault, 'journalBytesMax');
      db.pragma(`max_page_count = ${Math.max(1, Math.floor(journalBytesMax / pageBytes))}`);
      const from = schemaVersion(db);
      const version = migrate(db, options.migrations);
      // Migration 009 sealed an existing journal's plaintext results; their old page images stay in the WAL until it is truncated.
      if (from > 0 && from < migration009SealedResults.version && version >= migration009SealedResults.version)
        truncateWal(db);
      journal = new Journal(db, options.clock, version, options);
      // The lanes are read from the table here, at open, before recovery and before anything runs: from now on only
      // this journal's commits move them (a row another process edits later is never read for a lane). A schema older
      // than the action list's columns (a migration test's) has no lanes to read.
      if (version >= migration010ActionList.version) journal.lanes();
      journal.recover(options.judgeBeforeRecovery?.(journal) ?? 'trusted');
      for (const state of journal.laneTickets?.states() ?? []) journal.earlierLaned.add(state.action_id);
      if (journal.threadMode !== false) journal.prepareWriterThread(options);
      // An eager writer thread opens first (Journal.open), so the unlock's audit writes go to it too.
      if (options.vault !== undefined && journal.threadMode !== 'eager') journal.attachVault(options.vault);
      return journal;
    } catch (error) {
      journal?.walSync.close();
      db.close();
      throw error;
    }
  }

  /** After recovery: what a writer thread is started with, whenever it starts (its sealer's head is taken then). */
  private prepareWriterThread(options: JournalOpenOptions): void {
    if (this.db.memory) throw new Error('a writer thread needs the journal in a file');
    const platform = options.platform ?? process.platform;
    this.threadOptions = {
      dbPath: this.db.name,
      platform,
      syncMode: options.syncMode ?? syncModeFor(platform),
      busyTimeoutMs: this.busyTimeoutMs,
      maxPageCount: Number(this.db.pragma('max_page_count', { simple: true })),
      ackHeldFromSeq: options.writerAckHeldFromSeq,
      nativeBinding: options.writerThreadNativeBinding,
    };
    this.threadSealFault = options.sealFault;
  }

  /**
   * Starts the writer thread (once; the loop stays free while it opens). Until it is ready every batch commits inline;
   * the first batch posted to it names the head it extends. A thread that cannot start leaves the journal inline.
   */
  private openWriterThread(): Promise<void> {
    const options = this.threadOptions;
    if (options === undefined || this.thread !== undefined || this.state !== 'open') return Promise.resolve();
    this.threadOpening ??= WriterThread.launch(
      { ...options, start: { sealer: this.audit.sealerStart(), sealFault: this.threadSealFault } },
      (cause) => this.fail(cause, []),
    ).then(
      (thread) => {
        this.threadOpening = undefined;
        if (this.state !== 'open') {
          void thread.close();
          return;
        }
        this.thread = thread;
        this.loopWroteLast = true;
        this.threadUsedAtMs = performance.now();
        this.armThreadIdle();
      },
      (cause: unknown) => {
        this.threadOpening = undefined;
        // An optimisation that could not start: the loop keeps committing, as a journal without one does.
        this.threadOptions = undefined;
        this.threadStartFailure = cause;
        this.threadStartFailedAtMs = this.clock.nowMs();
        try {
          this.onThreadStartFailure?.(this.threadStartFailureReport());
        } catch {
          // A listener's fault is not the journal's: it stays inline as it would unheard.
        }
      },
    );
    return this.threadOpening;
  }

  /**
   * 'on-demand': the thread ends once it has had no batch for threadIdleMs (and nothing is in flight). One timer, armed
   * when the thread starts; a post only notes its time (no timer work per batch), and the timer, when it fires early,
   * waits out the rest.
   */
  private armThreadIdle(afterMs = this.threadIdleMs): void {
    if (this.threadMode !== 'on-demand' || this.threadIdleTimer !== undefined) return;
    this.threadIdleTimer = setTimeout(() => {
      this.threadIdleTimer = undefined;
      const thread = this.thread;
      if (thread === undefined || this.state !== 'open') return;
      const idleMs = performance.now() - this.threadUsedAtMs;
      if (this.inFlight.length > 0 || this.besideInFlight > 0 || idleMs < this.threadIdleMs) {
        this.armThreadIdle(Math.max(1, this.threadIdleMs - idleMs));
        return;
      }
      this.thread = undefined;
      void thread.close();
    }, afterMs);
    this.threadIdleTimer.unref();
  }

  /**
   * Resolves once the event is durable, with its append position and the action's new state. A
   * caller that does not expect a race gets a refusal as TransitionRefused (its code and message as
   * ever); a caller that does uses tryAppend and switches on the refusal.
   */
  async append(event: NewEvent, rows?: UnitRows, options?: AppendOptions): Promise<Appended> {
    return appendedOrThrow(await this.tryAppend(event, rows, options));
  }

  /**
   * append, with a lost race answered as a value instead of thrown. `rows` commit in the same transaction as the
   * event, or not at all (a refused event writes none; a constraint they break refuses the event with that error).
   */
  async tryAppend(event: NewEvent, rows?: UnitRows, options?: AppendOptions): Promise<AppendResult<Appended>> {
    const result = await this.enqueue([event], 'action', rows, false, options?.withHeld === true);
    if (!result.ok) return result;
    const [appended] = result.appended;
    if (appended === undefined || !('state' in appended))
      throw new Error('a one-event unit resolved without its event');
    return { ok: true, appended };
  }

  /**
   * An observation that rides in the next commit (event-durability.ts: admission and observations do not wait for the
   * disk, nor for a commit of their own): queued in order like any append, but it starts no commit by itself. It
   * settles with the commit of the next append that is not "later" (a DISPATCH_STARTED, a RESULT_COMMITTED: the
   * same transaction, so it is durable with that one's sync), of a read that must see the log whole, of durable(), or
   * after laterFlushMs. A caller awaits it only where it can wait that long; the channels' observations are awaited
   * only after the settlement that carries them is queued (or after commitHeld).
   */
  async appendLater(event: NewEvent): Promise<Appended> {
    if (eventWaitsForDisk[event.kind])
      throw new CodedError('INVALID_ARGUMENT', `${event.kind} waits for the disk: it cannot ride in a later commit`, {
        field: 'kind',
      });
    const [appended] = appendedOrThrow(await this.enqueue([event], 'action', undefined, true));
    if (appended === undefined || !('state' in appended))
      throw new Error('a one-event unit resolved without its event');
    return appended;
  }

  /** What appendLater holds is committed on the next turn, with whatever else is queued by then. */
  commitHeld(): void {
    if (this.queue.length > 0 && this.state === 'open') this.scheduleFlush();
  }

  /** All the events land in one transaction, in order, or none does. */
  async appendBatch(events: readonly NewEvent[]): Promise<Appended[]> {
    return appendedOrThrow(await this.tryAppendBatch(events));
  }

  /** appendBatch, with a lost race (of any event: the whole batch is refused) answered as a value. */
  async tryAppendBatch(events: readonly NewEvent[]): Promise<AppendResult<Appended[]>> {
    if (events.length === 0) return { ok: true, appended: [] };
    const result = await this.enqueue(events, 'action');
    return result.ok ? { ok: true, appended: result.appended.filter((a): a is Appended => 'state' in a) } : result;
  }

  /**
   * Appends one SESSION_* event (subject `ses_…`), folded through broker/core applySessionEvent in
   * the same commit path as actions: the same hash chain, the same group commit, the same refusals.
   */
  async appendSession(event: NewEvent): Promise<AppendedSession> {
    return appendedOrThrow(await this.tryAppendSession(event));
  }

  /** appendSession, with a lost race (approved, revoked or ended meanwhile; started twice) answered as a value. */
  async tryAppendSession(event: NewEvent): Promise<AppendResult<AppendedSession>> {
    const result = await this.enqueue([event], 'session');
    if (!result.ok) return result;
    const [appended] = result.appended;
    if (appended === undefined || !('session' in appended))
      throw new Error('a session unit resolved without its event');
    return { ok: true, appended };
  }

  /** Several SESSION_* events of one session in one unit, all or none (a session started and approved at once). */
  async tryAppendSessionBatch(events: readonly NewEvent[]): Promise<AppendResult<AppendedSession[]>> {
    const result = await this.enqueue(events, 'session');
    if (!result.ok) return result;
    return { ok: true, appended: result.appended.filter((a): a is AppendedSession => 'session' in a) };
  }

  /**
   * Appends one configuration event (CONFIG_APPLIED, subject `cfg_…`): the same hash chain and commit path as actions,
   * folded into no state (the action and session projections skip it).
   */
  async appendConfig(event: NewEvent): Promise<AppendedConfig> {
    const [appended] = appendedOrThrow(await this.enqueue([event], 'config'));
    if (appended === undefined) throw new Error('a configuration unit resolved without its event');
    return appended;
  }

  /**
   * Appends one credential request event (CREDENTIAL_REQUESTED and its answer, subject `crq_…`) through the same
   * commit path, folded by broker/core foldCredentialRequestEvent: a second answer (a person's click after the expiry,
   * two people at once) is refused as a value, under the journal's write lock.
   */
  async tryAppendCredentialRequest(event: NewEvent): Promise<AppendResult<AppendedCredentialRequest>> {
    const result = await this.enqueue([event], 'credential_request');
    if (!result.ok) return result;
    const [appended] = result.appended;
    if (appended === undefined || !('request' in appended))
      throw new Error('a credential request unit resolved without its event');
    return { ok: true, appended };
  }

  /** A credential request's state, folded from its plaintext event headers (known while the vault is locked). */
  getCredentialRequest(requestId: string): CredentialRequestState | undefined {
    this.requireReadable();
    return projectCredentialRequests(this.store.readSubjectHeaders(requestId)).get(requestId);
  }

  /** The newest credential requests (at most `limit`, bounded), oldest first. */
  listCredentialRequests(limit = credentialRequestsRecentMax): CredentialRequestState[] {
    this.requireReadable();
    const headers = this.store.readCredentialRequestHeaders(Math.min(Math.max(1, limit), credentialRequestsRecentMax));
    return [...projectCredentialRequests(headers).values()];
  }

  /**
   * Resolves once every event committed so far is on disk. An answer that names an action (an agent's, above all a
   * timed-out one) waits on this first: the events that do not wait for the disk themselves (event-durability.ts)
   * may otherwise still be only in the page cache when the agent reads the id.
   */
  durable(): Promise<void> {
    const misuse = this.refusedInsideRead('durable()');
    if (misuse !== undefined) return Promise.reject(misuse);
    if (this.state === 'failed') return Promise.reject(this.unavailable());
    // What appendLater holds rides in a commit now: durable() vouches for everything appended before it was called.
    // A commit that fails here has failed the journal and abandoned the sync: whenDurable rejects.
    if (this.thread !== undefined) return this.settledThrough(this.unitsQueued).then(() => this.walSync.whenDurable());
    this.flushQueued();
    return this.walSync.whenDurable();
  }

  /**
   * Runs `read` once everything appended before this call is committed, without holding the loop while the writer
   * thread commits it: the async form of the reads that commit what is queued first (`requireCurrent`: eventsPage,
   * subjectEvents, actionCounts, outcomeCounts, the action list...), for callers that can wait (the operator's and the
   * agents' reads). The contract:
   *
   * - It resolves once every unit queued (or in flight) when it was called has settled: appends and appendLater units
   *   made before the call are seen (durable() waits the same way, for the same units). Without a writer thread they
   *   commit inline on this turn, as requireCurrent always did.
   * - `read` runs in a read transaction on the journal's connection (deferred BEGIN, COMMIT after it), so a read of
   *   several statements sees one snapshot while the thread commits later batches beside it; it runs on one turn, so
   *   no inline commit can come between its statements either. Inside it requireCurrent commits nothing more: what was
   *   queued after the call is not this read's to see (it may see some of it: a batch the thread committed meanwhile).
   * - What the journal keeps in memory (the state and session caches, the lanes' tickets, stats()) moves at each
   *   batch's ack, so it may be behind the snapshot, never ahead of it. laneHeads mixes the two and stays a synchronous
   *   read (the approval queue's planning).
   * - A journal that fails while the read waits: rejects JOURNAL_UNAVAILABLE and `read` never runs. One that starts
   *   closing meanwhile is read once what the read waited for has settled (close commits it first), as a read made
   *   while it closes is. A failed journal is read at once (nothing more will commit), as the synchronous reads do; a
   *   closed one refuses. `read` must be synchronous: a promise returned is refused (its rest would run outside the
   *   snapshot). Inside it, what needs a commit (durable(), readCurrent, close) is refused INVALID_ARGUMENT.
   */
  readCurrent<T>(read: () => T): Promise<T> {
    const misuse = this.refusedInsideRead('readCurrent()');
    if (misuse !== undefined) return Promise.reject(misuse);
    if (this.state === 'closed') return Promise.reject(this.unavailable());
    if (this.thread === undefined || this.state !== 'open') {
      try {
        // Inline: what is queued commits on this turn, as requireCurrent does. Failed or closing: nothing more will.
        if (this.state === 'open') this.flushQueued();
        return Promise.resolve(this.readInSnapshot(read));
      } catch (error) {
        return Promise.reject(error);
      }
    }
    return this.settledThrough(this.unitsQueued).then(() => {
      // Closing: what this read waited for has settled (close flushes first) and the file is still open, as for a
      // read made while closing (answered at once above). Closed: nothing can be read.
      if (this.state === 'closed') throw this.unavailable();
      return this.readInSnapshot(read);
    });
  }

  /**
   * Inside readCurrent's read the connection holds the read's snapshot (an open transaction), so nothing commits on it
   * before the read returns, and the read is synchronous, so it cannot wait for a commit either. A call there that
   * needs one (durable(), another readCurrent, close()) is refused, rather than answered as if what was appended before
   * it were committed (inline, the flush it needs would return at once: a transaction is open). Refused with a writer
   * thread too, where it would only answer after the read: the mistake shows whichever way the journal runs.
   */
  private refusedInsideRead(call: string): CodedError | undefined {
    if (this.currentReads === 0) return undefined;
    return new CodedError(
      'INVALID_ARGUMENT',
      `Journal.${call} was called inside a readCurrent read, where nothing can commit: call it after the read returns`,
      { field: 'read' },
    );
  }

  /** `read` in one read transaction (one snapshot of the file), with requireCurrent committing nothing meanwhile. */
  private readInSnapshot<T>(read: () => T): T {
    this.requireReadable();
    // Inside a transaction already (never a read of readCurrent's: refusedInsideRead): its snapshot is the read's.
    const begun = !this.db.inTransaction;
    // Deferred: no lock is taken; the snapshot is fixed by the first statement and held until COMMIT.
    if (begun) this.db.exec('BEGIN');
    this.currentReads += 1;
    try {
      const value = read();
      // An async read would run its later part outside the snapshot (and drain the thread there): refused.
      if (typeof (value as { then?: unknown } | null)?.then === 'function')
        throw new TypeError('Journal.readCurrent: the read must be synchronous (it returned a promise)');
      return value;
    } finally {
      this.currentReads -= 1;
      // A read-only transaction: COMMIT only ends it (it cannot fail for a lock, nothing was written).
      if (begun && this.db.inTransaction) this.db.exec('COMMIT');
    }
  }

  /**
   * Resolves once the event at `seq` (already appended) is durable, by a sync other appends asked for: it starts none,
   * so it can wait long (an action waiting for a person is covered by the next dispatch's sync of any action). Tells
   * what a crash cannot take back without adding a sync to any path.
   */
  onceDurable(seq: number): Promise<void> {
    if (this.state === 'failed') return Promise.reject(this.unavailable());
    return this.walSync.whenCovered(seq);
  }

  /** The log position the last sync made durable (every event up to it survives a power cut). */
  durableSeq(): number {
    return this.walSync.durableThrough();
  }

  /**
   * Told after every commit that appended events, at COMMIT (before the sync that makes them durable; kinds and the
   * last position, never a payload): the operator
   * UI's change feed (broker/host/change-feed.ts) pushes from here instead of the UI polling. A listener that
   * throws is ignored: a view's refresh must never undo or delay a commit.
   */
  onCommit(listener: (commit: JournalCommit) => void): () => void {
    this.commitListeners.add(listener);
    return () => this.commitListeners.delete(listener);
  }

  /**
   * A session as this journal knows it. One read from the table at open (an earlier run's) is confirmed by folding its
   * own sealed events the first time it is asked for while they can be opened, and from then on is that fold: a row
   * edited while no broker ran (THREAT-MODEL 3: a pending session set to approved, one inserted for the agent's child)
   * is then replaced by what the log says, or forgotten where the log has no such session. While they cannot be
   * opened (the vault locked) it is the row, and `sessionConfirmed` says so.
   */
  getSession(sessionId: string): SessionState | undefined {
    this.requireReadable();
    return this.bookedSession(sessionId);
  }

  /** getSession without the state check: also what a commit folds a session event over (CommitOverlay). */
  private bookedSession(sessionId: string): SessionState | undefined {
    this.tryConfirmSession(sessionId);
    return this.sessionBook.get(sessionId);
  }

  /**
   * confirmSession where the session is unconfirmed, its events were not found locked since the last unlock, and they
   * were not found not to fold in this run: whether it tried.
   */
  private tryConfirmSession(sessionId: string): boolean {
    if (
      !this.sessionBook.isUnconfirmed(sessionId) ||
      this.sessionsLockedOut.has(sessionId) ||
      this.sessionsRefutedForGood.has(sessionId)
    )
      return false;
    this.confirmSession(sessionId);
    return true;
  }

  /**
   * A session the book does not hold (let go once ended, or never read at open): the fold of its own sealed events,
   * never its row; undefined while they cannot be opened or do not fold. An ended one's fold is kept (it cannot move).
   */
  private sessionFromLog(sessionId: string): SessionState | undefined {
    const kept = this.endedFromLog.get(sessionId);
    if (kept !== undefined) return kept;
    let folded: SessionState | undefined;
    try {
      folded = this.foldSessionEvents(sessionId);
    } catch {
      return undefined;
    }
    if (folded !== undefined && folded.ended_at_ms !== null) {
      if (this.endedFromLog.size >= endedFromLogKept)
        this.endedFromLog.delete(this.endedFromLog.keys().next().value ?? '');
      this.endedFromLog.set(sessionId, folded);
    }
    return folded;
  }

  /** A session as its own sealed events fold (throws what opening or folding them throws). */
  private foldSessionEvents(sessionId: string): SessionState | undefined {
    return projectSessions(this.allSubjectEvents(sessionId)).get(sessionId);
  }

  /**
   * Whether the session's state is this journal's own (written in this run, or an earlier run's confirmed from its
   * sealed events): what an approval is acted on only when (ApprovalQueue). Confirms it first where it can.
   */
  sessionConfirmed(sessionId: string): boolean {
    this.requireReadable();
    this.tryConfirmSession(sessionId);
    return !this.sessionBook.isUnconfirmed(sessionId);
  }

  /**
   * Whether an approval the session's record holds may be acted on (ApprovalQueue, the process allowlist): its record
   * is confirmed, and its row at open named the session's own process. One whose row named another process may have
   * bound that process's connection to it while locked (a connection is bound once, at its initialize), so none of
   * its approvals is acted on in this run: its calls get cards.
   */
  sessionApprovalUsable(sessionId: string): boolean {
    return this.sessionConfirmed(sessionId) && !this.sessionApprovalsRefused.has(sessionId);
  }

  /**
   * How far the session's record is checked (SessionRecordCheck), after confirming it where it can: what a card, a
   * credential request and the Sessions page show beside its status, so that a row edited while no broker ran is never
   * shown as a person's approval the journal vouches for.
   */
  sessionRecordCheck(sessionId: string): SessionRecordCheck {
    this.requireReadable();
    this.tryConfirmSession(sessionId);
    return this.recordCheckOf(sessionId);
  }

  /**
   * Confirms at most `max` of the sessions still unconfirmed that can be tried now (not found locked since the last
   * unlock, not found not to fold): what the runtime runs a turn of the loop at a time after an unlock, so an earlier
   * run's sessions read as their events say without a list asking for each (broker/host/session-confirmer.ts).
   * Also stops once it has spent `budgetMs` of the loop, after the first. `tried`: how many it tried; `settled`: of
   * those, how many are no longer waiting for an unlock (confirmed, forgotten, or found unverifiable: each changes
   * what its card says); `left`: whether some can still be tried. Quiet on a journal that is not open (nothing tried,
   * nothing left).
   */
  confirmHeldSessions(
    max: number,
    budgetMs = this.sessionsConfirmBudgetMs,
  ): { tried: number; settled: number; left: boolean } {
    if (this.state !== 'open') return { tried: 0, settled: 0, left: false };
    const triable = this.sessionBook
      .unconfirmedIds()
      .filter((id) => !this.sessionsLockedOut.has(id) && !this.sessionsRefutedForGood.has(id));
    // Bounded by time too: a session's fold reads all its events, up to 8,192 (one per reconnection).
    const until = performance.now() + budgetMs;
    let tried = 0;
    let settled = 0;
    for (const id of triable) {
      if (tried >= max || (tried > 0 && performance.now() >= until)) break;
      if (!this.tryConfirmSession(id)) continue;
      tried++;
      if (!this.sessionsLockedOut.has(id)) settled++;
    }
    return { tried, settled, left: triable.length > tried };
  }

  private recordCheckOf(sessionId: string): SessionRecordCheck {
    if (this.sessionBook.isUnconfirmed(sessionId))
      return this.sessionsRefutedForGood.has(sessionId) ? 'unverifiable' : 'unconfirmed';
    return this.sessionApprovalsRefused.has(sessionId) ? 'approval_withheld' : 'confirmed';
  }

  /**
   * Folds an earlier run's session from its sealed events into the book. Its events cannot be opened while the vault
   * is locked (AUDIT_KEY_UNAVAILABLE): it stays unconfirmed, to be tried at the next ask. Events that do not fold (a
   * row inserted that does not authenticate, a fold refused, a run that never had a key sealed them) leave it
   * unconfirmed for good: logged.
   */
  private confirmSession(sessionId: string): void {
    let folded: SessionState | undefined;
    try {
      folded = this.foldSessionEvents(sessionId);
    } catch (error) {
      // Locked: tried again after the next unlock. A run that never had a key sealed them for good: no unlock opens them.
      if (error instanceof CodedError && error.code === 'AUDIT_KEY_UNAVAILABLE' && !sealedForGood(error)) {
        this.sessionsLockedOut.add(sessionId);
        return;
      }
      // Unconfirmed for the rest of the run: tried again at every ask, a fold of thousands of events would hold the loop.
      this.sessionsRefutedForGood.add(sessionId);
      const row = this.sessionBook.get(sessionId);
      this.tellSessionRowRefuted({
        session_id: sessionId,
        row_status: row?.status ?? null,
        status: null,
        folds: false,
      });
      return;
    }
    const row = this.sessionBook.get(sessionId);
    if (folded === undefined || row === undefined || !sameSessionRecord(row, folded))
      this.tellSessionRowRefuted({
        session_id: sessionId,
        row_status: row?.status ?? null,
        status: folded?.status ?? null,
        folds: true,
      });
    this.sessionBook.confirmed(sessionId, folded);
    // The row named another process than the session's own: a process may have been found by it (a reconnection while
    // locked binds the connection to the session for good), so its approval is not acted on in this run at all.
    if (row !== undefined && folded !== undefined && (row.pid !== folded.pid || row.start_time !== folded.start_time))
      this.sessionApprovalsRefused.add(sessionId);
  }

  private tellSessionRowRefuted(report: SessionRowRefuted): void {
    try {
      this.onSessionRowRefuted?.(report);
    } catch {
      // The caller's logging is not the journal's concern.
    }
  }

  /**
   * The newest sessions (at most `limit`, 1,000 by default) in order of their first event, newest last; `status`
   * filters before the limit, so the sweeper's open sessions are never crowded out by older ended ones.
   */
  listSessions(options: { status?: SessionState['status'][]; limit?: number } = {}): SessionState[] {
    this.requireReadable();
    // The book holds every session a list this long shows (endedSessionsKept).
    return this.sessionBook.list(Math.min(options.limit ?? endedSessionsKept, endedSessionsKept), options.status);
  }

  /**
   * Every session not ended (pending, approved, revoked), however many: what the sweeper ends when its process is gone
   * and what the control socket's agent guard walks. listSessions' newest 1,000 would leave an older one out.
   */
  unendedSessions(): SessionState[] {
    this.requireReadable();
    return this.sessionBook.unendedSessions();
  }

  /**
   * What sessions.list shows: listSessions' newest sessions, each with how many actions it has (calls) and how many of
   * those are not sent yet (pending). Read from one counter row per session (migration 017), moved in the transaction
   * that writes each action row: the same cost for a session of ten actions as for one of a million, and exact.
   */
  listCountedSessions(): ListedSession[] {
    this.requireCurrent();
    // Which sessions is the journal's own answer (SessionBook: the newest endedSessionsKept by first event, every one of
    // them held), never the table's rows, among which another process could insert a thousand newer ones and so empty
    // the page. An earlier run's session is shown as its events say where they open (a row forged to approved is not
    // shown approved once they do), and each says how far it is checked (`record`). Every session not ended is
    // confirmed at once; of the ended ones, which nothing acts on, at most sessionsConfirmedPerList a call and, after
    // the first, sessionsConfirmBudgetMs of the loop, newest first, so the first list after an unlock does not fold a
    // thousand sessions' events in one turn of the loop. The figures are the table's counters.
    for (const s of this.sessionBook.unendedSessions()) this.tryConfirmSession(s.session_id);
    let budget = sessionsConfirmedPerList;
    const until = performance.now() + this.sessionsConfirmBudgetMs;
    const listed = this.sessionBook.list(endedSessionsKept);
    for (let i = listed.length - 1; i >= 0 && budget > 0; i--) {
      if (budget < sessionsConfirmedPerList && performance.now() >= until) break;
      if (this.tryConfirmSession(listed[i]?.session_id ?? '')) budget--;
    }
    const sessions = budget === sessionsConfirmedPerList ? listed : this.sessionBook.list(endedSessionsKept);
    const figures = this.store.sessionFigures(sessions.map((s) => s.session_id));
    return sessions.map((session) => ({
      session,
      ...(figures.get(session.session_id) ?? { calls: 0, pending: 0 }),
      record: this.recordCheckOf(session.session_id),
    }));
  }

  /** How many sessions the journal holds in memory: bounded, however many processes ever connected (SessionBook). */
  sessionsHeld(): number {
    return this.sessionBook.size();
  }

  /** The session of a live process, if one was recorded (pid + kernel start time). */
  findSessionByProcess(pid: number, startTime: string): SessionState | undefined {
    this.requireReadable();
    const found = this.sessionBook.findByProcess(pid, startTime);
    if (found === undefined || !this.sessionBook.isUnconfirmed(found.session_id)) return found;
    this.tryConfirmSession(found.session_id);
    return this.sessionBook.findByProcess(pid, startTime);
  }

  /**
   * The unresolved tickets of one lane from a ticket on, in ticket order (the dispatcher's view of a lane): from memory
   * (LaneTickets: read at open, moved by each commit), each state as the journal's commits wrote it, never a row read
   * back. A resolved ticket is not listed; scheduleLane would skip it.
   */
  listLane(lane: string, options: { fromTicket?: number; limit?: number } = {}): ActionState[] {
    this.requireReadable();
    const tickets = this.lanes().list(
      lane,
      options.fromTicket ?? 1,
      Math.min(options.limit ?? listActionsMax, listActionsMax),
    );
    // From memory only: the states the journal's own commits wrote (LaneTickets), never a row read back.
    return tickets.map(({ state }) => state);
  }

  /** Every lane that holds an unresolved ticket, with its lowest one, and the last ticket issued (the queue's open). */
  laneHeads(): { heads: Map<string, number>; lastTicket: number } {
    this.requireCurrent();
    return { heads: this.lanes().heads(), lastTicket: this.store.lastTicket() };
  }

  private lanes(): LaneTickets {
    if (this.laneTickets === undefined) {
      // What appendLater holds is committed first: from here on every commit moves the tickets it wrote.
      this.flushQueued();
      this.laneTickets = LaneTickets.load(this.store.unresolvedLaneStates());
      // A held action the log shows in flight keeps its lane as the log names it, whatever its row lists.
      for (const [id, state] of this.heldStates) {
        this.laneTickets.drop(id);
        this.laneTickets.moved(state);
      }
    }
    return this.laneTickets;
  }

  /** Actions of one session in ticket order. */
  listSessionActions(sessionId: string, options: { limit?: number } = {}): ActionState[] {
    this.requireCurrent();
    return this.store.listSessionActions(sessionId, Math.min(options.limit ?? listActionsMax, listActionsMax));
  }

  /**
   * One page of the action list, newest first (`limit + 1` rows: the extra one says another page follows), examining
   * at most `scanRowsMax` rows (at most actionListScanRowsMax; smaller in tests) when it tests each row.
   */
  actionListPage(filter: ActionListFilter, scanRowsMax = actionListScanRowsMax): ActionListPage {
    this.requireCurrent();
    return this.listQuery.page(
      { ...filter, limit: Math.min(Math.max(1, filter.limit), listActionsMax) },
      Math.min(Math.max(1, scanRowsMax), actionListScanRowsMax),
    );
  }

  /** A lane's tickets below `ticket`, newest first, bounded: what a ticket may have waited behind. */
  laneTicketsBefore(lane: string, ticket: number, limit = listActionsMax): LaneTicketRow[] {
    this.requireCurrent();
    return this.listQuery.laneTicketsBefore(lane, ticket, Math.min(limit, listActionsMax));
  }

  /** The action list's moments of one action (decided, dispatched, settled, resolved), as stored. */
  getActionTimeline(actionId: string): ActionTimeline | undefined {
    this.requireCurrent();
    return this.store.loadTimeline(actionId);
  }

  /**
   * The position of the newest event the file holds, as this connection reads it: inside readCurrent's read, its
   * snapshot's (stats().last_seq moves at each batch's ack, so it can be behind the rows such a read sees).
   */
  committedSeq(): number {
    this.requireCurrent();
    return this.store.lastSeq();
  }

  /** The wall time the newest event recorded (null for an empty log). */
  lastEventAtMs(): number | null {
    this.requireCurrent();
    return this.listQuery.lastEventAtMs();
  }

  /**
   * Records DISPATCH_STARTED for the next attempt and resolves only once that row is durable: the
   * caller may hand the first application byte to the transport only after this resolves.
   */
  beginDispatch(actionId: string, attempt: number, connection: DispatchConnection): Promise<Appended> {
    const payload = {
      attempt,
      connection: connection.connection,
      ...(connection.connection_id === undefined ? {} : { connection_id: connection.connection_id }),
      ...(connection.peer_identity === undefined ? {} : { peer_identity: connection.peer_identity }),
      ...(connection.peer_trust === undefined ? {} : { peer_trust: connection.peer_trust }),
      ...(connection.generation === undefined ? {} : { generation: connection.generation }),
    };
    return this.append({ kind: 'DISPATCH_STARTED', action_id: actionId, payload });
  }

  getAction(actionId: string): ActionState | undefined {
    this.requireReadable();
    return (
      this.stateCache.get(actionId)?.state ??
      this.heldStates.get(actionId) ??
      this.laneTickets?.stateOf(actionId) ??
      this.heldFolds.get(actionId) ??
      this.checkedRow(actionId)
    );
  }

  /**
   * An action as getAction answers it past the cache (an action no commit of this run touched lately), never the
   * plaintext `actions` row taken as it is: any process of the user can rewrite it while no broker runs (THREAT-MODEL),
   * to say an action dispatched long ago was never sent, or a recorded unknown committed. The action's own events fold
   * whenever they open (an old action's read costs its fold, once: checkedRows keeps it); while they cannot (the vault
   * locked, or a run whose key is lost for good), the row, checked first against the log's plaintext headers
   * (recovery.ts rowRefutation), or what the headers establish over a row they refute (refutedRowState). Events that
   * open but do not authenticate or fold refute the row as well. All read in one snapshot, so a commit of the writer
   * thread's meanwhile is not a refutation. A row that differs from the log is reported (onActionRowRefuted, `on_read`)
   * once.
   */
  private checkedRow(actionId: string): ActionState | undefined {
    const kept = this.checkedRows.get(actionId);
    if (kept !== undefined) return kept;
    const begun = !this.db.inTransaction;
    if (begun) this.db.exec('BEGIN');
    let read: { row: ActionState; facts: LogFacts; fold: ReturnType<Journal['heldFold']> } | undefined;
    try {
      const row = this.store.loadState(actionId);
      if (row !== undefined)
        read = { row, facts: this.logFacts(actionId), fold: this.heldFold(actionId, { forRead: true }) };
    } finally {
      if (begun && this.db.inTransaction) this.db.exec('COMMIT');
    }
    if (read === undefined) return undefined;
    const { row, facts, fold } = read;
    const folded = typeof fold === 'object' ? fold : undefined;
    const holds =
      rowRefutation(row, facts) ??
      (fold === 'unfoldable' || (folded !== undefined && !sameOutcomeRecord(row, folded))
        ? 'SEALED_EVENTS'
        : undefined);
    if (holds !== undefined) this.tellRefutedOnRead(actionId, row.stage, holds);
    const answer = folded ?? (holds === undefined ? row : refutedRowState(row, facts));
    this.checkedRows.committed([[actionId, answer]]);
    return answer;
  }

  /** What an action's plaintext event headers establish (JournalStore.logFacts; recovery.ts LogFacts). */
  private logFacts(actionId: string): LogFacts {
    return this.store.logFacts(actionId);
  }

  private tellRefutedOnRead(actionId: string, rowStage: ActionState['stage'], holds: LogHolds): void {
    if (this.refutedOnRead.has(actionId)) return;
    if (this.refutedOnRead.size >= refutedOnReadTold) this.refutedOnRead.clear();
    this.refutedOnRead.add(actionId);
    this.tellActionRowRefuted({ action_id: actionId, row_stage: rowStage, log_holds: holds, on_read: true });
  }

  /**
   * An action's state for handing over what it holds (its stored result) or acting on it for an agent (a cancel, a
   * retry): folded from the action's own sealed events, whose associated data authenticates each one's action and
   * session. Never the plaintext `actions` row, which any process of the user can edit (a row naming the asker's
   * session, or the asker's own row naming another action's result), and never a state in memory that a commit folded
   * over such a row. Throws what opening the events throws (AUDIT_KEY_UNAVAILABLE while the vault is locked, for an
   * earlier run's events).
   */
  sealedAction(actionId: string): ActionState | undefined {
    this.requireCurrent();
    return project(this.allSubjectEvents(actionId)).get(actionId);
  }

  /**
   * sealedAction for a commit's cache miss: `unreadable` while some of the action's events cannot be opened now (an
   * earlier run's, the vault locked; a run that never had a key). Any other failure — an event row that does not
   * authenticate (damaged, or inserted by another process: the table refuses only updates and deletes), a run key that
   * does not open, more events than one fold takes — refuses the unit that asked (IMPOSSIBLE_TRANSITION, a unit's
   * fault, so the journal goes on): falling back to the row there would let a process that inserts one bad row choose
   * what the new event folds over.
   */
  private sealedStateForCommit(actionId: string): ActionState | undefined | 'unreadable' {
    try {
      return project(this.allSubjectEvents(actionId)).get(actionId);
    } catch (error) {
      if (error instanceof CodedError && error.code === 'AUDIT_KEY_UNAVAILABLE') return 'unreadable';
      const why = error instanceof CodedError ? error.code : 'its events do not open';
      throw new CodedError(
        'IMPOSSIBLE_TRANSITION',
        `${actionId}: its recorded events cannot be folded (${why}), so no new event is folded over them`,
        { cause: error },
      );
    }
  }

  /**
   * sealedStateForCommit for the commit path: where the action's events cannot be opened yet, the commit folds over its
   * row (CommitOverlay), so a row the log refutes is refused (a unit's fault), never folded over — a held action's
   * (refuted at open, heldAtOpen), or one a check against the headers refutes now (rowRefutation: a person's decision
   * on an earlier run's action while the vault is locked).
   */
  private sealedStateOrHeld(actionId: string): ActionState | undefined | 'unreadable' {
    const sealed = this.sealedStateForCommit(actionId);
    if (sealed !== 'unreadable') return sealed;
    const held = this.heldAtOpen.get(actionId);
    if (held !== undefined)
      throw new CodedError(
        'IMPOSSIBLE_TRANSITION',
        `${actionId}: its row was found rewritten at this start (${logHoldsWords[held]}), so nothing is recorded over it until its own events can be read: unlock the vault`,
      );
    const holds = rowRefutation(this.store.loadState(actionId), this.logFacts(actionId));
    if (holds === undefined) return sealed;
    throw new CodedError(
      'IMPOSSIBLE_TRANSITION',
      `${actionId}: its row differs from the journal's log (${logHoldsWords[holds]}), so nothing is recorded over it until its own events can be read: unlock the vault`,
    );
  }

  /**
   * Every event of one action, a page at a time, opened as read (pages by seq, so a commit between two, on the writer
   * thread, only adds events after the last one read: each page is still in order). An
   * action has a few dozen; retries, reconciliations and attestations add to that, and a fold of more than
   * `sealedActionEventsMax` is refused rather than hold the loop.
   */
  private *allSubjectEvents(subjectId: string): Generator<JournalEvent, void, undefined> {
    let after = 0;
    for (let read = 0; ;) {
      const page = this.store.readSubjectEventsAfter(subjectId, after, eventsPageMax);
      for (const row of page) yield this.audit.openRow(row);
      read += page.length;
      const last = page.at(-1);
      if (page.length < eventsPageMax || last === undefined) return;
      if (read >= sealedActionEventsMax) throw new FoldTooLongError(subjectId);
      after = last.seq;
    }
  }

  /** The binding of an idempotency key on a route and scope (expired ones too: compare expires_at_ms). */
  getIdempotencyKey(route: string, scope: string, key: string): BoundIdempotencyKey | undefined {
    this.requireReadable();
    return this.store.loadIdempotencyKey(route, scope, key);
  }

  /** Actions in ticket order, one bounded page at a time. */
  listActions(options: { fromTicket?: number; limit?: number } = {}): ActionState[] {
    this.requireCurrent();
    const limit = Math.min(options.limit ?? listActionsMax, listActionsMax);
    return this.store.listStates(options.fromTicket ?? 1, limit);
  }

  /**
   * Durable events in append order. Reads page by page so no cursor stays open on the connection
   * across a yield (a commit in between would otherwise find the connection busy).
   */
  *events(fromSeq = 1): Generator<JournalEvent, void, undefined> {
    let next = fromSeq;
    for (;;) {
      this.requireCurrent();
      const page = this.store.readEvents(next, eventsPageMax).map((row) => this.audit.openRow(row));
      yield* page;
      const last = page.at(-1);
      if (page.length < eventsPageMax || last === undefined) return;
      next = last.seq + 1;
    }
  }

  /**
   * One bounded page of the log for views: each row opened if this run (or the unlocked vault) has
   * its key, else only its plaintext header with `sealed: true` (the Activity view still shows the
   * position, kind, action, session, ticket and lane of a row it cannot read). `only` narrows the page to one action's
   * or one session's rows, read through their index: the rows of other ids are never read nor opened.
   */
  eventsPage(fromSeq: number, limit: number, only: EventHeaderFilter = {}): Array<JournalEvent | SealedEventHeader> {
    this.requireCurrent();
    return this.store.readEvents(fromSeq, Math.min(Math.max(1, limit), eventsPageMax), only).map((row) => {
      try {
        return this.audit.openRow(row);
      } catch (error) {
        if (!isCodedError(error) || error.code !== 'AUDIT_KEY_UNAVAILABLE') throw error;
        return { sealed: true as const, ...eventHeaderOf(row) };
      }
    });
  }

  /** Which kinds of event a subject has, all of them, read from the plaintext headers (no event is opened). */
  subjectKinds(subjectId: string): ReadonlySet<EventKind> {
    this.requireCurrent();
    return this.store.readSubjectKinds(subjectId);
  }

  /**
   * The plaintext headers (seq, wall time, kind) of a subject's first `limit` events of a kind that carries a
   * classification (kindsRequiringClassification), in append order: no event is opened.
   */
  classifiedHeaders(subjectId: string, limit: number): ReadonlyArray<Pick<JournalEvent, 'seq' | 'at_ms' | 'kind'>> {
    this.requireCurrent();
    return this.store.readClassifiedHeaders(subjectId, Math.min(Math.max(1, limit), eventsPageMax));
  }

  /**
   * Whether some of the events `subjectEvents(subjectId, limit)` reads were sealed by a run that never had a key: no
   * unlock opens them (AuditWriter.keyLost). Read from the plaintext run column; nothing is opened.
   */
  subjectSealedForGood(subjectId: string, limit = eventsPageMax): boolean {
    this.requireCurrent();
    return this.store.readSubjectRuns(subjectId, Math.min(limit, eventsPageMax)).some((run) => this.audit.keyLost(run));
  }

  /** Events of one action (or session) in append order, bounded. */
  subjectEvents(subjectId: string, limit = eventsPageMax): JournalEvent[] {
    this.requireCurrent();
    return this.store
      .readSubjectEvents(subjectId, Math.min(limit, eventsPageMax))
      .map((row) => this.audit.openRow(row));
  }

  /**
   * The journal's key for the other stores of its file (ResultStore seals results at rest with it):
   * rows sealed under this run's key, opened under the key of the run that sealed them.
   */
  rowCipher(): RowCipher {
    return {
      seal: (ad, plaintext) => this.audit.sealRow(ad, plaintext),
      open: (row, ad) => {
        this.requireReadable();
        return this.audit.openSealedRow(row, ad);
      },
    };
  }

  /** The integrity anchor's view of this journal (broker/host/integrity-anchor.ts): read at start, before serving. */
  anchorFacts(headSeq: number): AnchorFacts {
    this.requireReadable();
    return new AnchorStore(this.db).facts(headSeq);
  }

  /** The anchor's light view (key ring, recorded counter) for each checkpoint and report: no scan of the log. */
  anchorState(): Pick<AnchorFacts, 'sign_public' | 'box_public' | 'recorded'> {
    this.requireReadable();
    return new AnchorStore(this.db).state();
  }

  private checkpointSink: CheckpointSink | undefined;

  /**
   * Every checkpoint signed from now on is handed to `sink.signed` inside its transaction, signing key in memory; the
   * sink writes its anchor file later (anchor-store.ts CheckpointSink), and close awaits `sink.settled`. Undefined
   * removes the sink.
   */
  onCheckpoint(sink: CheckpointSink | undefined): void {
    this.checkpointSink = sink;
    this.audit.onCheckpoint(sink === undefined ? undefined : (head: SignedHead) => sink.signed(head));
  }

  /** The journal's record of an anchor file now on disk, in its own write; false when the journal is not open. */
  recordAnchor(record: AnchorRecord): boolean {
    let recorded = false;
    this.auditWrite(() => {
      this.writeOp({ kind: 'anchorRecorded', record });
      recorded = true;
    });
    return recorded && this.writable();
  }

  /**
   * Writes beside the journal's own tables (an SSH recording's rows, a kept request: beside-rows.ts) on the writer
   * thread while it runs, so that they never wait for its write lock in SQLite's busy handler on the loop: one
   * transaction, after every batch and operation posted before it, and every batch posted after it follows it (none
   * commits inline meanwhile). Resolves with each operation's answer once committed. A failure rolls back only these
   * operations and rejects with what they met, the journal staying open: these rows are not the journal's, and on the
   * store's own connection the same refusal refuses only that write (a recording start the file refuses is the
   * command's RECORDING_UNAVAILABLE either way, whatever the load). A write that fails the file itself (a full disk, an
   * I/O error) fails the next batch, which fails the journal closed. Undefined when no writer thread runs (inline,
   * starting, or ended when idle) or the journal is no longer open (failed, closing: no batch holds the lock any more):
   * the caller writes on its own connection, as without a thread (a recording is still sealed after a failed
   * DISPATCH_STARTED).
   */
  writeBeside(ops: readonly BesideOp[]): Promise<BesideResult[]> | undefined {
    const thread = this.thread;
    if (thread === undefined || this.state !== 'open') return undefined;
    this.besideInFlight += 1;
    this.threadUsedAtMs = performance.now();
    return new Promise((resolve, reject) => {
      try {
        thread.write(ops, (error, results) => {
          this.besideInFlight -= 1;
          if (error !== undefined) {
            reject(error);
            return;
          }
          resolve(results.map((result) => result ?? 0));
        });
      } catch (error) {
        // Ops that could not cross (never posted): nothing of them is in flight.
        this.besideInFlight -= 1;
        reject(error instanceof Error ? error : new Error(String(error)));
      }
    });
  }

  /** Open, or closing: audit writes (an anchor's record) still land; appends are refused from `closing` on. */
  private writable(): boolean {
    return this.state === 'open' || this.state === 'closing';
  }

  /**
   * Resolves after a WAL sync that began after this call: every commit so far is on disk, also those that appended no
   * event (a checkpoint, an anchor's record), which durable() does not wait for.
   */
  synced(): Promise<void> {
    if (this.state === 'failed') return Promise.reject(this.unavailable());
    return this.walSync.whenSynced();
  }

  /** Whether checkpointNow can sign: the unlocked vault gave the audit signing key. */
  canSignCheckpoint(): boolean {
    return this.state === 'open' && this.audit.canSign();
  }

  /** Signs a checkpoint over the head now (a person re-adopted the journal); false without the unlocked vault. */
  checkpointNow(reason: 'readopt'): boolean {
    let signed = false;
    this.auditWrite(() => {
      signed = this.audit.checkpointIfDue(reason);
    });
    return signed;
  }

  stats(): JournalStats {
    return {
      state: this.state,
      events: this.eventCount,
      last_seq: this.lastSeq,
      schema_version: this.schemaVersion,
      recovered_at_open: this.recoveredAtOpen,
      commits: this.commits,
      // Posted to the writer thread and not yet committed are pending too.
      pending_events: this.pendingEvents + this.inFlight.reduce((sum, batch) => sum + batch.events, 0),
      wal_checkpoints: this.checkpointer?.checkpoints ?? 0,
      writer_thread: this.writerThreadStats(),
    };
  }

  private threadStartFailureReport(): WriterThreadStartFailure {
    return { ...startFailureOf(this.threadStartFailure), at_ms: this.threadStartFailedAtMs };
  }

  private writerThreadStats(): WriterThreadStats {
    if (this.threadStartFailure !== undefined)
      return { state: 'failed_to_start', error: this.threadStartFailureReport() };
    if (this.thread !== undefined) return { state: 'running' };
    return { state: this.threadOpening === undefined ? 'inline' : 'starting' };
  }

  /** Actions by current (phase, outcome, code), from the current-state table (the metrics view). */
  outcomeCounts(): OutcomeCountRow[] {
    this.requireCurrent();
    return this.store.outcomeCounts();
  }

  /** Action totals from the current-state table (for status views). */
  actionCounts(): ActionCounts {
    this.requireCurrent();
    return this.store.actionCounts();
  }

  /** The durability settings as the connection reports them now. */
  durability(): DurabilityReadBack {
    this.requireReadable();
    return readDurability(this.db);
  }

  /**
   * Commits what is queued (unless failed), signs a shutdown checkpoint if it can, then closes. From its first await on
   * the journal is `closing`: a new append is refused JOURNAL_UNAVAILABLE as after close (nothing can follow the run's
   * end), while everything accepted before was committed and answered on this turn. Called again, it answers when the
   * first call has closed.
   */
  close(): Promise<void> {
    // Its first flush and the shutdown checkpoint commit: not inside a read (refusedInsideRead). Refused before it
    // starts, so a close after the read still closes.
    const misuse = this.closeDone === undefined ? this.refusedInsideRead('close()') : undefined;
    if (misuse !== undefined) return Promise.reject(misuse);
    this.closeDone ??= this.closeNow();
    return this.closeDone;
  }

  private async closeNow(): Promise<void> {
    if (this.state === 'open') this.flushQueued();
    if (this.state === 'open') this.auditWrite(() => this.audit.closing('closed'));
    if (this.state === 'open') this.state = 'closing';
    // The anchors of the last checkpoints (this shutdown's, a lock's) land and are recorded while the connection is open.
    if (this.checkpointSink !== undefined) await this.checkpointSink.settled();
    for (const stop of this.unsubscribe.splice(0)) stop();
    // Their connections close first, so the journal's is the last one and SQLite checkpoints and removes the WAL there.
    if (this.threadIdleTimer !== undefined) clearTimeout(this.threadIdleTimer);
    await this.threadOpening;
    await this.thread?.close();
    await this.checkpointer?.close();
    this.walSync.close();
    if (this.state !== 'closed') {
      this.rejectQueued(this.unavailable());
      this.db.close();
      this.state = 'closed';
    }
    // Whoever still waits for units (durable(), readCurrent) hears the close instead of waiting for ever. Defensive:
    // the first flush settled every unit (or failed the journal, which answered the waiters), and none is queued after
    // it, so none waits here today. It stays because rejectQueued settles units without answering their waiters: were
    // that flush ever skipped (it returns while a transaction is open; a close inside a readCurrent read, the one way
    // there, is refused), they would otherwise wait for ever.
    for (const waiter of this.settledWaiters.splice(0)) waiter.reject(this.unavailable());
  }

  private enqueue(
    input: readonly NewEvent[],
    subject: Subject,
    rows?: UnitRows,
    later = false,
    withHeld = false,
  ): Promise<AppendResult<AnyAppended[]>> {
    if (this.state !== 'open') return Promise.reject(this.unavailable());
    let events: NewEvent[];
    try {
      if (input.length > this.batchEventsMax) {
        throw new CodedError('INVALID_ARGUMENT', `a batch holds at most ${this.batchEventsMax} events`, {
          field: 'events',
        });
      }
      events = input.map((event) => this.eventChecker.check(event));
      if (events.some((event) => !event.action_id.startsWith(subjectPrefixes[subject]))) {
        throw new CodedError('INVALID_ARGUMENT', wrongPath[subject], { field: 'kind' });
      }
    } catch (error) {
      return Promise.reject(error);
    }
    if (this.pendingEvents + events.length > this.pendingEventsMax) {
      return Promise.reject(
        new CodedError('JOURNAL_UNAVAILABLE', `the append queue is full (${this.pendingEventsMax} events waiting)`),
      );
    }
    const waits = events.some((event) => eventWaitsForDisk[event.kind]);
    const after = withHeld ? this.heldOf(events) : [];
    return new Promise<AppendResult<AnyAppended[]>>((resolve, reject) => {
      this.queue.push({
        events,
        waits,
        later,
        resolve,
        reject,
        ...(rows === undefined ? {} : { rows }),
        ...(after.length === 0 ? {} : { after }),
      });
      this.pendingEvents += events.length;
      this.unitsQueued += 1;
      // A flush already scheduled takes it along; else it waits for one, or for the timer.
      if (!later) this.scheduleFlush();
      else if (!this.flushScheduled) this.scheduleLaterFlush();
    });
  }

  /** The appendLater units of these events' action still queued (AppendOptions.withHeld). */
  private heldOf(events: readonly NewEvent[]): Unit[] {
    const actionId = events[0]?.action_id;
    return this.queue.filter((unit) => unit.later && unit.events.every((event) => event.action_id === actionId));
  }

  /**
   * setImmediate, not a microtask: it runs after the callers woken by the previous commit (their
   * continuations are microtasks) and after pending I/O callbacks, so they all join this batch.
   */
  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => this.runScheduledFlush());
  }

  /** The scheduled flush: one transaction, then whatever is left scheduled again (or left for the later timer). */
  private runScheduledFlush(): void {
    if (this.checkpointer?.holdsCommits === true) {
      // A catch-up checkpoint copies the last frames so the next commit restarts the WAL: the batch waits for it.
      void this.checkpointer.whenCommitsMayResume().then(() => {
        this.flushScheduled = false;
        this.scheduleFlush();
      });
      return;
    }
    this.flushScheduled = false;
    // With a writer thread, the ack of a batch in flight flushes what queued meanwhile (postUnits).
    if (this.inFlight.length >= writerBatchesInFlightMax) return;
    if (!this.flushOnce(this.lockWaitDue())) {
      this.retryForLock();
      return;
    }
    // What the timer was armed for rode in this commit: a timer left armed would split a later batch in two.
    if (this.queue.length === 0) this.clearLaterTimer();
    if (this.queue.length === 0 || this.state !== 'open') return;
    if (this.queue.every((unit) => unit.later)) this.scheduleLaterFlush();
    else this.scheduleFlush();
  }

  /**
   * Another connection holds the write lock (the checkpointer's reset write, a CLI writing beside the daemon): the batch
   * stays queued and the flush tries again in a millisecond, with the loop free meanwhile, instead of SQLite's busy
   * handler sleeping on the loop. Once busyTimeoutMs has passed the next try waits on the lock as before, and a lock
   * still held then fails the journal closed.
   */
  private retryForLock(): void {
    this.lockBusySinceMs ??= performance.now();
    this.flushScheduled = true;
    setTimeout(() => this.runScheduledFlush(), 1);
  }

  private lockWaitDue(): boolean {
    return this.lockBusySinceMs !== undefined && performance.now() - this.lockBusySinceMs >= this.busyTimeoutMs;
  }

  /** Units queued by appendLater alone: committed when something else flushes, or after laterFlushMs. */
  private scheduleLaterFlush(): void {
    if (this.laterTimer !== undefined) return;
    this.laterTimer = setTimeout(() => {
      this.laterTimer = undefined;
      // A flush already due this turn takes them along (and arms the timer again for what it leaves).
      if (!this.flushScheduled) this.scheduleFlush();
    }, this.laterFlushMs);
  }

  /** Commits everything queued now, on this turn (a read that must see the whole log, durable(), close). */
  private flushQueued(): void {
    if (this.db.inTransaction) return;
    if (this.thread !== undefined) {
      // Waits for the writer on this turn (as a commit on the loop would take it): each batch's ack settles on the way.
      try {
        this.thread.drain();
        while (this.queue.length > 0 && this.state === 'open') {
          this.flushOnce(true);
          this.thread.drain();
        }
      } catch (cause) {
        this.fail(cause, []);
      }
    } else {
      while (this.queue.length > 0 && this.state === 'open') this.flushOnce(true);
    }
    if (this.queue.length === 0) this.clearLaterTimer();
  }

  private clearLaterTimer(): void {
    if (this.laterTimer === undefined) return;
    clearTimeout(this.laterTimer);
    this.laterTimer = undefined;
  }

  /**
   * One transaction: the queued units that fit in batchEventsMax (one unit without group commit). Without
   * `waitForLock`, a write lock another connection holds leaves them queued, in order, and answers false.
   */
  private flushOnce(waitForLock: boolean): boolean {
    if (this.state !== 'open' || this.queue.length === 0 || this.inFlight.length >= writerBatchesInFlightMax)
      return true;
    let taken = 0;
    let events = 0;
    for (const unit of this.queue) {
      if (taken > 0 && (!this.groupCommit || events + unit.events.length > this.batchEventsMax)) break;
      taken += 1;
      events += unit.events.length;
    }
    // With batches in flight, the loop may not write (the thread holds the tree's head): this one follows them. With a
    // write beside the journal in flight it follows that too (a settlement never commits before its recording's seal).
    const wantsThread =
      this.inFlight.length > 0 ||
      this.besideInFlight > 0 ||
      (this.threadMode !== false && events >= this.threadBatchEventsMin);
    const thread = wantsThread ? this.thread : undefined;
    // A large batch while no thread runs: one starts, and this batch commits inline meanwhile.
    if (wantsThread && thread === undefined) void this.openWriterThread();
    if (!waitForLock && thread === undefined) {
      let begun: boolean;
      try {
        begun = this.beginWithoutWaiting();
      } catch (cause) {
        this.fail(cause, []);
        return true;
      }
      if (!begun) return false;
    }
    this.lockBusySinceMs = undefined;
    const units = this.queue.splice(0, taken);
    this.pendingEvents -= events;
    if (thread !== undefined) {
      this.postUnits(thread, units, events);
      return true;
    }
    if (this.threadWroteLast) {
      // The loop's sealer extends the head the thread's last ack gave (the same run, the same key).
      this.writer.abandoned(this.audit.committedHead());
      this.threadWroteLast = false;
    }
    this.loopWroteLast = true;
    this.commitUnits(units, !waitForLock);
    this.unitsDone(units.length);
    return true;
  }

  /**
   * With a writer thread: every unit planned on the loop, under no write lock (nothing else writes the journal's
   * tables) and in one read transaction (planInSnapshot), over the batches still in flight (their overlays, where their events end); the batch posted, and its
   * units settled when its ack is heard, in order.
   */
  private postUnits(thread: WriterThread, units: readonly Unit[], events: number): void {
    let planned: Planned;
    try {
      planned = this.planInSnapshot(units);
    } catch (cause) {
      this.fail(cause, units);
      this.unitsDone(units.length);
      return;
    }
    const batch = planned.batch;
    const tail = this.inFlight.at(-1);
    if (batch === undefined) {
      // Refusals only: planned over what is in flight, they answer once that has committed.
      if (tail !== undefined) tail.refusalsAfter.push(planned);
      else {
        this.settleUnits(planned, undefined);
        this.unitsDone(units.length);
      }
      return;
    }
    const posted: InFlightBatch = {
      overlay: planned.overlay,
      events,
      lastSeq: planned.lastSeq,
      lastTicket: planned.lastTicket,
      results: planned.results ?? tail?.results ?? newPlannedResults(),
      refusalsAfter: [],
    };
    this.inFlight.push(posted);
    this.threadUsedAtMs = performance.now();
    // The thread seals on from its own last batch, unless the loop committed since: then from the head it left.
    const base = this.loopWroteLast ? this.audit.committedHead() : undefined;
    this.loopWroteLast = false;
    thread.commit(batch, base, (error, ack) => {
      this.inFlight.shift();
      forgetPlannedResults(posted.results, batch.rows);
      if (error === undefined) this.threadWroteLast = true;
      if (error !== undefined) this.fail(error, units);
      // Closing: a batch accepted before close() is answered as committed (close drains the thread first, so none is
      // normally still in flight then).
      else if (!this.writable()) for (const unit of units) unit.reject(this.unavailable());
      else this.settleUnits(planned, ack);
      this.unitsDone(units.length);
      for (const after of posted.refusalsAfter) {
        if (this.writable()) this.settleUnits(after, undefined);
        else for (const { unit } of after.refused) unit.reject(this.unavailable());
        this.unitsDone(after.refused.length);
      }
      this.flushWhatQueued();
    });
  }

  /**
   * planUnits for the writer thread, its reads (where the log ends, each action's state and timeline, a result's unique
   * keys) in one deferred read transaction on the loop's connection: one WAL snapshot for the plan, where each read in
   * autocommit paid for a read transaction of its own (issue #18). One snapshot for the whole plan is as correct as one
   * per read: what the loop knows of the batches it posted and has not heard acknowledged comes from memory (their
   * overlays, their planned results, where their log ends), never from these reads; a batch's ack is sent after its
   * COMMIT, so the snapshot, fixed by the plan's first read, holds every batch the loop has heard acknowledged (and the
   * loop's own inline commits, all made before), which is all that planning reads the file for. A batch the thread
   * commits while the loop plans may be in the snapshot or not, as it might have been in any one read before.
   */
  private planInSnapshot(units: readonly Unit[]): Planned {
    // Inside a transaction already (not on this path: flushQueued does not flush inside a read), that one is the snapshot.
    const begun = !this.db.inTransaction;
    if (begun) this.planSnapshot.begin.run();
    try {
      return this.planUnits(units, true);
    } finally {
      // Read only: COMMIT only ends it. Also after a failed plan (fail() would roll back, but the plan leaves the
      // connection as it found it, whoever catches); SQLite may have ended it itself on some errors.
      if (begun && this.db.inTransaction) this.planSnapshot.commit.run();
    }
  }

  /** After a batch's ack: what queued while it was in flight goes next (or waits for the later timer). */
  private flushWhatQueued(): void {
    if (this.queue.length === 0) {
      this.clearLaterTimer();
      return;
    }
    if (this.state !== 'open') return;
    // Held observations wait for the later timer, unless durable() waits on them.
    if (this.queue.every((unit) => unit.later) && this.settledWaiters.length === 0) this.scheduleLaterFlush();
    else this.scheduleFlush();
  }

  /** Units left the queue for good (settled, refused, rejected): durable()'s waiters up to them are answered. */
  private unitsDone(count: number): void {
    this.unitsSettled += count;
    if (this.settledWaiters.length === 0) return;
    const due = this.settledWaiters.filter((waiter) => waiter.through <= this.unitsSettled);
    this.settledWaiters = this.settledWaiters.filter((waiter) => waiter.through > this.unitsSettled);
    for (const waiter of due) waiter.resolve();
  }

  /** Resolves once the first `through` units ever queued have settled; a flush takes the held ones along now. */
  private settledThrough(through: number): Promise<void> {
    if (this.unitsSettled >= through) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.settledWaiters.push({ through, resolve, reject });
      this.scheduleFlush();
    });
  }

  /** BEGIN IMMEDIATE with SQLite's busy handler off: false when another connection holds the write lock. */
  private beginWithoutWaiting(): boolean {
    this.busyHandler.off.get();
    try {
      this.db.exec('BEGIN IMMEDIATE');
      return true;
    } catch (error) {
      if (String((error as { code?: unknown }).code).startsWith('SQLITE_BUSY')) return false;
      throw error;
    } finally {
      this.busyHandler.on.get();
    }
  }

  /**
   * One transaction: every unit planned (under the write lock), then what was accepted written by the JournalWriter as
   * one WriteBatch; each unit settles only after COMMIT (or its sync).
   */
  private commitUnits(units: readonly Unit[], begun: boolean): void {
    let planned: Planned;
    let ack: WriteAck | undefined;
    try {
      if (!begun) this.db.exec('BEGIN IMMEDIATE');
      planned = this.planUnits(units, false);
      if (planned.batch !== undefined) ack = this.writer.commit(planned.batch);
      this.db.exec(ack !== undefined ? 'COMMIT' : 'ROLLBACK');
    } catch (cause) {
      this.fail(cause, units);
      return;
    }
    this.settleUnits(planned, ack);
  }

  /**
   * Inside the transaction, before anything is written: each unit planned over the ones before it (CommitOverlay), a
   * result's unique keys checked, and the accepted units' writes gathered into one WriteBatch (none when nothing was
   * accepted). `forThread`: the batch goes to the writer thread (CommitOverlay.rowsToWrite sends it less).
   */
  private planUnits(units: readonly Unit[], forThread: boolean): Planned {
    // Inline, read under the write lock: the database, not memory, says where the log ends. With batches in flight on
    // the writer thread, the log ends where the last of them does, and this batch is planned over their overlays.
    const tail = this.inFlight.at(-1);
    const lastSeq = tail?.lastSeq ?? this.store.lastSeq();
    const ticketBefore = tail?.lastTicket ?? this.store.lastTicket();
    const plannedResults: PlannedResults | undefined = tail?.results;
    const overlay = new CommitOverlay(
      this.store,
      this.stateCache,
      this.sessionsForCommit,
      this.keyBook,
      // A held action's lane entry is its refuted row: folded from its sealed events, or refused while they do not open.
      (id) => (this.heldAtOpen.has(id) ? undefined : (this.heldClosing.get(id) ?? this.laneTickets?.stateOf(id))),
      (id) => this.sealedStateOrHeld(id),
      this.inFlight.map((batch) => batch.overlay),
    );
    try {
      return this.planOver(units, overlay, lastSeq, ticketBefore, plannedResults, forThread);
    } finally {
      // Planned: from now on only its own maps are read, so no chain of overlays stays reachable under load.
      overlay.planned();
    }
  }

  private planOver(
    units: readonly Unit[],
    overlay: CommitOverlay,
    lastSeqBefore: number,
    ticketBefore: number,
    resultsBefore: PlannedResults | undefined,
    forThread: boolean,
  ): Planned {
    const accepted: Planned['accepted'] = [];
    const refused: Planned['refused'] = [];
    let lastSeq = lastSeqBefore;
    let lastTicket = ticketBefore;
    let plannedResults = resultsBefore;
    const rows: ResultRows[] = [];
    const events: JournalEvent[] = [];
    const refuse = (unit: Unit, refusal: UnitRefusal): void => {
      unit.refusal = refusal;
      refused.push({ unit, refusal });
    };
    for (const unit of units) {
      const heldRefusal = unit.after?.find((held) => held.refusal !== undefined)?.refusal;
      if (heldRefusal !== undefined) {
        refuse(unit, heldRefusal);
        continue;
      }
      let result: PlanResult;
      try {
        result = planUnit(unit.events, {
          nextSeq: lastSeq + 1,
          lastTicket,
          atMs: this.clock.nowMs(),
          ...overlay.reads,
        });
      } catch (error) {
        if (!isUnitFault(error)) throw error;
        refuse(unit, { error });
        continue;
      }
      if (!result.ok) {
        refuse(unit, result);
        continue;
      }
      const plan = result.plan;
      // A result id (or action attempt) the table or this commit already holds refuses this unit only, as its INSERT
      // would have: checked while planning, so that writing never meets the constraint (a clash there is fatal).
      if (unit.rows !== undefined) {
        const clash = resultRowsClash(this.db, unit.rows, (plannedResults ??= newPlannedResults()));
        if (clash !== undefined) {
          refuse(unit, { error: clash });
          continue;
        }
        rows.push(unit.rows);
      }
      for (const { event } of plan.appended) events.push(event);
      overlay.absorb(plan);
      lastSeq += plan.appended.length;
      lastTicket = plan.lastTicket;
      accepted.push({ unit, appended: plan.appended });
    }
    const end = { lastSeq, lastTicket, results: plannedResults };
    if (accepted.length === 0) return { accepted, refused, overlay, batch: undefined, ...end };
    const batch: WriteBatch = {
      rows,
      events,
      ...overlay.rowsToWrite(forThread),
      lastTicket: lastTicket === ticketBefore ? null : lastTicket,
    };
    return { accepted, refused, overlay, batch, ...end };
  }

  /** After a COMMIT: the checkpointer counts it (and starts once the run has committed enough to need one). */
  private checkpointCommitted(): void {
    if (this.checkpointer === undefined && this.commits >= checkpointerStartCommits) {
      try {
        this.checkpointer = WalCheckpointer.start(this.db.name, {
          platform: this.platform,
          onFailure: (cause) => this.fail(cause, []),
          resetWrite: walResetWrite,
        });
      } catch (cause) {
        // Without checkpoints the log grows until the disk is full: failed closed now, with the reason.
        this.fail(cause, []);
        return;
      }
    }
    this.checkpointer?.committed();
  }

  /**
   * After COMMIT: refusals answer at once, an accepted unit once its commit is durable (or at once, for events that
   * ride to disk with the next sync: event-durability.ts), then the change feed and a due checkpoint.
   */
  private settleUnits({ accepted, refused, overlay }: Planned, ack: WriteAck | undefined): void {
    const lastSeq = ack?.lastSeq ?? this.lastSeq;
    if (ack !== undefined) {
      // First: the committed tree head is what the file holds from COMMIT on, whatever the bookkeeping below does.
      this.audit.commitSucceeded(ack);
      this.stateCache.committed(overlay.written());
      for (const state of overlay.writtenStates()) {
        this.laneTickets?.moved(state);
        this.checkedRows.delete(state.action_id);
      }
      this.sessionBook.committed(overlay.writtenSessions());
      // Folded over a row no fold of the events had confirmed (even if one did meanwhile): confirmed again at the next ask.
      for (const id of overlay.sessionsFoldedOverRows()) this.sessionBook.unconfirm(id);
      this.keyBook.committed(overlay.writtenKeys());
      this.commits += 1;
      this.eventCount += ack.appended;
      this.lastSeq = lastSeq;
      this.walSync.committed(lastSeq);
      this.checkpointCommitted();
    } else {
      this.writer.abandoned(this.audit.committedHead());
    }
    for (const { unit, refusal } of refused) {
      if ('error' in refusal) unit.reject(refusal.error);
      else unit.resolve(refusal);
    }
    for (const { unit, appended } of accepted) {
      const result: AppendResult<AnyAppended[]> = { ok: true, appended: [...appended] };
      if (!unit.waits) unit.resolve(result);
      else
        this.walSync.whenDurable(lastSeq).then(
          () => unit.resolve(result),
          (error: unknown) => unit.reject(error),
        );
    }
    if (accepted.length > 0)
      this.tellCommit({
        last_seq: lastSeq,
        kinds: accepted.flatMap(({ appended }) => appended.map(({ event }) => event.kind)),
      });
    // After the release: a signature (~45 µs) and its fsync never delay a dispatcher.
    if (accepted.length > 0 && this.audit.intervalCheckpointDue())
      this.auditWrite(() => this.audit.checkpointIfDue('interval'), 'after what is in flight');
  }

  private tellCommit(commit: JournalCommit): void {
    for (const listener of this.commitListeners) {
      try {
        listener(commit);
      } catch {
        // See onCommit: a listener's failure is its own.
      }
    }
  }

  private fail(cause: unknown, batch: readonly Unit[]): void {
    if (this.db.inTransaction) {
      try {
        this.db.exec('ROLLBACK');
      } catch {
        // SQLite may already have rolled back (SQLITE_FULL, SQLITE_IOERR); failed is failed either way.
      }
    }
    // A failed sync can arrive after close (its descriptor outlives the connection until it returns): nothing to fail.
    if (this.state === 'closed') return;
    if (this.state === 'open' || this.state === 'closing') {
      this.state = 'failed';
      this.failure = cause;
      this.walSync.abandon(cause);
      this.thread?.abandon();
      this.writer.abandoned(this.audit.committedHead());
      this.audit.recordFailure(
        isCodedError(cause) ? cause.code : String((cause as { code?: unknown } | undefined)?.code ?? 'INTERNAL'),
      );
    }
    const error = this.unavailable();
    for (const unit of batch) unit.reject(error);
    this.rejectQueued(error);
    for (const waiter of this.settledWaiters.splice(0)) waiter.reject(error);
  }

  private rejectQueued(error: unknown): void {
    this.clearLaterTimer();
    const queued = this.queue;
    this.queue = [];
    this.pendingEvents = 0;
    this.unitsSettled += queued.length;
    for (const unit of queued) unit.reject(error);
  }

  private unavailable(): CodedError {
    if (this.state === 'failed') {
      return new CodedError('JOURNAL_UNAVAILABLE', 'the journal failed to make a record durable; dispatching stopped', {
        cause: this.failure,
      });
    }
    return new CodedError('JOURNAL_UNAVAILABLE', `the journal is ${this.state}`);
  }

  /**
   * The vault's lock state drives signing: unlocked → unwrap (or create) the audit secrets and sign
   * what fell due; locked → sign a last checkpoint, then forget them.
   */
  attachVault(vault: AuditVault): void {
    this.unsubscribe.push(
      vault.onUnlock(() => {
        this.auditWrite(() => this.audit.unlocked(vault));
        // Earlier-run sessions whose events did not open are confirmed at their next ask.
        this.sessionsLockedOut.clear();
        // What a read answered while the events were sealed is folded from them at the next read.
        this.checkedRows.clear();
        this.recoverHeld();
        this.tellHeldRecovered(this.refoldEarlierLaned());
      }),
      vault.onLock(() => {
        this.checkedRows.clear();
        this.auditWrite(() => this.audit.locked());
      }),
    );
    if (vault.state() === 'unlocked') {
      this.auditWrite(() => this.audit.unlocked(vault));
      this.recoverHeld();
      this.tellHeldRecovered(this.refoldEarlierLaned());
    }
  }

  /**
   * An audit write outside a commit (checkpoint, keys, the run's sealed key, run end, an anchor's record), in its own
   * transaction: the rows go to the JournalWriter as data (WriterOp). Its failure is fatal too.
   */
  private auditWrite(write: () => void, when: 'now' | 'after what is in flight' = 'now'): void {
    // Closing: the shutdown checkpoint's anchor is still recorded (close awaits it).
    if (!this.writable()) return;
    if (this.thread !== undefined) {
      this.auditWriteOnThread(this.thread, write, when);
      return;
    }
    try {
      this.db.exec('BEGIN IMMEDIATE');
      write();
      this.db.exec('COMMIT');
    } catch (cause) {
      this.fail(cause, []);
    }
  }

  /**
   * auditWrite with a writer thread: the batch in flight is answered first (a checkpoint signs the committed head), then
   * the operations `write` makes go to the writer as one transaction, and this returns once it committed.
   */
  private auditWriteOnThread(thread: WriterThread, write: () => void, when: 'now' | 'after what is in flight'): void {
    try {
      // 'now': the batches in flight first (a lock's or unlock's checkpoint signs the head they leave, and returns
      // written). An interval checkpoint instead signs the head the last ack left, and its row follows the batches in
      // flight on the thread without the loop waiting for them: a checkpoint may cover fewer leaves than the tree holds.
      if (when === 'now') thread.drain();
      if (!this.writable()) return;
      const outer = this.opBuffer;
      const ops: WriterOp[] = [];
      this.opBuffer = ops;
      try {
        write();
      } finally {
        this.opBuffer = outer;
      }
      if (ops.length === 0) return;
      if (when === 'now') thread.writeSync(ops);
      else thread.write(ops, (error) => error !== undefined && this.fail(error, []));
    } catch (cause) {
      this.fail(cause, []);
    }
  }

  /**
   * The AuditWriter's rows, and an anchor's record: inline, written in the caller's transaction; with a writer thread,
   * gathered by auditWrite, or (the run's failed end, written outside any auditWrite) sent on their own.
   */
  private writeOp(op: WriterOp): void {
    if (this.thread === undefined) this.writer.write(op);
    // The very first unlock's key pairs are written at once (with what was gathered before them): the checkpoint the
    // unlock signs next hands its anchor a key ring read back from the file (Journal.anchorState).
    else if (this.opBuffer !== undefined && op.kind !== 'auditKeys') this.opBuffer.push(op);
    else this.thread.writeSync([...(this.opBuffer?.splice(0) ?? []), op]);
  }

  /**
   * Whether recovery may take one action's row for what it says. At open no earlier run's sealed event can be opened
   * (the vault is attached after recovery), so recovery reads the `actions` row: plaintext that any process of the user
   * can rewrite while no broker runs (THREAT-MODEL), for instance back to a copy taken before its DISPATCH_STARTED, or
   * to one that reads settled. So what recovery, lanes and reads act on (its dispatch, an outcome recorded since, its
   * admission's ticket and lane, an abandonment, its last event) is checked against the log's plaintext headers, each
   * bound into its event's seal and the audit tree's leaf, so an edited header fails `audit verify` (recovery.ts
   * rowRefutation). A row they refute is held (heldAtOpen; its reads and lane from refutedRowState: what the headers
   * establish) and onActionRowRefuted is told. Four reads of its headers per row recovery reads: a handful a start (the
   * actions in flight, the unresolved unknowns, the lanes' open tickets).
   */
  private rowTrustedForRecovery(id: string, state: ActionState | undefined, facts: LogFacts): boolean {
    const holds = rowRefutation(state, facts);
    if (holds === undefined) return true;
    this.heldAtOpen.set(id, holds);
    if (state !== undefined) {
      const held = refutedRowState(state, facts);
      this.heldStates.set(id, held);
      // Lanes loaded before recovery (they are at the first lane read) take it now; later loads, in lanes().
      this.laneTickets?.drop(id);
      this.laneTickets?.moved(held);
    }
    this.tellActionRowRefuted({ action_id: id, row_stage: state?.stage ?? null, log_holds: holds });
    return false;
  }

  /**
   * Recovery of the actions whose rows the log refuted at open (heldAtOpen), once the vault unlocks: each is folded from
   * its own sealed events, its lane ticket moved from wherever the row listed it to that fold, and what classifyRestart
   * says of the fold appended through the normal commit path — unknown after a dispatch, nothing where the log had
   * already settled it. One whose events still do not open (the vault locked again) stays held. One whose events will
   * never fold (a header row another process inserted, a run whose key is lost for good) is reported and closes as a
   * quarantined journal's open action does (unknown, reconcile, over the row: nothing proves it either way), so a
   * person can attest or abandon it and its lane is never wedged (THREAT-MODEL 4). onHeldRecovered is told the ids
   * once their lanes may move.
   */
  private recoverHeld(): void {
    if ((this.heldAtOpen.size === 0 && this.deferredAtOpen.size === 0) || this.state !== 'open') return;
    const moved: string[] = [];
    const appends: Array<Promise<string>> = [];
    this.recordDeferred(moved, appends);
    for (const [id, holds] of [...this.heldAtOpen]) {
      const fold = this.heldFold(id);
      if (fold === 'unreadable') continue;
      // What its unfoldable events close over: what the log's headers establish over its row (refutedRowState), never
      // the row's own lane, ticket, abandonment or last event (a row held has one; a row deleted outright does not).
      const heldState = this.heldStates.get(id);
      this.heldAtOpen.delete(id);
      this.heldStates.delete(id);
      // A rewritten row may list the ticket in another lane, or under another number: its entry goes first.
      this.laneTickets?.drop(id);
      let event: NewEvent | undefined;
      if (fold === 'unfoldable') {
        this.tellActionRowRefuted({
          action_id: id,
          row_stage: heldState?.stage ?? null,
          log_holds: holds,
          events_fold: false,
        });
        if (heldState !== undefined) this.laneTickets?.moved(heldState);
        event = heldState === undefined ? undefined : unfoldableRecoveryEvent(heldState, this.clock.nowMs());
        // The close folds over that state, laned or not (the commit path reads heldClosing first).
        if (event !== undefined && heldState !== undefined) this.heldClosing.set(id, heldState);
      } else {
        this.laneTickets?.moved(fold);
        event = recoveryEvent(fold, this.clock.nowMs(), this.recoveredJournal);
        if (event === undefined) this.heldFolds.set(id, fold);
      }
      if (event === undefined) moved.push(id);
      else
        appends.push(
          this.append(validateNewEvent(event)).then(
            () => {
              this.heldClosing.delete(id);
              return id;
            },
            (error: unknown) => {
              // Not recorded (the journal closing, or failed): held again, in the lane the headers name.
              this.heldClosing.delete(id);
              this.heldAtOpen.set(id, holds);
              if (heldState !== undefined) {
                this.heldStates.set(id, heldState);
                this.laneTickets?.drop(id);
                this.laneTickets?.moved(heldState);
              }
              throw error;
            },
          ),
        );
    }
    this.tellHeldRecovered(moved);
    for (const appended of appends)
      appended.then(
        (id) => this.tellHeldRecovered([id]),
        () => undefined,
      );
    // Chained: after a quick lock and unlock, what an earlier unlock appended is still waited for.
    this.unlockRecoveries = Promise.allSettled([this.unlockRecoveries, ...appends]);
  }

  /**
   * At an unlock: every action whose lane entry was loaded from its row at open (earlierLaned), replaced by its own
   * events' fold. The headers check only what they name (its dispatch, outcome, admission, abandonment, last event), so
   * a recorded unknown head's row rewritten while no broker ran to hold a key's expiry, another target or another retry
   * budget would otherwise be what its card shows, what a person attests, and what the journal's same-key lease fence
   * reads, for the rest of the run. Held and deferred actions are recoverHeld's (their entries are their folds from
   * there). Each is folded once a run: one whose events do not open yet waits for the next unlock; one whose events do
   * not fold (a header row inserted, a run's key lost for good) is told, and its entry keeps no unproven retry basis
   * (not idempotent, no key, no budget), since nothing proves one. The ids whose lane entry changed (the approval queue
   * re-reads their lanes).
   */
  private refoldEarlierLaned(): string[] {
    if (this.laneTickets === undefined || this.state !== 'open') return [];
    const moved: string[] = [];
    for (const id of [...this.earlierLaned]) {
      if (this.heldAtOpen.has(id) || this.deferredAtOpen.has(id)) continue;
      if (this.heldClosing.has(id)) {
        // recoverHeld's record of it is on its way, over its fold: that commit moves its lane.
        this.earlierLaned.delete(id);
        continue;
      }
      const state = this.laneTickets.stateOf(id);
      const fold = state === undefined ? undefined : this.heldFold(id);
      if (fold === 'unreadable') continue;
      this.earlierLaned.delete(id);
      if (state === undefined || fold === undefined || isDeepStrictEqual(fold, state)) continue;
      let over: ActionState;
      if (fold !== 'unfoldable') over = fold;
      else {
        this.tellActionRowRefuted({
          action_id: id,
          row_stage: state.stage,
          log_holds: 'SEALED_EVENTS',
          events_fold: false,
          laned: true,
        });
        over = withoutUnprovenRetry(state);
      }
      this.stateCache.delete(id);
      this.laneTickets.drop(id);
      this.laneTickets.moved(over);
      moved.push(id);
    }
    return moved;
  }

  /**
   * recoverHeld's part for the actions whose restart record waited for the unlock (deferredAtOpen): each folded from its
   * own events, moved into its lane as that fold (or, where the events do not fold, as recovery checked it at open), and
   * its record appended through the normal commit path. `moved` and `appends` are recoverHeld's.
   */
  private recordDeferred(moved: string[], appends: Array<Promise<string>>): void {
    for (const [id, checked] of [...this.deferredAtOpen]) {
      const fold = this.heldFold(id);
      if (fold === 'unreadable') continue;
      const found = this.deferredRecoveryEvent(id, checked, fold);
      const event = found === undefined ? undefined : validateNewEvent(found);
      this.deferredAtOpen.delete(id);
      // What it folds over from now on, in its lane and in the record's commit (its state cache entry dropped, the
      // commit reads heldClosing): its own events' fold, so the row's unproven idempotency and key expiry go with it;
      // where they do not fold, the state checked at open.
      const over = fold === 'unfoldable' ? withoutUnprovenRetry(checked) : fold;
      this.stateCache.delete(id);
      this.laneTickets?.drop(id);
      this.laneTickets?.moved(over);
      if (event === undefined) {
        moved.push(id);
        continue;
      }
      this.heldClosing.set(id, over);
      // Counted as queued (a status read right after the unlock sees it), uncounted if it is not recorded.
      this.recoveredAtOpen += 1;
      appends.push(
        this.append(event).then(
          () => {
            this.heldClosing.delete(id);
            return id;
          },
          (error: unknown) => {
            // Not recorded (the journal closing, or failed): deferred again; its lane keeps what it was moved to.
            this.heldClosing.delete(id);
            this.recoveredAtOpen -= 1;
            this.deferredAtOpen.set(id, checked);
            throw error;
          },
        ),
      );
    }
  }

  /**
   * The restart record of an action recovery deferred to the unlock (deferredAtOpen), from its own events' fold: the
   * retry classifyRestart advises from what they say of its idempotency and key, never from the row's columns (told
   * RETRY_BASIS where those the row said at open differ). Where its events do not fold (a header row inserted, a run's
   * key lost for good), nothing proves either, so it closes over the state checked at open as a held action's
   * unfoldable events do: unknown, `reconcile` (told as such, `deferred`).
   */
  private deferredRecoveryEvent(
    id: string,
    checked: ActionState,
    fold: ActionState | 'unfoldable',
  ): NewEvent | undefined {
    const nowMs = this.clock.nowMs();
    if (fold !== 'unfoldable') {
      if (checked.idempotent !== fold.idempotent || checked.key_expires_at_ms !== fold.key_expires_at_ms)
        this.tellActionRowRefuted({ action_id: id, row_stage: checked.stage, log_holds: 'RETRY_BASIS' });
      return recoveryEvent(fold, nowMs, this.recoveredJournal);
    }
    this.tellActionRowRefuted({
      action_id: id,
      row_stage: checked.stage,
      log_holds: 'SEALED_EVENTS',
      events_fold: false,
      deferred: true,
    });
    return unfoldableRecoveryEvent(withoutUnprovenRetry(checked), nowMs);
  }

  /** Settles once what the last unlock recorded for deferred and held actions committed (or failed). */
  unlockRecovered(): Promise<void> {
    return this.unlockRecoveries.then(() => undefined);
  }

  /** Whether one action's restart record waits for the unlock (deferredRecoveries). */
  isDeferred(actionId: string): boolean {
    return this.deferredAtOpen.has(actionId);
  }

  /**
   * Actions a previous run left in flight whose restart record waits for the unlock (deferredAtOpen): the retry they
   * may be advised rests on their own sealed events. They read in flight (unknown, nothing recorded) meanwhile.
   */
  deferredRecoveries(): readonly string[] {
    return [...this.deferredAtOpen.keys()];
  }

  /**
   * A held action's own events folded: `unreadable` while they cannot be opened yet (the vault locked), `unfoldable`
   * where they never will (sealed for good) or do not fold (a row that does not authenticate, a refused transition).
   */
  private heldFold(actionId: string, options: { forRead?: boolean } = {}): ActionState | 'unreadable' | 'unfoldable' {
    try {
      return project(this.allSubjectEvents(actionId)).get(actionId) ?? 'unfoldable';
    } catch (error) {
      if (options.forRead !== true)
        return error instanceof CodedError && error.code === 'AUDIT_KEY_UNAVAILABLE' && !sealedForGood(error)
          ? 'unreadable'
          : 'unfoldable';
      // A read: a run sealed for good, or more events than a fold takes, leave the row (checked) as all there is; what
      // does not authenticate or fold refutes it; anything else (the disk) is the read's failure, as a row read's was.
      if (!(error instanceof CodedError)) throw error;
      return error.code === 'AUDIT_KEY_UNAVAILABLE' || error instanceof FoldTooLongError ? 'unreadable' : 'unfoldable';
    }
  }

  private tellHeldRecovered(ids: readonly string[]): void {
    if (ids.length === 0) return;
    for (const listener of this.heldListeners) {
      try {
        listener(ids);
      } catch {
        // A listener's failure is not the journal's concern.
      }
    }
  }

  private tellActionRowRefuted(report: ActionRowRefuted): void {
    try {
      this.onActionRowRefuted?.(report);
    } catch {
      // The caller's logging is not the journal's concern.
    }
  }

  /**
   * Told with the ids of actions held at open (their rows refuted by the log) once recovered from their own sealed
   * events after an unlock: their lanes may move now (the approval queue re-reads them).
   */
  onHeldRecovered(listener: (actionIds: readonly string[]) => void): () => void {
    this.heldListeners.add(listener);
    return () => this.heldListeners.delete(listener);
  }

  /** Actions whose rows the log refuted at open, not recovered yet (their sealed events did not open). */
  heldActions(): readonly string[] {
    return [...this.heldAtOpen.keys()];
  }

  /** Whether one action is held (heldActions): what its row reads is not what the journal wrote. */
  isHeld(actionId: string): boolean {
    return this.heldAtOpen.has(actionId);
  }

  private requireReadable(): void {
    if (this.state === 'closed') throw this.unavailable();
  }

  /** A read of the log or of the tables as a whole: what appendLater holds is committed first, so it is seen. */
  private requireCurrent(): void {
    this.requireReadable();
    // Inside readCurrent's read, what it waited for is committed; flushQueued would also return (a transaction is open).
    if (this.currentReads > 0) return;
    this.flushQueued();
  }

  /**
   * Runs once at open, before any append: classifies every action a previous run left in flight
   * (recovery.ts says how) through the normal commit path, so applyEvent still guards each record. `found` is what
   * the start judged of the journal before this (JournalOpenOptions.judgeBeforeRecovery).
   */
  private recover(found: RecoveredJournal): void {
    this.recoveredJournal = found;
    const events: NewEvent[] = [];
    // What the log's headers say was in flight when the broker stopped, whatever the rows say; every row whose columns
    // read in flight (the two agree in an honest file: rowRefutation); and every row a lane will be loaded from
    // (LaneTickets takes its rows as they are), so none of them is taken unchecked either.
    const ids = new Set(this.store.unrecordedActionIds());
    for (const marks of this.store.openDispatches()) ids.add(marks.action_id);
    // What the log last left unknown and nobody abandoned (headers since schema 25): a row rewritten to read settled or
    // abandoned no longer escapes the check, nor releases the lane it heads.
    for (const id of this.store.openOutcomes()) ids.add(id);
    // (Loaded at open unless the schema predates the action list's columns: a migration test's.)
    if (this.laneTickets !== undefined) for (const state of this.store.unresolvedLaneStates()) ids.add(state.action_id);
    for (const id of ids) {
      const state = this.store.loadState(id);
      // A row the log refutes is held, not recovered from: recoverHeld folds its own events once they open.
      if (!this.rowTrustedForRecovery(id, state, this.logFacts(id))) continue;
      if (state === undefined) continue;
      // Its lane from its checked state, not from the columns the lanes were loaded by: `resolved_at_ms` alone, edited
      // to read resolved, would have left a blocked head out of its lane.
      this.laneTickets?.drop(id);
      this.laneTickets?.moved(state);
      // Idempotent, or a key's expiry: what a restart may advise rests on what no header proves, so on its own events.
      if (restartRetryRestsOnRow(state, this.clock.nowMs())) {
        this.deferredAtOpen.set(id, state);
        continue;
      }
      const event = recoveryEvent(state, this.clock.nowMs(), found);
      if (event !== undefined) events.push(validateNewEvent(event));
    }
    for (let i = 0; i < events.length; i += this.batchEventsMax) {
      const refusals: unknown[] = [];
      const units = events.slice(i, i + this.batchEventsMax).map((event): Unit => ({
        events: [event],
        // Settled at once: recovery runs before any caller exists, and syncs once at its end.
        waits: false,
        later: false,
        resolve: (result) => {
          if (result.ok) this.recoveredAtOpen += 1;
          else refusals.push(new TransitionRefused(result.refusal));
        },
        reject: (error) => refusals.push(error),
      }));
      this.commitUnits(units, false);
      if (this.state === 'failed') throw this.unavailable();
      if (refusals.length > 0) {
        throw new CodedError('INTERNAL', `recovery at open produced ${refusals.length} refused record(s)`, {
          cause: refusals[0],
        });
      }
    }
    this.walSync.syncNow();
  }
}

function journalPath(options: JournalOpenOptions): string {
  if (options.path !== undefined) return options.path;
  if (options.dataDir === undefined) throw new Error('Journal.open needs a path or a dataDir');
  // 0700: the journal holds no secrets, but it does hold who asked for what.
  mkdirSync(options.dataDir, { recursive: true, mode: 0o700 });
  const path = join(options.dataDir, journalFileName);
  // Created 0600 before SQLite opens it: SQLite gives -wal and -shm the main file's mode.
  closeSync(openSync(path, 'a', 0o600));
  return path;
}

/**
 * A fault of one unit's own events (a malformed event, an idempotency key bound to another
 * fingerprint, a transition no race explains) rejects that unit only; anything else (a SQLite
 * error, a sealing failure) is fatal for the batch. Lost races never get here: planUnit returns them.
 */
function isUnitFault(error: unknown): boolean {
  if (!isCodedError(error)) return false;
  return (
    error.code === 'IMPOSSIBLE_TRANSITION' || error.code === 'INVALID_ARGUMENT' || error.code === 'IDEMPOTENCY_MISMATCH'
  );
}

/** The durable events, or the refusal thrown with its code and message as ever (for a caller that expects no race). */
function appendedOrThrow<T>(result: AppendResult<T>): T {
  if (!result.ok) throw new TransitionRefused(result.refusal);
  return result.appended;
}

/**
 * A writer thread's start failure as status shows it: a code, and the message's first line without file paths (a
 * native module's or a bundle's path says where Postern is installed, which status does not tell), bounded.
 */
function startFailureOf(cause: unknown): { code: string; detail: string } {
  const code = (cause as { code?: unknown } | undefined)?.code;
  const message = cause instanceof Error ? cause.message : String(cause);
  const line = (message.split('\n')[0] ?? '').replace(/(^|[\s'"(=:])(?:[A-Za-z]:)?[\\/][^\s'"()]*/g, '$1<path>');
  return {
    code: typeof code === 'string' && /^[A-Z][A-Z0-9_]{0,63}$/.test(code) ? code : 'INTERNAL',
    detail: line.length > 200 ? `${line.slice(0, 199)}…` : line,
  };
}

function positive(value: number, name: string): number {
  if (!Number.isInteger(value) || value <= 0) throw new RangeError(`${name} must be a positive integer, got ${value}`);
  return value;
}

/** Actions past the state cache whose checked reads are kept (Journal.checkedRows). */
const checkedRowsKept = 512;

/** Refuted rows a read remembers having reported (Journal.checkedRow): beyond this many it reports them again. */
const refutedOnReadTold = 1_024;

/** More events for one subject than one fold takes (sealedActionEventsMax): not folded, and not a sign of tampering. */
class FoldTooLongError extends CodedError {
  constructor(subjectId: string) {
    super('INTERNAL', `${subjectId} has more than ${sealedActionEventsMax} events; not folded`);
  }
}

/** Whether a row says what its action's events fold to, in every field an outcome is told by. */
function sameOutcomeRecord(row: ActionState, folded: ActionState): boolean {
  return (
    row.dispatch_seq === folded.dispatch_seq &&
    row.outcome === folded.outcome &&
    row.recorded === folded.recorded &&
    row.code === folded.code &&
    row.effect === folded.effect &&
    row.retry === folded.retry &&
    row.abandoned === folded.abandoned &&
    row.result_id === folded.result_id &&
    row.last_seq === folded.last_seq
  );
}

/** Ended sessions the journal keeps as their events fold, for asks about sessions its book let go. */
const endedFromLogKept = 256;

/**
 * How many of an earlier run's sessions one sessions.list confirms from their sealed events (Journal
 * listCountedSessions) beyond those not ended: a few milliseconds of the loop a call (bench/sessions-confirm.ts).
 */
const sessionsConfirmedPerList = 100;

/**
 * The loop time one sessions.list or one turn of the session confirmer (confirmHeldSessions) gives to confirming
 * ended sessions, after the first: a session's fold reads all its events, up to 8,192 (one per reconnection), so a
 * count alone does not bound it. What is left is confirmed at the next list or turn.
 */
export const sessionsConfirmBudgetMsDefault = 20;

/** A session as sessions.list shows it: its record, how far the journal has checked it, and its counters. */
export interface ListedSession extends CountedSession {
  readonly record: SessionRecordCheck;
}

/** Whether a session's row says what its events say, in every field a decision or a person reads. */
function sameSessionRecord(row: SessionState, folded: SessionState): boolean {
  return (
    row.status === folded.status &&
    row.pid === folded.pid &&
    row.start_time === folded.start_time &&
    row.exe === folded.exe &&
    row.approved_by === folded.approved_by &&
    row.revoked_by === folded.revoked_by &&
    row.allowlist_withheld === folded.allowlist_withheld &&
    row.ended_at_ms === folded.ended_at_ms &&
    row.updated_at_ms === folded.updated_at_ms
  );
}
