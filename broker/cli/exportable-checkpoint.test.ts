import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { formatCheckpointFile, parseCheckpointFile } from '../audit/checkpoint-file.js';
import { verifyJournal } from '../audit/verify-journal.js';
import { actionPaths } from '../testing/action-paths.js';
import { swapKeyAndRewrite } from '../testing/key-swap-attack.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { exportableCheckpoint } from './exportable-checkpoint.js';

/** Real SQLite journals with real libsodium keys; the vault is the in-memory one the journal wrapped its secrets with. */
const cleanup: TempJournal[] = [];
afterEach(async () => {
  for (const t of cleanup.splice(0)) await t.dispose();
});

const actionIds = ['act_export_0000', 'act_export_0001', 'act_export_0002'];
const noProgress = (): void => {};

/** Three approved HTTP actions, checkpointed every 4 events; `lockedTail` more are written while the vault is locked. */
async function closedJournal(lockedTail = 0): Promise<TempJournal> {
  const t = await openTempJournal({ checkpointEveryEvents: 4 });
  cleanup.push(t);
  for (const id of actionIds)
    for (const event of actionPaths.httpApproved(id)) {
      t.clock.advance(1);
      await t.journal.append(event);
    }
  if (lockedTail > 0) {
    t.vault.lock('operator');
    for (const event of actionPaths.httpApproved('act_export_0003').slice(0, lockedTail)) await t.journal.append(event);
  }
  await t.journal.close();
  t.vault.unlock(); // the person's passphrase, as the CLI asks for it
  return t;
}

function row<T>(path: string, sql: string): T {
  const db = new Database(path, { readonly: true });
  try {
    return db.prepare(sql).get() as T;
  } finally {
    db.close();
  }
}

const journalKey = (path: string): Buffer =>
  row<{ sign_public: Buffer }>(path, `SELECT sign_public FROM audit_keys`).sign_public;
const checkpointCount = (path: string): number => row<{ n: number }>(path, `SELECT count(*) AS n FROM checkpoints`).n;

describe('when the journal is honest', () => {
  it('exports the newest checkpoint under the vault key, and the journal verifies against the file', async () => {
    const t = await closedJournal();
    const checkpoint = await exportableCheckpoint(t.path, t.vault, t.clock, noProgress);
    expect(Buffer.from(checkpoint.signPublic).equals(journalKey(t.path))).toBe(true);
    const anchor = parseCheckpointFile(Buffer.from(formatCheckpointFile(checkpoint, 0)));
    const report = await verifyJournal({ dbPath: t.path, anchor, threads: 0 });
    expect(report).toMatchObject({ ok: true, anchor_size: checkpoint.size, key_source: 'checkpoint_file' });
    if (report.ok) expect(checkpoint.size).toBe(report.events);
  });

  it('when events came after the newest checkpoint, signs them first and exports that checkpoint', async () => {
    const t = await closedJournal(3);
    const before = checkpointCount(t.path);
    const checkpoint = await exportableCheckpoint(t.path, t.vault, t.clock, noProgress);
    expect(checkpointCount(t.path)).toBe(before + 1);
    expect(await verifyJournal({ dbPath: t.path, anchor: checkpoint, threads: 0 })).toMatchObject({
      ok: true,
      unsigned_tail: 0,
      anchor_size: checkpoint.size,
    });
  });
});

describe('when a same-user process rewrote history and put its own key in audit_keys', () => {
  it('refuses with AUDIT_KEY_MISMATCH though the journal verifies under its own claimed key', async () => {
    const t = await closedJournal();
    const swap = await swapKeyAndRewrite(t.path, actionIds[1] as string);
    // The attack works against a verify that trusts the journal's own key column.
    expect(await verifyJournal({ dbPath: t.path, threads: 0 })).toMatchObject({ ok: true, key_source: 'journal' });
    await expect(exportableCheckpoint(t.path, t.vault, t.clock, noProgress)).rejects.toMatchObject({
      code: 'AUDIT_KEY_MISMATCH',
    });
    expect(Buffer.from(swap.attackerKey).equals(journalKey(t.path))).toBe(true);
  });

  it('with its checkpoints deleted (the export would sign), refuses before signing anything', async () => {
    const t = await closedJournal();
    await swapKeyAndRewrite(t.path, actionIds[0] as string, false);
    await expect(exportableCheckpoint(t.path, t.vault, t.clock, noProgress)).rejects.toMatchObject({
      code: 'AUDIT_KEY_MISMATCH',
    });
    expect(checkpointCount(t.path)).toBe(0);
  });

  it('with the wrapped signing secret replaced too, refuses: only the vault can wrap one', async () => {
    const t = await closedJournal();
    await swapKeyAndRewrite(t.path, actionIds[2] as string);
    const db = new Database(t.path);
    db.exec(`UPDATE audit_keys SET sign_secret_wrapped = box_secret_wrapped`);
    db.close();
    await expect(exportableCheckpoint(t.path, t.vault, t.clock, noProgress)).rejects.toThrow();
  });
});

describe('when rows changed after signing and the key is intact', () => {
  it('refuses with AUDIT_VERIFY_FAILED naming the verify code, and signs nothing over the changed log', async () => {
    const t = await closedJournal(2);
    const db = new Database(t.path);
    db.exec(`DROP TRIGGER events_no_update; UPDATE events SET kind = 'OUTCOME_RECORDED' WHERE seq = 3`);
    db.close();
    const before = checkpointCount(t.path);
    const refused = exportableCheckpoint(t.path, t.vault, t.clock, noProgress);
    await expect(refused).rejects.toMatchObject({ code: 'AUDIT_VERIFY_FAILED' });
    await expect(refused).rejects.toThrow(/^ROW_MODIFIED at seq 3: /);
    expect(checkpointCount(t.path)).toBe(before);
  });
});

describe('when the journal has nothing to export', () => {
  it('an empty journal with an audit key is a usage error', async () => {
    const t = await openTempJournal();
    cleanup.push(t);
    await t.journal.close();
    await expect(exportableCheckpoint(t.path, t.vault, t.clock, noProgress)).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
  });
});
