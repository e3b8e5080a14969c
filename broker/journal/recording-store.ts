import type Database from 'better-sqlite3';
import { statementCache } from '../ports/open-database.js';
import { CodedError } from '../contract/index.js';
import type { RowCipher } from './audit-writer.js';
import { writeBesideOrHere, type BesideOp, type BesideResult, type BesideWriter } from './beside-rows.js';

/** Stored cast bytes per chunk row, like a result's: bounds one row. */
export const recordingChunkBytes = 64 * 1024;
/** Recordings one purgeExpired call may purge: one short write transaction. */
export const recordingPurgeBatchMax = 500;

/*
 * Associated data naming a sealed recording chunk. A JSON array with its own label, so no result or
 * event row of the run's key opens as a recording chunk and no chunk opens under another recording or position.
 */
export function recordingChunkAd(recordingId: string, n: number): Buffer {
  return Buffer.from(JSON.stringify(['postern.recording.chunk.v1', recordingId, n]), 'utf8');
}

/** The recording id of an action: `rec_` and the action id's own suffix (`act_x` → `rec_x`), one per action. */
export function recordingIdOf(actionId: string): string {
  return `rec_${actionId.startsWith('act_') ? actionId.slice(4) : actionId}`;
}

// The purge's reads (beside-rows.ts, where the purge's SQL is), named here for the query-plan test.
export { purgeFinishedSql, purgeOpenSql } from './beside-rows.js';

/**
 * Whose store it is. 'broker': the one store of the process holding the data directory's lock (the runtime's). No
 * other broker runs on the file while it does, so every open row it did not start and is not running (`running`) is an
 * earlier run's or a given-up one: RECORDING_INCOMPLETE is a fact, and the purge may take it. 'reader': any other store
 * on the file (a tool beside a running daemon). Its `running` is empty and says nothing of the broker's, so an open
 * row may be a command that broker is running now: it answers RECORDING_STATE_UNKNOWN, purges finished recordings only,
 * and starts none.
 */
export type RecordingStoreRole = 'broker' | 'reader';

export interface StoredRecording {
  readonly recording_id: string;
  readonly action_id: string;
  /** The asciicast v2 text, opened. */
  readonly cast: Buffer;
  readonly truncated: boolean;
  readonly started_at_ms: number;
  readonly finished_at_ms: number;
}

interface RecordingRow {
  recording_id: string;
  action_id: string;
  started_at_ms: number;
  complete: number;
  truncated: number;
  cast_bytes: number;
  chunks: number;
  run: number | null;
  finished_at_ms: number | null;
  purged_at_ms: number | null;
  alive_at_ms: number;
}

/**
 * SSH session recordings (migration 013), on the result store's connection to the journal file. `start` writes an
 * open row before the exec request (the executor refuses to exec when it rejects); `finish` seals the cast in
 * chunks under the run key and marks the row complete in ONE transaction, so a reader sees all of it or none. While
 * its command runs the open row reads as RECORDING_IN_PROGRESS; one that stays open after (a crash or a failed seal
 * between the two) reads as RECORDING_INCOMPLETE until purged, never as partial bytes.
 *
 * With `beside` (the broker's journal), `start`, `finish` and `forget` write through the journal's writer thread while
 * it runs (Journal.writeBeside: never in SQLite's busy handler on the loop, in order with the journal's batches), and
 * on this connection otherwise; the same rows either way (beside-rows.ts), and so does the purge (`purgeExpired`).
 * Reads and `close` (once, at the stop) stay on this connection.
 */
export class RecordingStore {
  private readonly sql: (sql: string) => Database.Statement;
  /**
   * Recordings this store started and has not finished: their commands are running, so the purge leaves them (a
   * command may outlive a short retention), and a read says it is in progress. An open row not in it is an earlier
   * run's leftover or one whose seal failed or was given up (`forget`): never to be finished.
   */
  private readonly running = new Set<string>();
  /** Set by `close` (the broker stopping): nothing is started, sealed or purged after it. */
  private closed = false;

  constructor(
    private readonly db: Database.Database,
    private readonly cipher: RowCipher,
    private readonly role: RecordingStoreRole,
    private readonly beside?: BesideWriter,
  ) {
    const table = db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'recordings'`).get();
    if (table === undefined)
      throw new CodedError('MIGRATION_FAILED', 'the journal has no recordings table (schema older than 13)');
    // Without it an earlier run's open recording could only be purged by its start, hours early for a long command.
    const alive = db.prepare(`SELECT name FROM pragma_table_info('recordings') WHERE name = 'alive_at_ms'`).get();
    if (alive === undefined)
      throw new CodedError(
        'MIGRATION_FAILED',
        'the journal has no recordings.alive_at_ms column (schema older than 19)',
      );
    this.sql = statementCache(db);
  }

  /**
   * The open marker, written before the exec request (durable with the DISPATCH_STARTED that follows it: one WAL);
   * rejects (any error) when it cannot be written.
   */
  async start(actionId: string, startedAtMs: number): Promise<string> {
    if (this.role !== 'broker') throw new CodedError('INTERNAL', 'only the broker holding the data directory records');
    if (this.closed) throw new CodedError('SHUTTING_DOWN', 'the broker is stopping: no recording is started');
    const recordingId = recordingIdOf(actionId);
    if (this.running.has(recordingId)) throw new CodedError('INTERNAL', `recording ${recordingId} was already started`);
    // Running from now: a stop meanwhile marks it alive, and a purge leaves it.
    this.running.add(recordingId);
    try {
      const inserted = await this.write({ kind: 'recordingStarted', recordingId, actionId, startedAtMs });
      if (inserted !== 1) throw new CodedError('INTERNAL', `recording ${recordingId} was already started`);
      // The store closed while the row waited for the writer thread (the broker is stopping): no command may start
      // now, as none could after a close before (its seal would be refused). The open row has no DISPATCH_STARTED, so
      // the next start seals it as never sent (closeUnsentRecordings).
      if (this.closed) throw new CodedError('SHUTTING_DOWN', 'the broker is stopping: no recording is started');
      return recordingId;
    } catch (error) {
      this.running.delete(recordingId);
      throw error;
    }
  }

  /**
   * The command is over (at `endedAtMs`) but its recording will not be sealed (its cast could not be built): the row
   * stays open, a leftover that reads as RECORDING_INCOMPLETE and that the purge takes a retention after the command
   * ended (recorded here when the store can still write; else its last sweep's mark). Idempotent. Settles once the
   * mark is written or given up; never rejects.
   */
  forget(recordingId: string, endedAtMs: number): Promise<void> {
    if (!this.running.delete(recordingId)) return Promise.resolve();
    // A store that cannot write now leaves the row's last mark (its start, or the last sweep that saw it running).
    return this.write({ kind: 'recordingAlive', recordingId, atMs: endedAtMs }).then(
      () => undefined,
      () => undefined,
    );
  }

  /**
   * Seals the cast and marks the recording complete; once only (a second finish rejects INTERNAL). A recording purged
   * while still open (its command outlived the retention) keeps nothing: RESULT_EXPIRED, and no chunk is written that
   * no later purge would find. The cast is sealed here, on this call's turn; only ciphertext is written. It reads as
   * in progress until written, and its command is over whatever the write meets: a row a failed seal leaves open is a
   * leftover the purge may take.
   */
  finish(recordingId: string, cast: Buffer, truncated: boolean, finishedAtMs: number): Promise<void> {
    // The broker stopped first (it closes this store before it cuts what is still running): the row stays open, marked
    // alive at the stop by `close`, and the journal decides what it means (RECORDING_INCOMPLETE, or the never-sent mark).
    if (this.closed) {
      this.running.delete(recordingId);
      return Promise.reject(
        new CodedError('SHUTTING_DOWN', `the broker stopped before recording ${recordingId} was sealed: it stays open`),
      );
    }
    let written: Promise<BesideResult>;
    try {
      const chunks = Math.ceil(cast.length / recordingChunkBytes);
      // Sealed before the write: the write lock is held for the writes only, and the run key stays on the loop.
      const sealed = Array.from({ length: chunks }, (_, n) =>
        this.cipher.seal(
          recordingChunkAd(recordingId, n),
          cast.subarray(n * recordingChunkBytes, (n + 1) * recordingChunkBytes),
        ),
      );
      written = this.write({
        kind: 'recordingFinished',
        recordingId,
        truncated,
        castBytes: cast.length,
        run: sealed[0]?.run ?? null,
        chunks: sealed.map(({ ciphertext, nonce }) => ({ ciphertext, nonce })),
        finishedAtMs,
      });
    } catch (error) {
      written = Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
    return written
      .then((finished) => {
        if (finished === 'purged')
          throw new CodedError(
            'RESULT_EXPIRED',
            `recording ${recordingId} passed its retention before it was finished`,
          );
        if (finished !== 'finished') throw new CodedError('INTERNAL', `recording ${recordingId} is not open`);
      })
      .finally(() => this.running.delete(recordingId));
  }

  /**
   * One write beside the journal: through its writer thread while one runs, else here (`finish`'s rows in one
   * immediate transaction, as a reader must see all of them or none). Rejects with what the write met.
   */
  private write(op: BesideOp): Promise<BesideResult> {
    return writeBesideOrHere(this.beside, this.db, op);
  }

  /**
   * The broker is stopping (ResultStore.close, before the journal closes and what is still in flight is cut): the
   * commands still running are recorded as alive at `nowMs` (when given and the store can still write), so their open
   * rows are kept a retention after the stop, and are no longer this store's. A later `finish` or `start` is refused
   * SHUTTING_DOWN: a recording the stop left open stays open, RECORDING_INCOMPLETE once read (the journal decides:
   * a command provably never sent reads as the never-sent mark). Idempotent.
   */
  close(nowMs?: number): void {
    if (this.closed) return;
    this.closed = true;
    try {
      if (nowMs !== undefined && this.running.size > 0 && this.db.open)
        this.db.transaction(() => {
          for (const id of this.running) this.markAlive(id, nowMs);
        })();
    } catch {
      // A store that cannot write now leaves each row's last mark (its start, or the last sweep that saw it running).
    }
    this.running.clear();
  }

  /** Closed (`close`: the broker stopping): every write and purge of this store is refused SHUTTING_DOWN. */
  get isClosed(): boolean {
    return this.closed;
  }

  /**
   * Action ids of recordings still open (not purged), after `afterActionId` in id order, at most `limit`: what a
   * start looks at for recordings an earlier run left open (a stop or a crash between the two writes).
   */
  openActionIds(afterActionId: string, limit: number): string[] {
    if (!Number.isInteger(limit) || limit < 1 || limit > recordingPurgeBatchMax)
      throw new RangeError(`openActionIds lists 1..${recordingPurgeBatchMax} recordings per call, not ${limit}`);
    return this.sql(
      `SELECT action_id FROM recordings WHERE complete = 0 AND purged_at_ms IS NULL AND action_id > ?
       ORDER BY action_id LIMIT ?`,
    )
      .pluck()
      .all(afterActionId, limit) as string[];
  }

  /**
   * The action's recording: NOT_FOUND when it has none (not an SSH action, or refused before its exec was prepared),
   * RESULT_EXPIRED once purged (a finished one's chunks were deleted; an open one never had any, and its retention
   * has passed), RECORDING_IN_PROGRESS while this store's command is still running (`running`), else
   * RECORDING_INCOMPLETE when it was started and never finished — or, in a 'reader' store, RECORDING_STATE_UNKNOWN. Chunks are trusted only as the unbroken sequence the
   * row names; a complete row without them or its finish time, or a changed or moved chunk (it fails authentication),
   * is INTERNAL.
   */
  read(actionId: string): StoredRecording {
    const row = this.sql(`SELECT * FROM recordings WHERE action_id = ?`).get(actionId) as RecordingRow | undefined;
    if (row === undefined) throw new CodedError('NOT_FOUND', `no recording for ${actionId}`, { field: 'action_id' });
    // Purged first: past its retention a recording is expired whatever it was. A finished one's chunks were deleted;
    // an open one never had any (finish writes them in the transaction that completes the row), and the purge is what
    // ends the wait for a finish that never came, so nothing is left to read or to wait for either way.
    if (row.purged_at_ms !== null)
      throw new CodedError(
        'RESULT_EXPIRED',
        row.complete === 1
          ? `the recording of ${actionId} passed its retention and was purged`
          : `the recording of ${actionId} never completed, and its retention has passed`,
        { field: 'action_id' },
      );
    // Open and its command still running here: nothing is lost yet, the seal comes when the command ends.
    if (row.complete !== 1 && this.running.has(row.recording_id))
      throw new CodedError(
        'RECORDING_IN_PROGRESS',
        `the command of ${actionId} is still in progress: its recording is sealed when it ends`,
        { field: 'action_id' },
      );
    // A reader cannot know whether the broker that opened it is still running its command: neither answer is honest.
    if (row.complete !== 1 && this.role !== 'broker')
      throw new CodedError(
        'RECORDING_STATE_UNKNOWN',
        `the recording of ${actionId} is open, and this reader cannot tell whether its command is still running: ask the running broker`,
        { field: 'action_id' },
      );
    if (row.complete !== 1)
      throw new CodedError('RECORDING_INCOMPLETE', `the recording of ${actionId} was started but never completed`, {
        field: 'action_id',
      });
    // finish sets both in one statement: a complete row without its finish time is damaged, not unfinished.
    if (row.finished_at_ms === null)
      throw new CodedError('INTERNAL', `recording ${row.recording_id} is marked complete but has no finish time`);
    const parts = this.sql(`SELECT n, bytes, nonce FROM recording_chunks WHERE recording_id = ? ORDER BY n`).all(
      row.recording_id,
    ) as { n: number; bytes: Buffer; nonce: Buffer }[];
    if (parts.length !== row.chunks || parts.some((p, i) => p.n !== i) || (row.chunks > 0 && row.run === null))
      throw new CodedError('INTERNAL', `recording ${row.recording_id} is marked complete but its chunks are not whole`);
    const run = row.run ?? 0;
    const cast = Buffer.concat(
      parts.map((p) =>
        this.cipher.open({ run, nonce: p.nonce, ciphertext: p.bytes }, recordingChunkAd(row.recording_id, p.n)),
      ),
    );
    if (cast.length !== row.cast_bytes)
      throw new CodedError(
        'INTERNAL',
        `recording ${row.recording_id} has ${cast.length} bytes, expected ${row.cast_bytes}`,
      );
    return {
      recording_id: row.recording_id,
      action_id: row.action_id,
      cast,
      truncated: row.truncated === 1,
      started_at_ms: row.started_at_ms,
      finished_at_ms: row.finished_at_ms,
    };
  }

  /**
   * Deletes the sealed bytes of recordings past the results' retention, at most `limit`, each marked purged in the same
   * transaction; returns how many. A finished recording goes `retentionMs` after it was finished (with its result,
   * stored at the same moment); one left open (never to be finished) `retentionMs` after it was last known alive
   * (`alive_at_ms`); one whose command is still running (`running`) never, however long the command takes. Each call
   * first marks this store's running recordings alive at `nowMs`, so one its broker dies with (a crash mid-command) is
   * kept a retention after the last sweep that saw its command running, not after its start. A 'reader' store purges
   * finished recordings only. One transaction, through the journal's writer thread while it runs (after everything
   * posted before it: never in SQLite's busy handler on the loop), else on this connection; the same SQL either way
   * (beside-rows.ts). A failure rejects this purge alone.
   */
  async purgeExpired(nowMs: number, retentionMs: number, limit: number): Promise<number> {
    if (!Number.isInteger(limit) || limit < 1 || limit > recordingPurgeBatchMax)
      throw new RangeError(`purgeExpired purges 1..${recordingPurgeBatchMax} recordings per call, not ${limit}`);
    // Closed (the broker stopping): its running set is gone, so an open row could no longer be told from a leftover.
    if (this.closed) throw new CodedError('SHUTTING_DOWN', 'the broker is stopping: no recording is purged');
    // The running set as it is now crosses as data; a start posted after this purge follows it, so its row is not there.
    const purged = await this.write({
      kind: 'recordingsPurged',
      nowMs,
      cutoffMs: nowMs - retentionMs,
      limit,
      running: [...this.running],
      leftovers: this.role === 'broker',
    });
    if (typeof purged !== 'number') throw new CodedError('INTERNAL', 'a recording purge answered no count');
    return purged;
  }

  /** Records that the open recording's command was still running (or just ended) at `atMs`; never moves it back. */
  private markAlive(recordingId: string, atMs: number): void {
    this.sql(
      `UPDATE recordings SET alive_at_ms = @atMs WHERE recording_id = @recordingId AND complete = 0
         AND purged_at_ms IS NULL AND alive_at_ms < @atMs`,
    ).run({ atMs, recordingId });
  }
}
