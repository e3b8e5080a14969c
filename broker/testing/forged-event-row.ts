import { randomBytes } from 'node:crypto';
import Database from 'better-sqlite3';
import { auditHeaderText, encodeLeaf, type AuditHeaderFields } from '../core/audit-record.js';
import { appendLeaf, decodeFrontier, encodeFrontier, leafHash } from '../core/merkle-tree.js';
import { sha256 } from '../journal/event-cipher.js';
import { readTreeSql } from '../journal/snapshot-sql.js';

/**
 * THREAT-MODEL: with no broker running, another process of the user appends an event row to the journal file — the
 * events table refuses updates and deletes, not inserts — and extends the unkeyed audit tree over it (the tree is
 * SHA-256 over plaintext, so its size and frontier can be recomputed by anyone), so the start's tree check passes. Its
 * payload is random bytes: it does not authenticate under any run key, so it never opens. Its header names the outcome
 * `header.outcome` says (journal schema 25), as the broker's own would. Returns its seq.
 */
export function appendForgedEventRow(journalPath: string, header: AuditHeaderFields): number {
  const db = new Database(journalPath, { fileMustExist: true, timeout: 5_000 });
  try {
    const tree = db.prepare(readTreeSql).get() as { size: number; frontier: Uint8Array };
    const frontier = decodeFrontier(tree.size, tree.frontier);
    if (frontier === undefined) throw new Error('the audit tree row does not decode');
    const seq = tree.size + 1;
    const nonce = randomBytes(24);
    const ciphertext = randomBytes(64);
    const headerBytes = Buffer.from(auditHeaderText(header), 'utf8');
    const leaf = leafHash(sha256, encodeLeaf(seq, headerBytes, nonce, ciphertext));
    const next = appendLeaf(sha256, frontier, leaf);
    db.transaction(() => {
      db.prepare(
        `INSERT INTO events (seq, at_ms, action_id, session_id, ticket, lane, kind, run, outcome, nonce, ciphertext,
          leaf_hash)
        VALUES (@seq, @at_ms, @action_id, @session_id, @ticket, @lane, @kind, @run, @outcome, @nonce, @ciphertext,
          @leaf_hash)`,
      ).run({ ...header, outcome: header.outcome ?? null, seq, nonce, ciphertext, leaf_hash: leaf });
      db.prepare('UPDATE audit_tree SET size = ?, frontier = ? WHERE id = 1').run(next.size, encodeFrontier(next));
    })();
    return seq;
  } finally {
    db.close();
  }
}
