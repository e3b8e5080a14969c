import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acceptedConfigDirName, acceptedConfigFileName } from '../broker/host/config-integrity.js';
import { op } from '../tests/support/drill.js';
import { repoRoot, startDaemon, type RunningDaemon } from '../tests/support/postern-process.js';
import { browserOverLockedDataDir, tearDownSpec } from './fixtures/data-dir.js';
import { openOperatorPage } from './fixtures/browser.js';

/**
 * Issue #14, config integrity, by clicks against the real headless daemon: postern.yaml accepted
 * on first use, then rewritten outside Postern (a route re-pointed, its approval dropped, an SSH host added). The
 * Routes & hosts view shows the change as a card with the fields that differ (under a command rule with a `*`, the
 * note saying what it matches); the broker keeps the accepted route; Accept (a person's decision on the signed-in
 * operator UI) records it for the next start. Waits are on the page or the broker's state, never sleeps.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'pe2e-config-'));
const screenshots = path.join(repoRoot, 'test-results', 'e2e');
const passphrase = 'e2e config passphrase (test only)';
const dataDir = path.join(scratch, 'data');
const passphraseFile = path.join(scratch, 'pass');

const routesYaml = (port: number, approval: string, more: readonly string[] = []): string =>
  [
    'version: 1',
    'routes:',
    '  - name: docs',
    `    base_url: http://127.0.0.1:${port}/api`,
    '    credential: docs-token',
    '    injection: bearer',
    `    approval: ${approval}`,
    ...more,
    '',
  ].join('\n');

/** An SSH host added with a command rule whose `*` the card explains, and one without a `*`. */
const sshHostYaml = [
  'ssh_hosts:',
  '  - name: web',
  '    host: 10.0.0.5',
  '    user: deploy',
  '    credential: web-key',
  '    host_key: accept_new',
  '    approval: per_call',
  '    commands:',
  "      - { command: 'echo *' }",
  "      - { command: 'uptime' }",
];

let browser: Browser;
let daemon: RunningDaemon | undefined;
beforeAll(async () => {
  // The file present when the person creates the vault: trusted on first use then.
  browser = await browserOverLockedDataDir({
    repoRoot,
    screenshots,
    dataDir,
    passphrase,
    passphraseFile,
    configText: routesYaml(9, 'per_call'),
  });
}, 30_000);
afterAll(() => tearDownSpec(daemon, browser, scratch));

async function shoot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: path.join(screenshots, name), fullPage: true });
}

describe('a change of postern.yaml made outside Postern, by clicks', () => {
  it('shows the pending change with its diff, keeps the accepted route, and Accept records it for the next start', async () => {
    daemon = await startDaemon(dataDir, { person: { passphraseFile } });
    expect(await op(dataDir, 'config.pending', {})).toMatchObject({
      trust: 'verified',
      change: null,
      accepted: { how: 'first_use' },
    });
    await daemon.process.stop('SIGTERM');

    // As an agent would: re-point the route and drop its approval, add an SSH host, then wait for a restart.
    writeFileSync(path.join(dataDir, 'postern.yaml'), routesYaml(19, 'none', sshHostYaml));
    daemon = await startDaemon(dataDir, { person: { passphraseFile } });
    const { page, problems } = await openOperatorPage(browser, daemon.operatorUrl);
    await page.getByRole('tab', { name: /^Routes/ }).click();

    const card = page.getByTestId('config-pending');
    await card.waitFor();
    const baseUrl = page.getByTestId('config-change-route-docs-base_url');
    expect(await baseUrl.locator('del').textContent()).toBe('http://127.0.0.1:9/api');
    expect(await baseUrl.locator('ins').textContent()).toBe('http://127.0.0.1:19/api');
    const approval = page.getByTestId('config-change-route-docs-approval');
    expect(await approval.locator('del').textContent()).toBe('per_call');
    expect(await approval.locator('ins').textContent()).toBe('none');
    // The command rule with a `*` says under it what the `*` matches (config.pending's note); the exact one says nothing.
    const starRule = page.getByTestId('config-change-host-web-commands[0]');
    expect(await starRule.locator('ins').textContent()).toContain('echo *');
    const fields = (await op(dataDir, 'config.pending', {})).change?.ssh_hosts.find((h) => h.name === 'web')?.fields;
    const note = fields?.find((f) => f.field === 'commands[0]')?.note ?? '';
    expect(note).toContain('never takes a space or shell syntax');
    expect(await page.getByTestId('config-change-host-web-commands[0]-note').textContent()).toBe(note);
    expect(await page.getByTestId('config-change-host-web-commands[1]').count()).toBe(1);
    expect(await page.getByTestId('config-change-host-web-commands[1]-note').count()).toBe(0);
    // The running broker keeps what a person accepted.
    await page.getByTestId('route-docs').filter({ hasText: 'http://127.0.0.1:9/api' }).waitFor();
    expect(await page.getByTestId('route-docs').textContent()).toContain('per_call');
    await shoot(page, 'config-pending.png');

    await card.getByRole('button', { name: 'Accept change' }).click();
    await card.waitFor({ state: 'detached' });
    // Accepted by a person with the vault unlocked: in force at once, no restart.
    await page.getByTestId('route-docs').filter({ hasText: 'http://127.0.0.1:19/api' }).waitFor();
    expect(await page.getByTestId('config-restart-needed').count()).toBe(0);
    const pending = await op(dataDir, 'config.pending', {});
    expect(pending).toMatchObject({
      change: null,
      restart_needed: false,
      accepted: { how: 'accepted', by: expect.stringContaining('(web, passphrase in the page)') },
    });
    expect((await op(dataDir, 'config.show', {})).routes).toEqual([
      expect.objectContaining({ base_url: 'http://127.0.0.1:19/api', approval: 'none' }),
    ]);
    const applied = (await op(dataDir, 'activity.list', {})).events.filter((e) => e.kind === 'CONFIG_APPLIED');
    // The file trusted on first use when the vault was created, then the person's acceptance.
    expect(applied).toEqual([
      expect.objectContaining({ summary: expect.stringMatching(/^first_use by trust on first use: sha256:/) }),
      expect.objectContaining({ summary: expect.stringContaining(pending.accepted?.digest ?? '-') }),
    ]);
    expect(problems).toEqual([]);
    await page.context().close();
    await daemon.process.stop('SIGTERM');

    daemon = await startDaemon(dataDir, { person: { passphraseFile } });
    expect((await op(dataDir, 'config.show', {})).routes).toEqual([
      expect.objectContaining({ base_url: 'http://127.0.0.1:19/api', approval: 'none' }),
    ]);
  }, 90_000);

  it('while no accepted copy exists every view carries a banner that routes are refused, leading to the card that accepts it', async () => {
    await daemon?.process.stop('SIGTERM');
    // As an agent would: delete the accepted copy. The directory has run before, so nothing is trusted as found.
    rmSync(path.join(dataDir, acceptedConfigDirName, acceptedConfigFileName));
    daemon = await startDaemon(dataDir, { person: { passphraseFile } });
    expect(await op(dataDir, 'config.pending', {})).toMatchObject({ trust: 'untrusted', accept_applies: 'now' });
    const { page, problems } = await openOperatorPage(browser, daemon.operatorUrl);

    // On Status, which shows nothing wrong of its own: the banner names the refusal and why, as sentences.
    await page.getByTestId('status-data-dir').waitFor();
    const banner = page.getByTestId('config-banner');
    await banner.waitFor();
    expect(await page.getByTestId('config-banner-headline').textContent()).toBe(
      'Every route and SSH host is refused: postern.yaml is not accepted.',
    );
    expect(await page.getByTestId('config-banner-detail').textContent()).toMatch(
      /^There is no accepted copy of postern\.yaml, yet this data directory has run before .*before anything is sent\.$/,
    );
    await shoot(page, 'config-untrusted-banner.png');
    await page.getByTestId('config-banner-next').click();

    const routes = page.getByTestId('routes-view');
    await routes.waitFor();
    expect(await page.getByTestId('routes-heading-words').textContent()).toBe(
      'as loaded, all refused until postern.yaml is accepted',
    );
    // The refusal's reason and the next sentence are two sentences, not one run together.
    expect(await page.getByTestId('config-untrusted').textContent()).toContain(
      'before anything is sent. Every route and host is refused',
    );
    const card = page.getByTestId('config-pending');
    await card.getByTestId('config-change-route-docs').waitFor();
    // The whole file is shown against nothing: a setting the file never names (a default) is no change.
    expect(await card.getByTestId('config-change-section-operator').count()).toBe(0);

    await card.getByRole('button', { name: 'Accept change' }).click();
    // The file this run loaded, accepted by a person: in force at once, the banner gone, the heading says so.
    await banner.waitFor({ state: 'detached' });
    await page
      .getByTestId('routes-heading-words')
      .filter({ hasText: /^as the broker runs them now$/ })
      .waitFor();
    expect(await op(dataDir, 'config.pending', {})).toMatchObject({ trust: 'verified', change: null });
    expect(problems).toEqual([]);
    await page.context().close();
  }, 90_000);
});
