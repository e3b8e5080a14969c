import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cardLine } from '../cli/operator-commands.js';
import { parseConfig } from '../config/index.js';
import type { Journal } from '../journal/index.js';
import { ApprovalQueue } from '../queue/approval-queue.js';
import { actionPaths } from '../testing/action-paths.js';
import { openLockedVaultRuns, type LockedVaultRuns } from '../testing/locked-vault-runs.js';
import type { OperatorBroker } from './operator-broker.js';
import { createOperatorHandlers } from './operator-handlers.js';
import { createOperatorReads } from './operator-reads.js';

/**
 * What actions.show answers, through the real operator handlers over a real journal file and a real vault, for an
 * action whose events a broker run that never had a key sealed, and for one an earlier keyed run sealed:
 * - run 1 starts with the vault locked before any audit key exists and is never unlocked: its key is sealed to no one;
 * - run 2 starts locked (its recovery closes run 1's card), then a person unlocks: the audit keys are made; a card waits;
 * - run 3 starts locked (its recovery closes run 2's card).
 * Both refusals carry AUDIT_KEY_UNAVAILABLE; only the never-keyed run's says `sealed_for_good`, so the desktop app asks
 * for no unlock there (renderer/src/store/sealed-action.ts), locked or not.
 */
const passphrase = Buffer.from('correct horse battery staple');

let runs: LockedVaultRuns;

beforeEach(async () => {
  runs = await openLockedVaultRuns('postern-sealed-reply-', passphrase);
});
afterEach(async () => {
  await runs.dispose();
});

/** actions.show as every operator surface calls it: the handlers over the broker's own reads of `journal`. */
function show(journal: Journal, id: string) {
  const config = parseConfig('version: 1\n');
  const queue = ApprovalQueue.open({ journal, clock: runs.clock, config });
  try {
    const handlers = createOperatorHandlers(createOperatorReads(journal, queue) as unknown as OperatorBroker);
    return handlers['actions.show']({ action_id: id });
  } finally {
    queue.close();
  }
}

/** approvals.list as every operator surface calls it: the handlers over the broker's own (the queue's cards). */
async function cards(journal: Journal) {
  const config = parseConfig('version: 1\n');
  const queue = ApprovalQueue.open({ journal, clock: runs.clock, config });
  try {
    const broker = { 'approvals.list': () => ({ cards: queue.cards() }) };
    const reply = await createOperatorHandlers(broker as unknown as OperatorBroker)['approvals.list']({});
    if (!reply.ok) throw new Error(reply.error.code);
    return reply.value.cards;
  } finally {
    queue.close();
  }
}

/** An HTTP route's call whose outcome is unknown after dispatch, in `lane`: a blocked head, its card rebuilt later. */
async function blockedHead(journal: Journal, id: string, lane: string): Promise<void> {
  for (const event of actionPaths.callerCancelledAfterDispatch(id)) {
    runs.clock.advance(1_000);
    await journal.append(event.kind === 'ACTION_ACCEPTED' ? { ...event, lane } : event);
  }
}

describe('actions.show of an action whose events are sealed: the refusal says whether an unlock opens them', () => {
  it('a run that never had a key: sealed_for_good, locked and unlocked; an earlier keyed run: not, and it opens once unlocked', async () => {
    await runs.run((journal) => runs.cardWaiting(journal, 'act_neverkeyed'));
    await runs.run(async (journal) => {
      await runs.cardWaiting(journal, 'act_keyedrun');
      await runs.vault.unlock(passphrase);
    });
    runs.vault.lock('operator');
    await runs.run(async (journal) => {
      expect(runs.vault.state()).toBe('locked');
      const lostLocked = await show(journal, 'act_neverkeyed');
      expect(lostLocked).toEqual({
        ok: false,
        error: {
          code: 'AUDIT_KEY_UNAVAILABLE',
          message: expect.stringContaining('sealed in the journal for good') as unknown,
          sealed_for_good: true,
        },
      });
      const keptLocked = await show(journal, 'act_keyedrun');
      expect(keptLocked).toMatchObject({ ok: false, error: { code: 'AUDIT_KEY_UNAVAILABLE' } });
      expect(keptLocked.ok ? undefined : keptLocked.error).not.toHaveProperty('sealed_for_good');

      await runs.vault.unlock(passphrase);
      // As the flags said: the keyed run's events open now; the never-keyed run's stay sealed, and say so still.
      const keptUnlocked = await show(journal, 'act_keyedrun');
      expect(keptUnlocked.ok).toBe(true);
      const lostUnlocked = await show(journal, 'act_neverkeyed');
      expect(lostUnlocked).toMatchObject({
        ok: false,
        error: { code: 'AUDIT_KEY_UNAVAILABLE', sealed_for_good: true },
      });
    });
  });
});

describe('approvals.list of a blocked head rebuilt from the journal: its request details say whether an unlock shows them', () => {
  it('a run that never had a key: sealed_for_good, and the CLI line asks for no unlock; an earlier keyed run: sealed until unlocked', async () => {
    await runs.run((journal) => blockedHead(journal, 'act_lostblock', 'lane-a'));
    await runs.run(async (journal) => {
      await blockedHead(journal, 'act_keptblock', 'lane-b');
      await runs.vault.unlock(passphrase);
    });
    runs.vault.lock('operator');
    await runs.run(async (journal) => {
      const byId = async () => new Map((await cards(journal)).map((c) => [c.action_id, c]));
      const locked = await byId();
      expect(locked.get('act_lostblock')).toMatchObject({ state: 'blocked_head', request_details: 'sealed_for_good' });
      expect(locked.get('act_keptblock')).toMatchObject({ state: 'blocked_head', request_details: 'sealed' });
      const lostLine = cardLine(locked.get('act_lostblock')!);
      expect(lostLine).toContain(
        '[query, headers and body size sealed in the journal for good: the broker run that recorded them ended before any audit key existed, and no unlock opens them]',
      );
      expect(lostLine).not.toContain('unlock the vault');
      expect(cardLine(locked.get('act_keptblock')!)).toContain('unlock the vault to show them');

      await runs.vault.unlock(passphrase);
      const unlocked = await byId();
      // The keyed run's event opens now (an admission without a request_view: not recorded); the other stays sealed.
      expect(unlocked.get('act_keptblock')?.request_details).toBe('not_recorded');
      expect(unlocked.get('act_lostblock')?.request_details).toBe('sealed_for_good');
    });
  });
});
