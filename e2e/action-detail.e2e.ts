import path from 'node:path';
import type { Locator, Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import type { ApprovalCard } from '../broker/contract/index.js';
import { dateTime } from '../broker/contract/time-words.js';
import { laneCards, op, postMarker, waitFor, type Drill } from '../tests/support/drill.js';
import { repoRoot } from '../tests/support/postern-process.js';
import { handSessionToNextLoad, openOperatorPage, type OperatorPage } from './fixtures/browser.js';
import { browserOverDrillForFile } from './fixtures/drill-spec.js';

/**
 * An action's detail in Chromium on the real daemon (tests/support/drill.ts: a per-call route on an arrival-log
 * remote, two agent processes through `postern mcp`): opened from an Approvals card, its address names Approvals, so
 * after a reload its back link still returns there; and an action the remote holds in flight reads as running with no
 * outcome yet (not the dispatch's provisional unknown; its status line: dispatched, waiting for its outcome), then
 * shows its outcome once the remote answers; its card's expiry in the chronology is in the page's zone, never ISO.
 * Every wait is on the page or the broker's state; none is a sleep. Screenshots go to test-results/e2e/.
 */
const screenshots = path.join(repoRoot, 'test-results', 'e2e');
const spec = browserOverDrillForFile({ scratchPrefix: 'pe2e-detail-', screenshots, name: 'detail', ttlSeconds: 120 });
const theDrill = spec.drill;
const caseTimeoutMs = 60_000;

const detailOf = (page: Page): Locator => page.getByTestId('action-detail');
const hashOf = (page: Page): string => new URL(page.url()).hash;

/** The agent's POST of `marker` to /docs/`doc` and its card, once pending in its lane. */
async function cardFor(d: Drill, doc: string, marker: string) {
  const answer = postMarker(d.p1, doc, marker);
  const [card] = await waitFor(
    () => laneCards(d.dataDir, `doc-${doc}`),
    (c) => c.length === 1 && c[0]?.state === 'pending',
    `the card of ${marker}`,
  );
  return { answer, card: card as ApprovalCard };
}

/** Signs in, opens the Approvals tab and, from the card, the action's detail. */
async function openDetailFromCard(d: Drill, card: ApprovalCard): Promise<OperatorPage> {
  const opened = await openOperatorPage(spec.browser(), d.daemon.operatorUrl);
  const { page } = opened;
  await page.getByRole('tab', { name: /^Approvals/ }).click();
  await page.getByTestId(`card-${card.ticket}-detail`).click();
  await detailOf(page).getByTestId('action-chronology').waitFor();
  return opened;
}

describe('an Action detail opened from an Approvals card', () => {
  it(
    'names Approvals in its address, so after a reload its back link still returns to Approvals',
    async () => {
      const d = theDrill();
      const { answer, card } = await cardFor(d, 'origin', 'origin:p1');
      const { page, problems, context } = await openDetailFromCard(d, card);
      expect(hashOf(page)).toBe(`#/action/${card.action_id}?from=approvals`);
      const back = detailOf(page).getByRole('link', { name: '← Approvals' });
      expect(await back.getAttribute('href')).toBe('#/approvals');

      // A new document reads only the address: it still knows where the detail was opened.
      await handSessionToNextLoad(page, d.daemon.operatorUrl);
      await page.reload();
      await detailOf(page).getByTestId('action-chronology').waitFor();
      expect(await detailOf(page).getByTestId('action-detail-id').textContent()).toBe(card.action_id);
      expect(await page.getByRole('tab', { name: /^Approvals/ }).getAttribute('aria-selected')).toBe('true');
      await back.click();
      await page.getByRole('article', { name: `Ticket #${card.ticket}`, exact: true }).waitFor();
      expect(hashOf(page)).toBe('#/approvals');
      expect(await page.getByRole('tab', { name: /^Approvals/ }).getAttribute('aria-selected')).toBe('true');

      // A forged origin is none: the back link returns to the tab shown — Status here, not the Approvals the detail
      // was opened from before — and the page shows nothing of it. Name-shaped words an address could carry as a tab.
      await page.getByRole('tab', { name: /^Status/ }).click();
      expect(hashOf(page)).toBe('#/status');
      for (const forged of ['nonsense', 'constructor', '%3Cb%3Eevil%3C%2Fb%3E']) {
        await page.evaluate(
          ([id, from]) => {
            window.location.hash = `#/action/${id}?from=${from}`;
          },
          [card.action_id, forged] as const,
        );
        await detailOf(page).getByTestId('action-chronology').waitFor();
        expect(hashOf(page)).toBe(`#/action/${card.action_id}?from=${forged}`);
        const forgedBack = detailOf(page).getByRole('link', { name: '← Status' });
        expect(await forgedBack.getAttribute('href'), forged).toBe('#/status');
        expect(await page.getByRole('tab', { name: /^Status/ }).getAttribute('aria-selected'), forged).toBe('true');
        // Back to Status, the detail gone, so the next forged address is read afresh (never this one's stale link).
        await forgedBack.click();
        await detailOf(page).getByTestId('action-chronology').waitFor({ state: 'detached' });
        expect(hashOf(page)).toBe('#/status');
      }
      expect(await page.content()).not.toContain('evil');
      expect(await page.content()).not.toContain('nonsense');

      await op(d.dataDir, 'approvals.approve', { ticket: card.ticket });
      expect((await answer).reply?.isError ?? false).toBe(false);
      expect(problems).toEqual([]);
      await context.close();
    },
    caseTimeoutMs,
  );
});

describe('a running action in its Action detail', () => {
  it(
    'reads as running with no outcome yet (not unknown) while the remote holds it, then shows its outcome once it answers',
    async () => {
      const d = theDrill();
      const marker = 'held:p1';
      d.holds.add(marker);
      const { answer, card } = await cardFor(d, 'held', marker);
      const { page, problems, context } = await openDetailFromCard(d, card);
      const detail = detailOf(page);
      expect(await detail.getByTestId('order-dispatch').textContent()).toBe('never dispatched');
      expect(await detail.getByTestId('action-detail-running').count()).toBe(0);
      // The card's expiry in the chronology is written as every console time (the page's zone, named), never ISO.
      const cardEntry = detail
        .getByTestId('chronology-entry')
        .filter({ has: page.locator('td.kind', { hasText: /^CARD_SHOWN$/ }) });
      expect(card.expires_at_ms).not.toBeNull();
      expect(await cardEntry.locator('td').nth(3).textContent()).toBe(
        `expires at ${dateTime(card.expires_at_ms ?? 0)}`,
      );

      // Approved, it is dispatched; the remote has it and answers nothing until released.
      const before = d.log.arrivals.length;
      await op(d.dataDir, 'approvals.approve', { ticket: card.ticket });
      await d.log.waitForArrivals(before + 1, 15_000);
      expect(d.log.markers().at(-1)).toBe(marker);
      const running = await op(d.dataDir, 'actions.show', { action_id: card.action_id });
      expect(running.state.dispatch_seq).not.toBeNull();
      expect(running.state.outcome).toBeNull();

      // The detail's refresh shows it dispatched and not complete, with no outcome and no effect: not "unknown".
      await detail
        .getByTestId('order-dispatch')
        .filter({ hasText: /^DISPATCH_STARTED at seq \d+$/ })
        .waitFor();
      expect(await detail.getByTestId('order-completion').textContent()).toBe('not complete');
      // Said in plain words too, as a closed card says it.
      expect(await detail.getByTestId('action-detail-running').textContent()).toBe(
        'dispatched: sent; waiting for its outcome',
      );
      expect(await detail.getByTestId('action-outcome').textContent()).toBe('open (not classified yet)');
      expect(await detail.getByTestId('action-effect').textContent()).toBe('—');
      expect(await detail.getByTestId('action-classification').textContent()).not.toMatch(/unknown/i);
      expect(await detail.getByTestId('action-orders').textContent()).not.toMatch(/unknown/i);
      await page.screenshot({ path: path.join(screenshots, 'action-detail-running.png'), fullPage: true });

      // The remote answers: the call settles, and the detail's next refresh shows the recorded outcome.
      expect(d.log.releaseHeld()).toBe(1);
      expect((await answer).reply?.isError ?? false).toBe(false);
      const settled = await op(d.dataDir, 'actions.show', { action_id: card.action_id });
      expect(settled.state.outcome).toBe('committed');
      await detail
        .getByTestId('action-outcome')
        .filter({ hasText: /^committed$/ })
        .waitFor();
      expect(await detail.getByTestId('order-completion').textContent()).toMatch(/^committed at seq \d+ \(/);
      expect(await detail.getByTestId('action-detail-running').count()).toBe(0);
      expect(await detail.getByTestId('action-effect').textContent()).not.toBe('—');
      await page.screenshot({ path: path.join(screenshots, 'action-detail-settled.png'), fullPage: true });
      expect(problems).toEqual([]);
      await context.close();
    },
    caseTimeoutMs,
  );
});
