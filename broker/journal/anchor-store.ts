import type Database from 'better-sqlite3';
import { appendLeaf, decodeFrontier, emptyFrontier, frontierRoot } from '../core/index.js';
import type { SignedHead } from './audit-writer.js';
import { sha256 } from './event-cipher.js';

/** The journal's record of the last anchor file written for it (migration 012). */
export interface AnchorRecord {
  readonly counter: number;
  readonly head_seq: number;
  readonly key_id: string;
  readonly written_at_ms: number;
}

/**
 * The integrity anchor's side of each checkpoint (broker/host/integrity-anchor.ts). `signed` runs inside the
 * checkpoint's transaction with the signing key in memory: it signs the anchor there and writes nothing; the file is
 * written later, off the loop, after the sync that makes the head durable. `settled` resolves once every anchor signed
 * so far was written and recorded (or failed and was logged); it never rejects. The journal awaits it at close.
 */
export interface CheckpointSink {
  signed(head: SignedHead): void;
  settled(): Promise<void>;
}

/** What the start-up check needs of the journal to judge an anchor (broker/host/integrity-anchor.ts). */
export interface AnchorFacts {
  readonly events: number;
  readonly last_seq: number;
  /** The audit signing key's public half; undefined before the first unlock created it. */
  readonly sign_public: Uint8Array | undefined;
  readonly box_public: Uint8Array | undefined;
  readonly recorded: AnchorRecord | undefined;
  /** Merkle root over the first `head_seq` leaves as stored now; undefined when the log holds fewer. */
  readonly root_at_head: Uint8Array | undefined;
}

/** Leaf hashes are folded this many rows a page, so a long journal never sits in memory at once. */
const leafPageRows = 10_000;

/** The SQL of the anchor's journal side over the journal's own connection; the caller owns transactions. */
export class AnchorStore {
  constructor(private readonly db: Database.Database) {}

  read(): AnchorRecord | undefined {
    return this.db
      .prepare(`SELECT counter, head_seq, key_id, written_at_ms FROM integrity_anchor WHERE id = 1`)
      .get() as AnchorRecord | undefined;
  }

  /**
   * In a journal write after the anchor file was renamed into place and its directory synced (never before: a record
   * ahead of the file would read as a rolled-back anchor). Never moves the counter back: a late record of an older
   * anchor is ignored.
   */
  write(record: AnchorRecord): void {
    this.db
      .prepare(
        `INSERT INTO integrity_anchor (id, counter, head_seq, key_id, written_at_ms)
         VALUES (1, @counter, @head_seq, @key_id, @written_at_ms)
         ON CONFLICT (id) DO UPDATE SET counter = excluded.counter, head_seq = excluded.head_seq,
           key_id = excluded.key_id, written_at_ms = excluded.written_at_ms
         WHERE excluded.counter >= integrity_anchor.counter`,
      )
      .run(record);
  }

  /** The start's full view: counts and the tree head at `headSeq` (a fold over the leaves when it is not the tip). */
  facts(headSeq: number): AnchorFacts {
    const events = (this.db.prepare(`SELECT count(*) AS n FROM events`).get() as { n: number }).n;
    const lastSeq = (this.db.prepare(`SELECT max(seq) AS seq FROM events`).get() as { seq: number | null }).seq ?? 0;
    return {
      events,
      last_seq: lastSeq,
      ...this.state(),
      root_at_head: headSeq > events ? undefined : this.rootAt(headSeq),
    };
  }

  /** What a checkpoint and a report need: the key ring's public halves and the record; no scan of the log. */
  state(): Pick<AnchorFacts, 'sign_public' | 'box_public' | 'recorded'> {
    const keys = this.db.prepare(`SELECT sign_public, box_public FROM audit_keys`).get() as
      { sign_public: Uint8Array; box_public: Uint8Array } | undefined;
    return { sign_public: keys?.sign_public, box_public: keys?.box_public, recorded: this.read() };
  }

  /**
   * The tree head over the first `size` leaves. The stored frontier answers the usual case (the anchor names the head
   * the last shutdown signed); otherwise the leaves are folded from the start, which is what a rewritten log must face.
   */
  private rootAt(size: number): Uint8Array {
    const tree = this.db.prepare(`SELECT size, frontier FROM audit_tree WHERE id = 1`).get() as
      { size: number; frontier: Uint8Array } | undefined;
    const stored = tree === undefined ? undefined : decodeFrontier(tree.size, tree.frontier);
    if (stored !== undefined && stored.size === size) return frontierRoot(sha256, stored);
    const page = this.db.prepare(`SELECT seq, leaf_hash FROM events WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?`);
    let frontier = emptyFrontier;
    let after = 0;
    while (frontier.size < size) {
      const rows = page.all(after, size, leafPageRows) as Array<{ seq: number; leaf_hash: Uint8Array }>;
      if (rows.length === 0) break;
      for (const row of rows) frontier = appendLeaf(sha256, frontier, row.leaf_hash);
      after = rows[rows.length - 1]!.seq;
    }
    return frontierRoot(sha256, frontier);
  }
}
