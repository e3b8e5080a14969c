import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { actionPaths } from '../testing/action-paths.js';
import { createMemoryVault } from '../testing/memory-vault.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { RunKeyLostError, sealedForGood } from './audit-writer.js';
import { Journal } from './journal.js';
import { readDecryptedEvents } from './read-decrypted-events.js';

/**
 * `postern audit export`'s reader over a real journal file: events of a run that ended before any audit key existed
 * are refused as the broker refuses them everywhere (RunKeyLostError: the one wording, and sealedForGood), whether
 * no audit key exists at all or a later run made one.
 */
let t: TempJournal | undefined;
afterEach(async () => {
  await t?.dispose();
  t = undefined;
});

async function exportAll(path: string, vault: Awaited<ReturnType<typeof createMemoryVault>>): Promise<unknown> {
  try {
    for await (const event of readDecryptedEvents(path, vault, 1, Number.MAX_SAFE_INTEGER)) void event;
  } catch (error) {
    return error;
  }
  return undefined;
}

describe('readDecryptedEvents of a run that never had a key', () => {
  it('refuses with the broker’s sealed-for-good error, with no audit key yet and after a later run made one', async () => {
    t = await openTempJournal({ vault: await createMemoryVault('locked') });
    for (const event of actionPaths.httpApproved('act_export_lost')) await t.journal.append(event);
    await t.journal.close();
    const expected = new RunKeyLostError(1, 'events');

    const noKey = await exportAll(t.path, await createMemoryVault('unlocked'));
    expect(sealedForGood(noKey)).toBe(true);
    expect(noKey).toMatchObject({ code: 'AUDIT_KEY_UNAVAILABLE', message: expected.message });

    // Run 2 opens unlocked: the audit keys are made, run 2's key sealed; run 1's events still open never.
    const vault = await createMemoryVault('unlocked');
    const later = await Journal.open({ path: t.path, clock: t.clock, vault });
    await later.close();
    const db = new Database(t.path, { readonly: true });
    expect(db.prepare(`SELECT count(*) AS n FROM audit_keys`).get()).toEqual({ n: 1 });
    db.close();
    const keyed = await exportAll(t.path, vault);
    expect(sealedForGood(keyed)).toBe(true);
    expect(keyed).toMatchObject({ code: 'AUDIT_KEY_UNAVAILABLE', message: expected.message });
  });
});
