/**
 * The journal's writer thread (docs/journal-writer-thread.md, phase 2): the entry a worker runs, bundled by esbuild
 * into one script (writer-worker-source.ts) that `WriterThread` evaluates. It owns the journal's write connection:
 * for each WriteBatch it begins the transaction, writes it through a JournalWriter (sealing each event with this run's
 * key), commits, and answers the WriteAck; for writer operations (checkpoints, keys, the run's end, an anchor's record)
 * the same in a transaction of their own. It decides nothing: every refusal was made on the loop while planning.
 *
 * After a failed batch it refuses every later batch without touching the file (the loop has failed the journal), but
 * still writes operations, so the run's `failed: CODE` end can be recorded.
 *
 * Every answer is posted on the loop's port and then counted in the shared signal word, so the loop can wait for it
 * without its event loop (Atomics.wait + receiveMessageOnPort) where it must answer synchronously.
 */
import { workerData as untypedWorkerData, type MessagePort } from 'node:worker_threads';
import Database from 'better-sqlite3';
import type { TreeHead } from './audit-writer.js';
import { requireDurableConnection, type SyncMode } from './durability.js';
import { sodiumReady } from './event-cipher.js';
import { JournalStore } from './journal-store.js';
import { JournalWriter, type WriteBatch, type WriterOp, type WriterStart } from './journal-writer.js';
import type { WriterError, WriterReply } from './writer-thread.js';

/** What the loop starts the writer with (plain data, plus the port and the shared signal word). */
export interface WriterWorkerData {
  readonly dbPath: string;
  readonly nativeBinding: string | undefined;
  readonly platform: NodeJS.Platform;
  readonly syncMode: SyncMode;
  readonly busyTimeoutMs: number;
  readonly maxPageCount: number;
  readonly start: WriterStart;
  /** Test seam (JournalOpenOptions.writerAckHeldFromSeq): a batch reaching this seq commits and is never answered. */
  readonly ackHeldFromSeq: number | undefined;
  readonly port: MessagePort;
  readonly signal: SharedArrayBuffer;
}

export type WriterRequest =
  | { readonly kind: 'commit'; readonly id: number; readonly batch: WriteBatch; readonly base?: TreeHead }
  | { readonly kind: 'ops'; readonly id: number; readonly ops: readonly WriterOp[] }
  | { readonly kind: 'end'; readonly id: number };

const data = untypedWorkerData as WriterWorkerData;

/**
 * The actions rows the thread remembers having written (JournalWriter rememberRows): a batch names a row it holds by
 * seq alone. Enough for every action open at c64 with batches in flight many times over; a miss reads the row.
 */
const writerRowsRemembered = 2_048;
const signal = new Int32Array(data.signal);

function reply(message: WriterReply): void {
  data.port.postMessage(message);
  Atomics.add(signal, 0, 1);
  Atomics.notify(signal, 0);
}

// A loop waiting for an answer without its event loop cannot hear the worker's 'exit': the thread says so itself.
process.on('exit', () => {
  Atomics.store(signal, 1, 1);
  Atomics.add(signal, 0, 1);
  Atomics.notify(signal, 0);
});

/** An error as data: its message, and its code when it has one (a SQLite code; none for a plain Error). */
function errorOf(error: unknown): WriterError {
  const code = (error as { code?: unknown } | undefined)?.code;
  const message = error instanceof Error ? error.message : String(error);
  return typeof code === 'string' && code !== '' ? { code, message } : { message };
}

function open(): Database.Database {
  const options: Database.Options = { fileMustExist: true, timeout: data.busyTimeoutMs };
  const db = new Database(
    data.dbPath,
    data.nativeBinding === undefined ? options : { ...options, nativeBinding: data.nativeBinding },
  );
  try {
    requireDurableConnection(db, data.platform, data.syncMode);
    // Checkpoints run on the checkpointer's thread, never inside this connection's COMMIT.
    db.pragma('wal_autocheckpoint = 0');
    db.pragma(`max_page_count = ${data.maxPageCount}`);
    return db;
  } catch (error) {
    db.close();
    throw error;
  }
}

/** One transaction around `write`: committed if it returns, rolled back if it throws. */
function inTransaction<T>(db: Database.Database, write: () => T): T {
  db.exec('BEGIN IMMEDIATE');
  try {
    const result = write();
    db.exec('COMMIT');
    return result;
  } catch (error) {
    if (db.inTransaction) {
      try {
        db.exec('ROLLBACK');
      } catch {
        // SQLite may have rolled back already (SQLITE_FULL, SQLITE_IOERR).
      }
    }
    throw error;
  }
}

/** The thread's answers to the loop's requests, in the order they come. */
function serve(db: Database.Database, writer: JournalWriter): (request: WriterRequest) => void {
  let committed: TreeHead = data.start.sealer.tree;
  let failed: WriterError | undefined;
  const commit = (request: Extract<WriterRequest, { kind: 'commit' }>): void => {
    if (failed !== undefined) {
      reply({ id: request.id, error: { ...failed, message: `an earlier batch failed: ${failed.message}` } });
      return;
    }
    try {
      // The loop committed since this thread last did: seal on from the head it committed.
      if (request.base !== undefined) {
        writer.abandoned(request.base);
        committed = request.base;
      }
      const ack = inTransaction(db, () => {
        const written = writer.commit(request.batch);
        // The loop failed the journal meanwhile (a failed sync, another batch): nothing after that commits.
        if (Atomics.load(signal, 2) === 1) throw new Error('the journal failed before this batch committed');
        return written;
      });
      writer.committed();
      committed = { size: ack.treeSize, frontier: ack.frontier };
      // The crash test's cut point "committed by the writer, the ack not yet heard": the loop never learns of it.
      if (data.ackHeldFromSeq !== undefined && ack.lastSeq >= data.ackHeldFromSeq) return;
      reply({ id: request.id, ack });
    } catch (error) {
      writer.abandoned(committed);
      failed = errorOf(error);
      reply({ id: request.id, error: failed });
    }
  };
  return (request) => {
    switch (request.kind) {
      case 'commit':
        commit(request);
        return;
      case 'ops':
        try {
          const results = inTransaction(db, () => request.ops.map((op) => writer.write(op)));
          reply(results.every((result) => result === undefined) ? { id: request.id } : { id: request.id, results });
        } catch (error) {
          reply({ id: request.id, error: errorOf(error) });
        }
        return;
      case 'end':
        try {
          db.close();
          reply({ id: request.id });
        } catch (error) {
          reply({ id: request.id, error: errorOf(error) });
        }
        data.port.close();
        return;
      default:
        reply({ id: (request as { id: number }).id, error: { code: 'INTERNAL', message: 'unknown writer request' } });
    }
  };
}

async function main(): Promise<void> {
  let db: Database.Database;
  let writer: JournalWriter;
  try {
    await sodiumReady();
    db = open();
    writer = new JournalWriter(db, new JournalStore(db), data.start, { rememberRows: writerRowsRemembered });
  } catch (error) {
    reply({ id: 0, error: errorOf(error) });
    data.port.close();
    return;
  }
  data.port.on('message', serve(db, writer));
  reply({ id: 0 });
}

void main();
