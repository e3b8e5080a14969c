import Database from 'better-sqlite3';
import type { SealedRow } from './audit-writer.js';

/**
 * A result's rows, sealed, as plain data (numbers, strings, bytes): ResultStore.rowsOf builds them before any write
 * lock is held, the journal writes them (writeResultRows) in the transaction of the RESULT_COMMITTED that names the
 * result. Data rather than a closure so that a batch of them can cross to a journal writer thread
 * (docs/journal-writer-thread.md, phase 1) and be written there the same way.
 */
export interface ResultRows {
  readonly kind: 'result';
  readonly result_id: string;
  readonly action_id: string;
  readonly attempt: number;
  readonly total_bytes: number;
  readonly stored_bytes: number;
  readonly truncated: boolean;
  readonly digest: string;
  readonly created_at_ms: number;
  readonly summary: SealedRow;
  /** Chunk n is at index n. */
  readonly chunks: readonly Pick<SealedRow, 'nonce' | 'ciphertext'>[];
}

/** Writes `rows` on `db` (inside its caller's transaction): the result's row and every chunk's. */
export function writeResultRows(db: Database.Database, rows: ResultRows): void {
  const sql = resultStatements(db);
  sql.insertResult.run(
    rows.result_id,
    rows.action_id,
    rows.attempt,
    rows.total_bytes,
    rows.stored_bytes,
    rows.truncated ? 1 : 0,
    rows.digest,
    rows.chunks.length,
    rows.created_at_ms,
    rows.summary.run,
    rows.summary.nonce,
    rows.summary.ciphertext,
  );
  rows.chunks.forEach((chunk, n) => sql.insertChunk.run(rows.result_id, n, chunk.ciphertext, chunk.nonce));
}

/** The results planned into one commit so far (ResultRowsClash): their ids and their (action, attempt) keys. */
export interface PlannedResults {
  readonly ids: Set<string>;
  readonly attempts: Set<string>;
}

export function newPlannedResults(): PlannedResults {
  return { ids: new Set(), attempts: new Set() };
}

/**
 * Whether `rows` would break one of the results table's unique keys (result_id; action_id with attempt), against the
 * table and the results `planned` before them in the same commit: the error the INSERT would have thrown (the same
 * SqliteError, code and message, SQLite checking (action_id, attempt) first), else undefined, and `rows` join
 * `planned`. Exact only under the write lock: the journal asks while planning a commit, so the writer never meets the
 * constraint (docs/journal-writer-thread.md, phase 1).
 */
export function resultRowsClash(
  db: Database.Database,
  rows: ResultRows,
  planned: PlannedResults,
): InstanceType<typeof Database.SqliteError> | undefined {
  const sql = resultStatements(db);
  const attempt = `${rows.attempt} ${rows.action_id}`;
  if (planned.attempts.has(attempt) || sql.attemptExists.get(rows.action_id, rows.attempt) !== undefined)
    return new Database.SqliteError(
      'UNIQUE constraint failed: results.action_id, results.attempt',
      'SQLITE_CONSTRAINT_UNIQUE',
    );
  if (planned.ids.has(rows.result_id) || sql.idExists.get(rows.result_id) !== undefined)
    return new Database.SqliteError('UNIQUE constraint failed: results.result_id', 'SQLITE_CONSTRAINT_PRIMARYKEY');
  planned.ids.add(rows.result_id);
  planned.attempts.add(attempt);
  return undefined;
}

/**
 * A batch's results are committed (the table holds them now): they leave `planned`, which the batches still in flight
 * on the writer thread share, so that it holds only what is in flight and does not grow with every result.
 */
export function forgetPlannedResults(planned: PlannedResults, committed: readonly ResultRows[]): void {
  for (const rows of committed) {
    planned.ids.delete(rows.result_id);
    planned.attempts.delete(`${rows.attempt} ${rows.action_id}`);
  }
}

interface ResultStatements {
  readonly insertResult: Database.Statement;
  readonly insertChunk: Database.Statement;
  readonly idExists: Database.Statement<[string]>;
  readonly attemptExists: Database.Statement<[string, number]>;
}

const resultStatementsOf = new WeakMap<Database.Database, ResultStatements>();

/** A result's statements, prepared once per connection (the store's own, or the journal's). */
function resultStatements(db: Database.Database): ResultStatements {
  let statements = resultStatementsOf.get(db);
  if (statements === undefined) {
    statements = {
      insertResult: db.prepare(
        `INSERT INTO results (result_id, action_id, attempt, total_bytes, stored_bytes, truncated, digest, chunks, complete, created_at_ms, run, summary_nonce, summary_sealed)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?)`,
      ),
      insertChunk: db.prepare(`INSERT INTO result_chunks (result_id, n, bytes, nonce) VALUES (?, ?, ?, ?)`),
      idExists: db.prepare(`SELECT 1 FROM results WHERE result_id = ?`),
      attemptExists: db.prepare(`SELECT 1 FROM results WHERE action_id = ? AND attempt = ?`),
    };
    resultStatementsOf.set(db, statements);
  }
  return statements;
}
