import Database from 'better-sqlite3';
import type { TrustedCheckpoint } from './checkpoint-file.js';

/**
 * The newest signed checkpoint and the journal's checkpoint public key, read-only; undefined when
 * nothing has been signed yet. Export does not verify: `postern audit verify` does that.
 */
export function latestCheckpoint(dbPath: string): (TrustedCheckpoint & { readonly treeSize: number }) | undefined {
  const db = new Database(dbPath, { readonly: true, fileMustExist: true });
  try {
    db.exec('BEGIN'); // one snapshot: the checkpoint and the tree size it is compared with
    const key = db.prepare(`SELECT sign_public FROM audit_keys WHERE id = 1`).get() as
      { sign_public: Uint8Array } | undefined;
    const latest = db
      .prepare(`SELECT size, root, at_ms, signature FROM checkpoints ORDER BY size DESC LIMIT 1`)
      .get() as { size: number; root: Uint8Array; at_ms: number; signature: Uint8Array } | undefined;
    const tree = db.prepare(`SELECT size FROM audit_tree WHERE id = 1`).get() as { size: number } | undefined;
    if (key === undefined || latest === undefined) return undefined;
    return { ...latest, signPublic: key.sign_public, treeSize: tree?.size ?? 0 };
  } finally {
    db.close();
  }
}
