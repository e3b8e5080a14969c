import Database from 'better-sqlite3';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import {
  actionStateSchema,
  isCodedError,
  sessionStateSchema,
  type ActionState,
  type JournalEvent,
  type NewEvent,
  type SessionState,
} from '../contract/index.js';
import { project, projectSessions } from '../core/index.js';
import { actionPaths } from '../testing/action-paths.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { Journal } from './journal.js';
import { upgradeActionState, upgradeSessionState } from './upgrade-stored-state.js';

const id = 'act_upgrade_0001';

function stamped(events: readonly NewEvent[]): JournalEvent[] {
  return events.map(
    (e, i) => ({ session_id: null, ticket: 1, lane: null, ...e, seq: i + 1, at_ms: 1_000 + i }) as JournalEvent,
  );
}

/** A current-shape state with no field at its upgrade default: a retried action, rule-set approval, a bound key. */
function currentAction(): ActionState {
  const projected = project(stamped(actionPaths.throttledThenRetried(id))).get(id);
  if (projected === undefined) throw new Error('the path projects no state');
  return actionStateSchema.parse({
    ...projected,
    approval_rule: 'rules[0]: POST /documents/** → none',
    key_expires_at_ms: 90_000,
    abandoned: true,
  });
}

function currentSession(): SessionState {
  const started: NewEvent = {
    kind: 'SESSION_STARTED',
    action_id: 'ses_upgrade_01',
    payload: {
      pid: 4242,
      uid: 1000,
      start_time: '424200',
      ppid: 1,
      exe: '/usr/bin/node',
      cwd: '/home/ann',
      parent_exe: null,
      client_name: 'c',
      client_version: '1',
    },
  };
  const reconnected: NewEvent = {
    kind: 'SESSION_RECONNECTED',
    action_id: 'ses_upgrade_01',
    payload: { client_name: 'c', client_version: '1' },
  };
  const session = projectSessions(stamped([started, reconnected, reconnected])).get('ses_upgrade_01');
  if (session === undefined) throw new Error('no session');
  return session;
}

/** Each field added after the first release, the old rows that lack it, and what the upgrade reads its absence as. */
const actionFieldsAdded = [
  { field: 'abandoned', before: 'schema 5 (ABANDONED)', absentMeans: false },
  { field: 'retry_budget', before: 'the retry engine', absentMeans: 0 },
  { field: 'retry_generation', before: 'the retry engine', absentMeans: 0 },
  { field: 'lease', before: 'the retry engine', absentMeans: null },
  { field: 'approval_rule', before: 'route rules (and when the route’s own approval applied)', absentMeans: null },
  { field: 'key_expires_at_ms', before: 'the key expiry was projected (and until a key is bound)', absentMeans: null },
] as const;
type AddedField = (typeof actionFieldsAdded)[number]['field'];

function storedWithout(state: ActionState, fields: readonly AddedField[]): string {
  const row: Record<string, unknown> = { ...state };
  for (const field of fields) delete row[field];
  return JSON.stringify(row);
}

function defaulted(state: ActionState, fields: readonly AddedField[]): ActionState {
  const expected: Record<string, unknown> = { ...state };
  for (const { field, absentMeans } of actionFieldsAdded) if (fields.includes(field)) expected[field] = absentMeans;
  return expected as ActionState;
}

function codedFailure(read: () => unknown): { code: string; field: string | undefined; message: string } {
  try {
    read();
  } catch (error) {
    if (!isCodedError(error)) throw error;
    return { code: error.code, field: error.field, message: error.message };
  }
  throw new Error('the read did not fail');
}

describe('when a stored action row predates a field', () => {
  it.each(actionFieldsAdded)(
    'a row from before $before comes back with $field = $absentMeans and everything else as stored',
    ({ field }) => {
      const current = currentAction();
      const upgraded = upgradeActionState(storedWithout(current, [field]));
      expect(upgraded).toStrictEqual(defaulted(current, [field]));
      expect(actionStateSchema.parse(upgraded)).toStrictEqual(upgraded);
    },
  );

  it('a lease stored before leases recorded their verdict comes back with decision null (never counted as same-key)', () => {
    const current = currentAction();
    if (current.lease === null) throw new Error('the path holds no lease');
    const { decision: _dropped, ...oldLease } = current.lease;
    const upgraded = upgradeActionState(JSON.stringify({ ...current, lease: oldLease }));
    expect(upgraded).toStrictEqual({ ...current, lease: { ...current.lease, decision: null } });
  });

  it('any mix of missing fields (rows written by any older broker) upgrades to the current shape with those defaults', () => {
    const current = currentAction();
    const fields = actionFieldsAdded.map((f) => f.field);
    fc.assert(
      fc.property(fc.subarray(fields), (missing) => {
        expect(upgradeActionState(storedWithout(current, missing))).toStrictEqual(defaulted(current, missing));
      }),
    );
  });

  it('a current row comes back unchanged', () => {
    const current = currentAction();
    expect(upgradeActionState(JSON.stringify(current))).toStrictEqual(current);
    const fresh = project(stamped(actionPaths.httpApproved(id).slice(0, 1))).get(id);
    expect(upgradeActionState(JSON.stringify(fresh))).toStrictEqual(fresh);
  });
});

describe('when a stored session row predates reconnects', () => {
  it('comes back with reconnects 0; a current row comes back unchanged', () => {
    const current = currentSession();
    expect(current.reconnects).toBe(2);
    const { reconnects: _dropped, ...old } = current;
    expect(upgradeSessionState(JSON.stringify(old))).toStrictEqual({ ...current, reconnects: 0 });
    expect(upgradeSessionState(JSON.stringify(current))).toStrictEqual(current);
  });
});

describe('when a stored session row predates approved_at_ms', () => {
  it('comes back with the grant starting at its last event if approved (as the grant check then read it), else null', () => {
    const current = currentSession();
    const { approved_at_ms: _dropped, ...old } = current;
    expect(upgradeSessionState(JSON.stringify({ ...old, status: 'approved' }))).toStrictEqual({
      ...current,
      status: 'approved',
      approved_at_ms: current.updated_at_ms,
    });
    expect(upgradeSessionState(JSON.stringify({ ...old, status: 'pending' }))).toStrictEqual({
      ...current,
      status: 'pending',
      approved_at_ms: null,
    });
  });
});

describe('when a stored session row predates allowlist_withheld', () => {
  it('comes back with allowlist_withheld null (nothing withheld the allowlist from it)', () => {
    const current = { ...currentSession(), allowlist_withheld: 'LD_PRELOAD set' };
    const { allowlist_withheld: _dropped, ...old } = current;
    expect(upgradeSessionState(JSON.stringify(old))).toStrictEqual({ ...current, allowlist_withheld: null });
    expect(upgradeSessionState(JSON.stringify(current))).toStrictEqual(current);
  });
});

describe('when a stored row is malformed', () => {
  const current = currentAction();
  it.each([
    ['not JSON', '{"action_id": "act_', 'actions.state'],
    ['not an object', '[]', 'actions.state'],
    [
      'a required field missing (no version wrote it without)',
      storedWithout(current, []).replace('"action_id"', '"action_idx"'),
      'actions.state.action_id',
    ],
    [
      'a field of the wrong type',
      JSON.stringify({ ...current, retry_budget: 'ZZ-stored-value-ZZ' }),
      'actions.state.retry_budget',
    ],
    ['null where no version wrote null', JSON.stringify({ ...current, abandoned: null }), 'actions.state.abandoned'],
    [
      'a lease verdict outside the set',
      JSON.stringify({ ...current, lease: { ...current.lease, decision: 'ZZ-stored-value-ZZ' } }),
      'actions.state.lease.decision',
    ],
  ])('%s: a coded error naming the field, never a default', (_case, row, field) => {
    const failure = codedFailure(() => upgradeActionState(row));
    expect(failure).toMatchObject({ code: 'INTERNAL', field });
    expect(failure.message).not.toContain('ZZ-stored-value-ZZ');
  });

  it('a session row: the same', () => {
    const bad = JSON.stringify({ ...currentSession(), reconnects: -1 });
    expect(codedFailure(() => upgradeSessionState(bad))).toMatchObject({
      code: 'INTERNAL',
      field: 'sessions.state.reconnects',
    });
  });
});

describe('when the journal reads a row an older broker wrote', () => {
  let t: TempJournal | undefined;
  afterEach(async () => {
    await t?.dispose();
    t = undefined;
  });

  /** Rewrites stored rows through a second connection, as an older broker's file would hold them. */
  function rewrite(sql: string, ...params: unknown[]): void {
    if (t === undefined) throw new Error('no journal');
    const db = new Database(t.path);
    try {
      expect(db.prepare(sql).run(...params).changes).toBe(1);
    } finally {
      db.close();
    }
  }

  it('every read returns the current shape, and the next event folds over it and stores it whole', async () => {
    t = await openTempJournal();
    const appended = await t.journal.appendBatch(actionPaths.lostThenReconciled(id).slice(0, 7));
    const before = appended.at(-1)?.state;
    expect(before).toMatchObject({ outcome: 'unknown', recorded: true, abandoned: false });
    const fields = actionFieldsAdded.map((f) => `'$.${f.field}'`).join(', ');
    rewrite(`UPDATE actions SET state = json_remove(state, ${fields}) WHERE action_id = ?`, id);

    expect(t.journal.getAction(id)).toStrictEqual(before);
    expect(t.journal.listLane('lane-a')).toStrictEqual([before]);
    expect(t.journal.listSessionActions('ses_test')).toStrictEqual([before]);

    const abandoned = await t.journal.append({
      kind: 'ABANDONED',
      action_id: id,
      payload: { actor: { kind: 'person', id: 'ann' }, reason: 'checked by hand' },
    });
    expect(abandoned.state).toStrictEqual({
      ...before,
      abandoned: true,
      last_seq: abandoned.event.seq,
      updated_at_ms: abandoned.event.at_ms,
    });
    const db = new Database(t.path, { readonly: true });
    try {
      const row = db.prepare('SELECT state FROM actions WHERE action_id = ?').get(id) as { state: string };
      expect(Object.keys(JSON.parse(row.state) as object).sort()).toEqual(Object.keys(actionStateSchema.shape).sort());
    } finally {
      db.close();
    }
  });

  it('a session row without reconnects reads as 0 and counts on from there', async () => {
    t = await openTempJournal();
    const session = await t.journal.appendSession({
      kind: 'SESSION_STARTED',
      action_id: 'ses_upgrade_01',
      payload: {
        pid: 4242,
        uid: 1000,
        start_time: '424200',
        ppid: 1,
        exe: null,
        cwd: null,
        parent_exe: null,
        client_name: null,
        client_version: null,
      },
    });
    rewrite(`UPDATE sessions SET state = json_remove(state, '$.reconnects') WHERE session_id = ?`, 'ses_upgrade_01');
    expect(t.journal.getSession('ses_upgrade_01')).toStrictEqual(session.session);
    expect(t.journal.findSessionByProcess(4242, '424200')).toStrictEqual(session.session);
    const again = await t.journal.appendSession({
      kind: 'SESSION_RECONNECTED',
      action_id: 'ses_upgrade_01',
      payload: { client_name: null, client_version: null },
    });
    expect(again.session.reconnects).toBe(1);
    expect(sessionStateSchema.parse(t.journal.getSession('ses_upgrade_01'))).toMatchObject({ reconnects: 1 });
  });

  it('a damaged row of an unresolved ticket stops the open with a coded error: the lanes read it there', async () => {
    t = await openTempJournal();
    // Recorded unknown: settled, so recovery leaves it alone, and unresolved, so its lane holds it.
    await t.journal.appendBatch(actionPaths.lostThenReconciled(id).slice(0, 7));
    await t.journal.close();
    rewrite(`UPDATE actions SET state = json_set(state, '$.stage', 'teleported') WHERE action_id = ?`, id);
    await expect(Journal.open({ path: t.path, clock: t.clock, vault: t.vault })).rejects.toMatchObject({
      code: 'INTERNAL',
      field: 'actions.state.stage',
    });
  });

  it('a settled action damaged while the journal runs stops the read of it with a coded error; an unresolved one is read from memory', async () => {
    t = await openTempJournal();
    await t.journal.appendBatch(actionPaths.lostThenReconciled(id).slice(0, 7));
    await t.journal.appendBatch(actionPaths.httpNoApproval('act_settled_0002'));
    await t.journal.close();
    const reopened = await Journal.open({ path: t.path, clock: t.clock, vault: t.vault });
    try {
      // After the open, the journal holds nothing of the settled action in memory: its row is read, and checked.
      for (const damaged of [id, 'act_settled_0002'])
        rewrite(`UPDATE actions SET state = json_set(state, '$.stage', 'teleported') WHERE action_id = ?`, damaged);
      expect(codedFailure(() => reopened.getAction('act_settled_0002'))).toMatchObject({
        code: 'INTERNAL',
        field: 'actions.state.stage',
      });
      // The unresolved one is the lanes': the state the open read, never the row again.
      expect(reopened.getAction(id)?.stage).not.toBe('teleported');
      expect(reopened.listLane('lane-a').map((s) => [s.action_id, (s.stage as string) === 'teleported'])).toEqual([
        [id, false],
      ]);
    } finally {
      await reopened.close();
    }
  });

  it('an unsettled damaged row stops the next open: recovery reads it from disk', async () => {
    t = await openTempJournal();
    await t.journal.appendBatch(actionPaths.lostThenReconciled(id).slice(0, 2));
    rewrite(`UPDATE actions SET state = json_set(state, '$.stage', 'teleported') WHERE action_id = ?`, id);
    await t.journal.close();
    await expect(Journal.open({ path: t.path, clock: t.clock, vault: t.vault })).rejects.toMatchObject({
      code: 'INTERNAL',
      field: 'actions.state.stage',
    });
  });
});
