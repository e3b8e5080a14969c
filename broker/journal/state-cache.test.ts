import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import type { ActionState } from '../contract/index.js';
import { actionPaths } from '../testing/action-paths.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { Journal } from './journal.js';
import { StateCache, type CachedAction } from './state-cache.js';
import { advanceActionTimeline, emptyActionTimeline, foldEvent, splitActionTarget } from '../core/index.js';

let t: TempJournal | undefined;
afterEach(async () => {
  await t?.dispose();
  t = undefined;
});

const state = (id: string): CachedAction => ({
  state: { action_id: id } as unknown as ActionState,
  timeline: emptyActionTimeline,
});

describe('the state cache', () => {
  it('keeps at most its bound, dropping the least recently touched first', () => {
    const cache = new StateCache(3);
    cache.committed([
      ['a', state('a')],
      ['b', state('b')],
      ['c', state('c')],
    ]);
    expect(cache.get('a')).toEqual(state('a'));
    cache.committed([['d', state('d')]]);
    expect(cache.size()).toBe(3);
    expect(cache.get('b')).toBeUndefined();
    expect(cache.get('a')).toEqual(state('a'));
    expect(cache.get('d')).toEqual(state('d'));
  });

  it("through a real journal: every action's state read from memory equals what a fresh connection reads from disk", async () => {
    t = await openTempJournal();
    const paths = Object.values(actionPaths) as Array<(id: string) => Parameters<Journal['appendBatch']>[0]>;
    const ids: string[] = [];
    for (const [n, path] of paths.entries()) {
      const id = `act_cache_${String(n).padStart(3, '0')}`;
      ids.push(id);
      // One event at a time, so the cache serves each next event's fold, and a lost race leaves both unchanged.
      for (const event of path(id)) await t.journal.tryAppend(event);
    }
    const fromMemory = ids.map((id) => t?.journal.getAction(id));
    await t.journal.close();
    const reopened = await Journal.open({ path: t.path, clock: t.clock, vault: t.vault });
    try {
      const fromDisk = ids.map((id) => reopened.getAction(id));
      // Recovery at open may close what a path left open; compare the actions it did not touch.
      const untouched = ids.filter((_, i) => fromDisk[i]?.last_seq === fromMemory[i]?.last_seq);
      expect(untouched.length).toBeGreaterThan(paths.length / 2);
      for (const id of untouched) expect(reopened.getAction(id)).toEqual(fromMemory[ids.indexOf(id)]);
    } finally {
      await reopened.close();
    }
  });

  // Most events update only the columns that changed since this connection's last write (journal-store updateChanged):
  // a column that update missed would disagree here.
  it('after every path, each actions column says what the stored state and a fold of its events say', async () => {
    t = await openTempJournal();
    const paths = Object.values(actionPaths) as Array<(id: string) => Parameters<Journal['appendBatch']>[0]>;
    for (const [n, path] of paths.entries()) {
      const id = `act_cols_${String(n).padStart(3, '0')}`;
      for (const event of path(id)) await t.journal.tryAppend(event);
    }
    const db = new Database(t.path, { readonly: true });
    try {
      const rows = db.prepare(`SELECT * FROM actions`).all() as Array<Record<string, unknown>>;
      expect(rows.length).toBe(paths.length);
      const plain = ['session_id', 'ticket', 'lane', 'stage', 'decision', 'dispatch_seq', 'outcome', 'phase', 'retry'];
      const more = ['code', 'effect', 'outcome_basis', 'source', 'caller_disposition', 'result_id', 'last_seq'];
      const rest = ['channel', 'target', 'request_fingerprint', 'approval', 'dispatch_evidence', 'retry_after_ms'];
      const positions = ['result_digest', 'first_seq', 'accepted_at_ms', 'updated_at_ms'];
      for (const row of rows) {
        const state = JSON.parse(String(row['state'])) as Record<string, unknown>;
        for (const column of [...plain, ...more, ...rest, ...positions])
          expect([row['action_id'], column, row[column]]).toEqual([row['action_id'], column, state[column]]);
        expect(row['recorded']).toBe(state['recorded'] === true ? 1 : 0);
        expect(row['idempotent']).toBe(state['idempotent'] === true ? 1 : 0);
        expect(row['target_name']).toBe(splitActionTarget(String(state['target'])).name);
        // The timeline columns as a fold of the action's own events computes them, independently of the store.
        let folded: ActionState | undefined;
        let timeline = emptyActionTimeline;
        for (const event of t.journal.subjectEvents(String(row['action_id']))) {
          const next = foldEvent(folded, event);
          if (!next.ok) throw new Error(`the log holds a refused event at ${event.seq}`);
          folded = next.state;
          timeline = advanceActionTimeline(timeline, event, folded);
        }
        expect(timeline).toEqual({
          decided_by: row['decided_by'],
          decided_at_ms: row['decided_at_ms'],
          decided_seq: row['decided_seq'],
          dispatched_at_ms: row['dispatched_at_ms'],
          settled_at_ms: row['settled_at_ms'],
          resolved_at_ms: row['resolved_at_ms'],
        });
      }
    } finally {
      db.close();
    }
  });
});
