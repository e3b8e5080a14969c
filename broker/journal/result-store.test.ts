import { existsSync, readFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isCodedError, type NewEvent } from '../contract/index.js';
import { actionPaths } from '../testing/action-paths.js';
import { appendUptoCommitted, resultOf } from '../testing/committed-result.js';
import { createMemoryVault, type MemoryVault } from '../testing/memory-vault.js';
import { openTempJournal, openTempResultStore, type TempJournal } from '../testing/temp-journal.js';
import { Journal } from './journal.js';
import { ResultStore, resultChunkBytes, resultPurgeBatchMax } from './result-store.js';

describe('the result store', () => {
  let temp: TempJournal;
  let store: ResultStore;
  beforeEach(async () => ({ temp, store } = await openTempResultStore()));
  afterEach(() => temp.dispose());

  const input = (body: Buffer) => ({
    result_id: 'res_act_000001_1',
    action_id: 'act_000001',
    attempt: 1,
    summary: { status: 200, headers: { 'content-type': 'text/plain' } },
    body,
    total_bytes: body.length + 10,
    truncated: true,
    digest: `sha256:${'ab'.repeat(32)}`,
    created_at_ms: 5,
  });

  it('when a multi-chunk body is committed, it reads back whole, in sequence, with its facts', () => {
    const body = Buffer.alloc(resultChunkBytes * 2 + 17, 7);
    store.commit(input(body));
    const read = store.read('res_act_000001_1');
    expect(read?.body.equals(body)).toBe(true);
    expect(read).toMatchObject({
      truncated: true,
      total_bytes: body.length + 10,
      stored_bytes: body.length,
      summary: { status: 200 },
    });
    expect(store.readForAction('act_000001')?.result_id).toBe('res_act_000001_1');
  });

  it('is durable and visible to another connection as soon as commit returns', () => {
    store.commit(input(Buffer.from('hello')));
    const other = new Database(temp.path, { readonly: true });
    try {
      expect(other.prepare(`SELECT complete, chunks FROM results WHERE result_id = ?`).get('res_act_000001_1')).toEqual(
        { complete: 1, chunks: 1 },
      );
    } finally {
      other.close();
    }
  });

  it('an empty body is a complete result with zero chunks', () => {
    store.commit(input(Buffer.alloc(0)));
    expect(store.read('res_act_000001_1')?.body.length).toBe(0);
  });

  it('when a result without a completeness marker exists, it is not returned', () => {
    const raw = new Database(temp.path);
    raw
      .prepare(
        `INSERT INTO results (result_id, action_id, attempt, total_bytes, stored_bytes, truncated, digest, chunks, complete, created_at_ms, run, summary_nonce, summary_sealed) VALUES ('res_x', 'act_x', 1, 3, 3, 0, 'sha256:x', 1, 0, 1, 1, zeroblob(24), x'00')`,
      )
      .run();
    raw.close();
    expect(store.read('res_x')).toBeUndefined();
  });

  it('a result is committed once per action attempt', () => {
    store.commit(input(Buffer.from('a')));
    expect(() => store.commit({ ...input(Buffer.from('b')), result_id: 'res_other' })).toThrow(/UNIQUE/);
  });

  it('refuses an oversized summary with a coded error', () => {
    try {
      store.commit({ ...input(Buffer.from('a')), summary: { big: 'x'.repeat(70_000) } });
      expect.unreachable();
    } catch (error) {
      expect(isCodedError(error) && error.code).toBe('PAYLOAD_LIMIT');
    }
  });

  it('when the store is closed (the broker stopping), a commit is refused SHUTTING_DOWN and writes nothing', () => {
    store.close();
    expect(() => store.commit(input(Buffer.from('late')))).toThrow(
      expect.objectContaining({ code: 'SHUTTING_DOWN', message: expect.stringContaining('no result is committed') }),
    );
    const other = new Database(temp.path, { readonly: true });
    try {
      expect(other.prepare(`SELECT count(*) AS n FROM results`).get()).toEqual({ n: 0 });
    } finally {
      other.close();
    }
  });

  it('a reader resumes from a chunk offset: the bytes after the last chunk it verified, with the sequence facts', () => {
    const body = Buffer.concat([
      Buffer.alloc(resultChunkBytes, 1),
      Buffer.alloc(resultChunkBytes, 2),
      Buffer.from('tail'),
    ]);
    store.commit(input(body));
    const rest = store.readFrom('res_act_000001_1', 1);
    expect(rest).toMatchObject({ from_chunk: 1, chunks: 3, stored_bytes: body.length, digest: input(body).digest });
    expect(rest?.body.equals(body.subarray(resultChunkBytes))).toBe(true);
    expect(store.readFrom('res_act_000001_1', 3)?.body.length).toBe(0);
    expect(store.head('res_act_000001_1')).toMatchObject({ created_at_ms: 5, stored_bytes: body.length });
    expect(store.head('res_act_000001_1')).not.toHaveProperty('body');
  });

  it('an offset outside the sequence is refused with its field', () => {
    store.commit(input(Buffer.from('one chunk')));
    for (const bad of [-1, 2, 0.5]) {
      try {
        store.readFrom('res_act_000001_1', bad);
        expect.unreachable();
      } catch (error) {
        expect(isCodedError(error) && { code: error.code, field: error.field }).toEqual({
          code: 'INVALID_ARGUMENT',
          field: 'from_chunk',
        });
      }
    }
  });

  it('chunks without a completeness marker are never read, from any offset', () => {
    const raw = new Database(temp.path);
    raw
      .prepare(
        `INSERT INTO results (result_id, action_id, attempt, total_bytes, stored_bytes, truncated, digest, chunks, complete, created_at_ms, run, summary_nonce, summary_sealed) VALUES ('res_x', 'act_x', 1, 3, 3, 0, 'sha256:x', 1, 0, 1, 1, zeroblob(24), x'00')`,
      )
      .run();
    raw
      .prepare(`INSERT INTO result_chunks (result_id, n, bytes, nonce) VALUES ('res_x', 0, x'414243', zeroblob(24))`)
      .run();
    raw.close();
    expect(store.head('res_x')).toBeUndefined();
    expect(store.readFrom('res_x', 0)).toBeUndefined();
  });

  it('a marked result whose chunk sequence has a gap or a wrong length is not handed over (INTERNAL)', () => {
    const body = Buffer.alloc(resultChunkBytes * 2 + 1, 3);
    store.commit(input(body));
    const raw = new Database(temp.path);
    raw.prepare(`DELETE FROM result_chunks WHERE result_id = 'res_act_000001_1' AND n = 1`).run();
    raw.close();
    expect(() => store.readFrom('res_act_000001_1', 2)).toThrow(/not in sequence/);
    expect(() => store.read('res_act_000001_1')).toThrow(/not in sequence/);
    const again = new Database(temp.path);
    again
      .prepare(
        `INSERT INTO result_chunks (result_id, n, bytes, nonce) VALUES ('res_act_000001_1', 1, x'00', zeroblob(24))`,
      )
      .run();
    again.close();
    expect(() => store.readFrom('res_act_000001_1', 0)).toThrow(/stored bytes/);
  });

  describe('when results pass their retention and are purged', () => {
    const retentionMs = 1_000;
    const commitAt = (n: number, createdAtMs: number, body = Buffer.alloc(resultChunkBytes + 5, n)): string => {
      const id = `res_act_00000${n}_1`;
      store.commit({ ...input(body), result_id: id, action_id: `act_00000${n}`, created_at_ms: createdAtMs });
      return id;
    };
    const chunkRows = (id: string): number => {
      const raw = new Database(temp.path, { readonly: true });
      try {
        return (raw.prepare(`SELECT count(*) AS n FROM result_chunks WHERE result_id = ?`).get(id) as { n: number }).n;
      } finally {
        raw.close();
      }
    };
    const expiredCode = (read: () => unknown): unknown => {
      try {
        read();
      } catch (error) {
        return isCodedError(error) ? error.code : error;
      }
      return 'no error';
    };

    it('purges exactly the results at or past the boundary fetch_result calls expired, oldest first, and keeps the rest whole', async () => {
      const old = commitAt(1, 100);
      const boundary = commitAt(2, 200);
      const young = commitAt(3, 201);
      expect(await store.purgeExpired(1_200, retentionMs, 10)).toBe(2);
      expect(chunkRows(old)).toBe(0);
      expect(chunkRows(boundary)).toBe(0);
      expect(chunkRows(young)).toBe(2);
      expect(store.read(young)?.body.equals(Buffer.alloc(resultChunkBytes + 5, 3))).toBe(true);
      // Nothing left to purge: a second sweep at the same time purges nothing.
      expect(await store.purgeExpired(1_200, retentionMs, 10)).toBe(0);
    });

    it('a purged result still has its facts, and every read of its bytes says RESULT_EXPIRED — never partial bytes, never absent', async () => {
      const id = commitAt(1, 100);
      await store.purgeExpired(5_000, retentionMs, 1);
      expect(store.head(id)).toMatchObject({
        result_id: id,
        action_id: 'act_000001',
        digest: `sha256:${'ab'.repeat(32)}`,
        created_at_ms: 100,
        purged_at_ms: 5_000,
      });
      expect(expiredCode(() => store.read(id))).toBe('RESULT_EXPIRED');
      expect(expiredCode(() => store.readFrom(id, 1))).toBe('RESULT_EXPIRED');
      expect(expiredCode(() => store.readForAction('act_000001'))).toBe('RESULT_EXPIRED');
      expect(() => store.read(id)).toThrow(/purged at 1970-01-01T00:00:05.000Z/);
    });

    it('is bounded per call: `limit` results at most, the oldest first; the next call continues', async () => {
      const ids = [commitAt(1, 30), commitAt(2, 10), commitAt(3, 20)];
      expect(await store.purgeExpired(10_000, retentionMs, 2)).toBe(2);
      expect(ids.map((id) => store.head(id)?.purged_at_ms ?? null)).toEqual([null, 10_000, 10_000]);
      expect(await store.purgeExpired(10_001, retentionMs, 2)).toBe(1);
      expect(store.head(ids[0] ?? '')?.purged_at_ms).toBe(10_001);
    });

    it('the chunks and the marks change in one transaction: a failure midway leaves every result whole and unmarked', async () => {
      const first = commitAt(1, 10);
      const second = commitAt(2, 20);
      const raw = new Database(temp.path);
      // A trigger that refuses marking the second result, as a full disk would midway.
      raw.exec(
        `CREATE TRIGGER refuse_mark BEFORE UPDATE OF purged_at_ms ON results WHEN NEW.result_id = '${second}' BEGIN SELECT RAISE(ABORT, 'disk full'); END;`,
      );
      raw.close();
      await expect(store.purgeExpired(10_000, retentionMs, 10)).rejects.toThrow(/disk full/);
      expect([chunkRows(first), chunkRows(second)]).toEqual([2, 2]);
      expect(store.head(first)?.purged_at_ms).toBeNull();
      expect(store.read(first)?.body.length).toBe(resultChunkBytes + 5);
    });

    it('refuses a limit outside 1..resultPurgeBatchMax and a time that is not whole milliseconds (programmer errors)', async () => {
      await expect(store.purgeExpired(1, retentionMs, 0)).rejects.toThrow(RangeError);
      await expect(store.purgeExpired(1, retentionMs, resultPurgeBatchMax + 1)).rejects.toThrow(RangeError);
      await expect(store.purgeExpired(1.5, retentionMs, 1)).rejects.toThrow(RangeError);
      await expect(store.purgeExpired(1, -1, 1)).rejects.toThrow(RangeError);
    });
  });

  describe('a result written with the RESULT_COMMITTED that names it (one transaction)', () => {
    const storedResultIds = (): unknown[] => {
      const other = new Database(temp.path, { readonly: true });
      try {
        return other
          .prepare(`SELECT result_id FROM results ORDER BY result_id`)
          .all()
          .map((r) => (r as { result_id: string }).result_id);
      } finally {
        other.close();
      }
    };

    it('both are on disk once the append answers: another connection reads the result and the event', async () => {
      const committed = await appendUptoCommitted(temp.journal, 'act_rows_a');
      const appended = await temp.journal.append(committed, store.rowsOf(resultOf('act_rows_a', 'res_rows_a')));
      expect(appended.state).toMatchObject({ outcome: 'committed', stage: 'result_committed' });
      expect(storedResultIds()).toEqual(['res_rows_a']);
      expect(store.read('res_rows_a')?.body.toString()).toBe('body of act_rows_a');
    });

    it('the rows are plain data: a structured clone of them (what postMessage to a writer thread makes) commits the same result', async () => {
      const committed = await appendUptoCommitted(temp.journal, 'act_rows_clone');
      const body = Buffer.alloc(resultChunkBytes + 5, 3);
      const rows = store.rowsOf({ ...resultOf('act_rows_clone', 'res_rows_clone'), body, total_bytes: body.length });
      await temp.journal.append(committed, structuredClone(rows));
      expect(storedResultIds()).toEqual(['res_rows_clone']);
      expect(store.read('res_rows_clone')?.body.equals(body)).toBe(true);
    });

    it('a refused RESULT_COMMITTED writes no result: the rows go only with an accepted event', async () => {
      await temp.journal.append(actionPaths.httpNoApproval('act_rows_b')[0] as NewEvent);
      // Not dispatched: the projection refuses a result for it.
      const refused = temp.journal.append(
        { ...(actionPaths.httpNoApproval('act_rows_b').at(-2) as NewEvent) },
        store.rowsOf(resultOf('act_rows_b', 'res_rows_b')),
      );
      await expect(refused).rejects.toMatchObject({ code: 'IMPOSSIBLE_TRANSITION' });
      expect(storedResultIds()).toEqual([]);
    });

    it('a result id written twice refuses that event with the constraint, and the rest of the same commit lands', async () => {
      const first = await appendUptoCommitted(temp.journal, 'act_rows_c');
      await temp.journal.append(first, store.rowsOf(resultOf('act_rows_c', 'res_rows_same')));
      const second = await appendUptoCommitted(temp.journal, 'act_rows_d');
      // Same turn of the event loop: one transaction holds both units.
      const clash = temp.journal.append(second, store.rowsOf(resultOf('act_rows_d', 'res_rows_same')));
      const neighbour = temp.journal.append(actionPaths.httpNoApproval('act_rows_e')[0] as NewEvent);
      await expect(clash).rejects.toMatchObject({ code: 'SQLITE_CONSTRAINT_PRIMARYKEY' });
      expect((await neighbour).state.action_id).toBe('act_rows_e');
      expect(temp.journal.stats().state).toBe('open');
      expect(temp.journal.getAction('act_rows_d')?.stage).not.toBe('result_committed');
      expect(storedResultIds()).toEqual(['res_rows_same']);
      expect(store.read('res_rows_same')?.body.toString()).toBe('body of act_rows_c');
    });
  });
});

const canary = 'CANARY-4c1d8e2a-response-secret';

/** Every byte of the journal's files as they are on disk now (the audit file and its WAL and index). */
function journalFileBytes(path: string): Buffer {
  return Buffer.concat(
    ['', '-wal', '-shm'].map((suffix) => (existsSync(path + suffix) ? readFileSync(path + suffix) : Buffer.alloc(0))),
  );
}

/** The canary's forms an attacker with the file would look for; each is a needle. */
function canaryFormsIn(bytes: Buffer): string[] {
  const raw = Buffer.from(canary);
  const forms = {
    raw: raw.toString(),
    base64: raw.toString('base64'),
    base64url: raw.toString('base64url'),
    hex: raw.toString('hex'),
  };
  return Object.entries(forms)
    .filter(([, form]) => bytes.includes(form))
    .map(([name]) => name);
}

function codeOf(read: () => unknown): unknown {
  try {
    read();
  } catch (error) {
    return isCodedError(error) ? error.code : error;
  }
  return 'no error';
}

describe('when a response is stored, it is sealed at rest', () => {
  let temp: TempJournal;
  let store: ResultStore;
  const body = Buffer.concat([
    Buffer.from(`{"echo":"${canary}"}`),
    Buffer.alloc(resultChunkBytes, 0x20),
    Buffer.from(canary),
  ]);
  const committed = (resultId = 'res_act_000001_1', actionId = 'act_000001') => ({
    result_id: resultId,
    action_id: actionId,
    attempt: 1,
    summary: { status: 200, headers: { 'x-echo': canary, 'x-echo-b64': Buffer.from(canary).toString('base64') } },
    body,
    total_bytes: body.length,
    truncated: false,
    digest: `sha256:${'cd'.repeat(32)}`,
    created_at_ms: 7,
  });
  beforeEach(async () => {
    temp = await openTempJournal();
    store = ResultStore.open(temp.path, temp.journal.rowCipher());
  });
  afterEach(async () => {
    store.close();
    await temp.dispose();
  });

  it('no byte of journal.sqlite, its -wal or -shm holds the body or a header, raw or encoded; reads return the same values', () => {
    store.commit(committed());
    expect(store.read('res_act_000001_1')).toMatchObject({
      summary: committed().summary,
      stored_bytes: body.length,
      digest: committed().digest,
    });
    expect(store.read('res_act_000001_1')?.body.equals(body)).toBe(true);
    expect(store.readFrom('res_act_000001_1', 1)?.body.equals(body.subarray(resultChunkBytes))).toBe(true);
    expect(canaryFormsIn(journalFileBytes(temp.path))).toEqual([]);
    // The search can fail: the same bytes written plainly into the file are found.
    const raw = new Database(temp.path);
    raw.exec(`CREATE TABLE control (v TEXT); INSERT INTO control VALUES ('${canary}')`);
    raw.close();
    expect(canaryFormsIn(journalFileBytes(temp.path))).toContain('raw');
  });

  it('a purge zeroes the sealed bytes it deletes (secure_delete on the store connection)', async () => {
    const raw = new Database(temp.path);
    try {
      store.commit(committed());
      const sealed = (raw.prepare(`SELECT bytes FROM result_chunks WHERE n = 0`).pluck().get() as Buffer).subarray(
        0,
        32,
      );
      expect(journalFileBytes(temp.path).includes(sealed)).toBe(true);
      await store.purgeExpired(10_000, 1_000, 1);
      raw.pragma('wal_checkpoint(TRUNCATE)');
      expect(journalFileBytes(temp.path).includes(sealed)).toBe(false);
    } finally {
      raw.close();
    }
  });

  it('a ciphertext moved to another row (chunk, chunk number or summary) fails to open: INTERNAL, never the other bytes', () => {
    store.commit(committed());
    store.commit(committed('res_act_000002_1', 'act_000002'));
    store.commit(committed('res_act_000003_1', 'act_000003'));
    const raw = new Database(temp.path);
    raw.exec(`
      UPDATE result_chunks SET (bytes, nonce) = (SELECT bytes, nonce FROM result_chunks WHERE result_id = 'res_act_000001_1' AND n = 1)
        WHERE result_id = 'res_act_000002_1' AND n = 1;
      UPDATE results SET (summary_sealed, summary_nonce) = (SELECT summary_sealed, summary_nonce FROM results WHERE result_id = 'res_act_000002_1')
        WHERE result_id = 'res_act_000001_1';
      UPDATE result_chunks SET n = 5 WHERE result_id = 'res_act_000003_1' AND n = 0;
      UPDATE result_chunks SET n = 0 WHERE result_id = 'res_act_000003_1' AND n = 1;
      UPDATE result_chunks SET n = 1 WHERE result_id = 'res_act_000003_1' AND n = 5;
    `);
    raw.close();
    expect(() => store.readFrom('res_act_000002_1', 1)).toThrow(/failed authentication/);
    expect(codeOf(() => store.read('res_act_000002_1'))).toBe('INTERNAL');
    expect(codeOf(() => store.read('res_act_000001_1'))).toBe('INTERNAL');
    // Chunks of one result swapped in place are caught by their numbers too.
    expect(() => store.read('res_act_000003_1')).toThrow(/failed authentication/);
  });
});

describe('when a result was stored by an earlier broker run', () => {
  let temp: TempJournal;
  const stored = {
    result_id: 'res_act_000001_1',
    action_id: 'act_000001',
    attempt: 1,
    summary: { status: 201 },
    body: Buffer.from(canary),
    total_bytes: canary.length,
    truncated: false,
    digest: 'sha256:x',
    created_at_ms: 3,
  };
  afterEach(async () => temp.dispose());

  /** Stores a result, closes the broker's journal (locking the vault if asked) and opens it again. */
  async function storeThenRestart(
    vault: MemoryVault,
    lockAtRestart: boolean,
  ): Promise<{ journal: Journal; store: ResultStore }> {
    temp = await openTempJournal({ vault });
    const first = ResultStore.open(temp.path, temp.journal.rowCipher());
    first.commit(stored);
    first.close();
    await temp.journal.close();
    if (lockAtRestart) vault.lock();
    const journal = await Journal.open({ path: temp.path, clock: temp.clock, vault });
    return { journal, store: ResultStore.open(temp.path, journal.rowCipher()) };
  }

  it('while the vault is locked its bytes answer VAULT_LOCKED (head still answers); unlocked, the same values', async () => {
    const vault = await createMemoryVault();
    const { journal, store } = await storeThenRestart(vault, true);
    try {
      expect(store.head(stored.result_id)).toMatchObject({
        created_at_ms: 3,
        purged_at_ms: null,
        stored_bytes: canary.length,
      });
      expect(codeOf(() => store.read(stored.result_id))).toBe('VAULT_LOCKED');
      expect(codeOf(() => store.readFrom(stored.result_id, 0))).toBe('VAULT_LOCKED');
      vault.unlock();
      expect(store.read(stored.result_id)).toMatchObject({ summary: { status: 201 }, body: Buffer.from(canary) });
    } finally {
      store.close();
      await journal.close();
    }
  });

  it('a run that ended before any audit key existed sealed to no one: AUDIT_KEY_UNAVAILABLE, even unlocked', async () => {
    const vault = await createMemoryVault('locked');
    const { journal, store } = await storeThenRestart(vault, false);
    try {
      vault.unlock();
      expect(codeOf(() => store.read(stored.result_id))).toBe('AUDIT_KEY_UNAVAILABLE');
    } finally {
      store.close();
      await journal.close();
    }
  });
});
