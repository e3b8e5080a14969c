import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { NewEvent } from '../contract/index.js';
import { actionPaths } from '../testing/action-paths.js';
import { openTempResultStore, type TempJournal } from '../testing/temp-journal.js';
import type { ResultStore } from './result-store.js';

/** An action appended up to (not including) its RESULT_COMMITTED, which is returned. */
async function uptoCommitted(journal: TempJournal['journal'], id: string): Promise<NewEvent> {
  const path = actionPaths.httpNoApproval(id);
  const at = path.findIndex((e) => e.kind === 'RESULT_COMMITTED');
  for (const event of path.slice(0, at)) await journal.append(event);
  const committed = path[at];
  if (committed === undefined) throw new Error('the path has no RESULT_COMMITTED');
  return committed;
}

const resultOf = (actionId: string, resultId: string, attempt = 1) => ({
  result_id: resultId,
  action_id: actionId,
  attempt,
  summary: { status: 200 },
  body: Buffer.from(`body of ${actionId}`),
  total_bytes: 16,
  truncated: false,
  digest: `sha256:${'cd'.repeat(32)}`,
  created_at_ms: 5,
});

function storedResults(path: string): unknown[] {
  const db = new Database(path, { readonly: true });
  try {
    return db.prepare(`SELECT result_id, action_id, attempt FROM results ORDER BY result_id`).all();
  } finally {
    db.close();
  }
}

describe('a result that clashes with a unique key of the results table is refused while the commit is planned', () => {
  let temp: TempJournal;
  let store: ResultStore;
  beforeEach(async () => ({ temp, store } = await openTempResultStore()));
  afterEach(() => temp.dispose());

  it('the same result id twice in one commit: the second unit is refused with the primary key constraint, the first lands', async () => {
    const first = await uptoCommitted(temp.journal, 'act_clash_a');
    const second = await uptoCommitted(temp.journal, 'act_clash_b');
    // Same turn of the event loop: one transaction plans both units.
    const landed = temp.journal.append(first, store.rowsOf(resultOf('act_clash_a', 'res_clash')));
    const clash = temp.journal.append(second, store.rowsOf(resultOf('act_clash_b', 'res_clash')));
    await expect(clash).rejects.toMatchObject({
      code: 'SQLITE_CONSTRAINT_PRIMARYKEY',
      message: 'UNIQUE constraint failed: results.result_id',
    });
    expect((await landed).state.stage).toBe('result_committed');
    expect(temp.journal.stats().state).toBe('open');
    expect(temp.journal.getAction('act_clash_b')?.stage).not.toBe('result_committed');
    expect(storedResults(temp.path)).toEqual([{ result_id: 'res_clash', action_id: 'act_clash_a', attempt: 1 }]);
  });

  it("an action's attempt the table already holds under another result id: refused with the unique constraint, the rest of the commit lands", async () => {
    const first = await uptoCommitted(temp.journal, 'act_clash_c');
    await temp.journal.append(first, store.rowsOf(resultOf('act_clash_c', 'res_clash_c')));
    const second = await uptoCommitted(temp.journal, 'act_clash_d');
    const clash = temp.journal.append(second, store.rowsOf(resultOf('act_clash_c', 'res_clash_d')));
    const neighbour = temp.journal.append(actionPaths.httpNoApproval('act_clash_e')[0] as NewEvent);
    await expect(clash).rejects.toMatchObject({
      code: 'SQLITE_CONSTRAINT_UNIQUE',
      message: 'UNIQUE constraint failed: results.action_id, results.attempt',
    });
    expect((await neighbour).state.action_id).toBe('act_clash_e');
    expect(temp.journal.stats().state).toBe('open');
    expect(storedResults(temp.path)).toEqual([{ result_id: 'res_clash_c', action_id: 'act_clash_c', attempt: 1 }]);
  });

  it('an attempt planned earlier in the same commit, with the same result id too: the unique constraint, as SQLite checks it first', async () => {
    const first = await uptoCommitted(temp.journal, 'act_clash_f');
    const second = await uptoCommitted(temp.journal, 'act_clash_g');
    const landed = temp.journal.append(first, store.rowsOf(resultOf('act_clash_f', 'res_clash_f')));
    const clash = temp.journal.append(second, store.rowsOf(resultOf('act_clash_f', 'res_clash_f')));
    await expect(clash).rejects.toMatchObject({ code: 'SQLITE_CONSTRAINT_UNIQUE' });
    await landed;
    // A later attempt of the same action is not a clash.
    const third = await uptoCommitted(temp.journal, 'act_clash_h');
    await temp.journal.append(third, store.rowsOf(resultOf('act_clash_f', 'res_clash_f2', 2)));
    expect(temp.journal.stats().state).toBe('open');
    expect(storedResults(temp.path)).toEqual([
      { result_id: 'res_clash_f', action_id: 'act_clash_f', attempt: 1 },
      { result_id: 'res_clash_f2', action_id: 'act_clash_f', attempt: 2 },
    ]);
  });
});
