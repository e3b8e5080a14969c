import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../config/index.js';
import type { NewEvent } from '../contract/index.js';
import { Journal } from '../journal/index.js';
import { ApprovalQueue } from '../queue/approval-queue.js';
import { actionPaths } from '../testing/action-paths.js';
import { FakeClock } from '../testing/fake-clock.js';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import { openVault, type Vault } from '../vault/index.js';
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

let dir: TempDir;
let clock: FakeClock;
let vault: Vault;
let path: string;

beforeEach(async () => {
  dir = createTempDir('postern-sealed-reply-');
  clock = new FakeClock();
  path = join(dir.path, 'journal.sqlite');
  const vaultDir = join(dir.path, 'vault');
  mkdirSync(vaultDir, { mode: 0o700 });
  vault = await openVault({ dataDir: vaultDir, clock, kdf: 'min', idleLockMs: 0 });
  await vault.init(passphrase);
  vault.lock('operator');
});
afterEach(async () => {
  await vault.close();
  dir.remove();
});

/** A card shown and waiting: nobody decided; the next run's recovery closes it. */
async function cardWaiting(journal: Journal, id: string): Promise<void> {
  for (const event of actionPaths.expired(id).slice(0, 3) as NewEvent[]) {
    clock.advance(1_000);
    await journal.append(event);
  }
}

async function run(body: (journal: Journal) => Promise<void>): Promise<void> {
  clock.advance(1_000);
  const journal = await Journal.open({ path, clock, vault });
  try {
    await body(journal);
  } finally {
    await journal.close();
  }
}

/** actions.show as every operator surface calls it: the handlers over the broker's own reads of `journal`. */
function show(journal: Journal, id: string) {
  const config = parseConfig('version: 1\n');
  const queue = ApprovalQueue.open({ journal, clock, config });
  const handlers = createOperatorHandlers(createOperatorReads(journal, queue) as unknown as OperatorBroker);
  return handlers['actions.show']({ action_id: id });
}

describe('actions.show of an action whose events are sealed: the refusal says whether an unlock opens them', () => {
  it('a run that never had a key: sealed_for_good, locked and unlocked; an earlier keyed run: not, and it opens once unlocked', async () => {
    await run((journal) => cardWaiting(journal, 'act_neverkeyed'));
    await run(async (journal) => {
      await cardWaiting(journal, 'act_keyedrun');
      await vault.unlock(passphrase);
    });
    vault.lock('operator');
    await run(async (journal) => {
      expect(vault.state()).toBe('locked');
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

      await vault.unlock(passphrase);
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
