import { existsSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { actionPaths } from './action-paths.js';
import { tempJournals } from './temp-journal.js';

const { open, disposeOpened } = tempJournals();
afterEach(disposeOpened);

describe('tempJournals: the temp journals a file opens are disposed after each case', () => {
  it('disposes every journal opened since the last call (closed, directory removed), and none twice', async () => {
    const first = await open();
    const second = await open();
    await first.journal.appendBatch(actionPaths.httpNoApproval('act_temp_0001'));
    expect([existsSync(first.dir.path), existsSync(second.dir.path)]).toEqual([true, true]);

    await disposeOpened();
    expect([existsSync(first.path), existsSync(second.path)]).toEqual([false, false]);
    await expect(first.journal.append(actionPaths.httpNoApproval('act_temp_0002')[0]!)).rejects.toThrow();

    const third = await open();
    await disposeOpened();
    expect(existsSync(third.dir.path)).toBe(false);
    // Nothing is left to dispose: a second call has nothing to close.
    await expect(disposeOpened()).resolves.toBeUndefined();
  });
});
