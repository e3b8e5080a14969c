import type Database from 'better-sqlite3';
import { openDatabase, statementCache } from '../ports/open-database.js';
import { CodedError } from '../contract/index.js';
import type { RowCipher } from './audit-writer.js';
import { writeResultRows, type ResultRows } from './result-rows.js';
import { requireDurableConnection } from './durability.js';
import { RecordingStore, type RecordingStoreRole } from './recording-store.js';
import { writeBesideOrHere, type BesideOp, type BesideWriter } from './beside-rows.js';

/** Stored bytes per chunk row: bounds one row and lets a reader resume from a chunk. */
export const resultChunkBytes = 64 * 1024;
/** A stored result's summary (status, kept headers, ids) stays small; the body goes in chunks. */
export const resultSummaryBytesMax = 64 * 1024;
/** Results one purgeExpired call may purge: one short write transaction, never a stall of the journal file. */
export const resultPurgeBatchMax = 500;
const busyTimeoutMs = 2_000;
/** XChaCha20-Poly1305's tag: a sealed chunk is this much longer than the bytes it holds. */
const aeadTagBytes = 16;

/*
 * Associated data naming a sealed row: a result's summary, or chunk n of it. JSON arrays are
 * unambiguous whatever the id holds, and begin with '[' where an event's begins with the zero high
 * byte of its seq, so no row of the run's key opens as another kind of row.
 */
export function resultSummaryAd(resultId: string): Buffer {
  return Buffer.from(JSON.stringify(['postern.result.summary.v1', resultId]), 'utf8');
}

export function resultChunkAd(resultId: string, n: number): Buffer {
  return Buffer.from(JSON.stringify(['postern.result.chunk.v1', resultId, n]), 'utf8');
}

export interface ResultInput {
  readonly result_id: string;
  readonly action_id: string;
  readonly attempt: number;
  /** Non-secret facts (status, allow-listed headers, submission ids…), stored as JSON. */
  readonly summary: Readonly<Record<string, unknown>>;
  /** The kept body bytes (at most the configured cap). */
  readonly body: Uint8Array;
  /** Bytes received, including any beyond the cap. */
  readonly total_bytes: number;
  readonly truncated: boolean;
  /** sha256 over everything received. */
  readonly digest: string;
  readonly created_at_ms: number;
}

/** A complete result's facts without its bytes or summary (both sealed: head() needs no key). */
export type StoredResultHead = Omit<StoredResult, 'body' | 'summary'>;

/** Part of a complete result's body: the chunks from `from_chunk` to the last of `chunks`. */
export interface ResultPart extends StoredResult {
  readonly from_chunk: number;
  readonly chunks: number;
}

export interface StoredResult {
  readonly result_id: string;
  readonly action_id: string;
  readonly attempt: number;
  readonly summary: Record<string, unknown>;
  readonly body: Buffer;
  readonly total_bytes: number;
  readonly stored_bytes: number;
  readonly truncated: boolean;
  readonly digest: string;
  readonly created_at_ms: number;
  /** When its bytes were deleted after retention (purgeExpired); null while they are kept. */
  readonly purged_at_ms: number | null;
}

/**
 * The retrievable result under an invocation id (migration 003: results + result_chunks). Its own
 * connection to the journal file (reads, purges), with the same durability pragmas read back. Order of
 * writes (article 000: a RESULT_COMMITTED never points at a result that is not durable): the executor
 * seals the result here (rowsOf) and the journal writes its rows — summary, every chunk and the
 * completeness marker — in the same transaction as the RESULT_COMMITTED naming it, so both are durable
 * with one sync or neither exists; a crash before that commit leaves an action that recovery
 * classifies from its own events. Fetching a result is a read, never a second execution.
 * After `results.retention_seconds` the bytes are purged (purgeExpired) but the row stays, marked:
 * head() still answers, and a read of the bytes is RESULT_EXPIRED — never partial bytes, never
 * "no such result".
 *
 * Sealed at rest (migration 009): the summary (status, kept headers) and every chunk are AEAD
 * ciphertext under the journal's run key (`cipher`, Journal.rowCipher()), the row's identity as
 * associated data; ids, counts, digest and times stay plain (no content). A result of an earlier
 * broker run opens only while the vault is unlocked (VAULT_LOCKED otherwise); head() never needs a key.
 */
export class ResultStore {
  private readonly sql: (sql: string) => Database.Statement;
  /** SSH session recordings (migration 013): the same file, connection and key, purged with the results. */
  readonly recordings: RecordingStore;
  /** Set by `close`: no purge is posted after it (the journal's writer thread may still be open and take it). */
  private closed = false;

  private constructor(
    private readonly db: Database.Database,
    private readonly cipher: RowCipher,
    role: RecordingStoreRole,
    private readonly beside: BesideWriter | undefined,
  ) {
    this.sql = statementCache(db);
    this.recordings = new RecordingStore(db, cipher, role, beside);
  }

  /**
   * Opens the journal's database file (already migrated by Journal.open), sealing with the journal's key. `role` is
   * 'broker' only for the store of the process holding the data directory's lock (data-dir-lock.ts; the runtime's,
   * and the harnesses standing in for it): its recordings' verdicts rest on that (RecordingStore). Any other opener
   * is a 'reader' (the default). `journal`: the journal whose writer thread, while it runs, writes the recordings'
   * rows (RecordingStore; the broker's store) and the purges, so they never wait for its write lock on the loop.
   */
  static open(
    path: string,
    cipher: RowCipher,
    options: {
      readonly role?: RecordingStoreRole;
      readonly platform?: NodeJS.Platform;
      readonly journal?: BesideWriter;
    } = {},
  ): ResultStore {
    const platform = options.platform ?? process.platform;
    const db = openDatabase(path, { fileMustExist: true });
    try {
      requireDurableConnection(db, platform);
      db.pragma(`busy_timeout = ${busyTimeoutMs}`);
      // The journal's checkpointer copies the WAL on its own thread: a commit here must not do it on the loop.
      db.pragma('wal_autocheckpoint = 0');
      // A purge deletes sealed bytes; zeroed, the free pages never hand them to a later reader of the file.
      db.pragma('secure_delete = ON');
      const table = db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'results'`).get();
      if (table === undefined)
        throw new CodedError('MIGRATION_FAILED', 'the journal has no results table (schema older than 3)');
      // Without the purge mark a purged result could not be told from a kept one.
      const purgeMark = db.prepare(`SELECT name FROM pragma_table_info('results') WHERE name = 'purged_at_ms'`).get();
      if (purgeMark === undefined)
        throw new CodedError(
          'MIGRATION_FAILED',
          'the journal has no results.purged_at_ms column (schema older than 7)',
        );
      const sealedColumn = db
        .prepare(`SELECT name FROM pragma_table_info('results') WHERE name = 'summary_sealed'`)
        .get();
      if (sealedColumn === undefined)
        throw new CodedError('MIGRATION_FAILED', 'the journal has no sealed results (schema older than 9)');
      return new ResultStore(db, cipher, options.role ?? 'reader', options.journal);
    } catch (error) {
      db.close();
      throw error;
    }
  }

  /**
   * Commits a result in a transaction of its own (RESULT_COMMITTED's path uses rowsOf instead: one transaction). Once
   * closed (the broker stopping) it is refused SHUTTING_DOWN, as a purge is, not with the connection's own error.
   */
  commit(input: ResultInput): void {
    if (this.closed) throw new CodedError('SHUTTING_DOWN', 'the broker is stopping: no result is committed');
    const rows = this.rowsOf(input);
    this.db.transaction(() => writeResultRows(this.db, rows)).immediate();
  }

  /**
   * A result's rows, sealed now (before any write lock is held), for the journal to write in the transaction of the
   * RESULT_COMMITTED that names it (Journal.append's `rows`): the result and the event naming it commit together.
   */
  rowsOf(input: ResultInput): ResultRows {
    const summary = JSON.stringify(input.summary);
    if (Buffer.byteLength(summary) > resultSummaryBytesMax) {
      throw new CodedError('PAYLOAD_LIMIT', `a result summary is at most ${resultSummaryBytesMax} bytes`, {
        field: 'summary',
      });
    }
    const body = Buffer.from(input.body.buffer, input.body.byteOffset, input.body.byteLength);
    const chunks = Math.ceil(body.length / resultChunkBytes);
    const sealedSummary = this.cipher.seal(resultSummaryAd(input.result_id), Buffer.from(summary, 'utf8'));
    const sealedChunks = Array.from({ length: chunks }, (_, n) =>
      this.cipher.seal(
        resultChunkAd(input.result_id, n),
        body.subarray(n * resultChunkBytes, (n + 1) * resultChunkBytes),
      ),
    );
    return {
      kind: 'result',
      result_id: input.result_id,
      action_id: input.action_id,
      attempt: input.attempt,
      total_bytes: input.total_bytes,
      stored_bytes: body.length,
      truncated: input.truncated,
      digest: input.digest,
      created_at_ms: input.created_at_ms,
      summary: sealedSummary,
      chunks: sealedChunks.map(({ nonce, ciphertext }) => ({ nonce, ciphertext })),
    };
  }

  /**
   * The facts of a complete result without its bytes or summary (for a retention check before
   * reading chunks: it needs no key), or undefined: absent, or not marked complete. A purged result
   * still has its facts (purged_at_ms set).
   */
  head(resultId: string): StoredResultHead | undefined {
    const row = this.completeRow(resultId);
    return row === undefined ? undefined : headOf(row);
  }

  /**
   * The complete result, or undefined (absent, or not marked complete: chunks are not trusted).
   * A purged result throws RESULT_EXPIRED: its bytes are gone, and saying "absent" would be a lie.
   */
  read(resultId: string): StoredResult | undefined {
    const found = this.verifiedChunks(resultId, 0);
    return found === undefined
      ? undefined
      : { ...headOf(found.row), summary: this.summaryOf(found.row), body: found.body };
  }

  /**
   * The body from chunk `fromChunk` on (article 000: a caller resumes from the last chunk it
   * verified), or undefined like read().
   */
  readFrom(resultId: string, fromChunk: number): ResultPart | undefined {
    const found = this.verifiedChunks(resultId, fromChunk);
    return found === undefined
      ? undefined
      : {
          ...headOf(found.row),
          summary: this.summaryOf(found.row),
          body: found.body,
          from_chunk: fromChunk,
          chunks: found.row.chunks,
        };
  }

  /**
   * Deletes the bytes of every result stored at least `retentionMs` before `nowMs` (the same
   * boundary fetch_result's RESULT_EXPIRED uses), oldest first, at most `limit` of them, and marks
   * each purged — chunks and marks in ONE transaction, so a reader sees a result whole or purged,
   * never half. Returns how many it purged; fewer than `limit` means none is left to purge now.
   * The journal's events (outcome, digest, RESULT_COMMITTED) are never touched. Through the journal's writer thread
   * while it runs (after everything posted before it: never in SQLite's busy handler on the loop), else on this
   * connection; the same SQL either way (beside-rows.ts). A failure rejects this purge alone.
   */
  async purgeExpired(nowMs: number, retentionMs: number, limit: number): Promise<number> {
    if (!Number.isSafeInteger(nowMs) || !Number.isSafeInteger(retentionMs) || retentionMs < 0) {
      throw new RangeError(`purgeExpired needs whole milliseconds (now ${nowMs}, retention ${retentionMs})`);
    }
    if (!Number.isInteger(limit) || limit < 1 || limit > resultPurgeBatchMax)
      throw new RangeError(`purgeExpired purges 1..${resultPurgeBatchMax} results per call, not ${limit}`);
    // Refused before anything is posted: the recordings' purge (the second step) would be refused once this one
    // committed, and a caller would see a failure for rows that were purged.
    if (this.closed || this.recordings.isClosed)
      throw new CodedError('SHUTTING_DOWN', 'the broker is stopping: no result is purged');
    const purged = await this.write({ kind: 'resultsPurged', nowMs, cutoffMs: nowMs - retentionMs, limit });
    // Closed while the results' purge was in flight (the broker stopping): it committed, so it answers what it purged;
    // the recordings wait for the next run's sweep.
    if (this.recordings.isClosed) return purged;
    // A recording holds the same output as its result: it goes with the same retention (summed: the caller's
    // "fewer than limit means none left" still holds, as either batch at its limit makes the sum reach it).
    return purged + (await this.recordings.purgeExpired(nowMs, retentionMs, limit));
  }

  /** One write beside the journal, in a transaction of its own: through its writer thread while one runs, else here. */
  private async write(op: BesideOp): Promise<number> {
    const answer = await writeBesideOrHere(this.beside, this.db, op);
    if (typeof answer !== 'number') throw new CodedError('INTERNAL', `${op.kind} answered no count`);
    return answer;
  }

  readForAction(actionId: string): StoredResult | undefined {
    const row = this.sql(
      `SELECT result_id FROM results WHERE action_id = ? AND complete = 1 ORDER BY attempt DESC LIMIT 1`,
    ).get(actionId) as { result_id: string } | undefined;
    return row === undefined ? undefined : this.read(row.result_id);
  }

  /**
   * Closes the connection. `nowMs`: the broker is stopping now, so the recordings of commands still running are
   * recorded alive at that moment and left open (RecordingStore.close).
   */
  close(nowMs?: number): void {
    this.closed = true;
    this.recordings.close(nowMs);
    if (this.db.open) this.db.close();
  }

  /**
   * Chunks are trusted only under a completeness marker and only as the unbroken sequence
   * 0..chunks-1 the marker names: a gap, a missing or extra chunk or a wrong stored length throws
   * INTERNAL rather than hand over bytes the store cannot vouch for. Only the chunks handed over
   * are opened; a chunk changed or moved from another row fails authentication (INTERNAL).
   */
  private verifiedChunks(resultId: string, fromChunk: number): { row: ResultRow; body: Buffer } | undefined {
    const row = this.completeRow(resultId);
    if (row === undefined) return undefined;
    if (row.purged_at_ms !== null) {
      throw new CodedError(
        'RESULT_EXPIRED',
        `result ${resultId} passed its retention and its bytes were purged at ${new Date(row.purged_at_ms).toISOString()}; it is never re-executed`,
      );
    }
    if (!Number.isInteger(fromChunk) || fromChunk < 0 || fromChunk > row.chunks) {
      throw new CodedError('INVALID_ARGUMENT', `a chunk offset is a whole number from 0 to ${row.chunks}`, {
        field: 'from_chunk',
      });
    }
    const parts = this.sql(`SELECT n, bytes, nonce FROM result_chunks WHERE result_id = ? ORDER BY n`).all(
      resultId,
    ) as ChunkRow[];
    if (parts.length !== row.chunks || parts.some((p, i) => p.n !== i)) {
      throw new CodedError('INTERNAL', `result ${resultId} is marked complete but its chunks are not in sequence`);
    }
    const stored = parts.reduce((n, p) => n + p.bytes.length - aeadTagBytes, 0);
    if (stored !== row.stored_bytes)
      throw new CodedError('INTERNAL', `result ${resultId} has ${stored} stored bytes, expected ${row.stored_bytes}`);
    const run = sealedRun(row);
    const opened = parts
      .slice(fromChunk)
      .map((p) => this.cipher.open({ run, nonce: p.nonce, ciphertext: p.bytes }, resultChunkAd(resultId, p.n)));
    return { row, body: Buffer.concat(opened) };
  }

  private summaryOf(row: ResultRow): Record<string, unknown> {
    if (row.summary_nonce === null || row.summary_sealed === null)
      throw new CodedError('INTERNAL', `result ${row.result_id} has no sealed summary`);
    const plain = this.cipher.open(
      { run: sealedRun(row), nonce: row.summary_nonce, ciphertext: row.summary_sealed },
      resultSummaryAd(row.result_id),
    );
    return JSON.parse(Buffer.from(plain).toString('utf8')) as Record<string, unknown>;
  }

  private completeRow(resultId: string): ResultRow | undefined {
    return this.sql(`SELECT * FROM results WHERE result_id = ? AND complete = 1`).get(resultId) as
      ResultRow | undefined;
  }
}

interface ResultRow {
  result_id: string;
  action_id: string;
  attempt: number;
  total_bytes: number;
  stored_bytes: number;
  truncated: number;
  digest: string;
  chunks: number;
  created_at_ms: number;
  purged_at_ms: number | null;
  /** The sealing run (migration 009); null only on a row purged because nothing could seal it. */
  run: number | null;
  summary_nonce: Buffer | null;
  summary_sealed: Buffer | null;
}

interface ChunkRow {
  n: number;
  bytes: Buffer;
  nonce: Buffer;
}

function sealedRun(row: ResultRow): number {
  if (row.run === null) throw new CodedError('INTERNAL', `result ${row.result_id} is not sealed`);
  return row.run;
}

function headOf(row: ResultRow): StoredResultHead {
  return {
    result_id: row.result_id,
    action_id: row.action_id,
    attempt: row.attempt,
    total_bytes: row.total_bytes,
    stored_bytes: row.stored_bytes,
    truncated: row.truncated === 1,
    digest: row.digest,
    created_at_ms: row.created_at_ms,
    purged_at_ms: row.purged_at_ms,
  };
}
