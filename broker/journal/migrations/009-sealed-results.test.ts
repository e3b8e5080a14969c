import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { verifyJournal } from '../../audit/verify-journal.js';
import { isCodedError } from '../../contract/index.js';
import { FakeClock } from '../../testing/fake-clock.js';
import { createMemoryVault, type MemoryVault } from '../../testing/memory-vault.js';
import { createTempDir, type TempDir } from '../../testing/temp-dir.js';
import { sodiumReady } from '../event-cipher.js';
import { Journal } from '../journal.js';
import { migrate, schemaVersion } from '../migrate.js';
import { ResultStore, resultChunkBytes } from '../result-store.js';
import { journalMigrations } from './index.js';

const canary = 'CANARY-9b77f0e3-stored-before-sealing';
const upTo8 = journalMigrations.slice(0, 8);

let dir: TempDir;
let path: string;
beforeEach(() => {
  dir = createTempDir();
  path = join(dir.path, 'journal.sqlite');
});
afterEach(() => dir.remove());

function fileBytes(): Buffer {
  return Buffer.concat(
    ['', '-wal', '-shm'].map((suffix) => (existsSync(path + suffix) ? readFileSync(path + suffix) : Buffer.alloc(0))),
  );
}

function canaryForms(): string[] {
  const bytes = fileBytes();
  const raw = Buffer.from(canary);
  const forms = { raw: raw.toString(), base64: raw.toString('base64'), hex: raw.toString('hex') };
  return Object.entries(forms)
    .filter(([, form]) => bytes.includes(form))
    .map(([name]) => name);
}

const body = Buffer.concat([Buffer.from(canary), Buffer.alloc(resultChunkBytes, 0x2e), Buffer.from(canary)]);
const summary = { status: 200, headers: { 'x-echo': canary } };

/**
 * A broker of schema 8 stored a result in plaintext (two chunks, a header echoing the canary) and
 * an older one purged another without secure_delete, leaving its bytes in free pages; its
 * connection also holds a reader open so the last write stays in the WAL. Returns that reader.
 */
async function schema8WithPlaintext(vault: MemoryVault): Promise<Database.Database> {
  const journal = await Journal.open({ path, clock: new FakeClock(), vault, migrations: upTo8 });
  await journal.close();
  const db = new Database(path);
  db.pragma('secure_delete = OFF');
  const insert = db.prepare(
    `INSERT INTO results (result_id, action_id, attempt, summary, total_bytes, stored_bytes, truncated, digest, chunks, complete, created_at_ms) VALUES (?, ?, 1, ?, ?, ?, 0, 'sha256:x', 2, 1, 5)`,
  );
  const chunk = db.prepare(`INSERT INTO result_chunks (result_id, n, bytes) VALUES (?, ?, ?)`);
  for (const id of ['res_kept', 'res_purged']) {
    insert.run(id, id.replace('res', 'act'), JSON.stringify(summary), body.length, body.length);
    chunk.run(id, 0, body.subarray(0, resultChunkBytes));
    chunk.run(id, 1, body.subarray(resultChunkBytes));
  }
  db.exec(
    `DELETE FROM result_chunks WHERE result_id = 'res_purged'; UPDATE results SET purged_at_ms = 6 WHERE result_id = 'res_purged'`,
  );
  return db;
}

function codeOf(read: () => unknown): unknown {
  try {
    read();
  } catch (error) {
    return isCodedError(error) ? error.code : error;
  }
  return 'no error';
}

describe('when a version 8 journal holding plaintext results is migrated to 9', () => {
  it('with an audit key: every result is sealed under a run made for it, nothing plaintext remains in any file, and it reads back', async () => {
    const vault = await createMemoryVault();
    const old = await schema8WithPlaintext(vault);
    old.close();
    // The search can fail: before the migration the canary is there, raw, and in the purged result's free pages.
    expect(canaryForms()).toContain('raw');

    const journal = await Journal.open({ path, clock: new FakeClock(), vault });
    const store = ResultStore.open(path, journal.rowCipher());
    try {
      expect(journal.stats().schema_version).toBe(journalMigrations.length);
      expect(canaryForms()).toEqual([]);
      expect(store.read('res_kept')).toMatchObject({ summary, stored_bytes: body.length, purged_at_ms: null });
      expect(store.read('res_kept')?.body.equals(body)).toBe(true);
      expect(codeOf(() => store.read('res_purged'))).toBe('RESULT_EXPIRED');
      const raw = new Database(path, { readonly: true });
      const run = raw
        .prepare(
          `SELECT run, length(sealed_key) > 0 AS sealed, ended_at_ms IS NOT NULL AS ended FROM audit_runs WHERE run = (SELECT run FROM results WHERE result_id = 'res_kept')`,
        )
        .get();
      raw.close();
      expect(run).toEqual({ run: 2, sealed: 1, ended: 1 });
      vault.lock();
      // The migration's run is an earlier run: its rows need the unlocked vault.
      expect(codeOf(() => store.read('res_kept'))).toBe('VAULT_LOCKED');
    } finally {
      store.close();
      await journal.close();
    }
    const verified = await verifyJournal({ dbPath: path });
    expect(verified).toMatchObject({ ok: true });
  });

  it('without an audit key (vault never initialised): the plaintext is purged, a read says RESULT_EXPIRED, nothing remains in any file', async () => {
    const vault = await createMemoryVault('locked');
    const old = await schema8WithPlaintext(vault);
    expect(canaryForms()).toContain('raw');
    // A reader left open: the sealing pass's writes go to a WAL that only truncation empties.
    const journal = await Journal.open({ path, clock: new FakeClock(), vault });
    old.close();
    const store = ResultStore.open(path, journal.rowCipher());
    try {
      expect(journal.stats().schema_version).toBe(journalMigrations.length);
      expect(store.head('res_kept')).toMatchObject({ stored_bytes: body.length });
      expect(store.head('res_kept')?.purged_at_ms).toEqual(expect.any(Number));
      expect(codeOf(() => store.read('res_kept'))).toBe('RESULT_EXPIRED');
      const raw = new Database(path, { readonly: true });
      expect(raw.prepare(`SELECT count(*) AS n FROM result_chunks`).get()).toEqual({ n: 0 });
      expect(raw.prepare(`SELECT run, summary_sealed FROM results WHERE result_id = 'res_kept'`).get()).toEqual({
        run: null,
        summary_sealed: null,
      });
      raw.close();
      expect(canaryForms()).toEqual([]);
    } finally {
      store.close();
      await journal.close();
    }
  });

  it('an empty journal gains the sealing columns and no run', async () => {
    await sodiumReady();
    const db = new Database(path);
    try {
      migrate(db, upTo8);
      expect(migrate(db, journalMigrations.slice(0, 9))).toBe(9);
      expect(schemaVersion(db)).toBe(9);
      const columns = (table: string): unknown =>
        db.prepare(`SELECT name FROM pragma_table_info(?) ORDER BY cid`).pluck().all(table);
      expect(columns('results')).toEqual(
        expect.arrayContaining(['run', 'summary_nonce', 'summary_sealed', 'purged_at_ms']),
      );
      expect(columns('results')).not.toContain('summary');
      expect(columns('result_chunks')).toEqual(['result_id', 'n', 'nonce', 'bytes']);
      expect(
        db.prepare(`SELECT name FROM sqlite_master WHERE type = 'index' AND name = 'results_unpurged_by_age'`).get(),
      ).toEqual({ name: 'results_unpurged_by_age' });
      expect(db.prepare(`SELECT sql FROM sqlite_master WHERE name = 'result_chunks'`).pluck().get()).toMatch(
        /REFERENCES "?results"? \(result_id\)/,
      );
      expect(db.prepare(`SELECT count(*) AS n FROM audit_runs`).get()).toEqual({ n: 1 });
    } finally {
      db.close();
    }
  });
});
