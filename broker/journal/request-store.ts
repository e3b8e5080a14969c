import type Database from 'better-sqlite3';
import { CodedError } from '../contract/index.js';
import { openDatabase, statementCache } from '../ports/open-database.js';
import { requireDurableConnection } from './durability.js';
import { writeBesideOrHere, type BesideOp, type BesideResult, type BesideWriter } from './beside-rows.js';

const busyTimeoutMs = 2_000;
/** A kept request is the agent's bounded request; this bounds one sealed row all the same. */
export const keptRequestBytesMax = 8 * 1024 * 1024;

export interface KeptRequest {
  readonly action_id: string;
  readonly route: string;
  readonly sealed: Uint8Array;
  readonly kept_at_ms: number;
  readonly expires_at_ms: number;
}

/**
 * Sealed copies of agents' requests that a person may retry with the same idempotency key
 * (migration 008). The bytes are sealed by the caller (the vault's `wrap`, with the action id in
 * the purpose, so a row cannot be moved to another action); this store never sees plaintext. Its
 * own connection to the journal file, like the result store, with the same durability pragmas.
 */
export class RequestStore {
  private readonly sql: (sql: string) => Database.Statement;
  /**
   * Set by `close`: no write is posted after it. The journal's writer thread may still be open and would take it (the
   * broker closes this store before the journal), so the store refuses on its own.
   */
  private closed = false;

  private constructor(
    private readonly db: Database.Database,
    private readonly beside: BesideWriter | undefined,
  ) {
    this.sql = statementCache(db);
  }

  /**
   * `journal`: the journal whose writer thread, while it runs, writes `keep` and `drop` (Journal.writeBeside: never in
   * SQLite's busy handler on the loop, in order with the journal's batches); on this connection otherwise.
   */
  static open(path: string, platform: NodeJS.Platform = process.platform, journal?: BesideWriter): RequestStore {
    const db = openDatabase(path, { fileMustExist: true });
    try {
      requireDurableConnection(db, platform);
      db.pragma(`busy_timeout = ${busyTimeoutMs}`);
      // The journal's checkpointer copies the WAL on its own thread: a commit here must not do it on the loop.
      db.pragma('wal_autocheckpoint = 0');
      // A dropped, expired or replaced kept request's sealed bytes are zeroed in the file (beside-rows.ts).
      db.pragma('secure_delete = ON');
      const table = db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'kept_requests'`).get();
      if (table === undefined)
        throw new CodedError('MIGRATION_FAILED', 'the journal has no kept_requests table (schema older than 8)');
      return new RequestStore(db, journal);
    } catch (error) {
      db.close();
      throw error;
    }
  }

  /** Keeps (or replaces) the sealed request of an action until `expiresAtMs`; resolves once written. */
  async keep(row: KeptRequest): Promise<void> {
    if (row.sealed.byteLength > keptRequestBytesMax)
      throw new CodedError('PAYLOAD_LIMIT', `a kept request is at most ${keptRequestBytesMax} bytes`, {
        field: 'body',
      });
    await this.write({
      kind: 'requestKept',
      actionId: row.action_id,
      route: row.route,
      sealed: row.sealed,
      keptAtMs: row.kept_at_ms,
      expiresAtMs: row.expires_at_ms,
    });
  }

  /** The kept request, or undefined: never kept, dropped (settled), or past its expiry at `nowMs`. */
  read(actionId: string, nowMs: number): KeptRequest | undefined {
    const row = this.sql(
      `SELECT action_id, route, sealed, kept_at_ms, expires_at_ms FROM kept_requests WHERE action_id = ?`,
    ).get(actionId) as
      { action_id: string; route: string; sealed: Buffer; kept_at_ms: number; expires_at_ms: number } | undefined;
    if (row === undefined || nowMs >= row.expires_at_ms) return undefined;
    return { ...row, sealed: new Uint8Array(row.sealed) };
  }

  /**
   * Drops an action's kept request; resolves once written. A read first, so the common case (none kept) writes nothing
   * (with the writer thread, a keep still in flight there is not yet visible here: the delete is posted all the same).
   */
  async drop(actionId: string): Promise<void> {
    this.refuseClosed();
    const posted = this.beside?.writeBeside([{ kind: 'requestDropped', actionId }]);
    if (posted !== undefined) {
      await posted;
      return;
    }
    if (this.sql(`SELECT 1 FROM kept_requests WHERE action_id = ?`).get(actionId) === undefined) return;
    await this.write({ kind: 'requestDropped', actionId });
  }

  /**
   * One write, refused once closed: through the journal's writer thread while one runs, else on this connection in a
   * transaction of its own. Each op here is one statement (secure_delete is already on: no pragma moves), which SQLite
   * ran as its own transaction before, taking the write lock as it began: the IMMEDIATE transaction around it commits
   * the same rows, waits for the lock the same way, and is what the result and recording stores' writes do.
   */
  private async write(op: BesideOp): Promise<BesideResult> {
    this.refuseClosed();
    return writeBesideOrHere(this.beside, this.db, op);
  }

  /**
   * Deletes up to `limit` rows past their expiry at `nowMs`; resolves with how many. Through the journal's writer
   * thread while one runs (never in SQLite's busy handler on the loop), else on this connection; a failure rejects
   * this drop alone.
   */
  async dropExpired(nowMs: number, limit: number): Promise<number> {
    // A negative LIMIT is none in SQLite: every expired row in one transaction.
    if (!Number.isSafeInteger(nowMs) || !Number.isInteger(limit) || limit < 1)
      throw new RangeError(
        `dropExpired needs whole milliseconds and a limit of at least 1 (now ${nowMs}, limit ${limit})`,
      );
    const dropped = await this.write({ kind: 'expiredRequestsDropped', nowMs, limit });
    if (typeof dropped !== 'number')
      throw new CodedError('INTERNAL', 'dropping expired kept requests answered no count');
    return dropped;
  }

  close(): void {
    this.closed = true;
    this.db.close();
  }

  private refuseClosed(): void {
    if (this.closed) throw new CodedError('SHUTTING_DOWN', 'the broker is stopping: no kept request is written');
  }
}
