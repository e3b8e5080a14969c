import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApprovalCard } from '../broker/contract/index.js';
import { laneCards, postMarker, waitFor, type Drill } from '../tests/support/drill.js';
import { repoRoot, startDaemon } from '../tests/support/postern-process.js';
import { openOperatorPage } from './fixtures/browser.js';
import { browserOverDrill, tearDownDrillSpec } from './fixtures/drill-spec.js';

/**
 * The Approvals view as a person meets it when the broker stops under a waiting card, by keyboard and clicks: the real
 * daemon and agents (tests/support/drill.ts), three calls in one per-call lane. The header and the tab badge agree and
 * label the approved card that waits; keyboard focus follows Escape and a decision; SIGTERM while a card waits leaves
 * it plainly undecidable (its buttons disabled, no countdown, not on the badge) with the error said once; the next run
 * starts with the vault locked and the closed cards say what the plaintext records and how to read the rest.
 * Waits are on the page or the broker's state, never sleeps. Screenshots go to test-results/e2e/.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'pe2e-stopped-'));
const screenshots = path.join(repoRoot, 'test-results', 'e2e');
const doc = 'uia';
const lane = `doc-${doc}`;

let browser: Browser;
let drill: Drill | undefined;
beforeAll(async () => {
  ({ browser, drill } = await browserOverDrill({ scratch, screenshots, name: 'stopped', ttlSeconds: 120 }));
}, 90_000);
afterAll(async () => {
  await tearDownDrillSpec(drill, browser, scratch);
}, 30_000);

const cardOf = (page: Page, card: ApprovalCard): Locator =>
  page.getByRole('article', { name: `Ticket #${card.ticket}`, exact: true });
const showing = (locator: Locator, text: string | RegExp): Promise<void> => locator.filter({ hasText: text }).waitFor();

/** Posts `marker` and waits until the lane lists `count` cards, the newest pending; returns that card. */
async function sendCard(d: Drill, agent: Drill['p1'], marker: string, count: number): Promise<ApprovalCard> {
  void postMarker(agent, doc, marker);
  const cards = await waitFor(
    () => laneCards(d.dataDir, lane),
    (c) => c.length === count && c.at(-1)?.state === 'pending',
    `${count} cards in ${lane}`,
  );
  return cards.at(-1) as ApprovalCard;
}

describe('the Approvals view when the broker stops under a waiting card', () => {
  it('labels the badge difference, returns focus, goes undecidable while stopped, and after a locked restart says why', async () => {
    if (drill === undefined) throw new Error('the drill did not start');
    const d = drill;
    const a = await sendCard(d, d.p1, 'A', 1);
    const b = await sendCard(d, d.p2, 'B', 2);
    const c = await sendCard(d, d.p1, 'C', 3);
    const { page, problems, context } = await openOperatorPage(browser, d.daemon.operatorUrl);
    await page.getByRole('tab', { name: /^Approvals/ }).click();
    await cardOf(page, c).waitFor();

    // Approving C (behind B, behind A) leaves it in its lane: the header says so beside what needs a person, and the
    // badge counts exactly the "need you".
    await cardOf(page, c).getByRole('button', { name: 'Approve', exact: true }).click();
    await showing(page.getByTestId('approvals-count'), `2 need you · 1 approved, waiting for #${b.ticket}`);
    expect(await page.getByTestId('tab-approvals-badge').textContent()).toBe('2');

    // Approving A from the keyboard: its Approve button goes, and focus moves to the next card to decide (B).
    await cardOf(page, a).getByRole('button', { name: 'Approve', exact: true }).focus();
    await page.keyboard.press('Enter');
    await page.waitForFunction((id) => document.activeElement?.id === id, `ticket-${b.ticket}`);
    await showing(page.getByTestId('approvals-count'), `1 needs you · 1 approved, waiting for #${b.ticket}`);

    // Escape closes B's reject form and gives focus back to its Reject… button.
    const rejectB = cardOf(page, b).getByRole('button', { name: 'Reject…' });
    await rejectB.click();
    await page.getByRole('textbox', { name: `Why reject #${b.ticket}?` }).waitFor();
    await page.keyboard.press('Escape');
    await rejectB.waitFor();
    expect(await rejectB.evaluate((el) => el === document.activeElement)).toBe(true);

    // The broker stops while B waits for a decision.
    const problemsBeforeStop = problems.length;
    expect((await d.daemon.process.stop('SIGTERM')).code).toBe(0);
    await page.getByTestId('approvals-stopped').waitFor();
    await showing(page.getByTestId(`card-${b.ticket}-status`), 'The broker stopped: this card cannot be decided');
    await showing(
      page.getByTestId(`card-${b.ticket}-status`),
      'A restart closes it unsent (not_attempted, BROKER_RESTARTED)',
    );
    expect(await page.getByTestId(`card-${b.ticket}-expiry`).count()).toBe(0);
    for (const name of ['Approve', 'Reject…'])
      expect(await cardOf(page, b).getByRole('button', { name, exact: true }).isDisabled()).toBe(true);
    expect(await cardOf(page, c).getByRole('button', { name: 'Cancel…' }).isDisabled()).toBe(true);
    expect(await page.getByTestId('tab-approvals-badge').count()).toBe(0);
    await showing(page.getByTestId('approvals-count'), 'the broker stopped: none can be decided');
    // Said once, by the shell: the Approvals panel, an empty credential-requests section and the cards stay quiet.
    expect(await page.getByTestId('approvals-error').count()).toBe(0);
    expect(await page.getByTestId('credential-requests').count()).toBe(0);
    expect(await page.locator('main').innerText()).not.toContain('BROKER_UNREACHABLE');
    await page.getByTestId('integrity-error').filter({ hasText: 'BROKER_UNREACHABLE' }).waitFor();
    expect((await page.locator('body').innerText()).split('BROKER_UNREACHABLE')).toHaveLength(2);
    await page.screenshot({ path: path.join(screenshots, 'approvals-broker-stopped.png'), fullPage: true });

    // The next run starts with the vault locked (no passphrase file); its recovery closes B and C undecided.
    d.daemon = await startDaemon(d.dataDir, { port: d.daemon.port });
    await page.getByTestId('sign-in-view').waitFor();
    await page.getByTestId('sign-in-url').fill(d.daemon.operatorUrl);
    await page.getByTestId('sign-in-code').fill(d.daemon.signInCode);
    await page.getByTestId('sign-in-submit').click();
    await page.getByRole('tab', { name: /^Approvals/ }).click();
    for (const closed of [b, c]) {
      const sealed = page.getByTestId(`closed-${closed.ticket}-sealed`);
      await showing(sealed, 'not_attempted (BROKER_RESTARTED)');
      await showing(sealed, 'unlock to read its events');
      expect(await sealed.getByRole('link', { name: 'unlock' }).getAttribute('href')).toBe('#/vault');
    }
    expect(await page.getByTestId('closed-cards').innerText()).not.toContain('AUDIT_KEY_UNAVAILABLE');
    await page.screenshot({ path: path.join(screenshots, 'approvals-restarted-locked.png'), fullPage: true });

    // The action's own page says the same: the outcome the plaintext records, and the way to read its events.
    await page.evaluate((id) => (window.location.hash = `#/action/${id}`), b.action_id);
    await showing(page.getByTestId('action-detail-plain-outcome'), 'not_attempted (BROKER_RESTARTED)');
    await showing(page.getByTestId('action-detail-sealed'), 'unlock to read its events');
    expect(await page.getByTestId('action-detail-error').count()).toBe(0);
    await page.screenshot({ path: path.join(screenshots, 'action-detail-sealed.png'), fullPage: true });
    // Nothing before the stop. The stop itself: a request in flight at the SIGTERM is reset or its chunked answer cut
    // short (the change feed's stream), the polls during the outage are refused.
    expect(problems.slice(0, problemsBeforeStop)).toEqual([]);
    const outage = /net::ERR_(CONNECTION_(REFUSED|RESET)|INCOMPLETE_CHUNKED_ENCODING)/;
    expect(problems.slice(problemsBeforeStop).filter((p) => !outage.test(p))).toEqual([]);
    await context.close();
  }, 120_000);
});
