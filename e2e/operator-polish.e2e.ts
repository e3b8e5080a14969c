import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeDrill, laneCards, op, openDrill, waitFor, type Drill } from '../tests/support/drill.js';
import { DrillAgent } from '../tests/support/drill-agent.js';
import { repoRoot, startDaemon, type RunningDaemon } from '../tests/support/postern-process.js';
import { assertRendererBuilt, launchChromium, openOperatorPage } from './fixtures/browser.js';

/**
 * Issue #16's polish by clicks, in real Chromium at an 800 px wide window against real daemons: the
 * tab bar stays one line (badge included), a per-call agent's session offers no Approve that would
 * do nothing, the vault banner of an empty data directory says to create a vault, and a person's
 * rejection shows in Metrics as a decision, not a credential_injection failure. Every wait is on the
 * page or on the broker's state; none is a sleep. Screenshots go to test-results/e2e/.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'pe2e-polish-'));
const screenshots = path.join(repoRoot, 'test-results', 'e2e');
const narrow = { width: 800, height: 900 };
const caseTimeoutMs = 90_000;

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

const showing = (locator: Locator, text: string): Promise<void> => locator.filter({ hasText: text }).waitFor();

/** Every tab's box, and the tab list's: one line means one top edge and a list no taller than its tallest tab. */
async function expectOneLineTabBar(page: Page): Promise<void> {
  const tabs = page.getByRole('tab');
  const count = await tabs.count();
  expect(count).toBeGreaterThanOrEqual(8);
  const boxes = [];
  for (let i = 0; i < count; i += 1) {
    const box = await tabs.nth(i).boundingBox();
    if (box === null) throw new Error(`tab ${i} has no box`);
    boxes.push(box);
  }
  const tops = boxes.map((b) => Math.round(b.y));
  expect(new Set(tops).size, `tab tops ${tops.join(',')}`).toBe(1);
  const list = await page.getByRole('tablist').boundingBox();
  if (list === null) throw new Error('the tab list has no box');
  const tallest = Math.max(...boxes.map((b) => b.height));
  // The list may carry a thin horizontal scrollbar when the tabs do not fit; never a second row.
  expect(list.height).toBeLessThan(tallest * 1.5);
  // The tab bar stays within the window; what does not fit scrolls inside it.
  expect(list.x + list.width).toBeLessThanOrEqual(narrow.width + 1);
}

describe('on an empty data directory (no vault yet)', () => {
  let daemon: RunningDaemon | undefined;
  const dataDir = path.join(scratch, 'empty');
  beforeAll(async () => {
    daemon = await startDaemon(dataDir);
  }, 60_000);
  afterAll(() => daemon?.process.stop(), 30_000);

  it(
    'the Status banner says to create a vault, with the command for this data directory, and the tab bar is one line at 800 px',
    async () => {
      if (daemon === undefined) throw new Error('the daemon did not start');
      const { page, problems, context } = await openOperatorPage(browser, daemon.operatorUrl);
      await page.setViewportSize(narrow);
      const banner = page.getByTestId('status-vault-lock-banner');
      await showing(banner, 'Create a vault');
      expect(await banner.getAttribute('data-state')).toBe('uninitialized');
      expect(await banner.textContent()).toContain('No vault yet');
      expect(await banner.getByTestId('vault-create-command').textContent()).toBe(
        `postern vault init --data-dir ${dataDir}`,
      );
      // The step is also a link to the guided first run, which creates the vault in the page.
      expect(await banner.getByRole('link', { name: 'Create a vault' }).getAttribute('href')).toBe('#/welcome');
      await expectOneLineTabBar(page);
      await shoot(page, 'polish-status-no-vault-800.png');

      // The Vault tab says the same next step.
      await page.getByRole('tab', { name: /^Vault/ }).click();
      await showing(page.getByTestId('vault-uninitialized'), 'Create a vault');
      expect(problems).toEqual([]);
      await context.close();
    },
    caseTimeoutMs,
  );

  it(
    'in the tab list End moves to the last tab and Home to the first (WAI-ARIA tabs), selected and focused',
    async () => {
      if (daemon === undefined) throw new Error('the daemon did not start');
      const { page, problems, context } = await openOperatorPage(browser, daemon.operatorUrl);
      const tabs = page.getByRole('tab');
      const last = tabs.last();
      const first = tabs.first();
      await page.getByRole('tab', { name: /^Activity/ }).click();
      await page.keyboard.press('End');
      await last.and(page.locator(':focus')).waitFor();
      expect(await last.getAttribute('aria-selected')).toBe('true');
      expect(await last.textContent()).toContain('Routes & hosts');
      await page.keyboard.press('Home');
      await first.and(page.locator(':focus')).waitFor();
      expect(await first.getAttribute('aria-selected')).toBe('true');
      expect(await first.textContent()).toContain('Approvals');
      expect(problems).toEqual([]);
      await context.close();
    },
    caseTimeoutMs,
  );
});

describe('with a per-call route and session approval required (the drill)', () => {
  let drill: Drill | undefined;
  beforeAll(async () => {
    drill = await openDrill(scratch, 'drill', 120);
  }, 90_000);
  afterAll(() => closeDrill(drill), 30_000);

  it(
    'a per-call agent is not offered an Approve that would do nothing; a rejection shows in Metrics as a decision, not a failure',
    async () => {
      const d = drill;
      if (d === undefined) throw new Error('the drill did not start');
      const known = new Set((await op(d.dataDir, 'sessions.list', {})).sessions.map((s) => s.session_id));
      const { page, problems, context } = await openOperatorPage(browser, d.daemon.operatorUrl);
      await page.setViewportSize(narrow);
      const p3 = await DrillAgent.start(d.dataDir, 'polish-p3');
      try {
        const listed = await waitFor(
          () => op(d.dataDir, 'sessions.list', {}),
          (r) => r.sessions.some((s) => !known.has(s.session_id) && s.status === 'pending' && s.connected),
          'the new agent session, pending',
        );
        const session = listed.sessions.find((s) => !known.has(s.session_id));
        if (session === undefined) throw new Error('no new session');

        // Sessions: the broker's status is pending, but nothing waits for it: no Approve, and the card says why.
        await page.getByRole('tab', { name: /^Sessions/ }).click();
        const card = page.getByTestId(`session-${session.session_id}`);
        const status = card.getByTestId(`session-${session.session_id}-status`);
        await showing(status, 'no approval needed');
        expect(await status.getAttribute('data-status')).toBe('pending');
        expect(await card.getByTestId(`session-${session.session_id}-explanation`).textContent()).toContain(
          'approving this process would change nothing',
        );
        expect(await card.getByRole('button', { name: 'Approve', exact: true }).count()).toBe(0);
        // Revoke stays, inside the card.
        const revoke = card.getByRole('button', { name: 'Revoke…' });
        const [cardBox, revokeBox] = [await card.boundingBox(), await revoke.boundingBox()];
        if (cardBox === null || revokeBox === null) throw new Error('no box for the session card or its button');
        expect(revokeBox.x).toBeGreaterThanOrEqual(cardBox.x);
        expect(revokeBox.x + revokeBox.width).toBeLessThanOrEqual(cardBox.x + cardBox.width);
        await shoot(page, 'polish-sessions-per-call-800.png');

        // A per-call call of that pending session gets its card at once; the Approvals badge shows and the tab bar stays one line.
        const call = p3.call('http_request', {
          route: 'docs',
          method: 'POST',
          path: '/docs/polish',
          body: '{"marker":"polish:p3"}',
          timeout_ms: 120_000,
        });
        const answer = call.reply.then(
          (reply) => reply,
          (error: unknown) => ({ isError: true, error: String(error) }),
        );
        const [pending] = await waitFor(
          () => laneCards(d.dataDir, 'doc-polish'),
          (c) => c.length === 1 && c[0]?.state === 'pending',
          'the per-call card',
        );
        if (pending === undefined) throw new Error('no card');
        await page.getByTestId('tab-approvals-badge').waitFor();
        await expectOneLineTabBar(page);

        // A person rejects it by clicks.
        await page.getByRole('tab', { name: /^Approvals/ }).click();
        const article = page.getByRole('article', { name: `Ticket #${pending.ticket}`, exact: true });
        await article.getByRole('button', { name: 'Reject…' }).click();
        await article.getByRole('textbox').fill('polish check');
        await article.getByRole('button', { name: `Reject #${pending.ticket}` }).click();
        expect(await answer).toMatchObject({ isError: true });

        // Metrics: the rejection is a decision; credential_injection / not_attempted holds none of it.
        const metrics = await op(d.dataDir, 'metrics', {});
        const rejected = metrics.decisions.find((x) => x.decision === 'rejected')?.count ?? 0;
        expect(rejected).toBeGreaterThanOrEqual(1);
        expect(metrics.by_code.map((c) => c.code)).not.toContain('APPROVAL_DENIED');
        await page.getByRole('tab', { name: /^Metrics/ }).click();
        await page.locator(`[data-testid="decision-rejected"][data-count="${rejected}"]`).waitFor();
        expect(await page.getByTestId('cell-credential_injection-not_attempted').getAttribute('data-count')).toBe('0');
        const rate = page.getByTestId('rate-decision-rejected');
        await rate.waitFor();
        expect(Number(await rate.getAttribute('data-total'))).toBeGreaterThanOrEqual(1);
        expect(await rate.locator('svg polyline').count()).toBe(1);
        await expectOneLineTabBar(page);
        await shoot(page, 'polish-metrics-decisions-800.png');

        // Routes: a route just written to the file shows on the page, with when it applies.
        await page.getByRole('tab', { name: /^Routes/ }).click();
        const form = page.getByRole('form', { name: 'Add route' });
        await form.getByLabel('Route name').fill('status');
        await form.getByLabel('Base URL').fill('https://status.example.com');
        await form.getByLabel('Credential name').fill('drill-token');
        await form.getByLabel('Approval').selectOption('none');
        await form.getByRole('button', { name: 'Add route to the file' }).click();
        await page.getByTestId('config-edit-result').waitFor();
        const edit = await page.getByTestId('config-edit-result').textContent();
        if (edit?.includes('At the next start') === true) {
          // The broker runs what it loaded; the page says what the file holds now and when it applies.
          await showing(page.getByTestId('config-file-now'), 'applies at the next start');
          await page.getByTestId('file-added-status').waitFor();
        } else {
          // A broker that applies an edit at once lists the route itself.
          await page.getByTestId('route-status').waitFor();
        }
        await shoot(page, 'polish-routes-written-800.png');
        expect(problems).toEqual([]);
      } finally {
        await p3.stop();
        await context.close();
      }
    },
    caseTimeoutMs,
  );
});
