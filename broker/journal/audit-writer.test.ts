import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import type { NewEvent } from '../contract/index.js';
import { verifyJournal } from '../audit/verify-journal.js';
import { actionPaths } from '../testing/action-paths.js';
import { createMemoryVault } from '../testing/memory-vault.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { Journal } from './journal.js';

let t: TempJournal | undefined;
afterEach(async () => {
  await t?.dispose();
  t = undefined;
});

function eventsOf(n: number): NewEvent[] {
  const out: NewEvent[] = [];
  for (let i = 0; out.length < n; i += 1)
    out.push(...actionPaths.httpApproved(`act_audit_${String(i).padStart(4, '0')}`));
  return out.slice(0, n);
}

async function appendAll(journal: Journal, events: readonly NewEvent[]): Promise<void> {
  for (const event of events) await journal.append(event);
}

function checkpoints(path: string): Array<{ size: number; reason: string }> {
  const db = new Database(path, { readonly: true });
  try {
    return db.prepare(`SELECT size, reason FROM checkpoints ORDER BY size`).all() as Array<{
      size: number;
      reason: string;
    }>;
  } finally {
    db.close();
  }
}

describe('when events are appended', () => {
  it('no payload text reaches the event log: payloads are ciphertext, the header columns stay readable', async () => {
    t = await openTempJournal();
    const marker = 'route:payload-marker-7f3a';
    const [accepted] = actionPaths.httpApproved('act_marker_0001');
    await t.journal.append({
      ...(accepted as NewEvent & { kind: 'ACTION_ACCEPTED' }),
      payload: {
        channel: 'http',
        target: marker,
        request_fingerprint: `sha256:${'a'.repeat(64)}`,
        approval: 'none',
        idempotent: false,
      },
    });
    await t.journal.close();
    const db = new Database(t.path, { readonly: true });
    const row = db.prepare(`SELECT * FROM events`).get() as Record<string, unknown>;
    // The current-state row keeps the sanitized target in the clear by design (recovery and status
    // run while the vault is locked); the log itself holds it only as ciphertext.
    expect(db.prepare(`SELECT target FROM actions`).get()).toEqual({ target: marker });
    db.close();
    expect(row).toMatchObject({ action_id: 'act_marker_0001', kind: 'ACTION_ACCEPTED' });
    expect(Buffer.from(row['ciphertext'] as Uint8Array).includes(Buffer.from(marker))).toBe(false);
    expect(Object.values(row).filter((v) => typeof v === 'string' && v.includes(marker))).toEqual([]);
    const reopened = await Journal.open({ path: t.path, clock: t.clock, vault: t.vault });
    expect([...reopened.events()][0]).toMatchObject({ kind: 'ACTION_ACCEPTED', payload: { target: marker } });
    await reopened.close();
  });
});

describe('when the vault is unlocked', () => {
  it('signs a checkpoint every N events, one at lock, none twice for the same size', async () => {
    t = await openTempJournal({ checkpointEveryEvents: 4 });
    await appendAll(t.journal, eventsOf(10));
    expect(checkpoints(t.path)).toEqual([
      { size: 4, reason: 'interval' },
      { size: 8, reason: 'interval' },
    ]);
    t.vault.lock('idle');
    expect(checkpoints(t.path).at(-1)).toEqual({ size: 10, reason: 'lock' });
    await t.journal.close();
    expect(checkpoints(t.path)).toHaveLength(3);
    expect(await verifyJournal({ dbPath: t.path })).toMatchObject({
      ok: true,
      events: 10,
      checkpoints: 3,
      unsigned_tail: 0,
    });
  });
});

describe('when the vault is locked (write-blind)', () => {
  it('appends and reads its own run, signs what fell due at the next unlock, and an earlier run needs the unlocked vault', async () => {
    const vault = await createMemoryVault('locked');
    t = await openTempJournal({ vault, checkpointEveryEvents: 4 });
    await appendAll(t.journal, eventsOf(6));
    expect([...t.journal.events()]).toHaveLength(6);
    expect(checkpoints(t.path)).toEqual([]);
    // The very first unlock creates the audit keys and seals this run's key.
    vault.unlock();
    expect(checkpoints(t.path)).toEqual([{ size: 6, reason: 'unlock' }]);
    await t.journal.close();

    vault.lock();
    const locked = await Journal.open({ path: t.path, clock: t.clock, vault });
    expect(() => [...locked.events()]).toThrow(expect.objectContaining({ code: 'AUDIT_KEY_UNAVAILABLE' }));
    vault.unlock();
    // 7: recovery at this open recorded the in-flight action, in this run.
    expect([...locked.events()].map((e) => e.seq)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    await locked.close();
  });

  it('a run that ended before any audit key existed stays hashed and verifiable but cannot be decrypted', async () => {
    t = await openTempJournal({ vault: await createMemoryVault('locked') });
    await appendAll(t.journal, eventsOf(3));
    await t.journal.close();
    const later = await Journal.open({ path: t.path, clock: t.clock, vault: await createMemoryVault('unlocked') });
    expect(() => [...later.events()]).toThrow(expect.objectContaining({ code: 'AUDIT_KEY_UNAVAILABLE' }));
    await later.close();
    // 4: recovery at the second open recorded the in-flight action.
    expect(await verifyJournal({ dbPath: t.path })).toMatchObject({ ok: true, events: 4 });
  });
});

describe('when sealing an event fails', () => {
  it('fails closed like a failed commit: the batch and everything after reject, dispatch stops, nothing of it is stored', async () => {
    // The third event sealed (seq 3: the two before it are appended one by one) fails.
    t = await openTempJournal({ sealFault: { atSeq: 3, message: 'sealing failed (injected)' } });
    const events = eventsOf(5);
    await appendAll(t.journal, events.slice(0, 2));
    await expect(t.journal.append(events[2] as NewEvent)).rejects.toMatchObject({
      code: 'JOURNAL_UNAVAILABLE',
      cause: { message: 'sealing failed (injected)' },
    });
    expect(t.journal.stats().state).toBe('failed');
    await expect(t.journal.beginDispatch('act_audit_0000', 1, { connection: 'fresh' })).rejects.toMatchObject({
      code: 'JOURNAL_UNAVAILABLE',
    });
    await t.journal.close();

    const db = new Database(t.path, { readonly: true });
    expect(db.prepare(`SELECT count(*) AS n FROM events`).get()).toEqual({ n: 2 });
    expect(db.prepare(`SELECT end_reason FROM audit_runs ORDER BY run DESC LIMIT 1`).get()).toEqual({
      end_reason: 'failed: INTERNAL',
    });
    db.close();
    expect(await verifyJournal({ dbPath: t.path })).toMatchObject({ ok: true, events: 2 });
  });
});
