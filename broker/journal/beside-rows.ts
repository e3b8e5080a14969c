import type Database from 'better-sqlite3';
import { CodedError } from '../contract/index.js';
import { statementCache } from '../ports/open-database.js';

/**
 * Writes beside the journal's own tables — an SSH recording's rows (migration 013), a kept request (migration 008),
 * the retention purges of results, recordings and kept requests — as plain data, so that one function writes them
 * whether the store's own connection runs it on the loop (no writer thread) or the journal's writer thread does
 * (Journal.writeBeside; docs/journal-writer-thread.md). Each answers a
 * value for what the SQL found (a row that was not open, a purge that came first); only a SQLite failure throws, and
 * on the writer thread that rolls back these ops alone and rejects their write, the journal staying open (as on the
 * store's own connection).
 */
export type BesideOp =
  /** An SSH recording's open row, before its exec request. Answers the rows inserted: 0 when it already existed. */
  | {
      readonly kind: 'recordingStarted';
      readonly recordingId: string;
      readonly actionId: string;
      readonly startedAtMs: number;
    }
  /**
   * The recording's cast, sealed on the loop under the run key (`run`, `chunks` in order), and its row marked complete.
   * Answers 'finished', or 'purged' / 'not open' with nothing written.
   */
  | {
      readonly kind: 'recordingFinished';
      readonly recordingId: string;
      readonly truncated: boolean;
      readonly castBytes: number;
      readonly run: number | null;
      readonly chunks: readonly { readonly ciphertext: Uint8Array; readonly nonce: Uint8Array }[];
      readonly finishedAtMs: number;
    }
  /** The open recording's command was still running (or just ended) at `atMs`; never moves the mark back. */
  | { readonly kind: 'recordingAlive'; readonly recordingId: string; readonly atMs: number }
  /** A kept request's sealed row (kept-request.ts), kept or replaced. */
  | {
      readonly kind: 'requestKept';
      readonly actionId: string;
      readonly route: string;
      readonly sealed: Uint8Array;
      readonly keptAtMs: number;
      readonly expiresAtMs: number;
    }
  /** An action's kept request dropped (settled). Answers the rows deleted. */
  | { readonly kind: 'requestDropped'; readonly actionId: string }
  /**
   * The retention purge of results (ResultStore.purgeExpired): the bytes of at most `limit` results stored at or
   * before `cutoffMs`, oldest first, deleted and each marked purged at `nowMs`. Answers how many.
   */
  | { readonly kind: 'resultsPurged'; readonly nowMs: number; readonly cutoffMs: number; readonly limit: number }
  /**
   * The retention purge of recordings (RecordingStore.purgeExpired): `running` (the store's recordings whose commands
   * run now) marked alive at `nowMs` and never purged; then at most `limit` finished ones whose finish is at or before
   * `cutoffMs`, and, with `leftovers` (the broker's store only), open ones last known alive by then. Answers how many.
   */
  | {
      readonly kind: 'recordingsPurged';
      readonly nowMs: number;
      readonly cutoffMs: number;
      readonly limit: number;
      readonly running: readonly string[];
      readonly leftovers: boolean;
    }
  /** Kept requests expired at `nowMs` dropped, at most `limit` (RequestStore.dropExpired). Answers how many. */
  | { readonly kind: 'expiredRequestsDropped'; readonly nowMs: number; readonly limit: number };

export type BesideOpKind = BesideOp['kind'];
export type FinishedAs = 'finished' | 'purged' | 'not open';
/** What one BesideOp answers (plain data). */
export type BesideResult = number | FinishedAs;

/** Who writes beside the journal on its writer thread while one runs: the Journal (writeBeside). */
export interface BesideWriter {
  /**
   * Posts the operations to the writer thread as one transaction, after everything posted before, and resolves with
   * each one's answer once committed; undefined when no writer thread runs (the caller writes on its own connection).
   */
  writeBeside(ops: readonly BesideOp[]): Promise<BesideResult[]> | undefined;
}

/**
 * One write beside the journal, in a transaction of its own, for the stores (results, recordings, kept requests):
 * posted to the journal's writer thread while one runs (`beside`: after everything posted before it), else on the
 * store's own connection `db`, in an IMMEDIATE transaction taken on this turn (the write lock waited for with the
 * connection's busy timeout), as the thread runs its ops in one. Resolves with the op's answer; whatever the write
 * meets rejects (never a synchronous throw). A store refuses on its own once closed, before calling this: the writer
 * thread may outlive it.
 */
export async function writeBesideOrHere(
  beside: BesideWriter | undefined,
  db: Database.Database,
  op: BesideOp,
): Promise<BesideResult> {
  const posted = beside?.writeBeside([op]);
  if (posted === undefined) return db.transaction(() => writeBesideOp(db, op)).immediate();
  const [answer] = await posted;
  if (answer === undefined) throw new CodedError('INTERNAL', `${op.kind} was answered nothing by the writer thread`);
  return answer;
}

const besideKinds: ReadonlySet<string> = new Set<BesideOpKind>([
  'recordingStarted',
  'recordingFinished',
  'recordingAlive',
  'requestKept',
  'requestDropped',
  'resultsPurged',
  'recordingsPurged',
  'expiredRequestsDropped',
]);

export function isBesideOp(op: { readonly kind: string }): op is BesideOp {
  return besideKinds.has(op.kind);
}

/** The purge's finished recordings past the cutoff, oldest finish first: a range of recordings_by_finish. */
export const purgeFinishedSql = `SELECT recording_id FROM recordings WHERE purged_at_ms IS NULL AND finished_at_ms <= ?
  ORDER BY finished_at_ms LIMIT ?`;

/**
 * The purge's open recordings last known alive before the cutoff (`alive_at_ms`, migration 019: their start, or a
 * later moment their broker recorded them running), oldest first. `finished_at_ms IS NULL` (finish sets it with
 * complete = 1, in one statement) keeps the read to recordings_by_finish's NULL range: the few open rows are searched,
 * never a scan of every unpurged recording (and the sort is of those few alone).
 */
export const purgeOpenSql = `SELECT recording_id FROM recordings
  WHERE purged_at_ms IS NULL AND finished_at_ms IS NULL AND complete = 0 AND alive_at_ms <= ?
  ORDER BY alive_at_ms LIMIT ?`;

/**
 * A purge deletes sealed bytes (results, recordings), and so does a kept request's drop, its expiry or its
 * replacement: with secure_delete the content it deletes and the pages it frees are zeroed, so the file never hands
 * them to a later reader. The result and request stores' connections have it on already; the writer thread's turns it
 * on for the op alone.
 */
function zeroingFreedPages<T>(connection: Database.Database, write: () => T): T {
  const was = connection.pragma('secure_delete', { simple: true }) as number;
  if (was === 1) return write();
  connection.pragma('secure_delete = ON');
  try {
    return write();
  } finally {
    connection.pragma(`secure_delete = ${was === 2 ? 'FAST' : 'OFF'}`);
  }
}

/** A sealed byte string as a Buffer over the same bytes (a Uint8Array once it crossed to the thread). */
function bytes(view: Uint8Array): Buffer {
  return Buffer.from(view.buffer, view.byteOffset, view.byteLength);
}

/** Each connection's statements, compiled once. */
const statements = new WeakMap<Database.Database, (sql: string) => Database.Statement>();

/** Writes one operation's rows on `db`, inside the caller's transaction; throws only what SQLite throws. */
export function writeBesideOp(connection: Database.Database, op: BesideOp): BesideResult {
  let sql = statements.get(connection);
  if (sql === undefined) statements.set(connection, (sql = statementCache(connection)));
  const db = { prepare: sql };
  switch (op.kind) {
    case 'recordingStarted':
      return db
        .prepare(
          `INSERT INTO recordings (recording_id, action_id, started_at_ms, alive_at_ms) VALUES (?, ?, ?, ?)
           ON CONFLICT DO NOTHING`,
        )
        .run(op.recordingId, op.actionId, op.startedAtMs, op.startedAtMs).changes;
    case 'recordingFinished': {
      const changed = db
        .prepare(
          `UPDATE recordings SET complete = 1, truncated = ?, cast_bytes = ?, chunks = ?, run = ?, finished_at_ms = ?,
             alive_at_ms = ? WHERE recording_id = ? AND complete = 0 AND purged_at_ms IS NULL`,
        )
        .run(
          op.truncated ? 1 : 0,
          op.castBytes,
          op.chunks.length,
          op.run,
          op.finishedAtMs,
          op.finishedAtMs,
          op.recordingId,
        ).changes;
      if (changed !== 1) {
        const purged = db
          .prepare(`SELECT 1 FROM recordings WHERE recording_id = ? AND purged_at_ms IS NOT NULL`)
          .get(op.recordingId);
        return purged === undefined ? 'not open' : 'purged';
      }
      const insert = db.prepare(`INSERT INTO recording_chunks (recording_id, n, bytes, nonce) VALUES (?, ?, ?, ?)`);
      op.chunks.forEach((chunk, n) => insert.run(op.recordingId, n, bytes(chunk.ciphertext), bytes(chunk.nonce)));
      return 'finished';
    }
    case 'recordingAlive':
      return db
        .prepare(
          `UPDATE recordings SET alive_at_ms = @atMs WHERE recording_id = @recordingId AND complete = 0
             AND purged_at_ms IS NULL AND alive_at_ms < @atMs`,
        )
        .run({ atMs: op.atMs, recordingId: op.recordingId }).changes;
    case 'requestKept':
      // A row kept again for the same action replaces the old one: its sealed bytes are zeroed as a drop's are.
      return zeroingFreedPages(
        connection,
        () =>
          db
            .prepare(
              `INSERT OR REPLACE INTO kept_requests (action_id, route, sealed, kept_at_ms, expires_at_ms)
               VALUES (?, ?, ?, ?, ?)`,
            )
            .run(op.actionId, op.route, bytes(op.sealed), op.keptAtMs, op.expiresAtMs).changes,
      );
    case 'requestDropped':
      return zeroingFreedPages(
        connection,
        () => db.prepare(`DELETE FROM kept_requests WHERE action_id = ?`).run(op.actionId).changes,
      );
    case 'resultsPurged':
      return zeroingFreedPages(connection, () => purgeResults(db, op));
    case 'recordingsPurged':
      return zeroingFreedPages(connection, () => purgeRecordings(connection, db, op));
    case 'expiredRequestsDropped':
      return zeroingFreedPages(
        connection,
        () =>
          db
            .prepare(
              `DELETE FROM kept_requests WHERE action_id IN
                 (SELECT action_id FROM kept_requests WHERE expires_at_ms <= ? ORDER BY expires_at_ms LIMIT ?)`,
            )
            .run(op.nowMs, op.limit).changes,
      );
    default:
      throw new Error(`unknown write beside the journal: ${String((op as { kind?: unknown }).kind)}`);
  }
}

/** ResultStore.purgeExpired's rows (the `resultsPurged` op), inside the caller's transaction. */
function purgeResults(
  db: { prepare: (sql: string) => Database.Statement },
  op: Extract<BesideOp, { kind: 'resultsPurged' }>,
): number {
  const ids = db
    .prepare(
      `SELECT result_id FROM results WHERE purged_at_ms IS NULL AND created_at_ms <= ?
       ORDER BY created_at_ms, result_id LIMIT ?`,
    )
    .pluck()
    .all(op.cutoffMs, op.limit) as string[];
  const deleteChunks = db.prepare(`DELETE FROM result_chunks WHERE result_id = ?`);
  const mark = db.prepare(`UPDATE results SET purged_at_ms = ? WHERE result_id = ? AND purged_at_ms IS NULL`);
  for (const id of ids) {
    deleteChunks.run(id);
    mark.run(op.nowMs, id);
  }
  return ids.length;
}

/** RecordingStore.purgeExpired's rows (the `recordingsPurged` op), inside the caller's transaction. */
function purgeRecordings(
  connection: Database.Database,
  db: { prepare: (sql: string) => Database.Statement },
  op: Extract<BesideOp, { kind: 'recordingsPurged' }>,
): number {
  // Running first: one its broker dies with (a crash mid-command) is kept a retention after this sweep saw it running.
  for (const recordingId of op.running)
    writeBesideOp(connection, { kind: 'recordingAlive', recordingId, atMs: op.nowMs });
  const ids = db.prepare(purgeFinishedSql).pluck().all(op.cutoffMs, op.limit) as string[];
  // A reader cannot tell an earlier run's leftover from a command the broker runs now: it leaves open rows be.
  if (ids.length < op.limit && op.leftovers) {
    const running = new Set(op.running);
    // Open rows are few (leftovers, and the commands running now, which are skipped: at most `running.size` more).
    const leftovers = (
      db
        .prepare(purgeOpenSql)
        .pluck()
        .all(op.cutoffMs, op.limit - ids.length + running.size) as string[]
    ).filter((id) => !running.has(id));
    ids.push(...leftovers.slice(0, op.limit - ids.length));
  }
  const deleteChunks = db.prepare(`DELETE FROM recording_chunks WHERE recording_id = ?`);
  const mark = db.prepare(`UPDATE recordings SET purged_at_ms = ? WHERE recording_id = ?`);
  for (const id of ids) {
    deleteChunks.run(id);
    mark.run(op.nowMs, id);
  }
  return ids.length;
}
