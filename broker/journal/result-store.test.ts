import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isCodedError } from '../contract/index.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { ResultStore, resultChunkBytes, resultPurgeBatchMax } from './result-store.js';

describe('the result store', () => {
  let temp: TempJournal;
  let store: ResultStore;
  beforeEach(async () => {
    temp = await openTempJournal();
    store = ResultStore.open(temp.path);
  });
  afterEach(async () => {
    store.close();
    await temp.dispose();
  });

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
    expect(read).toMatchObject({ truncated: true, total_bytes: body.length + 10, stored_bytes: body.length, summary: { status: 200 } });
    expect(store.readForAction('act_000001')?.result_id).toBe('res_act_000001_1');
  });

  it('is durable and visible to another connection as soon as commit returns', () => {
    store.commit(input(Buffer.from('hello')));
    const other = new Database(temp.path, { readonly: true });
    try {
      expect(other.prepare(`SELECT complete, chunks FROM results WHERE result_id = ?`).get('res_act_000001_1')).toEqual({ complete: 1, chunks: 1 });
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
    raw.prepare(`INSERT INTO results VALUES ('res_x', 'act_x', 1, '{}', 3, 3, 0, 'sha256:x', 1, 0, 1, NULL)`).run();
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

  it('a reader resumes from a chunk offset: the bytes after the last chunk it verified, with the sequence facts', () => {
    const body = Buffer.concat([Buffer.alloc(resultChunkBytes, 1), Buffer.alloc(resultChunkBytes, 2), Buffer.from('tail')]);
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
        expect(isCodedError(error) && { code: error.code, field: error.field }).toEqual({ code: 'INVALID_ARGUMENT', field: 'from_chunk' });
      }
    }
  });

  it('chunks without a completeness marker are never read, from any offset', () => {
    const raw = new Database(temp.path);
    raw.prepare(`INSERT INTO results VALUES ('res_x', 'act_x', 1, '{}', 3, 3, 0, 'sha256:x', 1, 0, 1, NULL)`).run();
    raw.prepare(`INSERT INTO result_chunks VALUES ('res_x', 0, x'414243')`).run();
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
    again.prepare(`INSERT INTO result_chunks VALUES ('res_act_000001_1', 1, x'00')`).run();
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

    it('purges exactly the results at or past the boundary fetch_result calls expired, oldest first, and keeps the rest whole', () => {
      const old = commitAt(1, 100);
      const boundary = commitAt(2, 200);
      const young = commitAt(3, 201);
      expect(store.purgeExpired(1_200, retentionMs, 10)).toBe(2);
      expect(chunkRows(old)).toBe(0);
      expect(chunkRows(boundary)).toBe(0);
      expect(chunkRows(young)).toBe(2);
      expect(store.read(young)?.body.equals(Buffer.alloc(resultChunkBytes + 5, 3))).toBe(true);
      // Nothing left to purge: a second sweep at the same time purges nothing.
      expect(store.purgeExpired(1_200, retentionMs, 10)).toBe(0);
    });

    it('a purged result still has its facts, and every read of its bytes says RESULT_EXPIRED — never partial bytes, never absent', () => {
      const id = commitAt(1, 100);
      store.purgeExpired(5_000, retentionMs, 1);
      expect(store.head(id)).toMatchObject({ result_id: id, action_id: 'act_000001', digest: `sha256:${'ab'.repeat(32)}`, created_at_ms: 100, purged_at_ms: 5_000 });
      expect(expiredCode(() => store.read(id))).toBe('RESULT_EXPIRED');
      expect(expiredCode(() => store.readFrom(id, 1))).toBe('RESULT_EXPIRED');
      expect(expiredCode(() => store.readForAction('act_000001'))).toBe('RESULT_EXPIRED');
      expect(() => store.read(id)).toThrow(/purged at 1970-01-01T00:00:05.000Z/);
    });

    it('is bounded per call: `limit` results at most, the oldest first; the next call continues', () => {
      const ids = [commitAt(1, 30), commitAt(2, 10), commitAt(3, 20)];
      expect(store.purgeExpired(10_000, retentionMs, 2)).toBe(2);
      expect(ids.map((id) => store.head(id)?.purged_at_ms ?? null)).toEqual([null, 10_000, 10_000]);
      expect(store.purgeExpired(10_001, retentionMs, 2)).toBe(1);
      expect(store.head(ids[0] ?? '')?.purged_at_ms).toBe(10_001);
    });

    it('the chunks and the marks change in one transaction: a failure midway leaves every result whole and unmarked', () => {
      const first = commitAt(1, 10);
      const second = commitAt(2, 20);
      const raw = new Database(temp.path);
      // A trigger that refuses marking the second result, as a full disk would midway.
      raw.exec(`CREATE TRIGGER refuse_mark BEFORE UPDATE OF purged_at_ms ON results WHEN NEW.result_id = '${second}' BEGIN SELECT RAISE(ABORT, 'disk full'); END;`);
      raw.close();
      expect(() => store.purgeExpired(10_000, retentionMs, 10)).toThrow(/disk full/);
      expect([chunkRows(first), chunkRows(second)]).toEqual([2, 2]);
      expect(store.head(first)?.purged_at_ms).toBeNull();
      expect(store.read(first)?.body.length).toBe(resultChunkBytes + 5);
    });

    it('refuses a limit outside 1..resultPurgeBatchMax and a time that is not whole milliseconds (programmer errors)', () => {
      expect(() => store.purgeExpired(1, retentionMs, 0)).toThrow(RangeError);
      expect(() => store.purgeExpired(1, retentionMs, resultPurgeBatchMax + 1)).toThrow(RangeError);
      expect(() => store.purgeExpired(1.5, retentionMs, 1)).toThrow(RangeError);
      expect(() => store.purgeExpired(1, -1, 1)).toThrow(RangeError);
    });
  });
});
