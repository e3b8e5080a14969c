import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import type { ActionState } from '../contract/index.js';
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
    // The premise: read from the table, the action is the thief's and holds another result.
    expect(journal.getAction('act_owned_0001')).toMatchObject({ session_id: 'ses_thief_000001' });

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
    const t = await openTempJournal();
    opened.push(t);
    const id = 'act_settled_00001';
    for (const event of actionPaths.httpNoApproval(id)) await t.journal.append(event);
    const genuine = t.journal.getAction(id) as ActionState;
    expect(genuine).toMatchObject({ outcome: 'committed', recorded: true });
    await t.journal.close();
    // Reopened: nothing of the action is in memory (settled, so no lane holds it either).
    const journal = await Journal.open({ path: t.path, clock: t.clock, vault: t.vault });
    opened.push({ ...t, journal, dispose: () => journal.close() });

    const forger = new Database(t.path, { timeout: 5_000 });
    try {
      const forged = { ...genuine, outcome: 'unknown', effect: 'unknown_effect', code: 'REMOTE_OUTCOME_UNKNOWN' };
      forger
        .prepare('UPDATE actions SET outcome = ?, state = ? WHERE action_id = ?')
        .run('unknown', JSON.stringify(forged), id);
    } finally {
      forger.close();
    }
    expect(journal.getAction(id)).toMatchObject({ outcome: 'unknown' });

    const attest = {
      kind: 'OPERATOR_ATTESTED' as const,
      action_id: id,
      payload: { actor: { kind: 'person' as const, id: 'ann' }, basis: 'the row said unknown' },
      classification: {
        ...succeeded,
        outcome: 'rejected' as const,
        effect: 'no_effect' as const,
        code: 'ATTESTED_REJECTED' as const,
        outcome_basis: 'operator_attested',
        source: 'operator_attested' as const,
      },
    };
    // Folded over the row it would settle a committed action rejected; over its sealed events it is refused.
    await expect(journal.append(attest)).rejects.toMatchObject({
      code: 'IMPOSSIBLE_TRANSITION',
      message: expect.stringContaining('OPERATOR_ATTESTED'),
    });
    expect(journal.sealedAction(id)).toEqual(genuine);
    // Only that unit was refused: the journal goes on.
    for (const event of actionPaths.httpNoApproval('act_after_00001')) await journal.append(event);
    expect(journal.getAction('act_after_00001')).toMatchObject({ outcome: 'committed' });
  });

  it("refuses a decision on an action whose earlier run's key does not open, rather than fold over its row", async () => {
    const t = await openTempJournal();
    opened.push(t);
    const id = 'act_damaged_key_1';
    for (const event of actionPaths.httpNoApproval(id)) await t.journal.append(event);
    const genuine = t.journal.getAction(id) as ActionState;
    await t.journal.close();
    const journal = await Journal.open({ path: t.path, clock: t.clock, vault: t.vault });
    opened.push({ ...t, journal, dispose: () => journal.close() });

    // Another process damages the sealed key of the run that wrote the action (a plaintext column) and edits the
    // action's row to read unknown: a fallback to the row on any failure would let it choose what a decision folds over.
    const forger = new Database(t.path, { timeout: 5_000 });
    try {
      const run = forger.prepare('SELECT max(run) AS run FROM events WHERE action_id = ?').get(id) as { run: number };
      const key = forger.prepare('SELECT sealed_key FROM audit_runs WHERE run = ?').get(run.run) as {
        sealed_key: Buffer;
      };
      const damaged = Buffer.from(key.sealed_key);
      damaged[damaged.length - 1] = (damaged[damaged.length - 1] ?? 0) ^ 0xff;
      forger.prepare('UPDATE audit_runs SET sealed_key = ? WHERE run = ?').run(damaged, run.run);
      forger
        .prepare('UPDATE actions SET outcome = ?, state = ? WHERE action_id = ?')
        .run('unknown', JSON.stringify({ ...genuine, outcome: 'unknown', effect: 'unknown_effect' }), id);
    } finally {
      forger.close();
    }
    const attest = {
      kind: 'OPERATOR_ATTESTED' as const,
      action_id: id,
      payload: { actor: { kind: 'person' as const, id: 'ann' }, basis: 'the row said unknown' },
      classification: {
        ...succeeded,
        outcome: 'rejected' as const,
        effect: 'no_effect' as const,
        code: 'ATTESTED_REJECTED' as const,
        outcome_basis: 'operator_attested',
        source: 'operator_attested' as const,
      },
    };
    await expect(journal.append(attest)).rejects.toMatchObject({
      code: 'IMPOSSIBLE_TRANSITION',
      message: expect.stringContaining('its recorded events cannot be folded'),
    });
    // A unit's fault: the journal goes on.
    for (const event of actionPaths.httpNoApproval('act_after_00002')) await journal.append(event);
    expect(journal.getAction('act_after_00002')).toMatchObject({ outcome: 'committed' });
  });
});
