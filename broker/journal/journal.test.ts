import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ActionState, NewEvent } from '../contract/index.js';
import { project } from '../core/index.js';
import { verifyJournal } from '../audit/verify-journal.js';
import { actionPaths } from '../testing/action-paths.js';
import { FakeClock } from '../testing/fake-clock.js';
import { createTempDir } from '../testing/temp-dir.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { Journal, journalFileName } from './journal.js';
import { journalMigrations } from './migrations/index.js';

let t: TempJournal;
beforeEach(async () => {
  t = await openTempJournal();
});
afterEach(async () => {
  await t.dispose();
});

const acceptedOf = (id: string): NewEvent => {
  const [first] = actionPaths.httpNoApproval(id);
  if (first === undefined) throw new Error('empty path');
  return first;
};

function rawCount(table: string): number {
  const db = new Database(t.path, { readonly: true });
  try {
    return (db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;
  } finally {
    db.close();
  }
}

describe('when actions are accepted', () => {
  it('issues increasing tickets and stamps seq and wall time', async () => {
    const a = await t.journal.append(acceptedOf('act_ticket_0001'));
    t.clock.advance(7);
    const b = await t.journal.append(acceptedOf('act_ticket_0002'));
    expect([a.event.ticket, b.event.ticket]).toEqual([1, 2]);
    expect([a.event.seq, b.event.seq]).toEqual([1, 2]);
    expect(b.event.at_ms - a.event.at_ms).toBe(7);
    expect(b.state).toMatchObject({ ticket: 2, stage: 'accepted', lane: 'lane-a', session_id: 'ses_test' });
  });

  it('never reuses a ticket across a restart', async () => {
    await t.journal.append(acceptedOf('act_ticket_0001'));
    await t.journal.append(acceptedOf('act_ticket_0002'));
    await t.journal.close();
    const reopened = await Journal.open({ path: t.path, clock: t.clock });
    const c = await reopened.append(acceptedOf('act_ticket_0003'));
    expect(c.event.ticket).toBe(3);
    await reopened.close();
  });

  it('refuses a supplied ticket that is not above the last issued one, and writes nothing', async () => {
    await t.journal.append(acceptedOf('act_ticket_0001'));
    await expect(t.journal.append({ ...acceptedOf('act_ticket_0002'), ticket: 1 })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      field: 'ticket',
    });
    expect(t.journal.stats()).toMatchObject({ events: 1, last_seq: 1 });
    expect(t.journal.getAction('act_ticket_0002')).toBeUndefined();
  });
});

describe('when later events of an action omit session, ticket and lane', () => {
  it('copies them from the action, and refuses ones that contradict it', async () => {
    const [accepted, validated] = actionPaths.httpNoApproval('act_copy_0001');
    if (accepted === undefined || validated === undefined) throw new Error('short path');
    await t.journal.append(accepted);
    const v = await t.journal.append(validated);
    expect(v.event).toMatchObject({ session_id: 'ses_test', ticket: 1, lane: 'lane-a' });
    await expect(t.journal.append({ ...validated, lane: 'lane-z' })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      field: 'lane',
    });
    await expect(t.journal.append({ ...validated, ticket: 9 })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      field: 'ticket',
    });
    expect(t.journal.stats().events).toBe(2);
  });
});

describe('when an event is refused', () => {
  it('rejects a schema violation with INVALID_ARGUMENT and the field, writing nothing', async () => {
    // The schemas' own refusal of a bad value: checked in full (the suites' `both` fails a bad value's append).
    await t.dispose();
    t = await openTempJournal({ eventChecks: 'full' });
    const bad = {
      kind: 'REQUEST_SENT',
      action_id: 'act_bad_0001',
      payload: { attempt: 0, request_complete: true },
    } as NewEvent;
    await expect(t.journal.append(bad)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', field: 'payload.attempt' });
    expect(rawCount('events')).toBe(0);
  });

  it('rejects a regression with IMPOSSIBLE_TRANSITION from the projection, writing nothing', async () => {
    const path = actionPaths.httpNoApproval('act_regress_0001');
    for (const event of path.slice(0, 4)) await t.journal.append(event); // through DISPATCH_STARTED
    const before = t.journal.stats();
    const notAttempted: NewEvent = {
      kind: 'OUTCOME_RECORDED',
      action_id: 'act_regress_0001',
      payload: {},
      classification: {
        phase: 'connection_setup',
        outcome: 'not_attempted',
        retry: 'backoff',
        code: 'CONNECT_REFUSED',
        effect: 'no_effect',
        outcome_basis: 'x',
        source: 'local_gate',
      },
    };
    await expect(t.journal.append(notAttempted)).rejects.toMatchObject({ code: 'IMPOSSIBLE_TRANSITION' });
    expect(t.journal.stats()).toMatchObject({ events: before.events, last_seq: before.last_seq });
    expect(t.journal.getAction('act_regress_0001')).toMatchObject({ outcome: 'unknown', stage: 'dispatch_started' });
  });
});

describe('when an event is appended', () => {
  it('updates the action row in the same commit, as a second connection sees (attempts live in its state)', async () => {
    const path = actionPaths.httpNoApproval('act_tables_0001');
    for (const event of path.slice(0, 4)) await t.journal.append(event);
    const db = new Database(t.path, { readonly: true });
    try {
      expect(db.prepare('SELECT ticket, lane, stage, outcome, dispatch_seq, last_seq FROM actions').get()).toEqual({
        ticket: 1,
        lane: 'lane-a',
        stage: 'dispatch_started',
        outcome: 'unknown',
        dispatch_seq: 4,
        last_seq: 4,
      });
      const stored = db.prepare('SELECT state FROM actions').get() as { state: string };
      expect(JSON.parse(stored.state)).toEqual(t.journal.getAction('act_tables_0001'));
      expect((JSON.parse(stored.state) as ActionState).attempts).toMatchObject([
        { n: 1, state: 'dispatched', connection: 'fresh', dispatch_seq: 4 },
      ]);
    } finally {
      db.close();
    }
  });

  it('keeps actions.state equal to the pure projection of the stored events', async () => {
    for (const event of actionPaths.sshExit23('act_fold_0001')) await t.journal.append(event);
    expect(project(t.journal.events()).get('act_fold_0001')).toEqual(t.journal.getAction('act_fold_0001'));
  });
});

describe('when events are appended as a batch', () => {
  it('commits them together in order', async () => {
    const appended = await t.journal.appendBatch(actionPaths.httpApproved('act_batch_0001'));
    expect(appended.map((a) => a.event.seq)).toEqual(Array.from({ length: 11 }, (_, i) => i + 1));
    expect(t.journal.stats().commits).toBe(1);
    expect(t.journal.getAction('act_batch_0001')?.stage).toBe('result_delivered');
  });

  it('writes none of them when one is refused', async () => {
    const path = actionPaths.httpApproved('act_batch_0002');
    const broken = [...path.slice(0, 3), ...path.slice(4)]; // APPROVED missing: credential before approval
    await expect(t.journal.appendBatch(broken)).rejects.toMatchObject({ code: 'IMPOSSIBLE_TRANSITION' });
    expect(rawCount('events')).toBe(0);
    expect(rawCount('actions')).toBe(0);
  });

  it('refuses a batch larger than batchEventsMax', async () => {
    const small = await openTempJournal({ batchEventsMax: 4 });
    await expect(small.journal.appendBatch(actionPaths.httpApproved('act_batch_0003'))).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      field: 'events',
    });
    await small.dispose();
  });
});

describe('when the append queue is full', () => {
  it('refuses further appends instead of queueing without bound', async () => {
    const small = await openTempJournal({ pendingEventsMax: 2 });
    const first = small.journal.append(acceptedOf('act_queue_0001'));
    const second = small.journal.append(acceptedOf('act_queue_0002'));
    await expect(small.journal.append(acceptedOf('act_queue_0003'))).rejects.toMatchObject({
      code: 'JOURNAL_UNAVAILABLE',
    });
    await expect(Promise.all([first, second])).resolves.toHaveLength(2);
    expect(small.journal.stats().state).toBe('open');
    await small.dispose();
  });
});

describe('when the journal is read', () => {
  it('lists actions in ticket order within a bounded page', async () => {
    for (const n of [1, 2, 3, 4, 5]) await t.journal.append(acceptedOf(`act_list_000${n}`));
    expect(t.journal.listActions().map((a) => a.ticket)).toEqual([1, 2, 3, 4, 5]);
    expect(t.journal.listActions({ fromTicket: 2, limit: 2 }).map((a) => a.action_id)).toEqual([
      'act_list_0002',
      'act_list_0003',
    ]);
  });

  it('iterates events in append order across pages, from any position', async () => {
    const events: NewEvent[] = [];
    for (let n = 0; n < 60; n += 1)
      events.push(...actionPaths.httpNoApproval(`act_page_${String(n).padStart(4, '0')}`));
    for (let i = 0; i < events.length; i += 200) await t.journal.appendBatch(events.slice(i, i + 200));
    const seqs = [...t.journal.events()].map((e) => e.seq);
    expect(seqs).toEqual(Array.from({ length: 600 }, (_, i) => i + 1));
    expect([...t.journal.events(590)].map((e) => e.seq)).toEqual([
      590, 591, 592, 593, 594, 595, 596, 597, 598, 599, 600,
    ]);
    expect(t.journal.stats()).toMatchObject({
      events: 600,
      last_seq: 600,
      schema_version: journalMigrations.length,
      state: 'open',
    });
  });
});

describe('when the journal is closed', () => {
  it('commits what was queued first, then refuses appends', async () => {
    const pending = t.journal.append(acceptedOf('act_close_0001'));
    await t.journal.close();
    await expect(pending).resolves.toMatchObject({ event: { seq: 1 } });
    await expect(t.journal.append(acceptedOf('act_close_0002'))).rejects.toMatchObject({ code: 'JOURNAL_UNAVAILABLE' });
    expect(t.journal.stats().state).toBe('closed');
    expect(rawCount('events')).toBe(1);
  });

  it('while close() awaits the anchor sink it is closing: a new append is refused as closed, and every unit accepted before commits and is answered', async () => {
    // The integrity anchor's sink: close awaits its settling (the shutdown checkpoint's anchor file), held open here.
    let settle = (): void => undefined;
    const settling = new Promise<void>((resolve) => (settle = resolve));
    const signedAt: number[] = [];
    t.journal.onCheckpoint({ signed: (head) => signedAt.push(head.size), settled: () => settling });
    const path = actionPaths.httpNoApproval('act_closing_0001');
    const [accepted, validated, authorized, dispatch, sent] = path as [
      NewEvent,
      NewEvent,
      NewEvent,
      NewEvent,
      NewEvent,
    ];
    for (const event of [accepted, validated, authorized]) await t.journal.append(event);
    // Accepted and not yet committed when close() is called: a dispatch (waits for the disk), the observation it
    // carries (held for the next commit), another action's batch, and a lone append.
    const beforeClose = [
      t.journal.append(dispatch),
      t.journal.appendLater(sent),
      t.journal.appendBatch(actionPaths.httpNoApproval('act_closing_0002').slice(0, 3)),
      t.journal.append(acceptedOf('act_closing_0003')),
    ];
    const closed = t.journal.close();
    expect(t.journal.stats().state).toBe('closing');
    await expect(t.journal.append(acceptedOf('act_closing_late1'))).rejects.toMatchObject({
      code: 'JOURNAL_UNAVAILABLE',
      message: 'the journal is closing',
    });
    // Turns pass while close waits: still closing, and an append queued now is refused too, never committed.
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(t.journal.stats().state).toBe('closing');
    await expect(t.journal.appendLater(acceptedOf('act_closing_late2'))).rejects.toMatchObject({
      code: 'JOURNAL_UNAVAILABLE',
    });
    // Everything accepted before close() was answered, committed, before the sink settled.
    const answers = await Promise.all(beforeClose);
    expect(answers.flat().map((a) => a.event.seq)).toEqual([4, 5, 6, 7, 8, 9]);
    // The sink still records the shutdown checkpoint's anchor while the journal closes (integrity-anchor.ts).
    expect(signedAt).toEqual([9]);
    expect(t.journal.recordAnchor({ counter: 1, head_seq: 9, key_id: 'key-closing', written_at_ms: 1 })).toBe(true);
    expect(t.journal.close()).toBe(closed);
    settle();
    await closed;
    expect(t.journal.stats().state).toBe('closed');

    const reopened = await Journal.open({ path: t.path, clock: t.clock, vault: t.vault });
    try {
      const events = [...reopened.events()];
      // The refused appends left nothing; the reopen's recovery closes the three open actions after what was kept.
      expect(events.filter((e) => e.action_id.includes('late'))).toEqual([]);
      expect(events.slice(9).map((e) => e.kind)).toEqual(Array(3).fill('OUTCOME_RECORDED'));
      expect(events.slice(0, 9).map((e) => `${e.action_id} ${e.kind}`)).toEqual([
        'act_closing_0001 ACTION_ACCEPTED',
        'act_closing_0001 PREFLIGHT_VALIDATED',
        'act_closing_0001 CREDENTIAL_AUTHORIZED',
        'act_closing_0001 DISPATCH_STARTED',
        'act_closing_0001 REQUEST_SENT',
        'act_closing_0002 ACTION_ACCEPTED',
        'act_closing_0002 PREFLIGHT_VALIDATED',
        'act_closing_0002 CREDENTIAL_AUTHORIZED',
        'act_closing_0003 ACTION_ACCEPTED',
      ]);
      expect(reopened.anchorState().recorded).toMatchObject({ counter: 1, head_seq: 9 });
    } finally {
      await reopened.close();
    }
    expect(await verifyJournal({ dbPath: t.path })).toMatchObject({ ok: true });
  });
});

describe('when opened with a data directory', () => {
  it('creates the directory and the journal file in it', async () => {
    const dir = createTempDir();
    const dataDir = join(dir.path, 'nested', 'data');
    const journal = await Journal.open({ dataDir, clock: new FakeClock() });
    expect(existsSync(join(dataDir, journalFileName))).toBe(true);
    await journal.close();
    dir.remove();
  });
});

describe('when the journal creates its files in a data directory', () => {
  it('makes the database, -wal and -shm readable by the owner only', async () => {
    const dir = createTempDir();
    const previous = process.umask(0o022);
    try {
      const journal = await Journal.open({ dataDir: join(dir.path, 'data'), clock: new FakeClock() });
      await journal.append(actionPaths.httpNoApproval('act_modes00000001')[0] as NewEvent);
      for (const name of ['journal.sqlite', 'journal.sqlite-wal', 'journal.sqlite-shm']) {
        expect((statSync(join(dir.path, 'data', name)).mode & 0o777).toString(8)).toBe('600');
      }
      await journal.close();
    } finally {
      process.umask(previous);
      dir.remove();
    }
  });
});
