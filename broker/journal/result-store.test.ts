import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isCodedError } from '../contract/index.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { ResultStore, resultChunkBytes } from './result-store.js';

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
    raw.prepare(`INSERT INTO results VALUES ('res_x', 'act_x', 1, '{}', 3, 3, 0, 'sha256:x', 1, 0, 1)`).run();
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
});
