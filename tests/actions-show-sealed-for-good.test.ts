import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Journal } from '../broker/journal/index.js';
import { systemClock } from '../broker/ports/index.js';
import { actionPaths } from '../broker/testing/action-paths.js';
import { openVault } from '../broker/vault/index.js';
import { runPostern, startDaemon } from './support/postern-process.js';

/**
 * `postern actions show` of an action whose events a broker run sealed that never had a key, as a real subprocess
 * against a real daemon: run 1 (the real journal, in this process) opens over a vault initialised and locked before
 * any audit key exists and records a card; the daemon (run 2) starts locked, and its recovery closes that card. The
 * broker's refusal carries `sealed_for_good` (broker/host/sealed-for-good-reply.test.ts): the CLI says plainly that no
 * unlock opens those events, asks for none, and names what still reads — the action's plaintext `actions list` row.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'postern-sealed-show-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const actionId = 'act_neverkeyed_show';

async function dataDirWithNeverKeyedRun(): Promise<string> {
  const dataDir = path.join(scratch, 'data');
  mkdirSync(dataDir, { mode: 0o700 });
  const vault = await openVault({ dataDir, clock: systemClock, kdf: 'min', idleLockMs: 0 });
  try {
    await vault.init(Buffer.from('correct horse battery staple'));
    vault.lock('operator');
    const journal = await Journal.open({ dataDir, clock: systemClock, vault });
    try {
      for (const event of actionPaths.expired(actionId).slice(0, 3)) await journal.append(event);
    } finally {
      await journal.close();
    }
  } finally {
    await vault.close();
  }
  writeFileSync(path.join(dataDir, 'postern.yaml'), 'version: 1\n');
  return dataDir;
}

describe('postern actions show of events sealed for good', () => {
  it('says no unlock opens them and points at the plaintext row, never at an unlock', async () => {
    const dataDir = await dataDirWithNeverKeyedRun();
    const daemon = await startDaemon(dataDir);
    try {
      const shown = await runPostern(['actions', 'show', actionId, '--data-dir', dataDir]);
      expect(shown.code).toBe(1);
      expect(shown.stdout).toBe('');
      expect(shown.stderr).toContain(
        `postern: AUDIT_KEY_UNAVAILABLE: ${actionId}: its events are sealed in the journal for good: the broker run that recorded them ended before any audit key existed, and no unlock opens them.`,
      );
      expect(shown.stderr).toContain(`postern actions list --text ${actionId}`);
      expect(shown.stderr).not.toMatch(/unlock the vault|vault unlock|once unlocked|need the unlocked vault/);

      // What it points at reads, locked as the daemon is: the row the run's recovery closed.
      const listed = await runPostern(['actions', 'list', '--text', actionId, '--data-dir', dataDir]);
      expect(listed.code).toBe(0);
      expect(listed.stdout).toContain('[lane-a]  undecided  not_attempted/no_effect (BROKER_RESTARTED)');
    } finally {
      await daemon.process.stop();
    }
  }, 60_000);
});
