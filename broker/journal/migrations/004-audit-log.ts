import { hash } from 'node:crypto';
import type { Database } from 'better-sqlite3';
import { auditHeaderText, encodeLeaf } from '../../core/audit-record.js';
import { appendLeaf, emptyFrontier, encodeFrontier, leafHash, type MerkleFrontier } from '../../core/merkle-tree.js';
import type { Migration } from '../migration.js';

/**
 * The audit log: event payloads become ciphertext and every row becomes a leaf of an RFC 9162
 * Merkle tree whose head is signed at checkpoints (docs/audit.md).
 *
 * events is rebuilt (SQLite cannot drop the payload column's JSON CHECK in place): the plaintext
 * columns stay (action id, session, ticket, lane, kind — what recovery, status and the indexes
 * read, never secret by contract); payload + classification go into `ciphertext`, sealed under the
 * run's key (`run` → audit_runs). Rows written by schema 3 have no key to be sealed under: they
 * move as run 0, "plaintext, written before encryption existed", and are hashed like the rest.
 *
 * audit_keys holds the audit key pairs' public halves in the clear and the secret halves only as
 * wrapped by the vault. audit_tree is the compact range of the tree (one row, rewritten in each
 * commit). checkpoints is append-only like events.
 */
export const migration004AuditLog: Migration = {
  version: 4,
  name: 'audit-log',
  up(db) {
    const lastSeq =
      (db.prepare(`SELECT seq FROM sqlite_sequence WHERE name = 'events'`).get() as { seq: number } | undefined)?.seq ??
      0;
    db.exec(`
      CREATE TABLE audit_events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        at_ms INTEGER NOT NULL,
        action_id TEXT NOT NULL,
        session_id TEXT,
        ticket INTEGER,
        lane TEXT,
        kind TEXT NOT NULL,
        run INTEGER NOT NULL,
        nonce BLOB NOT NULL,
        ciphertext BLOB NOT NULL,
        leaf_hash BLOB NOT NULL
      ) STRICT;

      CREATE TABLE audit_runs (
        run INTEGER PRIMARY KEY,
        started_at_ms INTEGER NOT NULL,
        sealed_key BLOB,
        ended_at_ms INTEGER,
        end_reason TEXT
      ) STRICT;
      INSERT INTO audit_runs (run, started_at_ms, end_reason) VALUES (0, 0, 'plaintext rows written before schema 4');

      CREATE TABLE audit_keys (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        box_public BLOB NOT NULL,
        sign_public BLOB NOT NULL,
        box_secret_wrapped BLOB NOT NULL,
        sign_secret_wrapped BLOB NOT NULL,
        created_at_ms INTEGER NOT NULL
      ) STRICT;

      CREATE TABLE audit_tree (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        size INTEGER NOT NULL,
        frontier BLOB NOT NULL
      ) STRICT;

      CREATE TABLE checkpoints (
        size INTEGER PRIMARY KEY,
        root BLOB NOT NULL,
        at_ms INTEGER NOT NULL,
        reason TEXT NOT NULL,
        signature BLOB NOT NULL
      ) STRICT;
      CREATE TRIGGER checkpoints_no_update BEFORE UPDATE ON checkpoints
      BEGIN SELECT RAISE(ABORT, 'checkpoints are append-only'); END;
      CREATE TRIGGER checkpoints_no_delete BEFORE DELETE ON checkpoints
      BEGIN SELECT RAISE(ABORT, 'checkpoints are append-only'); END;
    `);
    const frontier = moveLegacyRows(db);
    db.prepare(`INSERT INTO audit_tree (id, size, frontier) VALUES (1, ?, ?)`).run(
      frontier.size,
      encodeFrontier(frontier),
    );
    db.exec(`
      DROP TABLE events;
      ALTER TABLE audit_events RENAME TO events;
      CREATE INDEX events_by_action ON events (action_id, seq);
      CREATE INDEX events_by_session ON events (session_id, seq) WHERE session_id IS NOT NULL;
      CREATE TRIGGER events_no_update BEFORE UPDATE ON events
      BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
      CREATE TRIGGER events_no_delete BEFORE DELETE ON events
      BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
    `);
    // AUTOINCREMENT's high-water mark survives the rebuild: an append position is never reused.
    db.prepare(`DELETE FROM sqlite_sequence WHERE name = 'events'`).run();
    if (lastSeq > 0) db.prepare(`INSERT INTO sqlite_sequence (name, seq) VALUES ('events', ?)`).run(BigInt(lastSeq));
  },
};

interface LegacyRow {
  seq: number;
  at_ms: number;
  action_id: string;
  session_id: string | null;
  ticket: number | null;
  lane: string | null;
  kind: string;
  payload: string;
  classification: string | null;
}

const legacyPageRows = 1_000;

function sha256(data: Uint8Array): Uint8Array {
  return hash('sha256', data, 'buffer');
}

/** Copies schema-3 rows as run 0 (plaintext body, empty nonce), hashing each into the tree. */
function moveLegacyRows(db: Database): MerkleFrontier {
  const insert = db.prepare(`
    INSERT INTO audit_events (seq, at_ms, action_id, session_id, ticket, lane, kind, run, nonce, ciphertext, leaf_hash)
    VALUES (@seq, @at_ms, @action_id, @session_id, @ticket, @lane, @kind, 0, @nonce, @ciphertext, @leaf_hash)`);
  let frontier = emptyFrontier;
  const nonce = new Uint8Array(0);
  // Page by page: better-sqlite3 cannot write while a cursor on the same connection is open.
  const page = db.prepare(`SELECT * FROM events WHERE seq > ? ORDER BY seq LIMIT ${legacyPageRows}`);
  for (let rows = page.all(0) as LegacyRow[]; rows.length > 0; rows = page.all(rows.at(-1)?.seq ?? 0) as LegacyRow[]) {
    for (const row of rows) {
      const body =
        row.classification === null
          ? `{"payload":${row.payload}}`
          : `{"payload":${row.payload},"classification":${row.classification}}`;
      const ciphertext = Buffer.from(body, 'utf8');
      const header = Buffer.from(auditHeaderText({ ...row, run: 0 }), 'utf8');
      const leaf = leafHash(sha256, encodeLeaf(row.seq, header, nonce, ciphertext));
      frontier = appendLeaf(sha256, frontier, leaf);
      insert.run({ ...row, nonce, ciphertext, leaf_hash: leaf });
    }
  }
  return frontier;
}
