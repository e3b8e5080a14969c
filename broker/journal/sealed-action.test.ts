import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import type { ActionState, NewEvent } from '../contract/index.js';
import { actionPathNames, actionPaths, succeeded } from '../testing/action-paths.js';
import { openTempJournal, type TempJournal } from '../testing/temp-journal.js';
import { Journal } from './journal.js';

const opened: TempJournal[] = [];
afterEach(async () => {
  for (const t of opened.splice(0)) await t.dispose();
});

describe('Journal.sealedAction', () => {
  it("answers an earlier run's action from its own sealed events, not from a row another process edited", async () => {
    const t = await openTempJournal();
    opened.push(t);
    for (const event of actionPaths.httpNoApproval('act_owned_0001')) await t.journal.append(event);
    const genuine = t.journal.getAction('act_owned_0001') as ActionState;
    await t.journal.close();
    const journal = await Journal.open({ path: t.path, clock: t.clock, vault: t.vault });
    opened.push({ ...t, journal, dispose: () => journal.close() });

    const forger = new Database(t.path, { timeout: 5_000 });
    try {
      const forged = { ...genuine, session_id: 'ses_thief_000001', result_id: 'res_someone_else_0001' };
      forger
        .prepare('UPDATE actions SET session_id = ?, state = ? WHERE action_id = ?')
        .run(forged.session_id, JSON.stringify(forged), 'act_owned_0001');
    } finally {
      forger.close();
    }
    // The premise: the table says the action is the thief's and holds another result (a plain read past the cache
    // answers the action's own fold too, since the row disagrees with it: Journal.checkedRow).
    const row = new Database(t.path, { readonly: true });
    try {
      const stored = row.prepare('SELECT state FROM actions WHERE action_id = ?').get('act_owned_0001') as {
        state: string;
      };
      expect(JSON.parse(stored.state)).toMatchObject({ session_id: 'ses_thief_000001' });
    } finally {
      row.close();
    }
    expect(journal.getAction('act_owned_0001')).toEqual(genuine);

    const sealed = journal.sealedAction('act_owned_0001');
    expect(sealed).toEqual(genuine);
    expect(journal.sealedAction('act_never_0002')).toBeUndefined();
  });

  it('folds an action this run wrote to the state its commits wrote, for every action path', async () => {
    const t = await openTempJournal();
    opened.push(t);
    for (const [i, name] of actionPathNames.entries()) {
      const id = `act_${name.slice(0, 20)}_${i}`;
      for (const event of actionPaths[name](id)) await t.journal.append(event);
      expect([name, t.journal.sealedAction(id)]).toEqual([name, t.journal.getAction(id)]);
    }
  });

  it('folds an action with more events than one page reads (1,300 here) to the state its commits wrote', async () => {
    const t = await openTempJournal();
    opened.push(t);
    const id = 'act_many_events_01';
    const path = actionPaths.sshExit23(id);
    const firstOutput = path.findIndex((e) => e.kind === 'OUTPUT_RECEIVED');
    const more = Array.from({ length: 1_290 }, () => ({
      kind: 'OUTPUT_RECEIVED' as const,
      action_id: id,
      payload: { attempt: 1, stream: 'stdout' as const, bytes: 1 },
    }));
    const events = [...path.slice(0, firstOutput), ...more, ...path.slice(firstOutput)];
    expect(events.length).toBeGreaterThan(2 * 512);
    for (let i = 0; i < events.length; i += 200) await t.journal.appendBatch(events.slice(i, i + 200));
    const sealed = t.journal.sealedAction(id);
    expect(sealed).toEqual(t.journal.getAction(id));
    expect(sealed?.attempts[0]?.output_bytes.stdout).toBe(100 + 1_290);
  });

  it("refuses a person's attestation of a settled action whose row another process edited to read unknown: a commit folds its sealed events on a cache miss, never the row", async () => {
    const { journal, genuine, forger } = await settledThenReopened('act_settled_00001');
    expect(genuine).toMatchObject({ outcome: 'committed', recorded: true });
    try {
      readUnknown(forger, genuine);
    } finally {
      forger.close();
    }
    // A read past the cache answers the sealed fold, not the row (Journal.checkedRow).
    expect(journal.getAction(genuine.action_id)).toMatchObject({ outcome: 'committed' });
    // Folded over the row it would settle a committed action rejected; over its sealed events it is refused.
    await expect(journal.append(attestRejected(genuine.action_id))).rejects.toMatchObject({
      code: 'IMPOSSIBLE_TRANSITION',
      message: expect.stringContaining('OPERATOR_ATTESTED'),
    });
    expect(journal.sealedAction(genuine.action_id)).toEqual(genuine);
    await expectJournalGoesOn(journal, 'act_after_00001');
  });

  it("refuses a decision on an action whose earlier run's key does not open, rather than fold over its row", async () => {
    const { journal, genuine, forger } = await settledThenReopened('act_damaged_key_1');
    // Another process damages the sealed key of the run that wrote the action (a plaintext column) and edits the
    // action's row to read unknown: a fallback to the row on any failure would let it choose what a decision folds over.
    try {
      const run = forger.prepare('SELECT max(run) AS run FROM events WHERE action_id = ?').get(genuine.action_id) as {
        run: number;
      };
      const key = forger.prepare('SELECT sealed_key FROM audit_runs WHERE run = ?').get(run.run) as {
        sealed_key: Buffer;
      };
      const damaged = Buffer.from(key.sealed_key);
      damaged[damaged.length - 1] = (damaged[damaged.length - 1] ?? 0) ^ 0xff;
      forger.prepare('UPDATE audit_runs SET sealed_key = ? WHERE run = ?').run(damaged, run.run);
      readUnknown(forger, genuine);
    } finally {
      forger.close();
    }
    await expect(journal.append(attestRejected(genuine.action_id))).rejects.toMatchObject({
      code: 'IMPOSSIBLE_TRANSITION',
      message: expect.stringContaining('its recorded events cannot be folded'),
    });
    await expectJournalGoesOn(journal, 'act_after_00002');
  });
});

/**
 * A committed action written by one run, the journal reopened (nothing of the action in memory: settled, so no lane
 * holds it either), and a second connection to the file, as another process of the user has.
 */
async function settledThenReopened(
  id: string,
): Promise<{ journal: Journal; genuine: ActionState; forger: Database.Database }> {
  const t = await openTempJournal();
  opened.push(t);
  for (const event of actionPaths.httpNoApproval(id)) await t.journal.append(event);
  const genuine = t.journal.getAction(id) as ActionState;
  await t.journal.close();
  const journal = await Journal.open({ path: t.path, clock: t.clock, vault: t.vault });
  opened.push({ ...t, journal, dispose: () => journal.close() });
  return { journal, genuine, forger: new Database(t.path, { timeout: 5_000 }) };
}

/** The action's plaintext row rewritten to read unknown. */
function readUnknown(forger: Database.Database, genuine: ActionState): void {
  const forged = { ...genuine, outcome: 'unknown', effect: 'unknown_effect', code: 'REMOTE_OUTCOME_UNKNOWN' };
  forger
    .prepare('UPDATE actions SET outcome = ?, state = ? WHERE action_id = ?')
    .run('unknown', JSON.stringify(forged), genuine.action_id);
}

/** A person's attestation that the action was rejected, as `postern actions attest` appends it. */
function attestRejected(id: string): NewEvent {
  return {
    kind: 'OPERATOR_ATTESTED',
    action_id: id,
    payload: { actor: { kind: 'person', id: 'ann' }, basis: 'the row said unknown' },
    classification: {
      ...succeeded,
      outcome: 'rejected',
      effect: 'no_effect',
      code: 'ATTESTED_REJECTED',
      outcome_basis: 'operator_attested',
      source: 'operator_attested',
    },
  };
}

/** Only the refused unit was refused: the journal takes the next action. */
async function expectJournalGoesOn(journal: Journal, id: string): Promise<void> {
  for (const event of actionPaths.httpNoApproval(id)) await journal.append(event);
  expect(journal.getAction(id)).toMatchObject({ outcome: 'committed' });
}
