import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { op, waitFor, type Drill } from '../tests/support/drill.js';
import { repoRoot } from '../tests/support/postern-process.js';
import { handSessionToNextLoad, openOperatorPage, type OperatorPage } from './fixtures/browser.js';
import { browserOverDrill, tearDownDrillSpec } from './fixtures/drill-spec.js';

/**
 * Live push through the real UI: the real daemon (tests/support/drill.ts: a per-call route, two
 * agent processes through `postern mcp`), the page in Debian's chromium, and every poll of the page
 * slowed to ten minutes with `?pollFloorMs` (the flag can only slow polling). So a card or a banner
 * that shows up within a few seconds, without a reload, came by GET /api/events.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'pe2e-live-'));
const screenshots = path.join(repoRoot, 'test-results', 'e2e');
/** drill.ts's vault passphrase (test only). */
const drillPassphrase = 'drill passphrase (test only)';
const pollFloorMs = 600_000;
/** Far below pollFloorMs and the live fallback (10 s): only a push can meet it. */
const pushDeadlineMs = 5_000;

let browser: Browser;
let drill: Drill | undefined;
beforeAll(async () => {
  ({ browser, drill } = await browserOverDrill({ scratch, screenshots, name: 'live', ttlSeconds: 120 }));
}, 90_000);
afterAll(async () => {
  await tearDownDrillSpec(drill, browser, scratch);
}, 30_000);

function theDrill(): Drill {
  if (drill === undefined) throw new Error('the drill did not start');
  return drill;
}

/** Signs in, then reopens a tab (Approvals unless told) with every poll slowed, once its change stream is open. */
async function openSlowPolled(d: Drill, tab: 'approvals' | 'sessions' = 'approvals'): Promise<OperatorPage> {
  const opened = await openOperatorPage(browser, d.daemon.operatorUrl);
  const { page } = opened;
  const origin = new URL(d.daemon.operatorUrl).origin;
  const streamOpen = page.waitForResponse((r) => r.url() === `${origin}/api/events` && r.status() === 200);
  await handSessionToNextLoad(page, d.daemon.operatorUrl);
  await page.goto(`${origin}/?pollFloorMs=${pollFloorMs}#/${tab}`);
  await streamOpen;
  await page.getByTestId(`${tab}-view`).waitFor();
  // A reload would lose this: the checks below see the same document.
  await page.evaluate(() => ((window as unknown as { liveMarker: string }).liveMarker = 'same document'));
  return opened;
}

/** In the page: whether the Sessions cards' calls add up to `calls` (a function, since the page's CSP has no eval). */
function callsShown(calls: number): boolean {
  const shown = Array.from(document.querySelectorAll('[data-testid^="session-"][data-testid$="-calls"]'));
  return shown.reduce((sum, e) => sum + Number(e.textContent), 0) === calls;
}

async function sameDocument(page: Page): Promise<boolean> {
  return page.evaluate(() => (window as unknown as { liveMarker?: string }).liveMarker === 'same document');
}

describe('a live UI: state pushed over GET /api/events, not polled', () => {
  it("an agent's call makes its card appear without a reload, well inside the slowed poll", async () => {
    const d = theDrill();
    const { page, problems } = await openSlowPolled(d);
    const lane = 'doc-live-card';
    const sentAt = Date.now();
    const call = d.p1.call('http_request', {
      route: 'docs',
      method: 'POST',
      path: '/docs/live-card',
      body: JSON.stringify({ marker: 'live' }),
      timeout_ms: 120_000,
    });
    const answered = call.reply.then(
      () => 'answered',
      () => 'failed',
    );
    await page.getByTestId(`lane-${lane}`).getByRole('article').first().waitFor({ timeout: pushDeadlineMs });
    const shownAfterMs = Date.now() - sentAt;
    expect(shownAfterMs).toBeLessThan(pushDeadlineMs);
    expect(await sameDocument(page)).toBe(true);
    await page.screenshot({ path: path.join(screenshots, 'live-push-card.png'), fullPage: true });

    // The person's decision elsewhere (the CLI) reaches this page the same way: the card closes.
    const [card] = await waitFor(
      async () => (await op(d.dataDir, 'approvals.list', {})).cards.filter((c) => c.lane === lane),
      (cards) => cards.length === 1,
      'the card in the broker',
    );
    if (card === undefined) throw new Error('no card');
    await op(d.dataDir, 'approvals.reject', { ticket: card.ticket, reason: 'live push e2e' });
    expect(await answered).toBe('answered');
    await page.getByTestId(`closed-${card.ticket}`).waitFor({ timeout: pushDeadlineMs });
    expect(await sameDocument(page)).toBe(true);
    expect(problems).toEqual([]);
    await page.context().close();
  }, 60_000);

  it("a session's calls and not-sent-yet count follow its actions live, though no session event is journaled", async () => {
    const d = theDrill();
    const { page, problems } = await openSlowPolled(d, 'sessions');
    const shownCalls = (calls: number) => page.waitForFunction(callsShown, calls, { timeout: pushDeadlineMs });
    const figures = await op(d.dataDir, 'sessions.list', {});
    const callsBefore = figures.sessions.reduce((sum, s) => sum + s.calls, 0);
    await shownCalls(callsBefore);
    const sessions = page.getByTestId('sessions-view');
    expect(await sessions.getByText('not sent yet').count()).toBe(0);
    const lane = 'doc-live-session';
    const call = d.p1.call('http_request', {
      route: 'docs',
      method: 'POST',
      path: '/docs/live-session',
      body: JSON.stringify({ marker: 'live-session' }),
      timeout_ms: 120_000,
    });
    const answered = call.reply.then(
      () => 'answered',
      () => 'failed',
    );
    // The card waits for a person: one more call, not sent yet. Only ACTION_ACCEPTED was journaled ('activity').
    await shownCalls(callsBefore + 1);
    await sessions.getByText('1 not sent yet').waitFor({ timeout: pushDeadlineMs });
    const [card] = await waitFor(
      async () => (await op(d.dataDir, 'approvals.list', {})).cards.filter((c) => c.lane === lane),
      (cards) => cards.length === 1,
      'the card in the broker',
    );
    if (card === undefined) throw new Error('no card');
    await op(d.dataDir, 'approvals.reject', { ticket: card.ticket, reason: 'live push e2e (sessions)' });
    expect(await answered).toBe('answered');
    await sessions.getByText('not sent yet').waitFor({ state: 'detached', timeout: pushDeadlineMs });
    expect(await sameDocument(page)).toBe(true);
    expect(problems).toEqual([]);
    await page.context().close();
  }, 60_000);

  it('the vault lock hint appears on a lock and goes on an unlock, live', async () => {
    const d = theDrill();
    const { page, problems } = await openSlowPolled(d);
    const hint = page.getByTestId('vault-locked-hint');
    expect(await hint.count()).toBe(0);
    await op(d.dataDir, 'vault.lock', {});
    await hint.waitFor({ timeout: pushDeadlineMs });
    await page.screenshot({ path: path.join(screenshots, 'live-push-vault-locked.png'), fullPage: true });
    await op(d.dataDir, 'vault.unlock', { passphrase: drillPassphrase });
    await hint.waitFor({ state: 'detached', timeout: pushDeadlineMs });
    expect(await sameDocument(page)).toBe(true);
    expect(await page.content()).not.toContain(drillPassphrase);
    expect(problems).toEqual([]);
    await page.context().close();
  }, 60_000);
});
