import Database from 'better-sqlite3';
import type { Checkpoint } from './checkpoint-file.js';

/**
 * The newest signed checkpoint (undefined when nothing has been signed yet) and the stored tree size, read-only in
 * one snapshot. It carries no key on purpose: `audit_keys.sign_public` is plaintext that any process running as the
 * user can rewrite, so whoever trusts a checkpoint brings the key (an export: the vault's) and verifies under it.
 */
export function latestCheckpoint(dbPath: string): {
  readonly checkpoint: Checkpoint | undefined;
  readonly treeSize: number;
} {
  const db = new Database(dbPath, { readonly: true, fileMustExist: true });
  try {
    db.exec('BEGIN'); // one snapshot: the checkpoint and the tree size it is compared with
    const checkpoint = db
      .prepare(`SELECT size, root, at_ms, signature FROM checkpoints ORDER BY size DESC LIMIT 1`)
      .get() as Checkpoint | undefined;
    const tree = db.prepare(`SELECT size FROM audit_tree WHERE id = 1`).get() as { size: number } | undefined;
    return { checkpoint, treeSize: tree?.size ?? 0 };
  } finally {
    db.close();
  }
}
