import Database from 'better-sqlite3';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { NewEvent } from '../contract/index.js';
import { actionPaths } from '../testing/action-paths.js';
import { appendUptoCommitted, resultOf } from '../testing/committed-result.js';
import { openTempResultStore, type TempJournal } from '../testing/temp-journal.js';
import { Journal } from './journal.js';
import type { ResultStore } from './result-store.js';

/*
 * The writer thread's planning on the loop (Journal.planInSnapshot): its point reads share one read transaction, and a
 * plan that throws leaves none open. Real SQLite files and a real writer thread (every batch goes to it); the probe
 * wraps better-sqlite3's own Statement methods on this thread (the writer thread's connection is not seen by it).
 */

/**
 * What planning reads, by the statement's SQL: an action's sealed events (what a commit folds over when no cache holds
 * the action; a brand-new action's are none) or, while those cannot be opened, its state row; its timeline; a result's
 * two unique keys.
 */
const actionEventsRead = 'SELECT * FROM events WHERE action_id = ? AND seq > ?';
const actionRowRead = 'SELECT state FROM actions WHERE action_id = ?';
const planningReads = [
  actionEventsRead,
  actionRowRead,
  'SELECT decided_by, decided_at_ms',
  'SELECT 1 FROM results WHERE action_id = ? AND attempt = ?',
  'SELECT 1 FROM results WHERE result_id = ?',
];

interface Read {
  readonly sql: string;
  readonly db: Database.Database;
  readonly inTransaction: boolean;
  /** How many deferred BEGINs the journal had run on this thread when the read ran. */
  readonly begins: number;
}

/** Records every planning read and counts every prepared `BEGIN` run on this thread, until the test ends. */
function probe(): { readonly reads: Read[]; readonly begins: () => number; failOn?: string } {
  const scratch = new Database(':memory:');
  const statement = Object.getPrototypeOf(scratch.prepare('SELECT 1')) as Database.Statement;
  scratch.close();
  const { get, all, run } = statement;
  let begins = 0;
  const probed = { reads: [] as Read[], begins: () => begins, failOn: undefined as string | undefined };
  spies.push(
    vi.spyOn(statement, 'get').mockImplementation(function (this: Database.Statement, ...params: unknown[]) {
      const sql = planningReads.find((read) => this.source.trim().startsWith(read));
      if (sql !== undefined)
        probed.reads.push({ sql, db: this.database, inTransaction: this.database.inTransaction, begins });
      return get.apply(this, params) as unknown;
    }),
    vi.spyOn(statement, 'all').mockImplementation(function (this: Database.Statement, ...params: unknown[]) {
      const sql = planningReads.find((read) => this.source.trim().startsWith(read));
      if (sql !== undefined)
        probed.reads.push({ sql, db: this.database, inTransaction: this.database.inTransaction, begins });
      return all.apply(this, params) as unknown[];
    }),
    vi.spyOn(statement, 'run').mockImplementation(function (this: Database.Statement, ...params: unknown[]) {
      if (this.source === 'BEGIN') begins += 1;
      return run.apply(this, params);
    }),
  );
  return probed;
}
const spies: { mockRestore(): void }[] = [];

const opened: { temp: TempJournal; store: ResultStore }[] = [];
afterEach(async () => {
  for (const spy of spies.splice(0)) spy.mockRestore();
  for (const { temp, store } of opened.splice(0)) {
    store.close();
    await temp.dispose();
  }
});

async function threadJournal(): Promise<{ temp: TempJournal; store: ResultStore }> {
  const opening = await openTempResultStore({ writerThread: true, threadBatchEventsMin: 1 });
  opened.push(opening);
  return opening;
}

describe('when the loop plans a batch for the writer thread', () => {
  it("its point reads (actions' states and timelines, results' unique keys) run in one read transaction", async () => {
    const { temp, store } = await threadJournal();
    const ids = ['act_plan_a', 'act_plan_b', 'act_plan_c'];
    const committed = await Promise.all(ids.map((id) => appendUptoCommitted(temp.journal, id)));
    const accepted = ['act_plan_d', 'act_plan_e'].map((id) => actionPaths.httpNoApproval(id)[0] as NewEvent);
    const probed = probe();
    // One turn: one flush, one batch, one plan (three results, two new actions).
    const appends = [
      ...committed.map((event, n) => temp.journal.append(event, store.rowsOf(resultOf(ids[n]!, `res_plan_${n}`)))),
      ...accepted.map((event) => temp.journal.append(event)),
    ];
    await Promise.all(appends);
    const reads = probed.reads.filter((read) => read.db.name === temp.path);
    const kinds = new Set(reads.map((read) => read.sql));
    // Each kind of planning read ran, each result's keys once (the new actions' events at least once); every action
    // here is this run's, so no state row is read.
    for (const sql of planningReads) expect(kinds.has(sql), sql).toBe(sql !== actionRowRead);
    expect(reads.filter((read) => read.sql.includes('FROM results'))).toHaveLength(2 * ids.length);
    expect(reads.every((read) => read.inTransaction)).toBe(true);
    expect(probed.begins()).toBe(1);
    expect(new Set(reads.map((read) => read.begins))).toEqual(new Set([1]));
    expect(reads[0]?.db.inTransaction).toBe(false);
    expect(temp.journal.stats().state).toBe('open');
  });

  it('a plan that throws (a stored state its schema refuses, read while the vault is locked) leaves no transaction open: the failed journal is still read', async () => {
    const first = await threadJournal();
    const path = actionPaths.httpNoApproval('act_plan_corrupt');
    for (const event of path) await first.temp.journal.append(event);
    await first.temp.journal.close();
    const edit = new Database(first.temp.path);
    edit.prepare("UPDATE actions SET state = '{}' WHERE action_id = ?").run('act_plan_corrupt');
    edit.close();
    // Locked: the earlier run's events do not open, so the plan folds over the stored state (the row), which throws.
    first.temp.vault.lock();
    const journal = await Journal.open({
      path: first.temp.path,
      clock: first.temp.clock,
      vault: first.temp.vault,
      writerThread: true,
      threadBatchEventsMin: 1,
    });
    try {
      const probed = probe();
      const later = journal.append(path.at(-1)!);
      await expect(later).rejects.toMatchObject({ code: 'JOURNAL_UNAVAILABLE' });
      expect(journal.stats().state).toBe('failed');
      const planned = probed.reads.find((read) => read.sql === actionRowRead);
      expect(planned?.inTransaction).toBe(true);
      // Ended by planInSnapshot's finally (and by fail()'s ROLLBACK, were it still open).
      expect(planned?.db.inTransaction).toBe(false);
      await expect(journal.readCurrent(() => journal.eventsPage(1, 500).length)).resolves.toBe(path.length);
    } finally {
      await journal.close();
    }
  });
});
