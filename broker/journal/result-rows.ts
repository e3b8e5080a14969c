import type Database from 'better-sqlite3';
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

const resultWrites = new WeakMap<
  Database.Database,
  { insertResult: Database.Statement; insertChunk: Database.Statement }
>();

/** A result's insert statements, prepared once per connection (the store's own, or the journal's). */
function resultStatements(db: Database.Database): {
  insertResult: Database.Statement;
  insertChunk: Database.Statement;
} {
  let statements = resultWrites.get(db);
  if (statements === undefined) {
    statements = {
      insertResult: db.prepare(
        `INSERT INTO results (result_id, action_id, attempt, total_bytes, stored_bytes, truncated, digest, chunks, complete, created_at_ms, run, summary_nonce, summary_sealed)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?)`,
      ),
      insertChunk: db.prepare(`INSERT INTO result_chunks (result_id, n, bytes, nonce) VALUES (?, ?, ?, ?)`),
    };
    resultWrites.set(db, statements);
  }
  return statements;
}
