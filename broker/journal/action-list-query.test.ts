import type Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { brokerApiSchemas, type NewEvent, type OperatorInput } from '../contract/index.js';
import { listActions } from '../host/action-list.js';
import { actionPaths } from '../testing/action-paths.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { ActionListQuery, actionListScanRowsMax, actionListSql, type ActionListFilter } from './action-list-query.js';

/** One accepted (open) action: the cheapest row of the list, so a test can hold tens of thousands. */
function accepted(id: string, options: { target?: string; lane?: string; session?: string } = {}): NewEvent {
  const [first] = actionPaths.httpNoApproval(id);
  if (first?.kind !== 'ACTION_ACCEPTED') throw new Error('a script starts with ACTION_ACCEPTED');
  return {
    ...first,
    session_id: options.session ?? 'ses_filler_01',
    lane: options.lane ?? 'lane-filler',
    payload: { ...first.payload, target: options.target ?? 'route:docs POST /documents/{id}' },
  };
}

/** `count` filler actions, appended in batches (one transaction each). */
async function appendFillers(t: TempJournal, count: number, from = 0): Promise<void> {
  const batchEvents = 250;
  for (let start = 0; start < count; start += batchEvents) {
    const batch: NewEvent[] = [];
    for (let i = start; i < Math.min(count, start + batchEvents); i += 1)
      batch.push(accepted(`act_filler_${String(from + i).padStart(8, '0')}`));
    await t.journal.appendBatch(batch);
  }
}

let temp: TempJournal;
beforeEach(async () => {
  temp = await openTempJournal();
});
afterEach(() => temp.dispose());

const list = (input: OperatorInput<'actions.list'>, scanRowsMax?: number) =>
  brokerApiSchemas['actions.list'].output.parse(
    listActions(
      temp.journal,
      brokerApiSchemas['actions.list'].input.parse(input),
      scanRowsMax === undefined ? {} : { scanRowsMax },
    ),
  );

describe('when the only match of a text search is older than the scan bound', () => {
  it('the first page is empty but says where it stopped, and following next_before finds the match', async () => {
    await temp.journal.appendBatch([accepted('act_needle_000001', { target: 'route:rare-needle GET /x' })]);
    await appendFillers(temp, actionListScanRowsMax + 25);
    const first = list({ text: 'RARE-needle', limit: 10 });
    expect(first.actions).toEqual([]);
    expect(first.searched_before_seq).not.toBeNull();
    expect(first.next_before).toBe(first.searched_before_seq);
    // Exactly actionListScanRowsMax actions were searched: the ones from the newest down to the bound.
    const searched = temp
      .reader()
      .prepare('SELECT count(*) FROM actions WHERE first_seq >= ?')
      .pluck()
      .get(first.searched_before_seq);
    expect(searched).toBe(actionListScanRowsMax);

    const second = list({ text: 'RARE-needle', limit: 10, before_seq: first.next_before ?? 0 });
    expect(second.actions.map((a) => a.action_id)).toEqual(['act_needle_000001']);
    expect(second).toMatchObject({ next_before: null, searched_before_seq: null });
  }, 60_000);

  it('the list without a filter is unchanged: full pages, next_before the last row, never a scan mark', async () => {
    await appendFillers(temp, 30);
    const page = list({ limit: 7 }, 3);
    expect(page.actions).toHaveLength(7);
    expect(page.next_before).toBe(page.actions.at(-1)?.first_seq);
    expect(page.searched_before_seq).toBeNull();
    // One filter alone is an index range too: no bound applies.
    expect(list({ lane: 'lane-filler', limit: 7 }, 3)).toMatchObject({ searched_before_seq: null });
    expect(list({ lane: 'lane-filler', limit: 7 }, 3).actions).toHaveLength(7);
  });
});

/** Counts the rows a text search examined: `lower` is called on each row's action id (the needle never matches). */
function countingReader(t: TempJournal): { db: Database.Database; examined: Set<string> } {
  const db = t.reader();
  const examined = new Set<string>();
  db.function('lower', { deterministic: false }, (value: unknown) => {
    if (typeof value === 'string' && value.startsWith('act_')) examined.add(value);
    return typeof value === 'string' ? value.toLowerCase() : null;
  });
  return { db, examined };
}

describe('the rows one page examines are bounded', () => {
  it('a text search that matches nothing examines at most the bound per page, and the pages cover every action once', async () => {
    await appendFillers(temp, 230);
    const { db, examined } = countingReader(temp);
    const query = new ActionListQuery(db);
    const all = new Set<string>();
    let before: number | undefined;
    const pages: number[] = [];
    for (let n = 0; n < 10; n += 1) {
      examined.clear();
      const page = query.page(
        { text: 'no-such-text', limit: 5, ...(before === undefined ? {} : { beforeSeq: before }) },
        50,
      );
      expect(page.rows).toEqual([]);
      expect(examined.size).toBeLessThanOrEqual(50);
      pages.push(examined.size);
      for (const id of examined) all.add(id);
      if (page.searchedBeforeSeq === null) break;
      before = page.searchedBeforeSeq;
    }
    expect(pages).toEqual([50, 50, 50, 50, 30]);
    expect(all.size).toBe(230);
  });

  it("text with other filters: the driving filter's range is bounded too", async () => {
    const events: NewEvent[] = [];
    for (let i = 0; i < 120; i += 1)
      events.push(
        accepted(`act_mixed_${String(i).padStart(8, '0')}`, { lane: `lane-${i % 2}`, session: `ses_m_${i % 3}` }),
      );
    await temp.journal.appendBatch(events);
    const { db, examined } = countingReader(temp);
    const query = new ActionListQuery(db);
    const page = query.page({ text: 'no-such-text', lane: 'lane-1', sessionId: 'ses_m_0', limit: 5 }, 10);
    expect(page.rows).toEqual([]);
    expect(examined.size).toBeLessThanOrEqual(10);
    expect(page.searchedBeforeSeq).not.toBeNull();
  });

  const scripts = ['http500', 'rejectedByPerson', 'expired', 'httpNoApproval', 'lostThenReconciled'] as const;
  // Each with the index that drives its read (the others test its rows).
  const combinations: Array<[string, Omit<ActionListFilter, 'limit'>, string]> = [
    ['session + outcome', { sessionId: 'ses_c_1', outcome: 'rejected' }, 'actions_list_by_session'],
    [
      'outcome + code + open',
      { outcome: 'committed', code: 'REMOTE_ERROR_STATUS', open: true },
      'actions_list_by_code',
    ],
    ['code + lane', { code: 'APPROVAL_DENIED', lane: 'lane-c-0' }, 'actions_list_by_code'],
    ['lane + target + session', { lane: 'lane-c-1', targetName: 'docs', sessionId: 'ses_c_0' }, 'actions_list_by_lane'],
    ['text', { text: 'approval_denied' }, 'actions_list'],
  ];
  for (const [name, filter, index] of combinations) {
    it(`${name}: each page is an index range bounded on both sides, and the pages find every match once`, async () => {
      for (let i = 0; i < 90; i += 1) {
        const [first, ...rest] = actionPaths[scripts[i % scripts.length] ?? 'http500'](
          `act_combo_${String(i).padStart(6, '0')}`,
        );
        if (first === undefined) throw new Error('empty script');
        await temp.journal.appendBatch([{ ...first, session_id: `ses_c_${i % 2}`, lane: `lane-c-${i % 3}` }, ...rest]);
      }
      const db = temp.reader();
      const { sql, floorSql } = actionListSql({ ...filter, beforeSeq: 1_000 });
      expect(floorSql).not.toBeNull();
      const plan = db
        .prepare(`EXPLAIN QUERY PLAN ${sql}`)
        .all(...Array.from({ length: (sql.match(/\?/g) ?? []).length }, () => 1))
        .map((r) => (r as { detail: string }).detail)
        .join('\n');
      expect(plan).toMatch(
        new RegExp(`SEARCH a USING (COVERING )?INDEX ${index} \\([^)]*first_seq>\\? AND first_seq<\\?\\)`),
      );
      expect(plan).not.toContain('TEMP B-TREE');

      const unbounded = new ActionListQuery(db).page({ ...filter, limit: 1_000 }, 1_000_000);
      expect(unbounded.searchedBeforeSeq).toBeNull();
      const query = new ActionListQuery(db);
      const seen: string[] = [];
      let before: number | undefined;
      let partials = 0;
      for (let n = 0; n < 200; n += 1) {
        const page = query.page({ ...filter, limit: 2, ...(before === undefined ? {} : { beforeSeq: before }) }, 4);
        seen.push(...page.rows.slice(0, 2).map((r) => r.action_id));
        if (page.searchedBeforeSeq !== null) partials += 1;
        const next = page.searchedBeforeSeq ?? (page.rows.length > 2 ? page.rows[1]?.first_seq : undefined);
        if (next === undefined) break;
        before = next;
      }
      expect(seen).toEqual(unbounded.rows.map((r) => r.action_id));
      expect(partials).toBeGreaterThan(0);
    });
  }
});
