import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot, signInCodeFor, startDaemon, type RunningDaemon } from '../tests/support/postern-process.js';
import { op } from '../tests/support/drill.js';
import { typeSignInCode } from './fixtures/browser.js';
import { browserOverLockedDataDir, tearDownSpec } from './fixtures/data-dir.js';

/**
 * "Confirm it is you" in real Chromium: a tab signed in with the printed URL and code only (which a program that starts
 * its own daemon reads too: tests/operator-proof.test.ts performs that attack) reads, and its first decision asks for
 * the vault passphrase in a dialog. A wrong one is said there and decides nothing; the right one proves the tab and the
 * decision goes through; the tab's next decision does not ask again. Cancelling decides nothing.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'pe2e-proof-'));
const screenshots = path.join(repoRoot, 'test-results', 'e2e');
const passphrase = 'e2e person proof passphrase (test only)';
const dataDir = path.join(scratch, 'data');
const passphraseFile = path.join(scratch, 'pass');

let browser: Browser;
let daemon: RunningDaemon | undefined;
beforeAll(async () => {
  browser = await browserOverLockedDataDir({ repoRoot, screenshots, dataDir, passphrase, passphraseFile });
  daemon = await startDaemon(dataDir, { person: { passphraseFile } });
}, 30_000);
afterAll(() => tearDownSpec(daemon, browser, scratch));

describe('a tab signed in with the code only', () => {
  it('asks for the vault passphrase at its first decision, says a wrong one, decides with the right one, and asks once', async () => {
    if (daemon === undefined) throw new Error('the daemon did not start');
    const context = await browser.newContext({ viewport: { width: 1100, height: 900 } });
    context.setDefaultTimeout(15_000);
    const page = await context.newPage();
    await page.goto(daemon.operatorUrl);
    // The person leaves the passphrase field empty: the tab reads.
    await typeSignInCode(page, signInCodeFor(daemon.operatorUrl));
    await page.getByRole('tab', { name: /^Vault/ }).click();

    // Cancelled: nothing decided.
    await page.getByRole('button', { name: 'Lock now' }).click();
    const dialog = page.getByTestId('proof-dialog');
    await dialog.waitFor();
    expect(await dialog.getByTestId('proof-why').textContent()).toContain('vault.lock is a decision');
    await page.screenshot({ path: path.join(screenshots, 'person-proof-dialog.png'), fullPage: true });
    await dialog.getByTestId('proof-cancel').click();
    await dialog.waitFor({ state: 'detached' });
    expect((await op(dataDir, 'vault.status', {})).state).toBe('unlocked');

    // A wrong passphrase is said in the dialog, which stays; the right one proves the tab and the lock goes through.
    await page.getByRole('button', { name: 'Lock now' }).click();
    await dialog.getByTestId('proof-passphrase').fill('not the passphrase');
    await dialog.getByTestId('proof-submit').click();
    const error = dialog.getByTestId('proof-error');
    await error.waitFor();
    expect(await error.getAttribute('data-code')).toBe('VAULT_PASSPHRASE_INVALID');
    expect((await op(dataDir, 'vault.status', {})).state).toBe('unlocked');
    await dialog.getByTestId('proof-passphrase').fill(passphrase);
    await dialog.getByTestId('proof-submit').click();
    await dialog.waitFor({ state: 'detached' });
    await page.locator('[data-testid="vault-state"]', { hasText: /^locked$/ }).waitFor();
    expect((await op(dataDir, 'vault.status', {})).state).toBe('locked');
    // The page holds no passphrase: the field is gone and nothing of it is in the document.
    expect(await page.content()).not.toContain(passphrase);

    // The tab is proven for this run: unlocking in the page and locking again asks nothing more.
    await page.getByTestId('vault-passphrase').fill(passphrase);
    await page.getByRole('button', { name: 'Unlock' }).click();
    await page.getByTestId('vault-lock').waitFor();
    await page.getByRole('button', { name: 'Lock now' }).click();
    await page.locator('[data-testid="vault-state"]', { hasText: /^locked$/ }).waitFor();
    expect(await dialog.count()).toBe(0);
    await context.close();
  }, 60_000);
});
