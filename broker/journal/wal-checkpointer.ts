import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { CodedError } from '../contract/index.js';
import { sqliteNativeBinding } from '../ports/open-database.js';

/**
 * WAL frames to let accumulate before a checkpoint: SQLite's own wal_autocheckpoint default, so the WAL stays the size
 * it was when SQLite checkpointed inside COMMIT (~4 MB at 4 KiB pages), and each checkpoint copies about as much.
 * Smaller would spend two fsyncs (WAL, then database file) on a few pages, competing with the WAL's own fdatasync;
 * larger only grows the file and the copy.
 */
export const walFramesPerCheckpointDefault = 1_000;
/** Commits between the first checkpoints, before one has measured how many frames a commit writes here. */
const commitsPerCheckpointInitial = 64;
/** Whatever the estimate says: a checkpoint at least every this many commits (and at most one per commit). */
const commitsPerCheckpointMax = 10_000;
/** How long the worker's connection waits for a lock SQLite holds briefly (opening, reading the WAL index). */
export const checkpointerBusyTimeoutMs = 100;
/** The worker's page cache (KiB): a checkpoint copies frames through its own buffer, not the cache. */
const checkpointerCacheKiB = 256;
const workerLimits = { maxYoungGenerationSizeMb: 4, maxOldGenerationSizeMb: 32 };

/**
 * The worker thread, plain CommonJS evaluated from a string (the pattern of audit/verify-worker-source.ts): it loads
 * better-sqlite3 by resolved path, so it runs the same from the sources (tsx, vitest), the CLI bundle and the
 * Electron bundle. It runs PASSIVE checkpoints, which never wait for the journal's writer or its readers (a frame a
 * reader still needs is left for the next one). Its one write is the optional reset write (WalCheckpointerOptions
 * .resetWrite), run right after a checkpoint that copied every frame.
 */
const workerSource = String.raw`
'use strict';
const { parentPort, workerData } = require('node:worker_threads');
const { performance } = require('node:perf_hooks');
const Database = require(workerData.sqlitePath);
const codeOf = (error) => String(error && error.code ? error.code : 'ERROR');
const messageOf = (error) => String(error && error.message ? error.message : error);
let db;
let resetStatement;
try {
  const options = { fileMustExist: true, timeout: workerData.busyTimeoutMs };
  if (workerData.nativeBinding !== undefined) options.nativeBinding = workerData.nativeBinding;
  db = new Database(workerData.dbPath, options);
  db.pragma('journal_mode = WAL');
  // NORMAL: a checkpoint syncs the WAL before it copies a frame and the database file before the WAL may be reused.
  db.pragma('synchronous = NORMAL');
  if (workerData.darwin) db.pragma('checkpoint_fullfsync = ON');
  db.pragma('wal_autocheckpoint = 0');
  db.pragma('cache_size = ' + workerData.cacheKiB * -1);
  parentPort.postMessage({
    ready: {
      readonly: db.readonly,
      journal_mode: String(db.pragma('journal_mode', { simple: true })).toLowerCase(),
      synchronous: Number(db.pragma('synchronous', { simple: true })),
      checkpoint_fullfsync: Number(db.pragma('checkpoint_fullfsync', { simple: true })),
    },
  });
} catch (error) {
  if (db !== undefined) db.close();
  db = undefined;
  parentPort.postMessage({ openFailed: { code: codeOf(error), message: messageOf(error) } });
}

parentPort.on('message', (m) => {
  if (m.kind === 'end') {
    if (db !== undefined) db.close();
    db = undefined;
    parentPort.postMessage({ ended: true });
    parentPort.close();
    return;
  }
  try {
    if (db === undefined) throw Object.assign(new Error('the checkpointer has no connection'), { code: 'ERROR' });
    // Test seam (WalCheckpointerOptions.faultForTest): fail this checkpoint as SQLite would, with that code.
    if (m.fault !== undefined) throw Object.assign(new Error('injected checkpoint fault'), { code: m.fault });
    const started = performance.now();
    const row = db.pragma('wal_checkpoint(PASSIVE)')[0];
    let reset = false;
    if (workerData.resetWrite !== undefined && row.busy === 0 && row.log > 0 && row.checkpointed === row.log) {
      // Every frame is in the database file: this write, right away, begins the WAL again from its start, so SQLite
      // writes and syncs the new WAL header here, on this thread, and not in the journal's next COMMIT on the loop.
      resetStatement = resetStatement || db.prepare(workerData.resetWrite);
      try {
        resetStatement.run();
        reset = true;
      } catch (error) {
        // Another connection holds the write lock: tried again under a catch-up, while the journal holds its commits.
        if (!/^SQLITE_(BUSY|LOCKED)/.test(codeOf(error))) throw error;
      }
    }
    const ms = performance.now() - started;
    parentPort.postMessage({ id: m.id, done: { busy: row.busy, log: row.log, checkpointed: row.checkpointed, ms, reset } });
  } catch (error) {
    parentPort.postMessage({ id: m.id, failed: { code: codeOf(error), message: messageOf(error) } });
  }
});
`;

/** What one checkpoint did (the row `PRAGMA wal_checkpoint` returns), and how long it held the worker. */
export interface CheckpointReport {
  /** 1 when another checkpointer held the lock: nothing was copied. */
  readonly busy: number;
  /** Frames in the WAL; -1 when busy. */
  readonly log: number;
  /** Frames now in the database file; equal to `log` when the WAL may be reset by the next commit. */
  readonly checkpointed: number;
  readonly ms: number;
  /**
   * The reset write ran right after this checkpoint (it copied every frame): the WAL began again on the worker, unless
   * a reader still held frames of it (then the write appended, and a later write restarts it).
   */
  readonly reset: boolean;
}

export interface WalCheckpointerOptions {
  /**
   * The checkpoint failed (an I/O error, a full disk) or the worker could not start: after a failed sync the kernel
   * may have dropped the dirty pages, so the journal fails closed, as on a failed fdatasync. Called at most once.
   */
  readonly onFailure: (cause: unknown) => void;
  /** Selects F_FULLFSYNC for the checkpoint's syncs on macOS. */
  readonly platform?: NodeJS.Platform;
  readonly walFramesPerCheckpoint?: number;
  /** Heard after each checkpoint that ran (tests, benches). */
  readonly onCheckpoint?: (report: CheckpointReport) => void;
  /** Test seam: the next checkpoint fails in the worker with this SQLite code instead of running. */
  readonly faultForTest?: () => string | undefined;
  /**
   * One small write (SQL, no parameters) the worker runs right after a checkpoint that copied every frame: SQLite
   * begins the WAL again at the first write after such a checkpoint and syncs the new header before any frame, and
   * this way that sync runs on the worker's thread, not on the event loop inside the journal's next COMMIT. A commit
   * that lands in the instant between the copy and this write still restarts the WAL itself. Without the option the
   * journal's first commit after every full copy does.
   */
  readonly resetWrite?: string;
}

type State = 'starting' | 'open' | 'closing' | 'closed' | 'failed';

/** SQLite's "someone else holds the lock" answers: the next commit asks again, nothing is lost meanwhile. */
const isBusy = (code: string): boolean => code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED');

/**
 * The journal's WAL checkpoints on a worker thread with its own connection, so the event loop's COMMIT never copies
 * pages into the database file or waits for their fsyncs (issue #18). The journal's connection runs with
 * wal_autocheckpoint=0 and calls `committed()` after each commit; every so many commits (sized so a checkpoint copies
 * about `walFramesPerCheckpoint` frames, measured from the previous checkpoint's frame count) this asks the worker for
 * a PASSIVE checkpoint. At most one runs at a time; commits meanwhile only raise the count for the next.
 */
export class WalCheckpointer {
  private state: State = 'starting';
  private readonly worker: Worker;
  private readonly framesTarget: number;
  private commitsSince = 0;
  private commitsPerCheckpoint = commitsPerCheckpointInitial;
  private inFlight: { id: number; commits: number; catchUp: boolean } | undefined = undefined;
  /** A catch-up checkpoint runs: the journal defers commits until it answers (see holdsCommits). */
  private holding = false;
  private holdWaiters: Array<() => void> = [];
  /** Asked before the worker was ready, or while a checkpoint ran: run one as soon as it can. */
  private wanted = false;
  private nextId = 1;
  private readyWaiters: Array<{ resolve(): void; reject(error: unknown): void }> = [];
  private idleWaiters: Array<() => void> = [];
  private exited: Promise<void>;
  private failure: unknown = undefined;
  private ended = false;
  /** Checkpoints that ran, those SQLite answered busy, and the reset writes the worker ran after one. */
  checkpoints = 0;
  busyAnswers = 0;
  resets = 0;

  private constructor(
    dbPath: string,
    private readonly options: WalCheckpointerOptions,
  ) {
    this.framesTarget = options.walFramesPerCheckpoint ?? walFramesPerCheckpointDefault;
    if (!Number.isSafeInteger(this.framesTarget) || this.framesTarget < 1)
      throw new Error(`walFramesPerCheckpoint must be a positive integer, not ${this.framesTarget}`);
    const require = createRequire(import.meta.url);
    const workerData = {
      dbPath,
      sqlitePath: require.resolve('better-sqlite3'),
      nativeBinding: sqliteNativeBinding(),
      busyTimeoutMs: checkpointerBusyTimeoutMs,
      cacheKiB: checkpointerCacheKiB,
      darwin: (options.platform ?? process.platform) === 'darwin',
      resetWrite: options.resetWrite,
    };
    this.worker = new Worker(workerSource, { eval: true, workerData, resourceLimits: workerLimits });
    // An idle checkpointer must not keep a CLI process alive; close() holds it while it waits.
    this.worker.unref();
    this.worker.on('message', (m: WorkerMessage) => this.heard(m));
    this.worker.on('error', (error) => this.fail(error));
    this.exited = new Promise<void>((resolve) => {
      this.worker.on('exit', () => {
        this.ended = true;
        if (this.state !== 'closing' && this.state !== 'closed')
          this.fail(new Error('the WAL checkpointer thread ended unexpectedly'));
        resolve();
      });
    });
  }

  /** Starts the worker; its connection opens on the thread (failures reach onFailure, and whenReady rejects). */
  static start(dbPath: string, options: WalCheckpointerOptions): WalCheckpointer {
    return new WalCheckpointer(dbPath, options);
  }

  /** The worker thread has ended (after close, or after it died). */
  get threadEnded(): boolean {
    return this.ended;
  }

  /** Resolves once the worker's connection is open with WAL and a syncing checkpoint. */
  whenReady(): Promise<void> {
    if (this.state === 'failed') return Promise.reject(this.failure);
    if (this.state !== 'starting') return Promise.resolve();
    return new Promise((resolve, reject) => this.readyWaiters.push({ resolve, reject }));
  }

  /** A commit returned: a checkpoint once enough commits wrote about walFramesPerCheckpoint frames. */
  committed(): void {
    if (this.state !== 'starting' && this.state !== 'open') return;
    this.commitsSince += 1;
    if (this.commitsSince >= this.commitsPerCheckpoint) this.request();
  }

  /** A checkpoint now (or right after the one running), whatever the count says. */
  request(): void {
    if (this.state !== 'starting' && this.state !== 'open') return;
    this.wanted = true;
    this.kick();
  }

  /**
   * True while a short catch-up checkpoint runs; the journal should start no commit until whenCommitsMayResume.
   * SQLite resets the WAL (writes from its start again) only when a write begins with every frame copied. A PASSIVE
   * checkpoint copies the frames that existed when it began, and under steady load commits land while it runs, so
   * without a pause the WAL would never reset and grow without bound. So the bulk copy runs beside the commits, and
   * when commits landed meanwhile a second checkpoint copies just those (a few frames and the two fsyncs) while
   * commits wait, off the loop; the next commit then resets the WAL — or, with a reset write, the worker resets it
   * before the commits resume, so its header sync is not on the loop either.
   */
  get holdsCommits(): boolean {
    return this.holding;
  }

  whenCommitsMayResume(): Promise<void> {
    if (!this.holding) return Promise.resolve();
    return new Promise((resolve) => this.holdWaiters.push(resolve));
  }

  /** Resolves when no checkpoint runs and none is wanted (or the checkpointer stopped). */
  whenIdle(): Promise<void> {
    if (this.isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /**
   * Stops asking, waits for a checkpoint in flight, closes the worker's connection and ends the thread. Call before
   * the journal's own close, so that connection is the last and SQLite checkpoints and removes the WAL there.
   */
  async close(): Promise<void> {
    if (this.state === 'closed') return;
    const wasFailed = this.state === 'failed';
    if (!wasFailed) this.state = 'closing';
    this.wanted = false;
    this.worker.ref();
    if (this.inFlight !== undefined) await this.whenIdle();
    this.worker.postMessage({ kind: 'end' });
    // The thread ends on its own once its connection closed (parentPort.close()); terminate covers a dead one.
    await this.exited.then(
      () => undefined,
      () => undefined,
    );
    await this.worker.terminate();
    this.state = 'closed';
    this.release();
    for (const w of this.readyWaiters.splice(0))
      w.reject(new CodedError('JOURNAL_UNAVAILABLE', 'the journal is closed'));
    this.settleIdle();
  }

  private isIdle(): boolean {
    const running = this.state === 'starting' || this.state === 'open';
    return this.inFlight === undefined && (!running || !this.wanted);
  }

  private kick(catchUp = false): void {
    if (this.state !== 'open' || this.inFlight !== undefined || !(this.wanted || catchUp)) return;
    // A catch-up covers every commit so far, also those that asked for one meanwhile.
    this.wanted = false;
    const id = this.nextId++;
    this.inFlight = { id, commits: this.commitsSince, catchUp };
    this.commitsSince = 0;
    this.worker.postMessage({ kind: 'checkpoint', id, fault: this.options.faultForTest?.() });
  }

  private heard(m: WorkerMessage): void {
    if (m.ready !== undefined) return this.opened(m.ready);
    if (m.openFailed !== undefined) return this.fail(sqliteError(m.openFailed));
    if (m.id === undefined || m.id !== this.inFlight?.id) return;
    const { commits, catchUp } = this.inFlight;
    this.inFlight = undefined;
    if (catchUp) this.release();
    if (m.failed !== undefined) {
      if (!isBusy(m.failed.code)) return this.fail(sqliteError(m.failed));
      this.busyAnswers += 1;
      // Nothing was copied: the frames stay in the WAL for the next commit's request.
      this.commitsSince += commits;
    } else if (m.done !== undefined) {
      this.checkpoints += 1;
      if (m.done.reset) this.resets += 1;
      if (m.done.busy !== 0) this.busyAnswers += 1;
      else if (!catchUp) this.adapt(m.done, commits);
      this.options.onCheckpoint?.(m.done);
      // Commits landed while it copied: their frames keep the WAL from resetting unless copied with commits held.
      // A reset write the worker could not run (another connection held the lock) is retried the same way.
      const caughtUp = m.done.busy === 0 && m.done.checkpointed === m.done.log;
      const resetMissed = this.options.resetWrite !== undefined && m.done.log > 0 && !m.done.reset;
      if (this.state === 'open' && !catchUp && caughtUp && (this.commitsSince > 0 || resetMissed)) {
        this.holding = true;
        this.kick(true);
      }
    }
    if (this.state === 'open') this.kick();
    this.settleIdle();
  }

  /**
   * `log` counts the frames since the WAL was last reset, which (when the previous checkpoint copied everything) is
   * what the commits since then wrote: frames per commit here, so the next checkpoint comes after about
   * framesTarget frames whatever the journal's commit size (one event, or a group of hundreds).
   */
  private adapt(report: CheckpointReport, commits: number): void {
    if (commits < 1 || report.log < 1) return;
    const framesPerCommit = report.log / commits;
    const next = Math.round(this.framesTarget / framesPerCommit);
    this.commitsPerCheckpoint = Math.min(commitsPerCheckpointMax, Math.max(1, next));
  }

  private opened(readBack: WorkerReadBack): void {
    if (this.state !== 'starting') return;
    const refusal = refusalOf(readBack, this.options.platform ?? process.platform);
    if (refusal !== undefined) return this.fail(refusal);
    this.state = 'open';
    for (const w of this.readyWaiters.splice(0)) w.resolve();
    if (this.commitsSince >= this.commitsPerCheckpoint) this.wanted = true;
    this.kick();
  }

  private fail(cause: unknown): void {
    if (this.state === 'failed' || this.state === 'closed') return;
    this.state = 'failed';
    this.failure = cause;
    this.inFlight = undefined;
    this.release();
    for (const w of this.readyWaiters.splice(0)) w.reject(cause);
    this.settleIdle();
    // Also while closing: after a failed sync the kernel may have dropped WAL pages a commit was already answered on.
    this.options.onFailure(cause);
  }

  private release(): void {
    this.holding = false;
    for (const resolve of this.holdWaiters.splice(0)) resolve();
  }

  private settleIdle(): void {
    if (!this.isIdle()) return;
    for (const resolve of this.idleWaiters.splice(0)) resolve();
  }
}

interface WorkerReadBack {
  readonly readonly: boolean;
  readonly journal_mode: string;
  readonly synchronous: number;
  readonly checkpoint_fullfsync: number;
}

interface WorkerMessage {
  readonly ready?: WorkerReadBack;
  readonly openFailed?: { code: string; message: string };
  readonly id?: number;
  readonly done?: CheckpointReport;
  readonly failed?: { code: string; message: string };
  readonly ended?: boolean;
}

/** The worker's connection must checkpoint with the syncs that make a reused WAL safe, or the journal must not use it. */
function refusalOf(readBack: WorkerReadBack, platform: NodeJS.Platform): CodedError | undefined {
  const what = readBack.readonly
    ? 'the connection is read-only'
    : readBack.journal_mode !== 'wal'
      ? `journal_mode is ${readBack.journal_mode}, not wal`
      : readBack.synchronous < 1
        ? `synchronous is ${readBack.synchronous}, not NORMAL (1)`
        : platform === 'darwin' && readBack.checkpoint_fullfsync !== 1
          ? `checkpoint_fullfsync is ${readBack.checkpoint_fullfsync}, not ON`
          : undefined;
  if (what === undefined) return undefined;
  return new CodedError(
    'JOURNAL_NOT_DURABLE',
    `the journal's checkpoint connection refused a durability setting: ${what}`,
  );
}

/** SQLite's error as it crossed the thread: its code and message (no row data ever reaches either). */
function sqliteError(failed: { code: string; message: string }): Error {
  return Object.assign(new Error(`the WAL checkpoint failed: ${failed.message}`), { code: failed.code });
}
