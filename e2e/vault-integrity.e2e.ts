import {
  chmodSync,
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyJournal } from '../broker/audit/verify-journal.js';
import { journalFileName } from '../broker/journal/index.js';
import { op, waitFor } from '../tests/support/drill.js';
import { DrillAgent } from '../tests/support/drill-agent.js';
import { repoRoot, startDaemon, type RunningDaemon } from '../tests/support/postern-process.js';
import { createVaultAsPerson } from '../tests/support/accepted-config.js';
import {
  assertRendererBuilt,
  launchChromium,
  openOperatorPage,
  secretFieldExpected,
  secretFieldShape,
  type OperatorPage,
} from './fixtures/browser.js';

/**
 * Issue #8 by clicks against the real headless daemon: unlock the vault, add a credential through
 * the form (a canary secret that must never come back: not in the DOM, not in any API response the
 * page saw, not in the daemon's logs at debug level, not in the journal), verify the journal's
 * integrity (banner ok), then tamper with one byte of one event's ciphertext in a copy of the data
 * directory and watch the banner name the first bad position. Waits are on the page or the
 * broker's state, never sleeps. Screenshots go to test-results/e2e/.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'pe2e-vault-'));
const screenshots = path.join(repoRoot, 'test-results', 'e2e');
const canary = 'CANARY-e2e-credential-9d41e7';
const passphrase = 'e2e vault passphrase (test only)';
const caseTimeoutMs = 90_000;
const dataDir = path.join(scratch, 'live');
const copyDir = path.join(scratch, 'tampered');

let browser: Browser;
beforeAll(async () => {
  assertRendererBuilt(repoRoot);
  mkdirSync(screenshots, { recursive: true });
  browser = await launchChromium();
}, 30_000);
afterAll(async () => {
  await browser?.close();
  rmSync(scratch, { recursive: true, force: true });
});

async function shoot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: path.join(screenshots, name), fullPage: true });
}

/** A routes file with one route and one SSH host, then a locked vault a person created over it (fast KDF, test only). */
async function lockedDataDir(): Promise<void> {
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
      '    approval: per_call',
      '    lanes:',
      "      - { methods: ['*'], path: '/docs/{doc}', lane: 'doc-{doc}' }",
      'ssh_hosts:',
      '  - { name: web-1, host: 10.0.0.5, user: deploy, credential: deploy-key, host_key: accept_new }',
      '',
    ].join('\n'),
  );
  await createVaultAsPerson(dataDir, passphrase);
}

/** Every /api/ response body the page received, to search for the canary. */
function recordApiResponses(page: Page): string[] {
  const bodies: string[] = [];
  page.on('response', (response) => {
    if (!new URL(response.url()).pathname.startsWith('/api/')) return;
    response.text().then(
      (text) => bodies.push(text),
      () => undefined,
    );
  });
  return bodies;
}

/** Every regular file under a directory (journal, its WAL, vault, config…). */
function filesUnder(root: string): string[] {
  return readdirSync(root).flatMap((name) => {
    const file = path.join(root, name);
    const stat = statSync(file);
    return stat.isDirectory() ? filesUnder(file) : stat.isFile() ? [file] : [];
  });
}

const openTab = async (page: Page, name: RegExp): Promise<void> => {
  await page.getByRole('tab', { name }).click();
};

describe('vault, credentials and integrity by clicks', () => {
  let daemon: RunningDaemon | undefined;
  let agent: DrillAgent | undefined;
  afterAll(async () => {
    await agent?.stop();
    await daemon?.process.stop('SIGTERM');
  }, 30_000);

  it(
    'unlock the vault, add a credential that is never shown back, verify the journal; routes and hosts edited, in force at once',
    async () => {
      await lockedDataDir();
      // Debug-level logs, so a secret that reached any log line would be on stderr.
      daemon = await startDaemon(dataDir, { env: { POSTERN_LOG_LEVEL: 'debug' } });
      // One agent process connecting journals its session: real event rows to verify (and later to tamper with).
      agent = await DrillAgent.start(dataDir, 'vault-e2e-agent');
      await waitFor(
        () => op(dataDir, 'sessions.list', {}),
        (r) => r.sessions.some((s) => s.connected),
        'the agent session',
      );

      const ui: OperatorPage = await openOperatorPage(browser, daemon.operatorUrl);
      const { page } = ui;
      const apiBodies = recordApiResponses(page);

      // Locked: the Approvals view says what that means, the Vault view offers the unlock form.
      await openTab(page, /^Approvals/);
      await page.getByTestId('vault-locked-hint').filter({ hasText: 'VAULT_LOCKED' }).waitFor();
      await openTab(page, /^Vault/);
      await page
        .getByTestId('vault-state')
        .filter({ hasText: /^locked$/ })
        .waitFor();
      const passphraseField = page.getByLabel('Vault passphrase');
      expect(await secretFieldShape(passphraseField)).toEqual(secretFieldExpected);
      await shoot(page, 'vault-locked.png');

      // A wrong passphrase is refused and changes nothing.
      await passphraseField.fill('not the passphrase');
      await page.getByRole('button', { name: 'Unlock', exact: true }).click();
      await page.getByTestId('vault-result').filter({ hasText: 'VAULT_PASSPHRASE_INVALID' }).waitFor();
      expect(await page.getByTestId('vault-state').textContent()).toBe('locked');
      expect(await passphraseField.inputValue()).toBe('');

      await passphraseField.fill(passphrase);
      await page.getByRole('button', { name: 'Unlock', exact: true }).click();
      await page
        .getByTestId('vault-state')
        .filter({ hasText: /^unlocked$/ })
        .waitFor();
      expect((await op(dataDir, 'vault.status', {})).state).toBe('unlocked');
      await page.getByRole('button', { name: 'Lock now' }).waitFor();
      await shoot(page, 'vault-unlocked.png');
      await openTab(page, /^Approvals/);
      await page.getByTestId('approvals-view').waitFor();
      expect(await page.getByTestId('vault-locked-hint').count()).toBe(0);

      // Add a credential through the form: the secret's field is masked (not a password field), emptied on submit.
      await openTab(page, /^Credentials/);
      const form = page.getByRole('form', { name: 'Add credential' });
      await form.getByLabel('Name', { exact: true }).fill('docs-token');
      await form.getByLabel(/^May be sent to/).fill('docs, 127.0.0.1');
      const secretField = form.getByLabel('Secret', { exact: true });
      expect(await secretFieldShape(secretField)).toEqual(secretFieldExpected);
      await secretField.fill(canary);
      await form.getByRole('button', { name: 'Add credential' }).click();
      await page.getByTestId('credential-added').filter({ hasText: 'Added docs-token' }).waitFor();
      const row = page.getByTestId('credential-docs-token');
      await row.filter({ hasText: 'bearer' }).waitFor();
      expect(await row.textContent()).toContain('docs, 127.0.0.1');
      expect(await secretField.inputValue()).toBe('');
      const listed = await op(dataDir, 'credentials.list', {});
      expect(listed.credentials).toEqual([
        expect.objectContaining({ name: 'docs-token', kind: 'bearer', bindings: ['docs', '127.0.0.1'] }),
      ]);
      await shoot(page, 'credentials.png');

      // Verify now: the banner turns green with the counts.
      const banner = page.getByTestId('integrity-banner');
      await banner.getByRole('button', { name: 'Verify now' }).click();
      await page.locator('[data-testid="integrity-banner"][data-state="ok"]').waitFor();
      const events = (await op(dataDir, 'status', {})).journal.events;
      expect(events).toBeGreaterThan(0);
      expect(await banner.textContent()).toMatch(/Journal verified/);
      expect(await page.getByTestId('integrity-detail').textContent()).toMatch(/^\d+ events? checked/);
      await shoot(page, 'integrity-ok.png');

      // Routes and SSH hosts, read-only, credentials by name.
      await openTab(page, /^Routes/);
      await page.getByTestId('route-docs').filter({ hasText: 'docs-token' }).waitFor();
      await page.getByTestId('ssh-host-web-1').filter({ hasText: 'deploy@10.0.0.5:22' }).waitFor();
      expect(await page.getByTestId('routes-source').textContent()).toContain(
        'apply at once while the vault is unlocked',
      );
      // Edit the file with the vault unlocked: add a route, remove the SSH host (with a second click); each is in force at once.
      const routeForm = page.getByRole('form', { name: 'Add route' });
      await routeForm.getByLabel('Route name').fill('status');
      await routeForm.getByLabel('Base URL').fill('https://status.example.com');
      await routeForm.getByLabel('Credential name').fill('docs-token');
      await routeForm.getByLabel('Approval').selectOption('none');
      await routeForm.getByLabel(/^Methods/).fill('GET');
      await routeForm.getByRole('button', { name: 'Add route to the file' }).click();
      await page.getByTestId('config-edit-result').filter({ hasText: 'In force now: routes docs, status' }).waitFor();
      await page.getByTestId('ssh-host-web-1').getByRole('button', { name: 'Remove…' }).click();
      await page.getByTestId('ssh-host-web-1').getByRole('button', { name: 'Remove web-1' }).click();
      await page.getByTestId('config-edit-result').filter({ hasText: 'SSH hosts (none)' }).waitFor();
      // In force now: the page lists the route it just added from the broker's own view, and no "applies at the next start" note.
      await page.getByTestId('route-status').waitFor();
      expect(await page.getByTestId('config-edited').count()).toBe(0);
      // The running broker runs the edits now, and the file holds them.
      expect((await op(dataDir, 'config.show', {})).routes.map((r) => r.name)).toEqual(['docs', 'status']);
      expect((await op(dataDir, 'config.show', {})).ssh_hosts).toEqual([]);
      const yamlText = readFileSync(path.join(dataDir, 'postern.yaml'), 'utf8');
      expect(yamlText).toMatch(/name: status/);
      expect(yamlText).not.toMatch(/web-1/);
      await shoot(page, 'routes.png');

      // The canary: not in the DOM, not in any response the page saw, not in the daemon's output, not in the journal.
      expect(await page.content()).not.toContain(canary);
      expect(apiBodies.length).toBeGreaterThan(0);
      for (const body of apiBodies) expect(body).not.toContain(canary);
      expect(ui.problems).toEqual([]);
      await ui.context.close();

      await agent.stop();
      agent = undefined;
      await daemon.process.stop('SIGTERM');
      const output = `${daemon.process.stdout}\n${daemon.process.stderr}`;
      expect(daemon.process.stderr).toMatch(/credential added \(operator\)/);
      expect(output).not.toContain(canary);
      expect(output).not.toContain(passphrase);
      daemon = undefined;
      for (const file of filesUnder(dataDir)) {
        const bytes = readFileSync(file);
        expect(bytes.includes(Buffer.from(canary)), `${file} holds the canary`).toBe(false);
        expect(bytes.includes(Buffer.from(passphrase)), `${file} holds the passphrase`).toBe(false);
      }
    },
    caseTimeoutMs,
  );

  it(
    'a copy of the data directory with one ciphertext byte flipped: the banner names the first bad position',
    async () => {
      // The live broker is stopped (previous case); copy its data directory as it is on disk.
      cpSync(dataDir, copyDir, {
        recursive: true,
        filter: (source) => statSync(source).isDirectory() || statSync(source).isFile(),
      });
      chmodSync(copyDir, 0o700);
      const journalPath = path.join(copyDir, journalFileName);
      // Fold any WAL into the main file, so the row's bytes are where we flip them.
      const folding = new Database(journalPath);
      folding.pragma('wal_checkpoint(TRUNCATE)');
      const target = folding
        .prepare(`SELECT seq, ciphertext FROM events WHERE ciphertext IS NOT NULL ORDER BY seq LIMIT 1`)
        .get() as { seq: number; ciphertext: Buffer };
      folding.close();
      const bytes = readFileSync(journalPath);
      const offset = bytes.indexOf(target.ciphertext);
      expect(offset).toBeGreaterThan(0);
      const at = offset + Math.floor(target.ciphertext.length / 2);
      bytes[at] = (bytes[at] as number) ^ 0x01;
      writeFileSync(journalPath, bytes);
      // The offline verifier agrees on where it breaks (the same function `postern audit verify` runs).
      expect(await verifyJournal({ dbPath: journalPath })).toMatchObject({
        ok: false,
        code: 'ROW_MODIFIED',
        seq: target.seq,
      });

      daemon = await startDaemon(copyDir, { env: { POSTERN_LOG_LEVEL: 'debug' } });
      const ui = await openOperatorPage(browser, daemon.operatorUrl);
      const { page } = ui;
      const banner = page.getByTestId('integrity-banner');
      await page.locator('[data-testid="integrity-banner"][data-state="unverified"]').waitFor();
      await banner.getByRole('button', { name: 'Verify now' }).click();
      await page.locator('[data-testid="integrity-banner"][data-state="failed"]').waitFor();
      expect(await page.getByTestId('integrity-headline').textContent()).toBe(
        'Journal integrity FAILED (ROW_MODIFIED)',
      );
      expect(await page.getByTestId('integrity-detail').textContent()).toContain(
        `first bad position: seq ${target.seq}`,
      );
      expect((await op(copyDir, 'audit.last', {})).last).toMatchObject({
        ok: false,
        code: 'ROW_MODIFIED',
        seq: target.seq,
      });
      await shoot(page, 'integrity-tampered.png');
      expect(ui.problems).toEqual([]);
      await ui.context.close();
    },
    caseTimeoutMs,
  );
});
