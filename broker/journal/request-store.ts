import type Database from 'better-sqlite3';
import { CodedError } from '../contract/index.js';
import { openDatabase, statementCache } from '../ports/open-database.js';
import { requireDurableConnection } from './durability.js';

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

  private constructor(private readonly db: Database.Database) {
    this.sql = statementCache(db);
  }

  static open(path: string, platform: NodeJS.Platform = process.platform): RequestStore {
    const db = openDatabase(path, { fileMustExist: true });
    try {
      requireDurableConnection(db, platform);
      db.pragma(`busy_timeout = ${busyTimeoutMs}`);
      // The journal's checkpointer copies the WAL on its own thread: a commit here must not do it on the loop.
      db.pragma('wal_autocheckpoint = 0');
      const table = db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'kept_requests'`).get();
      if (table === undefined)
        throw new CodedError('MIGRATION_FAILED', 'the journal has no kept_requests table (schema older than 8)');
      return new RequestStore(db);
    } catch (error) {
      db.close();
      throw error;
    }
  }

  /** Keeps (or replaces) the sealed request of an action until `expiresAtMs`. */
  keep(row: KeptRequest): void {
    if (row.sealed.byteLength > keptRequestBytesMax)
      throw new CodedError('PAYLOAD_LIMIT', `a kept request is at most ${keptRequestBytesMax} bytes`, {
        field: 'body',
      });
    this.sql(
      `INSERT OR REPLACE INTO kept_requests (action_id, route, sealed, kept_at_ms, expires_at_ms) VALUES (?, ?, ?, ?, ?)`,
    ).run(
      row.action_id,
      row.route,
      Buffer.from(row.sealed.buffer, row.sealed.byteOffset, row.sealed.byteLength),
      row.kept_at_ms,
      row.expires_at_ms,
    );
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

  /** Drops an action's kept request; a read first, so the common case (none kept) writes nothing. */
  drop(actionId: string): void {
    if (this.sql(`SELECT 1 FROM kept_requests WHERE action_id = ?`).get(actionId) === undefined) return;
    this.sql(`DELETE FROM kept_requests WHERE action_id = ?`).run(actionId);
  }

  /** Deletes up to `limit` rows past their expiry; returns how many. */
  dropExpired(nowMs: number, limit: number): number {
    return this.sql(
      `DELETE FROM kept_requests WHERE action_id IN (SELECT action_id FROM kept_requests WHERE expires_at_ms <= ? ORDER BY expires_at_ms LIMIT ?)`,
    ).run(nowMs, limit).changes;
  }

  close(): void {
    this.db.close();
  }
}
