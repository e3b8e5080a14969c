import type { Database } from 'better-sqlite3';
import { encryptPayload, newRunKey, NoncePool, sealRunKey, wipe } from '../event-cipher.js';
import type { Migration } from '../migration.js';
import { resultChunkAd, resultSummaryAd } from '../result-store.js';

/** Results sealed per read of the old rows: bounds the memory one page of summaries takes. */
const resultsPageMax = 100;
/** The zero rows that overwrite old free pages: one row stays well under SQLite's blob length limit. */
const scrubRowBytes = 64 * 1024 * 1024;

/** The tables as this step leaves them; the `_sealed` names are the rebuild's, renamed at its end. */
const unpurgedIndexSql = `CREATE INDEX results_unpurged_by_age ON results (created_at_ms) WHERE purged_at_ms IS NULL`;

const sealedTablesSql = (suffix: string): string => `
      CREATE TABLE results${suffix} (
        result_id TEXT PRIMARY KEY,
        action_id TEXT NOT NULL,
        attempt INTEGER NOT NULL,
        total_bytes INTEGER NOT NULL,
        stored_bytes INTEGER NOT NULL,
        truncated INTEGER NOT NULL CHECK (truncated IN (0, 1)),
        digest TEXT NOT NULL,
        chunks INTEGER NOT NULL,
        complete INTEGER NOT NULL CHECK (complete IN (0, 1)),
        created_at_ms INTEGER NOT NULL,
        purged_at_ms INTEGER,
        run INTEGER,
        summary_nonce BLOB,
        summary_sealed BLOB,
        UNIQUE (action_id, attempt),
        CHECK ((run IS NULL) = (summary_sealed IS NULL) AND (run IS NULL) = (summary_nonce IS NULL)),
        CHECK (run IS NOT NULL OR purged_at_ms IS NOT NULL)
      ) STRICT;

      CREATE TABLE result_chunks${suffix} (
        result_id TEXT NOT NULL REFERENCES results${suffix} (result_id),
        n INTEGER NOT NULL,
        nonce BLOB NOT NULL,
        bytes BLOB NOT NULL,
        PRIMARY KEY (result_id, n)
      ) STRICT;`;

/**
 * Results at rest are sealed like events (docs/audit.md): a result's summary (status, kept headers)
 * and each chunk's bytes are ciphertext under a run key (`results.run` → audit_runs), a fresh nonce
 * per row, the row's identity as associated data. Ids, counts, digest and times stay plain.
 *
 * Both tables are rebuilt rather than altered: a row rewritten in place leaves its old bytes in its
 * page's free space, which secure_delete does not reach. The old tables' pages are zeroed as they
 * are dropped (secure_delete), and pages freed before this step (results purged by an older
 * broker) are overwritten by a zero blob dropped again. `summary` goes, with its JSON CHECK.
 *
 * Rows written before this step are plaintext. With an audit public key they are sealed under a
 * run created here, its key sealed to that public key as AuditWriter does (readable with the
 * unlocked vault). Without one (the vault was never initialised) nothing can seal them: they are
 * purged — no chunks, no summary, purged_at_ms set, so a read says RESULT_EXPIRED.
 *
 * The old page images still sit in the WAL until it is truncated outside this transaction
 * (truncateWal; Journal.open does). Needs libsodium ready (sodiumReady), as Journal.open ensures.
 */
export const migration009SealedResults: Migration = {
  version: 9,
  name: 'sealed-results',
  up(db) {
    // Rows are never deleted from results (a purge marks them): an empty table never held content.
    if (db.prepare(`SELECT 1 FROM results LIMIT 1`).get() === undefined) {
      db.exec(`DROP TABLE result_chunks; DROP TABLE results;`);
      db.exec(sealedTablesSql(''));
      db.exec(unpurgedIndexSql);
      return;
    }
    db.pragma('secure_delete = ON');
    db.exec(sealedTablesSql('_sealed'));
    const keys = db.prepare(`SELECT box_public FROM audit_keys WHERE id = 1`).get() as
      { box_public: Uint8Array } | undefined;
    if (keys === undefined) purgePlaintext(db, Date.now());
    else sealPlaintext(db, keys.box_public, Date.now());
    // Child first: the foreign key would refuse dropping results under its chunks. RENAME carries the reference along.
    db.exec(`
      DROP TABLE result_chunks;
      DROP TABLE results;
      ALTER TABLE results_sealed RENAME TO results;
      ALTER TABLE result_chunks_sealed RENAME TO result_chunks;
    `);
    db.exec(unpurgedIndexSql);
    zeroFreePages(db);
  },
};

/** Outside any transaction, after the step: the WAL's frames of the plaintext pages go with it. */
export function truncateWal(db: Database): void {
  // Best effort: a reader holding the WAL past the busy timeout leaves it for SQLite to overwrite.
  db.pragma('wal_checkpoint(TRUNCATE)');
}

const factColumns =
  'result_id, action_id, attempt, total_bytes, stored_bytes, truncated, digest, chunks, complete, created_at_ms';

function purgePlaintext(db: Database, nowMs: number): void {
  db.prepare(
    `INSERT INTO results_sealed (${factColumns}, purged_at_ms) SELECT ${factColumns}, coalesce(purged_at_ms, ?) FROM results`,
  ).run(nowMs);
}

function sealPlaintext(db: Database, boxPublic: Uint8Array, nowMs: number): void {
  const runKey = newRunKey();
  try {
    const run = Number(
      db
        .prepare(
          `INSERT INTO audit_runs (run, started_at_ms, sealed_key, ended_at_ms, end_reason) VALUES ((SELECT max(run) + 1 FROM audit_runs), ?, ?, ?, ?)`,
        )
        .run(nowMs, sealRunKey(runKey, boxPublic), nowMs, 'migration 009: sealed the results stored before it')
        .lastInsertRowid,
    );
    const nonces = new NoncePool();
    const seal = (ad: Uint8Array, plaintext: Uint8Array): { nonce: Uint8Array; ciphertext: Uint8Array } => {
      const nonce = nonces.next();
      return { nonce, ciphertext: encryptPayload(runKey, nonce, ad, plaintext) };
    };
    // Page by page: better-sqlite3 cannot write while a cursor on the same connection is open.
    const page = db.prepare(
      `SELECT result_id, summary FROM results WHERE result_id > ? ORDER BY result_id LIMIT ${resultsPageMax}`,
    );
    const insertResult = db.prepare(`
      INSERT INTO results_sealed (${factColumns}, purged_at_ms, run, summary_nonce, summary_sealed)
      SELECT ${factColumns}, purged_at_ms, ?, ?, ? FROM results WHERE result_id = ?`);
    const chunkNumbers = db.prepare(`SELECT n FROM result_chunks WHERE result_id = ? ORDER BY n`).pluck();
    const chunkBytes = db.prepare(`SELECT bytes FROM result_chunks WHERE result_id = ? AND n = ?`).pluck();
    const insertChunk = db.prepare(`INSERT INTO result_chunks_sealed (result_id, n, nonce, bytes) VALUES (?, ?, ?, ?)`);
    for (
      let rows = page.all('') as OldRow[];
      rows.length > 0;
      rows = page.all(rows.at(-1)?.result_id ?? '') as OldRow[]
    ) {
      for (const { result_id: id, summary } of rows) {
        const sealed = seal(resultSummaryAd(id), Buffer.from(summary, 'utf8'));
        insertResult.run(run, sealed.nonce, sealed.ciphertext, id);
        for (const n of chunkNumbers.all(id) as number[]) {
          const chunk = seal(resultChunkAd(id, n), chunkBytes.get(id, n) as Buffer);
          insertChunk.run(id, n, chunk.nonce, chunk.ciphertext);
        }
      }
    }
  } finally {
    wipe(runKey);
  }
}

interface OldRow {
  result_id: string;
  summary: string;
}

/**
 * Pages freed before secure_delete was on still hold what was deleted (results purged by an older
 * broker). SQLite fills a new row from the free list first: a zero blob as large as the free list
 * takes every free page and writes zeros over it; dropped again (secure_delete on) they stay zero.
 */
function zeroFreePages(db: Database): void {
  const freePages = Number(db.pragma('freelist_count', { simple: true }));
  if (freePages === 0) return;
  const pageBytes = Number(db.pragma('page_size', { simple: true }));
  db.exec(`CREATE TABLE migration_009_scrub (zeros BLOB NOT NULL) STRICT`);
  const fill = db.prepare(`INSERT INTO migration_009_scrub (zeros) VALUES (zeroblob(?))`);
  for (let left = freePages * pageBytes; left > 0; left -= scrubRowBytes) fill.run(Math.min(left, scrubRowBytes));
  db.exec(`DROP TABLE migration_009_scrub`);
}
