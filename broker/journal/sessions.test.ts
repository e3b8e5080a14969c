import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import type { NewEvent } from '../contract/index.js';
import { projectSessions } from '../core/index.js';
import { replayJournal } from '../testing/replay-journal.js';
import { readStateTables } from '../testing/state-tables.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { Journal, type JournalOpenOptions } from './journal.js';
import { endedSessionsKept } from './session-book.js';
import { sessionReconnectedEvent, sessionStartedEvent } from '../testing/session-events.js';
import { editSessionRow } from '../testing/session-rows.js';
import { openLockedVaultRuns } from '../testing/locked-vault-runs.js';

const opened: TempJournal[] = [];
afterEach(async () => {
  for (const t of opened.splice(0)) await t.dispose();
});
async function temp(): Promise<TempJournal> {
  const t = await openTempJournal();
  opened.push(t);
  return t;
}

const person = { kind: 'person' as const, id: 'ann' };

describe('agent sessions in the journal', () => {
  it('folds SESSION_* events into the sessions table in the same commit path, found by process', async () => {
    const t = await temp();
    await t.journal.appendSession(sessionStartedEvent('ses_alpha_1', 4242));
    const approved = await t.journal.appendSession({
      kind: 'SESSION_APPROVED',
      action_id: 'ses_alpha_1',
      payload: { actor: person },
    });
    expect(approved.session).toMatchObject({ status: 'approved', approved_by: 'person:ann', pid: 4242 });
    expect(approved.event.session_id).toBe('ses_alpha_1');
    expect(t.journal.getSession('ses_alpha_1')).toEqual(approved.session);
    // Written in this run: the journal's own record.
    expect(t.journal.sessionRecordCheck('ses_alpha_1')).toBe('confirmed');
    expect(t.journal.findSessionByProcess(4242, '424200')?.session_id).toBe('ses_alpha_1');
    expect(t.journal.findSessionByProcess(4242, '1')).toBeUndefined();
    const revoked = await t.journal.appendSession({
      kind: 'SESSION_REVOKED',
      action_id: 'ses_alpha_1',
      payload: { actor: person, reason: 'done' },
    });
    expect(revoked.session.status).toBe('revoked');
    const ended = await t.journal.appendSession({
      kind: 'SESSION_ENDED',
      action_id: 'ses_alpha_1',
      payload: { reason: 'process_exited' },
    });
    // A revoked session stays revoked in status; its end is still recorded.
    expect(ended.session).toMatchObject({ status: 'revoked', end_reason: 'process_exited' });
    // Ended all the same: the sweeper and the agent guard no longer go through it.
    expect(t.journal.unendedSessions().map((x) => x.session_id)).not.toContain('ses_alpha_1');
  });

  it('unendedSessions holds every session not ended, pending, approved or revoked, and none once it ends', async () => {
    const t = await temp();
    for (const [i, id] of ['ses_unended_1', 'ses_unended_2', 'ses_unended_3'].entries())
      await t.journal.appendSession(sessionStartedEvent(id, 7000 + i));
    await t.journal.appendSession({ kind: 'SESSION_APPROVED', action_id: 'ses_unended_2', payload: { actor: person } });
    await t.journal.appendSession({
      kind: 'SESSION_REVOKED',
      action_id: 'ses_unended_3',
      payload: { actor: person, reason: 'x' },
    });
    const ids = () => t.journal.unendedSessions().map((x) => [x.session_id, x.status]);
    expect(ids()).toEqual([
      ['ses_unended_1', 'pending'],
      ['ses_unended_2', 'approved'],
      ['ses_unended_3', 'revoked'],
    ]);
    await t.journal.appendSession({
      kind: 'SESSION_ENDED',
      action_id: 'ses_unended_1',
      payload: { reason: 'process_exited' },
    });
    await t.journal.appendSession({
      kind: 'SESSION_ENDED',
      action_id: 'ses_unended_3',
      payload: { reason: 'process_exited' },
    });
    expect(ids()).toEqual([['ses_unended_2', 'approved']]);
  });

  it('lists the newest sessions, oldest first, and filters by status before the limit (older ended ones never crowd out open ones)', async () => {
    const t = await temp();
    const ids = ['ses_list_1', 'ses_list_2', 'ses_list_3', 'ses_list_4', 'ses_list_5'];
    for (const [i, id] of ids.entries()) {
      await t.journal.appendSession(sessionStartedEvent(id, 5000 + i));
      if (i < 4)
        await t.journal.appendSession({ kind: 'SESSION_ENDED', action_id: id, payload: { reason: 'process_exited' } });
      else await t.journal.appendSession({ kind: 'SESSION_APPROVED', action_id: id, payload: { actor: person } });
    }
    const listed = (options: Parameters<Journal['listSessions']>[0]): string[] =>
      t.journal.listSessions(options).map((s) => s.session_id);
    expect(listed({ limit: 3 })).toEqual(['ses_list_3', 'ses_list_4', 'ses_list_5']);
    expect(listed({})).toEqual(ids);
    // What the session sweeper asks for: the one open session, though four older ended ones fill the limit.
    expect(listed({ status: ['pending', 'approved', 'revoked'], limit: 3 })).toEqual(['ses_list_5']);
    expect(listed({ status: ['ended'], limit: 2 })).toEqual(['ses_list_3', 'ses_list_4']);
  });

  it('getSession answers what the sessions table holds after every event, refused ones too (the cache is never stale)', async () => {
    const t = await temp();
    const reader = t.reader();
    const stored = (id: string): unknown => {
      const row = reader.prepare('SELECT state FROM sessions WHERE session_id = ?').get(id) as
        { state: string } | undefined;
      return row === undefined ? undefined : JSON.parse(row.state);
    };
    const steps: NewEvent[] = [
      sessionStartedEvent('ses_cache_1', 31),
      { kind: 'SESSION_APPROVED', action_id: 'ses_cache_1', payload: { actor: person } },
      { kind: 'SESSION_APPROVED', action_id: 'ses_cache_1', payload: { actor: person } },
      { kind: 'SESSION_REVOKED', action_id: 'ses_cache_1', payload: { actor: person, reason: 'done' } },
      { kind: 'SESSION_ENDED', action_id: 'ses_cache_1', payload: { reason: 'process_exited' } },
    ];
    const statuses: string[] = [];
    for (const step of steps) {
      await t.journal.appendSession(step).catch(() => undefined);
      expect(t.journal.getSession('ses_cache_1')).toEqual(stored('ses_cache_1'));
      statuses.push(t.journal.getSession('ses_cache_1')?.status ?? 'none');
    }
    expect(statuses).toEqual(['pending', 'approved', 'approved', 'revoked', 'revoked']);
  });

  it('refuses what the session projection forbids and writes nothing for it', async () => {
    const t = await temp();
    await t.journal.appendSession(sessionStartedEvent('ses_beta_01', 7));
    await t.journal.appendSession({ kind: 'SESSION_APPROVED', action_id: 'ses_beta_01', payload: { actor: person } });
    const before = t.journal.stats().events;
    await expect(
      t.journal.appendSession({ kind: 'SESSION_APPROVED', action_id: 'ses_beta_01', payload: { actor: person } }),
    ).rejects.toMatchObject({ code: 'IMPOSSIBLE_TRANSITION' });
    await expect(
      t.journal.appendSession({ kind: 'SESSION_APPROVED', action_id: 'ses_never_1', payload: { actor: person } }),
    ).rejects.toMatchObject({ code: 'IMPOSSIBLE_TRANSITION' });
    expect(t.journal.stats().events).toBe(before);
  });

  it('keeps action and session subjects apart: wrong prefixes and wrong entry points are INVALID_ARGUMENT', async () => {
    const t = await temp();
    await expect(t.journal.append(sessionStartedEvent('ses_gamma_1', 9))).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      field: 'kind',
    });
    await expect(t.journal.appendSession(sessionStartedEvent('act_gamma_1', 9))).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      field: 'action_id',
    });
    await expect(
      t.journal.appendSession({
        kind: 'ACTION_ACCEPTED',
        action_id: 'ses_gamma_1',
        payload: {
          channel: 'http',
          target: 'x',
          request_fingerprint: `sha256:${'0'.repeat(64)}`,
          approval: 'none',
          idempotent: false,
        },
      }),
    ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', field: 'action_id' });
  });

  it('the sessions table equals a replay of the log and the pure fold of it', async () => {
    const live = await temp();
    await live.journal.appendSession(sessionStartedEvent('ses_one_001', 11));
    await live.journal.append({
      kind: 'ACTION_ACCEPTED',
      action_id: 'act_from_session_1',
      session_id: 'ses_one_001',
      payload: {
        channel: 'http',
        target: 'route:r POST /x',
        request_fingerprint: `sha256:${'1'.repeat(64)}`,
        approval: 'session',
        idempotent: false,
      },
    });
    await live.journal.appendSession(sessionStartedEvent('ses_two_002', 12));
    await live.journal.appendSession({
      kind: 'SESSION_APPROVED',
      action_id: 'ses_one_001',
      payload: { actor: { kind: 'policy', id: 'observe' } },
    });
    await live.journal.appendSession({
      kind: 'SESSION_ENDED',
      action_id: 'ses_two_002',
      payload: { reason: 'broker_found_gone' },
    });
    const target = await temp();
    await replayJournal(live.journal.events(), target.journal, target.clock);
    expect(readStateTables(target.path)).toEqual(readStateTables(live.path));
    const folded = projectSessions(live.journal.events());
    expect([...folded.values()]).toEqual(live.journal.listSessions());
    expect(live.journal.listSessionActions('ses_one_001').map((a) => a.action_id)).toEqual(['act_from_session_1']);
  });

  it('reopens with its sessions (schema 5) and a view page shows sealed rows of an earlier run while locked', async () => {
    const t = await temp();
    await t.journal.appendSession(sessionStartedEvent('ses_keep_01', 21));
    await t.journal.close();
    t.vault.lock();
    const reopened = await Journal.open({ path: t.path, clock: t.clock, vault: t.vault });
    try {
      expect(reopened.getSession('ses_keep_01')?.status).toBe('pending');
      const [row] = reopened.eventsPage(1, 10);
      expect(row).toMatchObject({ sealed: true, kind: 'SESSION_STARTED', action_id: 'ses_keep_01' });
    } finally {
      await reopened.close();
    }
  });
});

describe('when another process writes the sessions table while the journal is open (THREAT-MODEL 3)', () => {
  it('the journal answers from the sessions it wrote: a row inserted for another process, or its own row set to approved, decides nothing', async () => {
    const t = await temp();
    await t.journal.appendSession(sessionStartedEvent('ses_agentown_1', 7100));
    // The agent's own connection to the file: a forged approved session for its child (pid 7200), and its own pending
    // session set to approved, both in the shape the journal writes.
    const forger = new Database(t.path, { timeout: 5_000 });
    try {
      const own = forger.prepare('SELECT state FROM sessions WHERE session_id = ?').get('ses_agentown_1') as {
        state: string;
      };
      const approvedOwn = { ...JSON.parse(own.state), status: 'approved', approved_by: 'person:ann' };
      forger
        .prepare('UPDATE sessions SET status = ?, state = ? WHERE session_id = ?')
        .run('approved', JSON.stringify(approvedOwn), 'ses_agentown_1');
      const child = { ...approvedOwn, session_id: 'ses_forgedchild_1', pid: 7200, start_time: '720000', first_seq: 1 };
      forger
        .prepare(
          'INSERT INTO sessions (session_id, status, pid, start_time, first_seq, last_seq, state) VALUES (?, ?, ?, ?, ?, ?, ?)',
        )
        .run('ses_forgedchild_1', 'approved', 7200, '720000', 1, 1, JSON.stringify(child));
      // And a thousand rows newer than any session, to push the journal's own off a page read from the table.
      const insert = forger.prepare(
        'INSERT INTO sessions (session_id, status, pid, start_time, first_seq, last_seq, state) VALUES (?, ?, ?, ?, ?, ?, ?)',
      );
      forger.transaction(() => {
        for (let i = 0; i < 1_000; i++) {
          const id = `ses_flood_${i}`;
          const row = { ...child, session_id: id, pid: 30_000 + i, first_seq: 1_000_000 + i };
          insert.run(id, 'approved', 30_000 + i, child.start_time, 1_000_000 + i, 1_000_000 + i, JSON.stringify(row));
        }
      })();
    } finally {
      forger.close();
    }
    // The attack's premise: the table now says both are approved.
    const tableRows = readStateTables(t.path).sessions as Array<{ session_id: string; status: string }>;
    expect(
      tableRows.filter((s) => !s.session_id.startsWith('ses_flood_')).map((s) => [s.session_id, s.status]),
    ).toEqual([
      ['ses_agentown_1', 'approved'],
      ['ses_forgedchild_1', 'approved'],
    ]);

    expect(t.journal.findSessionByProcess(7200, '720000')).toBeUndefined();
    expect(t.journal.getSession('ses_forgedchild_1')).toBeUndefined();
    expect(t.journal.getSession('ses_agentown_1')?.status).toBe('pending');
    expect(t.journal.findSessionByProcess(7100, '710000')?.status).toBe('pending');
    expect(t.journal.listSessions().map((s) => [s.session_id, s.status])).toEqual([['ses_agentown_1', 'pending']]);
    expect(t.journal.listCountedSessions().map((c) => [c.session.session_id, c.session.status])).toEqual([
      ['ses_agentown_1', 'pending'],
    ]);
    // Events fold over the journal's own state: a reconnection is counted on the pending session, whose approval is
    // still a person's to give.
    const reconnected = await t.journal.appendSession(sessionReconnectedEvent('ses_agentown_1', 'claude'));
    expect(reconnected.session).toMatchObject({ status: 'pending', reconnects: 1, approved_by: null });
    await expect(t.journal.appendSession(sessionReconnectedEvent('ses_forgedchild_1', 'claude'))).rejects.toMatchObject(
      { code: 'IMPOSSIBLE_TRANSITION' },
    );
  });
});

describe('when an agent starts processes by the thousand, each connecting and exiting (THREAT-MODEL 4)', () => {
  it('the journal holds a bounded number of sessions, lists the table’s newest, and answers a let-go one from its row as ended', async () => {
    const t = await temp();
    const processes = endedSessionsKept * 3;
    // Each process opens its session and exits (the sweeper ends it), many at once as the agent starts them.
    for (let first = 0; first < processes; first += 100)
      await Promise.all(
        Array.from({ length: 100 }, async (_, i) => {
          const id = `ses_churn_${first + i}`;
          await t.journal.appendSession(sessionStartedEvent(id, 20_000 + first + i));
          await t.journal.appendSession({
            kind: 'SESSION_ENDED',
            action_id: id,
            payload: { reason: 'process_exited' },
          });
        }),
      );
    await t.journal.appendSession(sessionStartedEvent('ses_churn_live', 9_000));
    const bound = endedSessionsKept + Math.ceil(endedSessionsKept / 4) + 1;
    expect(t.journal.sessionsHeld()).toBeLessThanOrEqual(bound);
    // Every list shows what the table's own newest rows are.
    const newest = (rows: Array<{ session_id: string }>) => rows.map((s) => s.session_id);
    expect(newest(t.journal.listSessions())).toEqual(newest(readNewestSessions(t.reader(), endedSessionsKept)));
    expect(t.journal.listCountedSessions().map((c) => c.session.session_id)).toEqual(
      newest(readNewestSessions(t.reader(), endedSessionsKept)),
    );
    expect(t.journal.listSessions({ status: ['pending'] }).map((s) => s.session_id)).toEqual(['ses_churn_live']);
    // The oldest, let go: no process finds it, and asked by id (another session's retry of its action) it ended.
    expect(t.journal.findSessionByProcess(20_000, '2000000')).toBeUndefined();
    expect(t.journal.getSession('ses_churn_0')).toMatchObject({ status: 'ended', end_reason: 'process_exited' });
    // A decision on it is refused as on any ended session, and writes nothing.
    const before = t.journal.stats().events;
    await expect(
      t.journal.appendSession({
        kind: 'SESSION_REVOKED',
        action_id: 'ses_churn_0',
        payload: { actor: person, reason: 'late' },
      }),
    ).rejects.toMatchObject({ code: 'IMPOSSIBLE_TRANSITION' });
    expect(t.journal.stats().events).toBe(before);

    // Reopened, it reads the same bounded set: the live session and the newest ended ones.
    await t.journal.close();
    const reopened = await Journal.open({ path: t.path, clock: t.clock, vault: t.vault });
    try {
      expect(reopened.sessionsHeld()).toBe(endedSessionsKept + 1);
      expect(reopened.unendedSessions().map((s) => s.session_id)).toEqual(['ses_churn_live']);
      expect(newest(reopened.listSessions())).toEqual(newest(readNewestSessions(t.reader(), endedSessionsKept)));
      expect(reopened.getSession('ses_churn_1')?.status).toBe('ended');
      // Another process of the user rewrites the let-go session's row to approved: not read.
      editSessionRow(t.path, 'ses_churn_0', (state) => ({
        ...state,
        status: 'approved',
        ended_at_ms: null,
        end_reason: null,
      }));
      // What its events say, not the row.
      expect(reopened.getSession('ses_churn_0')).toMatchObject({ status: 'ended', end_reason: 'process_exited' });
      expect(reopened.findSessionByProcess(20_000, '2000000')).toBeUndefined();
    } finally {
      await reopened.close();
    }
  }, 120_000);
});

/** The table's newest `limit` sessions by first event, oldest first, read by another connection. */
function readNewestSessions(reader: Database.Database, limit: number): Array<{ session_id: string }> {
  return (
    reader.prepare('SELECT session_id FROM sessions ORDER BY first_seq DESC LIMIT ?').all(limit) as Array<{
      session_id: string;
    }>
  ).reverse();
}

describe('when another process edits the sessions table while no broker runs (THREAT-MODEL 3)', () => {
  it('a row moved to another process’s pid: that process may have been bound to it while locked, so the session’s approval is not acted on in the run', async () => {
    const t = await temp();
    await t.journal.appendSession(sessionStartedEvent('ses_moved_1', 7400));
    await t.journal.appendSession({ kind: 'SESSION_APPROVED', action_id: 'ses_moved_1', payload: { actor: person } });
    await t.journal.close();
    editSessionRow(t.path, 'ses_moved_1', (state) => ({ ...state, pid: 7500, start_time: '750000' }));
    t.vault.lock();
    const { reopened, refuted } = await reopenTelling(t);
    try {
      // Locked: the agent's process 7500 is found by the moved row and reconnects to the person's session.
      expect(reopened.findSessionByProcess(7500, '750000')?.session_id).toBe('ses_moved_1');
      await reopened.appendSession(sessionReconnectedEvent('ses_moved_1'));
      expect(reopened.sessionApprovalUsable('ses_moved_1')).toBe(false);
      // What a card and the Sessions page say beside its status: the file's word, not the journal's.
      expect(reopened.sessionRecordCheck('ses_moved_1')).toBe('unconfirmed');
      t.vault.unlock();
      // Unlocked: the record is its events' (process 7400, approved), but the approval is not acted on in this run.
      expect(reopened.sessionConfirmed('ses_moved_1')).toBe(true);
      expect(reopened.getSession('ses_moved_1')).toMatchObject({ status: 'approved', pid: 7400 });
      expect(reopened.sessionApprovalUsable('ses_moved_1')).toBe(false);
      expect(reopened.findSessionByProcess(7500, '750000')).toBeUndefined();
      expect(reopened.findSessionByProcess(7400, '740000')?.session_id).toBe('ses_moved_1');
      expect(reopened.sessionRecordCheck('ses_moved_1')).toBe('approval_withheld');
      expect(reopened.listCountedSessions().map((c) => c.record)).toEqual(['approval_withheld']);
      expect(refuted).toEqual([{ session_id: 'ses_moved_1', row_status: 'approved', status: 'approved', folds: true }]);
    } finally {
      await reopened.close();
    }
  });

  it('an earlier run’s session whose events do not fold (too many) is never confirmed, and is not folded again at every ask', async () => {
    const t = await temp();
    await t.journal.appendSession(sessionStartedEvent('ses_unfold_1', 7600));
    await t.journal.appendSession({ kind: 'SESSION_APPROVED', action_id: 'ses_unfold_1', payload: { actor: person } });
    // More events than one fold takes (16 × 512): an agent reconnecting that often (each MCP initialize is one).
    for (let i = 0; i < 17; i++)
      await Promise.all(
        Array.from({ length: 512 }, () => t.journal.appendSession(sessionReconnectedEvent('ses_unfold_1'))),
      );
    await t.journal.close();
    const { reopened, refuted } = await reopenTelling(t);
    try {
      const folds = (): number => {
        const began = performance.now();
        expect(reopened.sessionApprovalUsable('ses_unfold_1')).toBe(false);
        return performance.now() - began;
      };
      const first = folds();
      // Asked again (every call, every card list): no second fold of ~8,700 events.
      const again = Math.max(folds(), folds(), folds());
      expect(again).toBeLessThan(first / 4);
      expect(reopened.getSession('ses_unfold_1')?.status).toBe('approved');
      expect(reopened.sessionRecordCheck('ses_unfold_1')).toBe('unverifiable');
      expect(reopened.listCountedSessions().map((c) => [c.session.status, c.record])).toEqual([
        ['approved', 'unverifiable'],
      ]);
      expect(refuted).toEqual([{ session_id: 'ses_unfold_1', row_status: 'approved', status: null, folds: false }]);
    } finally {
      await reopened.close();
    }
  });

  it('an earlier run’s session is confirmed from its sealed events once they open: the row decides nothing until then', async () => {
    const t = await temp();
    await t.journal.appendSession(sessionStartedEvent('ses_offline_own', 7100));
    await t.journal.appendSession(sessionStartedEvent('ses_offline_ok', 7400));
    await t.journal.appendSession({
      kind: 'SESSION_APPROVED',
      action_id: 'ses_offline_ok',
      payload: { actor: person },
    });
    await t.journal.close();
    // While no broker runs: the agent's own pending session set to approved, and an approved session inserted for its
    // child, both in the shape the journal writes.
    editSessionRow(t.path, 'ses_offline_own', (state) => ({ ...state, status: 'approved', approved_by: 'person:ann' }));
    const file = new Database(t.path, { timeout: 5_000 });
    try {
      const own = file.prepare('SELECT state FROM sessions WHERE session_id = ?').get('ses_offline_own') as {
        state: string;
      };
      const child = { ...JSON.parse(own.state), session_id: 'ses_offline_child', pid: 7200, start_time: '720000' };
      file
        .prepare(
          'INSERT INTO sessions (session_id, status, pid, start_time, first_seq, last_seq, state) VALUES (?, ?, ?, ?, ?, ?, ?)',
        )
        .run('ses_offline_child', 'approved', 7200, '720000', 1, 1, JSON.stringify(child));
    } finally {
      file.close();
    }

    // The broker starts locked: the earlier run's events do not open, so no session of it is confirmed.
    t.vault.lock();
    const { reopened, refuted } = await reopenTelling(t);
    try {
      expect(reopened.getSession('ses_offline_own')?.status).toBe('approved');
      expect(reopened.sessionConfirmed('ses_offline_own')).toBe(false);
      expect(reopened.sessionConfirmed('ses_offline_ok')).toBe(false);
      // Listed as the rows say, each marked unconfirmed: the forged approval is not shown as the journal's.
      expect(
        reopened.listCountedSessions().map((c) => [c.session.session_id, c.session.approved_by, c.record]),
      ).toEqual([
        ['ses_offline_own', 'person:ann', 'unconfirmed'],
        ['ses_offline_ok', 'person:ann', 'unconfirmed'],
      ]);
      // A row with no event in the log at all needs no key to refute: forgotten at its first ask.
      expect(reopened.findSessionByProcess(7200, '720000')).toBeUndefined();
      expect(reopened.getSession('ses_offline_child')).toBeUndefined();
      expect(refuted).toEqual([{ session_id: 'ses_offline_child', row_status: 'approved', status: null, folds: true }]);
      // A reconnection while locked folds over the row it has: still not confirmed once written.
      await reopened.appendSession(sessionReconnectedEvent('ses_offline_own', 'claude'));
      expect(reopened.sessionConfirmed('ses_offline_own')).toBe(false);
      expect(reopened.sessionRecordCheck('ses_offline_own')).toBe('unconfirmed');
      expect(refuted).toHaveLength(1);

      // The person unlocks: each is what its events say at the next ask.
      t.vault.unlock();
      expect(reopened.getSession('ses_offline_own')).toMatchObject({
        status: 'pending',
        approved_by: null,
        reconnects: 1,
      });
      expect(reopened.sessionConfirmed('ses_offline_own')).toBe(true);
      expect(reopened.listCountedSessions().map((c) => [c.session.session_id, c.session.status, c.record])).toEqual([
        ['ses_offline_own', 'pending', 'confirmed'],
        ['ses_offline_ok', 'approved', 'confirmed'],
      ]);
      expect(reopened.sessionConfirmed('ses_offline_ok')).toBe(true);
      expect(reopened.getSession('ses_offline_ok')).toMatchObject({ status: 'approved', approved_by: 'person:ann' });
      expect(refuted.slice(1)).toEqual([
        { session_id: 'ses_offline_own', row_status: 'approved', status: 'pending', folds: true },
      ]);
      // A person's approval of the confirmed pending session folds over what the events say.
      const approvedNow = await reopened.appendSession({
        kind: 'SESSION_APPROVED',
        action_id: 'ses_offline_own',
        payload: { actor: person },
      });
      expect(approvedNow.session).toMatchObject({ status: 'approved', approved_by: 'person:ann', reconnects: 1 });
    } finally {
      await reopened.close();
    }
  });

  it('a list gives confirming ended sessions a time budget too: with none left, one a list (a fold may read thousands of events)', async () => {
    const t = await temp();
    for (let i = 0; i < 5; i++) {
      const id = `ses_budget_${i}`;
      await t.journal.appendSession(sessionStartedEvent(id, 8600 + i));
      await t.journal.appendSession({ kind: 'SESSION_ENDED', action_id: id, payload: { reason: 'process_exited' } });
    }
    await t.journal.close();
    const { reopened } = await reopenTelling(t, { sessionsConfirmBudgetMs: 0 });
    try {
      const unconfirmed = () => reopened.listCountedSessions().filter((c) => c.record === 'unconfirmed').length;
      expect([unconfirmed(), unconfirmed(), unconfirmed()]).toEqual([4, 3, 2]);
      // The confirmer's turn is bounded the same way: one, then the rest at the next.
      expect(reopened.confirmHeldSessions(100)).toEqual({ tried: 1, settled: 1, left: true });
      expect(reopened.confirmHeldSessions(100, 60_000)).toEqual({ tried: 1, settled: 1, left: false });
    } finally {
      await reopened.close();
    }
  });

  it('an earlier run’s session that a run with no key sealed is unverifiable, not unconfirmed: no unlock opens its events', async () => {
    const runs = await openLockedVaultRuns('postern-sessions-lost-', Buffer.from('lost key passphrase'));
    try {
      // Run 1 starts locked before any audit key exists and is never unlocked: its events are sealed for good.
      await runs.run(async (journal) => {
        await journal.appendSession(sessionStartedEvent('ses_lostkey_1', 7800));
      });
      await runs.run(async (journal) => {
        expect(journal.sessionRecordCheck('ses_lostkey_1')).toBe('unverifiable');
        await runs.vault.unlock(Buffer.from('lost key passphrase'));
        expect(journal.sessionRecordCheck('ses_lostkey_1')).toBe('unverifiable');
        expect(journal.sessionApprovalUsable('ses_lostkey_1')).toBe(false);
        expect(journal.listCountedSessions().map((c) => [c.session.session_id, c.record])).toEqual([
          ['ses_lostkey_1', 'unverifiable'],
        ]);
      });
    } finally {
      await runs.dispose();
    }
  });

  it('a list confirms an earlier run’s ended sessions a bounded number at a time, newest first, and marks the rest unconfirmed', async () => {
    const t = await temp();
    const ids = Array.from({ length: 130 }, (_, i) => `ses_listed_${String(i).padStart(3, '0')}`);
    for (const [i, id] of ids.entries()) {
      await t.journal.appendSession(sessionStartedEvent(id, 8000 + i));
      await t.journal.appendSession({ kind: 'SESSION_ENDED', action_id: id, payload: { reason: 'process_exited' } });
    }
    await t.journal.close();
    // The oldest one's row names an approval no person gave, and so does the newest one's.
    editSessionRow(t.path, 'ses_listed_000', (state) => ({ ...state, approved_by: 'person:ann' }));
    editSessionRow(t.path, 'ses_listed_129', (state) => ({ ...state, approved_by: 'person:ann' }));
    // Counted, not timed: this list may take as long as it needs (the time bound is the next test's).
    const { reopened } = await reopenTelling(t, { sessionsConfirmBudgetMs: 60_000 });
    try {
      const records = () => new Map(reopened.listCountedSessions().map((c) => [c.session.session_id, c]));
      const first = records();
      // The newest 100 are folded in the first list, the 30 older ones in the next.
      expect(ids.filter((id) => first.get(id)?.record === 'confirmed')).toEqual(ids.slice(30));
      expect(ids.filter((id) => first.get(id)?.record === 'unconfirmed')).toEqual(ids.slice(0, 30));
      expect(first.get('ses_listed_000')?.session.approved_by).toBe('person:ann');
      // One confirmed in this list is listed as its events fold, never as the row read before it.
      expect(first.get('ses_listed_129')?.session).toMatchObject({ status: 'ended', approved_by: null });
      const second = records();
      expect(ids.filter((id) => second.get(id)?.record !== 'confirmed')).toEqual([]);
      expect(second.get('ses_listed_000')?.session).toMatchObject({ status: 'ended', approved_by: null });
    } finally {
      await reopened.close();
    }
  });
});

/** The journal opened again on `t`'s file (as the next broker start), with what it tells of refuted session rows. */
async function reopenTelling(
  t: TempJournal,
  options: Pick<JournalOpenOptions, 'sessionsConfirmBudgetMs'> = {},
): Promise<{ reopened: Journal; refuted: unknown[] }> {
  const refuted: unknown[] = [];
  const reopened = await Journal.open({
    path: t.path,
    clock: t.clock,
    vault: t.vault,
    onSessionRowRefuted: (report) => refuted.push(report),
    ...options,
  });
  return { reopened, refuted };
}
