import type Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { brokerApiSchemas, type NewEvent } from '../contract/index.js';
import { Journal } from '../journal/index.js';
import { actionPaths } from '../testing/action-paths.js';
import { scanSessionCounts } from '../testing/session-counts.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { createOperatorReads } from './operator-reads.js';
import { inSession, sessionStartedEvent } from '../testing/session-events.js';

const opened: TempJournal[] = [];
afterEach(async () => {
  for (const t of opened.splice(0)) await t.dispose();
});

/**
 * The i-th action of a mix: accepted only, part way before dispatch (both not sent yet), committed, rejected by a
 * person (closed before dispatch), dispatched with no outcome yet.
 */
function mixed(id: string, i: number): NewEvent[] {
  switch (i % 5) {
    case 0:
      return actionPaths.httpNoApproval(id).slice(0, 1);
    case 1:
      return actionPaths.httpNoApproval(id).slice(0, 3);
    case 2:
      return actionPaths.httpNoApproval(id);
    case 3:
      return actionPaths.rejectedByPerson(id);
    default:
      return actionPaths.httpNoApproval(id).slice(0, 4);
  }
}

/** Appends whole actions, a few dozen per commit. */
async function appendActions(journal: Journal, actions: readonly NewEvent[][]): Promise<void> {
  for (let i = 0; i < actions.length; i += 40) await journal.appendBatch(actions.slice(i, i + 40).flat());
}

function reads(journal: Journal) {
  const operator = createOperatorReads(journal, { position: () => null, isConnected: () => false });
  return async () => brokerApiSchemas['sessions.list'].output.parse(await operator['sessions.list']()).sessions;
}

async function figures(journal: Journal): Promise<Record<string, { calls: number; pending: number }>> {
  return Object.fromEntries(
    (await reads(journal)()).map((s) => [s.session_id, { calls: s.calls, pending: s.pending }]),
  );
}

/** The scan's figures for the listed sessions (a session with no action has none: 0 and 0). */
function scanned(
  reader: Database.Database,
  sessions: readonly string[],
): Record<string, { calls: number; pending: number }> {
  const rows = new Map(scanSessionCounts(reader).map((r) => [r.session_id, r]));
  return Object.fromEntries(
    sessions.map((id) => [id, { calls: rows.get(id)?.calls ?? 0, pending: rows.get(id)?.pending ?? 0 }]),
  );
}

const big = 'ses_big_00001';
const small = 'ses_small_0001';
const idle = 'ses_idle_00001';
const bigActions = 1_250;

async function journalWithSessions(): Promise<TempJournal> {
  const t = await openTempJournal();
  opened.push(t);
  for (const [i, id] of [big, small, idle].entries()) await t.journal.appendSession(sessionStartedEvent(id, 7000 + i));
  const actions = [
    ...Array.from({ length: bigActions }, (_, i) => inSession(mixed(`act_big_${String(i).padStart(6, '0')}`, i), big)),
    ...Array.from({ length: 7 }, (_, i) => inSession(mixed(`act_small_${i}`, i), small)),
    ...Array.from({ length: 3 }, (_, i) => inSession(mixed(`act_nobody_${i}`, i), null)),
  ];
  await appendActions(t.journal, actions);
  return t;
}

describe('sessions.list: calls and pending', () => {
  it('when a session has more actions than the former 1,000-row read, are exact, and stay so across restarts', async () => {
    const t = await journalWithSessions();
    const ids = [big, small, idle];
    // Every action counts (not the first 1,000); pending: neither classified nor dispatched (cases 0 and 1 of five).
    expect(await figures(t.journal)).toEqual({
      [big]: { calls: bigActions, pending: (bigActions / 5) * 2 },
      [small]: { calls: 7, pending: 4 },
      [idle]: { calls: 0, pending: 0 },
    });
    expect(await figures(t.journal)).toEqual(scanned(t.reader(), ids));

    // Reopened on the same file: recovery classifies what the first run left open, through the same counted writes.
    await t.journal.close();
    const second = await Journal.open({ path: t.path, clock: t.clock, vault: t.vault });
    try {
      const after = await figures(second);
      expect(after[big]?.calls).toBe(bigActions);
      expect(after).toEqual(scanned(t.reader(), ids));
      // New actions after the restart, then some of them sent: pending follows each commit.
      const fresh = Array.from({ length: 30 }, (_, i) => `act_fresh_${String(i).padStart(4, '0')}`);
      await appendActions(
        second,
        fresh.map((id) => inSession(actionPaths.httpNoApproval(id).slice(0, 1), big)),
      );
      expect((await figures(second))[big]).toEqual({ calls: bigActions + 30, pending: after[big]!.pending + 30 });
      await appendActions(
        second,
        fresh.slice(0, 10).map((id) => actionPaths.httpNoApproval(id).slice(1)),
      );
      expect((await figures(second))[big]).toEqual({ calls: bigActions + 30, pending: after[big]!.pending + 20 });
      expect(await figures(second)).toEqual(scanned(t.reader(), ids));
    } finally {
      await second.close();
    }

    // And once more, with nothing appended in between: the stored figures, as the last run left them.
    const third = await Journal.open({ path: t.path, clock: t.clock, vault: t.vault });
    try {
      expect(await figures(third)).toEqual(scanned(t.reader(), ids));
    } finally {
      await third.close();
    }
  });

  it('reads one counter row per session with calls, no sessions row and no action row, however many actions it has', async () => {
    const t = await journalWithSessions();
    const list = reads(t.journal);
    await list();
    const { value: listed, reads: seen } = await countingRowsRead(() => list());
    expect(listed).toHaveLength(3);
    expect(seen.filter((r) => /\bactions\b/.test(r.sql))).toEqual([]);
    // Which sessions is the journal's own answer (its session book), never the table's rows.
    expect(seen.filter((r) => /\bsessions\b/.test(r.sql))).toEqual([]);
    expect(seen.reduce((n, r) => n + r.rows, 0)).toBe(listed.filter((s) => s.calls > 0).length);
  });
});

/**
 * Runs `body` (until it settles) with every better-sqlite3 statement's row-returning methods counted: the SQL each ran and the rows it
 * handed back. A read that scanned a session's actions shows up here as rows, whatever the clock says.
 */
async function countingRowsRead<T>(
  body: () => Promise<T>,
): Promise<{ value: T; reads: { sql: string; rows: number }[] }> {
  const reads: { sql: string; rows: number }[] = [];
  const proto = statementPrototype(opened[0]!.reader());
  const saved = { all: proto.all, get: proto.get, iterate: proto.iterate };
  proto.all = function (this: Database.Statement, ...args: unknown[]) {
    const rows = saved.all.apply(this, args) as unknown[];
    reads.push({ sql: this.source, rows: rows.length });
    return rows;
  };
  proto.get = function (this: Database.Statement, ...args: unknown[]) {
    const row = saved.get.apply(this, args);
    reads.push({ sql: this.source, rows: row === undefined ? 0 : 1 });
    return row;
  };
  proto.iterate = function* (this: Database.Statement, ...args: unknown[]) {
    const read = { sql: this.source, rows: 0 };
    reads.push(read);
    for (const row of saved.iterate.apply(this, args) as Iterable<unknown>) {
      read.rows += 1;
      yield row;
    }
  };
  try {
    return { value: await body(), reads };
  } finally {
    Object.assign(proto, saved);
  }
}

function statementPrototype(db: Database.Database): Database.Statement {
  return Object.getPrototypeOf(db.prepare('SELECT 1')) as Database.Statement;
}
