import type Database from 'better-sqlite3';
import type { JournalEvent, SessionState } from '../contract/index.js';
import type { BoundIdempotencyKey } from '../core/index.js';
import { RunSealer, type RunSealerStart, type TreeHead } from './audit-writer.js';
import { AnchorStore, type AnchorRecord } from './anchor-store.js';
import { isBesideOp, writeBesideOp, type BesideOp, type BesideResult } from './beside-rows.js';
import {
  newCounterTally,
  type ActionRowWrite,
  type AuditKeysRow,
  type CheckpointRow,
  type JournalStore,
  type WrittenRow,
} from './journal-store.js';
import { writeResultRows, type ResultRows } from './result-rows.js';
import { RecentCache } from './state-cache.js';

/**
 * The write half of one commit, planned (Journal: planUnit over the CommitOverlay) and handed to the JournalWriter.
 * Plain data only — numbers, strings, booleans, null, bytes, arrays and plain objects, no class instance, closure or
 * Map — so that a structured clone of it (what postMessage makes) writes the same rows: the shape a writer thread takes
 * (docs/journal-writer-thread.md, phase 2).
 */
export interface WriteBatch {
  /** The accepted units' result rows, in unit order; their unique keys were checked while planning (resultRowsClash). */
  readonly rows: readonly ResultRows[];
  /** The planned events, seqs contiguous from the log's end, in append order: sealed and inserted in this order. */
  readonly events: readonly JournalEvent[];
  /**
   * Every action row the events moved, as it ends up (one per action). Planned for the writer thread, a row the loop
   * knows carries only the seq naming it as last written (ActionRowWrite.writtenSeq).
   */
  readonly actions: readonly ActionRowWrite[];
  readonly sessions: readonly SessionState[];
  readonly idempotencyKeys: readonly BoundIdempotencyKey[];
  /** meta.last_ticket after the batch; null when no event took a ticket. */
  readonly lastTicket: number | null;
}

/**
 * An audit write outside a commit, as plain data: the rows only. Whatever they carry was signed, sealed or wrapped on
 * the loop (the signing secret never leaves it); the writer writes them in the caller's transaction.
 */
export type AuditOp =
  /** A checkpoint signed over the committed tree head (interval, lock, unlock, shutdown, readopt). */
  | { readonly kind: 'checkpoint'; readonly checkpoint: CheckpointRow }
  /** The audit key pairs made at the very first unlock: public halves, and the secret halves wrapped by the vault. */
  | { readonly kind: 'auditKeys'; readonly keys: AuditKeysRow }
  /** This run's key sealed to the audit public key, once one exists. */
  | { readonly kind: 'runKeySealed'; readonly run: number; readonly sealedKey: Uint8Array }
  /** The run's end: 'closed', or 'failed: CODE' after a failure. */
  | { readonly kind: 'runEnded'; readonly run: number; readonly atMs: number; readonly reason: string };

/**
 * A writer operation besides a commit's batch: an audit row, the record of an integrity anchor file on disk, or a
 * write beside the journal's tables (an SSH recording's rows, a kept request: beside-rows.ts).
 */
export type WriterOp = AuditOp | { readonly kind: 'anchorRecorded'; readonly record: AnchorRecord } | BesideOp;

/** What the JournalWriter answers for a batch it wrote (plain data too). */
export interface WriteAck {
  /** The seq of the batch's last event. */
  readonly lastSeq: number;
  /** How many events it appended. */
  readonly appended: number;
  /** The audit tree's size once the batch's leaves are in it (the events the log holds; the leaves `frontier` covers). */
  readonly treeSize: number;
  /**
   * The audit tree's frontier as written with the batch (audit_tree.frontier: its subtree roots, 32 bytes each, largest
   * first; `treeSize` leaves): once the batch is committed, the head the loop's AuditWriter signs checkpoints over
   * (AuditWriter.commitSucceeded).
   */
  readonly frontier: Uint8Array;
}

/**
 * What a JournalWriter starts from, plain data (a writer thread's workerData in phase 2): the RunSealer's run, run key
 * and committed tree (AuditWriter.sealerStart), and the sealFault test seam.
 */
export interface WriterStart {
  readonly sealer: RunSealerStart;
  /** Test seam (JournalOpenOptions.sealFault). */
  readonly sealFault?: SealFault | undefined;
}

/**
 * Test seam (JournalOpenOptions.sealFault), as data so that it can cross to a writer thread: sealing an event that
 * matches every field given (its seq, its kind) throws `new Error(message)`, a sealing failure (the first one fails the
 * journal, so no later event is sealed).
 */
export interface SealFault {
  readonly atSeq?: number;
  readonly kind?: JournalEvent['kind'];
  readonly message: string;
}

/**
 * Owns a commit's writes on the journal's connection: given a WriteBatch it writes the result rows, seals and inserts
 * each event, writes the actions rows (and the status counters they move), the sessions, the idempotency keys, the last
 * ticket and the audit tree's frontier, and answers a WriteAck. It decides nothing: every refusal was made while
 * planning, so any throw here (a SQLite error, a constraint, a sealing failure) is the journal's failure, and the
 * caller rolls the transaction back and fails closed.
 *
 * Phase 1 of docs/journal-writer-thread.md: it runs inline, inside the transaction the Journal began (BEGIN IMMEDIATE
 * before planning, since planning reads under the write lock; COMMIT or ROLLBACK after this returns or throws).
 */
export class JournalWriter {
  /** Seals this run's events, with the pending tree they extend: built here from the start data. */
  private readonly sealer: RunSealer;
  private readonly sealFault: SealFault | undefined;
  /**
   * With `rememberRows` (the writer thread): the actions rows this writer committed, by action id, so that a row the
   * loop names by its seq (ActionRowWrite.writtenSeq) need not cross or be read back. Bounded, least recent first out;
   * a row it does not hold (or holds at another seq: the loop wrote it since) is read from the table.
   */
  private readonly rows: RecentCache<WrittenRow> | undefined;
  /** The rows of the batch written and not yet committed (committed() keeps them, abandoned() drops them). */
  private pendingRows: [string, WrittenRow][] | undefined;

  constructor(
    private readonly db: Database.Database,
    private readonly store: JournalStore,
    start: WriterStart,
    options: { readonly rememberRows?: number } = {},
  ) {
    this.sealer = new RunSealer(store, start.sealer);
    this.sealFault = start.sealFault;
    this.rows = options.rememberRows === undefined ? undefined : new RecentCache(options.rememberRows);
  }

  /** Writes `batch` inside the caller's transaction. Throws on any failure; nothing it wrote may then be committed. */
  commit(batch: WriteBatch): WriteAck {
    const last = batch.events.at(-1);
    if (last === undefined) throw new Error('a write batch holds no event');
    for (const rows of batch.rows) writeResultRows(this.db, rows);
    for (const event of batch.events) {
      if (this.sealFault !== undefined) throwIfFault(this.sealFault, event);
      this.store.insertEvent(this.sealer.seal(event).row);
    }
    // The status counters move by each row's difference, summed for the whole batch and written once.
    const tally = newCounterTally();
    const rows = this.rows;
    if (rows === undefined) for (const action of batch.actions) this.store.writeState(action, tally);
    else {
      const pending: [string, WrittenRow][] = [];
      for (const action of batch.actions) {
        const id = action.state.action_id;
        const remembered = action.writtenSeq === undefined ? undefined : rows.peek(id);
        const values = this.store.writeRemembered(action, tally, remembered);
        pending.push([id, { lastSeq: action.state.last_seq, values }]);
      }
      this.pendingRows = pending;
    }
    this.store.writeCounts(tally);
    for (const session of batch.sessions) this.store.writeSession(session);
    for (const bound of batch.idempotencyKeys) this.store.writeIdempotencyKey(bound);
    if (batch.lastTicket !== null) this.store.setLastTicket(batch.lastTicket);
    // The tree head moves in the same transaction as the rows it covers.
    const tree = this.sealer.writeTree();
    return { lastSeq: last.seq, appended: batch.events.length, treeSize: tree.size, frontier: tree.frontier };
  }

  /**
   * Writes one operation's rows (an audit write outside a commit, an anchor's record) inside the caller's transaction
   * (Journal.auditWrite), or on its own where the caller has none (the run's failed end). Decides nothing; a throw is
   * the journal's failure. A write beside the journal answers what its SQL found (beside-rows.ts); the rest nothing.
   */
  write(op: WriterOp): BesideResult | undefined {
    if (isBesideOp(op)) return writeBesideOp(this.db, op);
    switch (op.kind) {
      case 'checkpoint':
        this.store.insertCheckpoint(op.checkpoint);
        return undefined;
      case 'auditKeys':
        this.store.insertKeys(op.keys);
        return undefined;
      case 'runKeySealed':
        this.store.setRunSealedKey(op.run, op.sealedKey);
        return undefined;
      case 'runEnded':
        this.store.endRun(op.run, op.atMs, op.reason);
        return undefined;
      case 'anchorRecorded':
        new AnchorStore(this.db).write(op.record);
        return undefined;
      default:
        // Ops cross from the loop as data: a kind this writer does not know is never dropped silently.
        throw new Error(`unknown writer operation: ${String((op as { kind?: unknown }).kind)}`);
    }
  }

  /** After the COMMIT of the last batch written: its rows are what the table holds now (for a writer that remembers). */
  committed(): void {
    if (this.pendingRows !== undefined) this.rows?.committed(this.pendingRows);
    this.pendingRows = undefined;
  }

  /**
   * After a ROLLBACK or a failed commit: the sealer's pending tree goes back to `committed` (the last head the loop
   * committed, AuditWriter.committedHead), so a batch sealed and not committed leaves no leaf behind, nor a row in the
   * writer's memory.
   */
  abandoned(committed: TreeHead): void {
    this.pendingRows = undefined;
    this.sealer.reset(committed);
  }
}

function throwIfFault(fault: SealFault, event: JournalEvent): void {
  if (fault.atSeq !== undefined && fault.atSeq !== event.seq) return;
  if (fault.kind !== undefined && fault.kind !== event.kind) return;
  throw new Error(fault.message);
}
