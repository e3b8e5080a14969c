import { closeSync, fdatasync, fdatasyncSync, openSync } from 'node:fs';
import { CodedError } from '../contract/index.js';
import type { SyncMode } from './durability.js';

/** A wait for durability that starts no sync (whenCovered). */
interface Watcher {
  readonly seq: number;
  resolve(): void;
  reject(error: unknown): void;
}

interface Waiter {
  readonly seq: number;
  /** whenSynced: released only by a sync numbered past this one (syncsBegun when it asked). */
  readonly afterSync?: number;
  resolve(): void;
  reject(error: unknown): void;
}

/**
 * Sync-behind (SyncMode `behind`): the journal commits on the event loop without waiting for the disk, then this
 * fdatasyncs the WAL file on libuv's thread pool and releases every caller whose commit the sync covered. One sync
 * covers every commit written before it began (the WAL is one file, appended in commit order), so callers that
 * arrive while a sync runs share the next one: group commit for the disk, with the loop free meanwhile.
 *
 * A failed fdatasync is fatal (`onFailure`): after a failed sync the kernel may have dropped the dirty pages, so no
 * later sync can vouch for them; the journal fails closed and every waiter is rejected.
 *
 * In mode `commit` (macOS, where only F_FULLFSYNC flushes the drive) SQLite synced inside COMMIT: every commit is
 * durable when it returns and nothing waits here.
 */
export class WalSync {
  private committedSeq: number;
  private durableSeq: number;
  private readonly waiters: Waiter[] = [];
  private watchers: Watcher[] = [];
  private running = false;
  private failure: unknown = undefined;
  private closed = false;
  private fd: number | undefined;
  private syncsBegun = 0;
  private syncsDone = 0;

  constructor(
    readonly mode: SyncMode,
    walPath: string,
    lastSeq: number,
    private readonly onFailure: (cause: unknown) => void,
    /** Test seam (broker/testing/disk-sync-gate.ts): runs before each fdatasync; a rejection is a failed sync. */
    private readonly beforeSync?: () => Promise<void>,
  ) {
    this.committedSeq = lastSeq;
    this.durableSeq = lastSeq;
    // The WAL exists once the connection has read the database in WAL mode; it is never deleted while the journal's
    // connection is open (only the last connection's close removes it), so one descriptor serves the whole run.
    if (mode === 'behind') {
      try {
        this.fd = openSync(walPath, 'r');
      } catch (cause) {
        throw new CodedError('JOURNAL_NOT_DURABLE', `the journal cannot open its write-ahead log to sync it`, {
          cause,
        });
      }
    }
  }

  /** The log now ends at `seq` (COMMIT returned). */
  committed(seq: number): void {
    this.committedSeq = Math.max(this.committedSeq, seq);
    if (this.mode !== 'commit') return;
    this.durableSeq = this.committedSeq;
    this.releaseWatchers();
  }

  /** The position a sync has made durable. */
  durableThrough(): number {
    return this.durableSeq;
  }

  /** Resolves once everything committed up to `seq` (default: everything committed so far) is on disk. */
  whenDurable(seq: number = this.committedSeq): Promise<void> {
    if (this.failure !== undefined) return Promise.reject(this.failed());
    if (seq <= this.durableSeq) return Promise.resolve();
    if (this.closed) return Promise.reject(new CodedError('JOURNAL_UNAVAILABLE', 'the journal is closed'));
    return new Promise<void>((resolve, reject) => {
      this.waiters.push({ seq, resolve, reject });
      this.kick();
    });
  }

  /**
   * Resolves once everything up to `seq` is on disk, by a sync some other caller asked for: it starts none, so
   * watching costs the disk nothing (a dispatch's sync covers its own admission). At a sync's end watchers are
   * released before the callers that waited for it, so what a watcher does runs before what they do next.
   */
  whenCovered(seq: number): Promise<void> {
    if (this.failure !== undefined) return Promise.reject(this.failed());
    if (seq <= this.durableSeq) return Promise.resolve();
    if (this.closed) return Promise.reject(new CodedError('JOURNAL_UNAVAILABLE', 'the journal is closed'));
    return new Promise<void>((resolve, reject) => this.watchers.push({ seq, resolve, reject }));
  }

  /**
   * Resolves after a sync that began after this call: it covers every commit so far, also those that appended no event
   * and so moved no seq (a checkpoint, the integrity anchor's record), which whenDurable cannot tell apart.
   */
  whenSynced(): Promise<void> {
    if (this.failure !== undefined) return Promise.reject(this.failed());
    // Mode `commit`: durable when COMMIT returned; closed: the sync at close covered every commit.
    if (this.fd === undefined || this.closed) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      this.waiters.push({ seq: this.committedSeq, afterSync: this.syncsBegun, resolve, reject });
      this.kick();
    });
  }

  /** Syncs now, on the loop: at the end of recovery and at close, where nothing may be left behind. */
  syncNow(): void {
    // A failed log vouches for nothing more; in mode `commit` every commit was durable when it returned.
    if (this.failure !== undefined) return;
    if (this.fd === undefined) {
      this.durableSeq = this.committedSeq;
      return;
    }
    try {
      fdatasyncSync(this.fd);
    } catch (cause) {
      this.fail(cause);
      throw this.failed();
    }
    this.syncsDone = ++this.syncsBegun;
    this.release(this.committedSeq);
  }

  /** Syncs what is committed, releases the waiters, and closes the descriptor (after an in-flight sync returns). */
  close(): void {
    if (this.closed) return;
    if (this.failure === undefined) {
      try {
        this.syncNow();
      } catch {
        // Failed already: the waiters were rejected.
      }
    }
    this.closed = true;
    const closedError = new CodedError('JOURNAL_UNAVAILABLE', 'the journal is closed');
    for (const w of this.waiters.splice(0)) w.reject(closedError);
    for (const w of this.watchers.splice(0)) w.reject(closedError);
    if (!this.running) this.closeFd();
  }

  /** The journal failed for another reason: nobody waits for a sync that vouches for a failed log. */
  abandon(cause: unknown): void {
    if (this.failure !== undefined) return;
    this.failure = cause;
    const error = this.failed();
    for (const w of this.waiters.splice(0)) w.reject(error);
    for (const w of this.watchers.splice(0)) w.reject(error);
  }

  private kick(): void {
    if (this.running || this.waiters.length === 0 || this.fd === undefined) return;
    this.running = true;
    const fd = this.fd;
    const target = this.committedSeq;
    const index = ++this.syncsBegun;
    const done = (error: unknown): void => {
      this.running = false;
      if (this.closed) {
        this.closeFd();
        return;
      }
      if (error !== null && error !== undefined) {
        this.fail(error);
        return;
      }
      this.syncsDone = Math.max(this.syncsDone, index);
      this.release(target);
      this.kick();
    };
    const gate = this.beforeSync === undefined ? Promise.resolve() : this.beforeSync();
    gate.then(
      () => fdatasync(fd, done),
      (error: unknown) => done(error ?? new Error('sync refused')),
    );
  }

  private release(target: number): void {
    this.durableSeq = Math.max(this.durableSeq, target);
    this.releaseWatchers();
    const isCovered = (w: Waiter): boolean =>
      w.seq <= this.durableSeq && (w.afterSync === undefined || w.afterSync < this.syncsDone);
    const covered = this.waiters.filter(isCovered);
    if (covered.length === 0) return;
    const rest = this.waiters.filter((w) => !isCovered(w));
    this.waiters.splice(0, this.waiters.length, ...rest);
    for (const w of covered) w.resolve();
  }

  private releaseWatchers(): void {
    if (this.watchers.length === 0) return;
    const covered = this.watchers.filter((w) => w.seq <= this.durableSeq);
    if (covered.length === 0) return;
    this.watchers = this.watchers.filter((w) => w.seq > this.durableSeq);
    for (const w of covered) w.resolve();
  }

  private fail(cause: unknown): void {
    this.abandon(cause);
    this.onFailure(cause);
  }

  private failed(): CodedError {
    return new CodedError('JOURNAL_UNAVAILABLE', 'the journal failed to make a record durable; dispatching stopped', {
      cause: this.failure,
    });
  }

  private closeFd(): void {
    if (this.fd === undefined) return;
    closeSync(this.fd);
    this.fd = undefined;
  }
}
