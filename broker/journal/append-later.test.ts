import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import type { NewEvent } from '../contract/index.js';
import { actionPaths } from '../testing/action-paths.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';

let t: TempJournal | undefined;
afterEach(async () => {
  await t?.dispose();
  t = undefined;
});

const id = 'act_later_0001';
const path = actionPaths.httpNoApproval(id);
const at = (kind: NewEvent['kind']): NewEvent => {
  const event = path.find((e) => e.kind === kind);
  if (event === undefined) throw new Error(`the path has no ${kind}`);
  return event;
};

/** A journal with the action dispatched (DISPATCH_STARTED durable), and an independent connection to its file. */
async function dispatched(laterFlushMs = 60_000): Promise<{ t: TempJournal; reader: Database.Database }> {
  t = await openTempJournal({ laterFlushMs });
  for (const event of path.slice(0, path.findIndex((e) => e.kind === 'DISPATCH_STARTED') + 1))
    await t.journal.append(event);
  return { t, reader: t.reader() };
}

const onDisk = (db: Database.Database): string[] =>
  db
    .prepare(`SELECT kind FROM events WHERE action_id = ? ORDER BY seq`)
    .all(id)
    .map((row) => (row as { kind: string }).kind);

/** Lets every timer, immediate and I/O callback due now run (the timer here is 60 s away). */
const turns = async (n: number): Promise<void> => {
  for (let i = 0; i < n; i += 1) await new Promise((resolve) => setImmediate(resolve));
};

describe('an observation appended later (Journal.appendLater)', () => {
  it('starts no commit of its own: it lands in the same commit as the next append that waits for the disk', async () => {
    const { t, reader } = await dispatched();
    const commits = t.journal.stats().commits;
    const sent = t.journal.appendLater(at('REQUEST_SENT'));
    const started = t.journal.appendLater(at('REMOTE_RESPONSE_STARTED'));
    let answered = false;
    void sent.then(() => (answered = true));
    await turns(20);
    expect(answered).toBe(false);
    expect(onDisk(reader)).not.toContain('REQUEST_SENT');
    expect(t.journal.stats().commits).toBe(commits);

    const complete = t.journal.append(at('REMOTE_RESPONSE_COMPLETE'));
    const [a, b, c] = await Promise.all([sent, started, complete]);
    expect([a.event.seq + 1, b.event.seq + 1]).toEqual([b.event.seq, c.event.seq]);
    expect(t.journal.stats().commits).toBe(commits + 1);
    expect(onDisk(reader).slice(-3)).toEqual(['REQUEST_SENT', 'REMOTE_RESPONSE_STARTED', 'REMOTE_RESPONSE_COMPLETE']);
  });

  it('is committed by a read of the log, by durable(), by commitHeld() and, alone, after laterFlushMs', async () => {
    const { t, reader } = await dispatched();
    const sent = t.journal.appendLater(at('REQUEST_SENT'));
    expect(t.journal.subjectEvents(id).map((e) => e.kind)).toContain('REQUEST_SENT');
    await sent;

    const started = t.journal.appendLater(at('REMOTE_RESPONSE_STARTED'));
    await t.journal.durable();
    expect(onDisk(reader)).toContain('REMOTE_RESPONSE_STARTED');
    await started;

    const complete = t.journal.appendLater(at('REMOTE_RESPONSE_COMPLETE'));
    t.journal.commitHeld();
    await complete;
    expect(onDisk(reader)).toContain('REMOTE_RESPONSE_COMPLETE');
  });

  it('alone, rides in a commit of its own after laterFlushMs', async () => {
    const { t, reader } = await dispatched(5);
    const before = performance.now();
    await t.journal.appendLater(at('REQUEST_SENT'));
    expect(performance.now() - before).toBeGreaterThanOrEqual(4);
    expect(onDisk(reader)).toContain('REQUEST_SENT');
  });

  it('waits laterFlushMs from its own append: a commit that took what armed the timer disarms it', async () => {
    const laterFlushMs = 400;
    const { t, reader } = await dispatched(laterFlushMs);
    const commits = t.journal.stats().commits;
    // The timer is armed for REQUEST_SENT; the next append takes it along at once.
    const sent = t.journal.appendLater(at('REQUEST_SENT'));
    await t.journal.append(at('REMOTE_RESPONSE_STARTED'));
    await sent;
    expect(t.journal.stats().commits).toBe(commits + 1);
    await new Promise((resolve) => setTimeout(resolve, laterFlushMs / 2));
    // A timer left armed would commit this one alone ~laterFlushMs/2 after its append (one more small commit).
    const queuedAt = performance.now();
    await t.journal.appendLater(at('REMOTE_RESPONSE_COMPLETE'));
    expect(performance.now() - queuedAt).toBeGreaterThanOrEqual(laterFlushMs - 2);
    expect(t.journal.stats().commits).toBe(commits + 2);
    expect(onDisk(reader)).toContain('REMOTE_RESPONSE_COMPLETE');
  });

  it('refuses an event that must wait for the disk, with the field to fix', async () => {
    const { t } = await dispatched();
    await expect(t.journal.appendLater(at('RESULT_COMMITTED'))).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      field: 'kind',
    });
  });

  it('a held event the projection refuses is refused on its own; the append after it commits', async () => {
    const { t } = await dispatched();
    // A second DISPATCH-less attempt's observation: the projection refuses it.
    const refused = t.journal.appendLater({
      kind: 'REQUEST_SENT',
      action_id: id,
      payload: { attempt: 7, request_complete: true },
    });
    const sent = t.journal.append(at('REQUEST_SENT'));
    await expect(refused).rejects.toMatchObject({ code: 'IMPOSSIBLE_TRANSITION' });
    expect((await sent).event.kind).toBe('REQUEST_SENT');
  });

  it('a settlement appended withHeld commits with the held observations: one commit, one sync', async () => {
    const { t, reader } = await dispatched();
    const commits = t.journal.stats().commits;
    const held = ['REQUEST_SENT', 'REMOTE_RESPONSE_STARTED', 'REMOTE_RESPONSE_COMPLETE'] as const;
    const observations = held.map((kind) => t.journal.appendLater(at(kind)));
    const settled = await t.journal.append(at('RESULT_COMMITTED'), undefined, { withHeld: true });
    expect((await Promise.all(observations)).map((a) => a.event.seq + 1)).toEqual([
      settled.event.seq - 2,
      settled.event.seq - 1,
      settled.event.seq,
    ]);
    expect(t.journal.stats().commits).toBe(commits + 1);
    expect(onDisk(reader).slice(-4)).toEqual([...held, 'RESULT_COMMITTED']);
  });

  it('a held observation refused refuses the settlement appended withHeld after it, with the same error; nothing of it is written', async () => {
    const { t, reader } = await dispatched();
    const sent = t.journal.appendLater(at('REQUEST_SENT'));
    // An observation of an attempt that never crossed the boundary: the projection refuses it.
    const impossible = t.journal.appendLater({
      kind: 'REMOTE_RESPONSE_STARTED',
      action_id: id,
      payload: { attempt: 7, status: 200 },
    });
    const settlement = t.journal.append(at('RESULT_COMMITTED'), undefined, { withHeld: true });
    const refusal = await impossible.then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refusal).toMatchObject({ code: 'IMPOSSIBLE_TRANSITION' });
    await expect(settlement).rejects.toBe(refusal);
    await sent;
    expect(onDisk(reader).slice(-1)).toEqual(['REQUEST_SENT']);
    expect(t.journal.getAction(id)?.stage).not.toBe('result_committed');
  });

  it("another action's refused observation does not refuse a settlement appended withHeld", async () => {
    const { t, reader } = await dispatched();
    const other = 'act_later_0002';
    for (const event of actionPaths
      .httpNoApproval(other)
      .slice(0, path.findIndex((e) => e.kind === 'DISPATCH_STARTED') + 1))
      await t.journal.append(event);
    const othersImpossible = t.journal.appendLater({
      kind: 'REMOTE_RESPONSE_STARTED',
      action_id: other,
      payload: { attempt: 7, status: 200 },
    });
    const settled = t.journal.append(at('RESULT_COMMITTED'), undefined, { withHeld: true });
    await expect(othersImpossible).rejects.toMatchObject({ code: 'IMPOSSIBLE_TRANSITION' });
    expect((await settled).event.kind).toBe('RESULT_COMMITTED');
    expect(onDisk(reader).slice(-1)).toEqual(['RESULT_COMMITTED']);
  });

  it('close commits what it holds', async () => {
    const { t } = await dispatched();
    const sent = t.journal.appendLater(at('REQUEST_SENT'));
    await t.journal.close();
    expect((await sent).event.kind).toBe('REQUEST_SENT');
    const db = new Database(t.path, { readonly: true });
    try {
      expect(onDisk(db)).toContain('REQUEST_SENT');
    } finally {
      db.close();
    }
  });
});
