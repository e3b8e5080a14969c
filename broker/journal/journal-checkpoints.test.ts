import { existsSync, statSync } from 'node:fs';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { actionPaths } from '../testing/action-paths.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { Journal } from './journal.js';

let t: TempJournal | undefined;
afterEach(async () => {
  await t?.dispose();
  t = undefined;
});

const walBytes = (path: string): number => (existsSync(`${path}-wal`) ? statSync(`${path}-wal`).size : 0);

describe("the journal's WAL checkpoints (wal-checkpointer.ts)", () => {
  it('run on the checkpointer thread: the connection checkpoints nothing itself, and the WAL stays bounded', async () => {
    t = await openTempJournal();
    expect(t.journal.durability().wal_autocheckpoint).toBe(0);
    // Many small commits, one action after another: one per event, a few pages each.
    const actions = 400;
    let peak = 0;
    for (let n = 0; n < actions; n += 1) {
      for (const event of actionPaths.httpNoApproval(`act_ckpt_${String(n).padStart(5, '0')}`))
        await t.journal.append(event);
      peak = Math.max(peak, walBytes(t.path));
    }
    expect(t.journal.stats().commits).toBeGreaterThanOrEqual(actions * 10);
    // The connection's own automatic checkpoint is off: only the thread copied pages into the database file.
    expect(t.journal.stats().wal_checkpoints).toBeGreaterThan(0);
    // Without checkpoints the log would hold every commit's pages (tens of MB here); the thread keeps it near its
    // target (about 1,000 frames of 4 KiB) and the log restarts from its beginning.
    const unbounded = t.journal.stats().commits * 3 * 4096;
    expect(peak).toBeLessThan(Math.min(unbounded / 2, 24 * 2 ** 20));
    // The log began again on the checkpointer's thread (its reset write), so its header sync was not on the loop.
    const reader = new Database(t.path, { readonly: true });
    const resets = reader.prepare(`SELECT value FROM meta WHERE key = 'wal_resets'`).get() as { value: number };
    reader.close();
    expect(resets.value).toBeGreaterThan(0);

    const events = t.journal.stats().events;
    await t.journal.close();
    // The journal's connection closed last: SQLite checkpointed and removed the log, and nothing was lost.
    expect(existsSync(`${t.path}-wal`)).toBe(false);
    const reopened = await Journal.open({ path: t.path, clock: t.clock, vault: t.vault });
    try {
      expect(reopened.stats().events).toBe(events);
    } finally {
      await reopened.close();
    }
  });

  it('a short run starts no thread: its log is checkpointed when the connection closes', async () => {
    t = await openTempJournal();
    for (const event of actionPaths.httpNoApproval('act_ckpt_short')) await t.journal.append(event);
    expect(t.journal.stats().wal_checkpoints).toBe(0);
    await t.journal.close();
    expect(existsSync(`${t.path}-wal`)).toBe(false);
  });
});
