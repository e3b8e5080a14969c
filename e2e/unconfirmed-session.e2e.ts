import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { journalFileName } from '../broker/journal/index.js';
import { editSessionRow } from '../broker/testing/session-rows.js';
import { createVaultAsPerson } from '../tests/support/accepted-config.js';
import { DrillAgent } from '../tests/support/drill-agent.js';
import { op, waitFor } from '../tests/support/drill.js';
import { unlockAsPerson } from '../tests/support/person-decision.js';
import { repoRoot, startDaemon, type RunningDaemon } from '../tests/support/postern-process.js';
import { assertRendererBuilt, launchChromium, openOperatorPage } from './fixtures/browser.js';

/**
 * THREAT-MODEL 3 on the Sessions page, in real Chromium against the real daemon: the agent's pending session is set
 * to approved, "approved by" a person, in the journal file while no broker runs. The broker starts again locked; the
 * page shows the session as the file's word (unconfirmed, "the file says approved by …"), never as a person's
 * approval, and offers no Approve. The person unlocks through the page: the unlock's notice has the page list again,
 * and the session reads as its sealed events say, pending, with Approve. Waits are on the page, never sleeps.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'pe2e-unconf-'));
const dataDir = path.join(scratch, 'data');
const passphrase = 'e2e unconfirmed passphrase (test only)';
const forgedBy = 'person:ann (web, operator session)';

let browser: Browser;
let daemon: RunningDaemon | undefined;
let agent: DrillAgent | undefined;
beforeAll(async () => {
  assertRendererBuilt(repoRoot);
  browser = await launchChromium();
}, 30_000);
afterAll(async () => {
  await agent?.stop();
  await daemon?.process.stop('SIGTERM');
  await browser?.close();
  rmSync(scratch, { recursive: true, force: true });
}, 30_000);

describe('a session row edited while no broker ran, on the Sessions page', () => {
  it('reads as the file’s word while locked, with no Approve; after the unlock, as its events say', async () => {
    mkdirSync(dataDir, { mode: 0o700 });
    writeFileSync(
      path.join(dataDir, 'postern.yaml'),
      [
        'version: 1',
        'routes:',
        '  - name: docs',
        '    base_url: http://127.0.0.1:9/api',
        '    credential: docs-token',
        '    injection: bearer',
        '    approval: session',
        '',
      ].join('\n'),
    );
    await createVaultAsPerson(dataDir, passphrase);
    daemon = await startDaemon(dataDir);
    // The person unlocks in this run, so its events are sealed under a key a later unlock opens (a run that never had
    // one seals them for good, and its sessions read unverifiable).
    await unlockAsPerson(dataDir, passphrase);
    agent = await DrillAgent.start(dataDir, 'unconfirmed-e2e-agent');
    const listed = await waitFor(
      () => op(dataDir, 'sessions.list', {}),
      (r) => r.sessions.some((s) => s.status === 'pending' && s.connected),
      "the agent's pending session",
    );
    const id = listed.sessions.find((s) => s.status === 'pending')?.session_id ?? '';
    await daemon.process.stop('SIGTERM');

    // The agent's own connection to the file, while no broker holds it.
    editSessionRow(path.join(dataDir, journalFileName), id, (state) => ({
      ...state,
      status: 'approved',
      approved_by: forgedBy,
    }));

    daemon = await startDaemon(dataDir);
    await waitFor(
      () => op(dataDir, 'sessions.list', {}),
      (r) => r.sessions.some((s) => s.session_id === id && s.connected),
      'the agent reconnected',
    );
    const { page } = await openOperatorPage(browser, daemon.operatorUrl);
    await page.getByRole('tab', { name: /^Sessions/ }).click();
    const card = page.getByTestId(`session-${id}`);
    await card.waitFor();
    expect(await card.getAttribute('data-record')).toBe('unconfirmed');
    expect(await page.getByTestId(`session-${id}-status`).textContent()).toBe('unconfirmed');
    expect(await page.getByTestId(`session-${id}-file-says`).textContent()).toContain(
      `the file says approved by ${forgedBy}, unconfirmed`,
    );
    expect(await page.getByTestId(`session-${id}-explanation`).textContent()).toContain('nothing it says is acted on');
    expect(await card.getByRole('button', { name: 'Approve', exact: true }).count()).toBe(0);

    // The person unlocks in the page; the Sessions page lists again on the unlock's notice.
    await page.getByRole('tab', { name: /^Vault/ }).click();
    await page.getByLabel('Vault passphrase').fill(passphrase);
    await page.getByRole('button', { name: 'Unlock', exact: true }).click();
    await page
      .getByTestId('vault-state')
      .filter({ hasText: /^unlocked$/ })
      .waitFor();
    await page.getByRole('tab', { name: /^Sessions/ }).click();
    await page.locator(`[data-testid="session-${id}"][data-record="confirmed"]`).waitFor();
    expect(await page.getByTestId(`session-${id}-status`).textContent()).toBe('pending');
    expect(await page.getByTestId(`session-${id}-file-says`).count()).toBe(0);
    expect(await card.textContent()).not.toContain(forgedBy);
    await card.getByRole('button', { name: 'Approve', exact: true }).waitFor();
  }, 120_000);
});
