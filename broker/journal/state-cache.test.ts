import { afterEach, describe, expect, it } from 'vitest';
import type { ActionState } from '../contract/index.js';
import { actionPaths } from '../testing/action-paths.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { Journal } from './journal.js';
import { StateCache } from './state-cache.js';

let t: TempJournal | undefined;
afterEach(async () => {
  await t?.dispose();
  t = undefined;
});

const state = (id: string): ActionState => ({ action_id: id }) as unknown as ActionState;

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
});
