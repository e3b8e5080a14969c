import { openDatabase } from '../ports/open-database.js';
import { CodedError } from '../contract/index.js';
import { checkpointDomain, decodeFrontier, encodeCheckpointMessage, frontierRoot } from '../core/index.js';
import type { Clock } from '../ports/index.js';
import { auditSignPurpose, type AuditVault } from './audit-writer.js';
import { sha256, signDetached, sodiumReady, wipe } from './event-cipher.js';
import { JournalStore, type CheckpointRow } from './journal-store.js';

/**
 * Signs a checkpoint over the stored tree head from outside the broker (`postern audit checkpoint
 * --export` when the latest one is stale). Safe beside a running broker: it takes the write lock,
 * reads the tree head the broker committed, and inserts at most one row (a checkpoint of that size
 * already there wins). Needs the unlocked vault; returns undefined when the log is empty.
 */
export async function signCheckpointNow(
  dbPath: string,
  vault: AuditVault,
  clock: Clock,
): Promise<CheckpointRow | undefined> {
  await sodiumReady();
  const db = openDatabase(dbPath, { fileMustExist: true });
  try {
    db.pragma('busy_timeout = 2000');
    const store = new JournalStore(db);
    db.exec('BEGIN IMMEDIATE');
    try {
      const keys = store.readKeys();
      if (keys === undefined)
        throw new CodedError(
          'AUDIT_KEY_UNAVAILABLE',
          'no audit key exists yet: the broker creates it at the first unlock',
        );
      const tree = store.readTree();
      const frontier = tree === undefined ? undefined : decodeFrontier(tree.size, tree.frontier);
      if (frontier === undefined)
        throw new CodedError(
          'JOURNAL_UNAVAILABLE',
          'the audit tree state is missing or damaged; run `postern audit verify`',
        );
      if (frontier.size === 0) {
        db.exec('ROLLBACK');
        return undefined;
      }
      const signSecret = vault.unwrap(auditSignPurpose, keys.sign_secret_wrapped);
      const root = frontierRoot(sha256, frontier);
      const atMs = clock.nowMs();
      const signature = signDetached(
        encodeCheckpointMessage(Buffer.from(checkpointDomain, 'utf8'), frontier.size, root, atMs),
        signSecret,
      );
      wipe(signSecret);
      store.insertCheckpoint({ size: frontier.size, root, at_ms: atMs, reason: 'export', signature });
      db.exec('COMMIT');
      return db
        .prepare(`SELECT size, root, at_ms, reason, signature FROM checkpoints WHERE size = ?`)
        .get(frontier.size) as CheckpointRow;
    } catch (error) {
      if (db.inTransaction) db.exec('ROLLBACK');
      throw error;
    }
  } finally {
    db.close();
  }
}
