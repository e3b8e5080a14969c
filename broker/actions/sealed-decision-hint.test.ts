import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../config/index.js';
import { agentToolReplySchema } from '../contract/index.js';
import { ResultStore, type Journal } from '../journal/index.js';
import { openLockedVaultRuns, type LockedVaultRuns } from '../testing/locked-vault-runs.js';
import { createAgentBackend } from './agent-backend.js';

/**
 * What the text line of action_status says of a decision it reads sealed, through the real agent backend on a real
 * journal file and a real vault, across three broker runs:
 * - run 1 starts with the vault locked before any audit key exists and is never unlocked: its run key is sealed to
 *   no one (audit_runs.sealed_key null) and ends with its process, so no unlock opens its events;
 * - run 2 starts locked too (its recovery closes run 1's waiting card), then a person unlocks: the audit keys are made
 *   and run 2's key is sealed; a second card waits;
 * - run 3 starts locked (its key sealed at its start; its recovery closes run 2's card).
 * Read in run 3 while locked, run 2's card asks the agent to read again after the unlock, and after the unlock its
 * decision reads whole; run 1's card asks for no unlock, locked or not, and after the unlock it is still sealed.
 */
const passphrase = Buffer.from('correct horse battery staple');
const session = 'ses_test';

let runs: LockedVaultRuns;

beforeEach(async () => {
  runs = await openLockedVaultRuns('postern-sealed-hint-', passphrase);
});
afterEach(async () => {
  await runs.dispose();
});

/** action_status of `id` as the agent of ses_test asks it, through the real backend over `journal`. */
async function status(journal: Journal, id: string): Promise<{ text: string; structured: unknown }> {
  const config = parseConfig('version: 1\n');
  const results = ResultStore.open(runs.path, journal.rowCipher(), { role: 'broker' });
  const backend = await createAgentBackend(
    runs.agentBackendDeps(journal, results, config, { processAlive: () => false, bootId: 'boot-test' }),
  );
  try {
    const answer = await backend.call(session, 'action_status', { action_id: id }, new AbortController().signal);
    return { text: answer.text, structured: agentToolReplySchema.parse(answer.structured) };
  } finally {
    backend.close();
    results.close();
  }
}

const closedByRestart = { state: 'closed', by: null, reason: null, closed_code: 'BROKER_RESTARTED' };
const unlockHint = 'read again once a person unlocks the vault';
const forGood = 'sealed in the journal for good: the broker run that recorded them never had a key';

describe('a decision read sealed: the text line asks for an unlock only where one opens the events', () => {
  it("a run that never had a key: no unlock is asked for, and none opens it; an earlier keyed run's: read again after the unlock", async () => {
    await runs.run(async (journal) => {
      await runs.cardWaiting(journal, 'act_neverkeyed');
      expect(journal.getAction('act_neverkeyed')).toMatchObject({ session_id: session, decision: null });
    });
    await runs.run(async (journal) => {
      await runs.cardWaiting(journal, 'act_keyedrun');
      expect(journal.getAction('act_keyedrun')).toMatchObject({ session_id: session, decision: null });
      await runs.vault.unlock(passphrase);
    });
    runs.vault.lock('operator');
    await runs.run(async (journal) => {
      // As the file holds it: run 1's key was sealed to no one; run 2's at its unlock, run 3's at its start.
      const db = new Database(runs.path, { readonly: true });
      try {
        const runs = db.prepare(`SELECT run, sealed_key IS NOT NULL AS keyed FROM audit_runs ORDER BY run`).all();
        expect(runs).toEqual([
          { run: 0, keyed: 0 },
          { run: 1, keyed: 0 },
          { run: 2, keyed: 1 },
          { run: 3, keyed: 1 },
        ]);
      } finally {
        db.close();
      }
      expect(journal.subjectSealedForGood('act_neverkeyed')).toBe(true);
      expect(journal.subjectSealedForGood('act_keyedrun')).toBe(false);

      const lostLocked = await status(journal, 'act_neverkeyed');
      expect(lostLocked.structured).toMatchObject({ decision: { ...closedByRestart, sealed: true } });
      expect(lostLocked.text).toContain(forGood);
      expect(lostLocked.text).not.toContain('unlocks');
      const keptLocked = await status(journal, 'act_keyedrun');
      expect(keptLocked.structured).toMatchObject({ decision: { ...closedByRestart, sealed: true } });
      expect(keptLocked.text).toContain(`sealed in the journal: ${unlockHint}`);
      expect(keptLocked.text).not.toContain('for good');

      await runs.vault.unlock(passphrase);
      // The hint held: the keyed run's events open now, and the decision reads whole.
      const keptUnlocked = await status(journal, 'act_keyedrun');
      expect(keptUnlocked.structured).toMatchObject({ decision: closedByRestart });
      expect(keptUnlocked.structured).not.toHaveProperty('decision.sealed');
      expect(keptUnlocked.text).not.toContain('sealed in the journal');
      // And so did the other: the unlock opened nothing of the run that never had a key.
      expect(() => journal.subjectEvents('act_neverkeyed')).toThrow(
        expect.objectContaining({ code: 'AUDIT_KEY_UNAVAILABLE' }),
      );
      expect(journal.subjectSealedForGood('act_neverkeyed')).toBe(true);
      const lostUnlocked = await status(journal, 'act_neverkeyed');
      expect(lostUnlocked.structured).toMatchObject({ decision: { ...closedByRestart, sealed: true } });
      expect(lostUnlocked.text).toContain(forGood);
      expect(lostUnlocked.text).not.toContain('unlocks');
    });
  });
});
