import Database from 'better-sqlite3';
import sodium from 'libsodium-wrappers-sumo';
import {
  appendLeaf,
  auditHeaderText,
  checkpointDomain,
  emptyFrontier,
  encodeCheckpointMessage,
  encodeFrontier,
  encodeLeaf,
  frontierRoot,
  leafHash,
} from '../core/index.js';
import { sha256 } from '../journal/event-cipher.js';

export interface KeySwap {
  /** The attacker's Ed25519 public key, now in audit_keys.sign_public. */
  readonly attackerKey: Uint8Array;
  /** Events left after the rewrite. */
  readonly events: number;
}

/**
 * What a same-user process can do to a closed journal file with no secret (THREAT-MODEL): drop the append-only
 * triggers, delete one action's events and renumber the rest, recompute every leaf, the stored tree head and the
 * AUTOINCREMENT mark, put its own Ed25519 public key in `audit_keys.sign_public`, delete every checkpoint and (unless
 * `sign` is false) sign one of its own over the new head. The wrapped signing secret is left alone: it cannot open it.
 */
export async function swapKeyAndRewrite(path: string, dropActionId: string, sign = true): Promise<KeySwap> {
  await sodium.ready;
  const db = new Database(path);
  try {
    db.exec(
      `DROP TRIGGER events_no_update; DROP TRIGGER events_no_delete; DROP TRIGGER checkpoints_no_update; DROP TRIGGER checkpoints_no_delete;`,
    );
    const rows = db.prepare(`SELECT * FROM events WHERE action_id <> ? ORDER BY seq`).all(dropActionId) as Array<
      Record<string, unknown>
    >;
    db.prepare(`DELETE FROM events`).run();
    let frontier = emptyFrontier;
    for (const [i, row] of rows.entries()) {
      const r = { ...row, seq: i + 1 } as unknown as { seq: number; nonce: Buffer; ciphertext: Buffer } & Parameters<
        typeof auditHeaderText
      >[0];
      const leaf = leafHash(sha256, encodeLeaf(r.seq, Buffer.from(auditHeaderText(r), 'utf8'), r.nonce, r.ciphertext));
      frontier = appendLeaf(sha256, frontier, leaf);
      const columns = Object.keys(row);
      const values = columns.map((c) => (c === 'seq' ? r.seq : c === 'leaf_hash' ? Buffer.from(leaf) : row[c]));
      db.prepare(`INSERT INTO events (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})`).run(
        ...values,
      );
    }
    db.prepare(`UPDATE audit_tree SET size = ?, frontier = ?`).run(frontier.size, encodeFrontier(frontier));
    db.prepare(`UPDATE sqlite_sequence SET seq = ? WHERE name = 'events'`).run(frontier.size);
    const attacker = sodium.crypto_sign_keypair();
    db.prepare(`UPDATE audit_keys SET sign_public = ?`).run(Buffer.from(attacker.publicKey));
    db.prepare(`DELETE FROM checkpoints`).run();
    if (sign) {
      const root = frontierRoot(sha256, frontier);
      const atMs = 12_345;
      const message = encodeCheckpointMessage(Buffer.from(checkpointDomain, 'utf8'), frontier.size, root, atMs);
      db.prepare(`INSERT INTO checkpoints (size, root, at_ms, reason, signature) VALUES (?, ?, ?, 'interval', ?)`).run(
        frontier.size,
        Buffer.from(root),
        atMs,
        Buffer.from(sodium.crypto_sign_detached(message, attacker.privateKey)),
      );
    }
    return { attackerKey: attacker.publicKey, events: frontier.size };
  } finally {
    db.close();
  }
}
