import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrokerApi, BrokerApiMethod } from '../broker/contract/index.js';
import { repoRoot, type RunningDaemon } from '../tests/support/postern-process.js';
import { handSessionToNextLoad, openOperatorPage, operatorCall, type OperatorPage } from './fixtures/browser.js';
import { tearDownSpec } from './fixtures/data-dir.js';
import { seededDaemon } from './fixtures/seeded-daemon.js';
import { appendTimelineActions, PinnableClock, type TimelineAction } from './fixtures/seed-timeline.js';

/**
 * The Activity tab's Actions and Timeline modes, by clicks, on the real headless daemon over a
 * journal seeded BEFORE it starts: 30,000 events of settled actions (e2e/fixtures/seed-activity.ts)
 * and then four actions with real waits between their steps (e2e/fixtures/seed-timeline.ts), the
 * newest. Every wait is on a selector or the page's state; none is a sleep. Screenshots go to
 * test-results/e2e/.
 */
const seededEvents = 30_000;
/** "Only a window of rows": the list's viewport holds ~10 rows plus overscan; never hundreds. */
const domRowsMax = 60;
const caseTimeoutMs = 60_000;

const scratch = mkdtempSync(path.join(os.tmpdir(), 'pe2e-actions-'));
const dataDir = path.join(scratch, 'data');
const screenshots = path.join(repoRoot, 'test-results', 'e2e');

let timeline: Record<TimelineAction['key'], TimelineAction>;
let daemon: RunningDaemon;
let browser: Browser;

beforeAll(async () => {
  const clock = new PinnableClock();
  // The scripted actions happened over the two minutes before the seed ends: bars of real length.
  const afterSeed = async (journal: Parameters<typeof appendTimelineActions>[0]) => {
    timeline = await appendTimelineActions(journal, clock, Date.now() - 120_000);
  };
  ({ browser, daemon } = await seededDaemon({
    dataDir,
    screenshots,
    events: seededEvents,
    seed: { clock, afterSeed },
  }));
}, 90_000);

afterAll(() => tearDownSpec(daemon, browser, scratch), 30_000);

/** One operator call as the page makes it. */
function api<M extends BrokerApiMethod>(method: M, input: BrokerApi[M]['input']): Promise<BrokerApi[M]['output']> {
  return operatorCall(daemon.operatorUrl, method, input);
}

async function openActivity(width = 1100): Promise<OperatorPage> {
  const opened = await openOperatorPage(browser, daemon.operatorUrl);
  await opened.page.setViewportSize({ width, height: 900 });
  await opened.page.getByRole('tab', { name: /^Activity/ }).click();
  await opened.page.getByTestId('action-list').waitFor();
  return opened;
}

const rows = (page: Page) => page.getByTestId('action-row');
const shownIds = (page: Page): Promise<string[]> =>
  rows(page).evaluateAll((els) => els.map((el) => el.getAttribute('data-action-id') ?? ''));
const rowOf = (page: Page, key: TimelineAction['key']) =>
  page.locator(`[data-testid="action-row"][data-action-id="${timeline[key].action_id}"]`);
const barOf = (page: Page, key: TimelineAction['key']) =>
  page.locator(`[data-testid="timeline-bar"][data-action-id="${timeline[key].action_id}"]`);
const hashOf = (page: Page): string => new URL(page.url()).hash;

async function shoot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: path.join(screenshots, name), fullPage: true });
}

describe('the Actions mode of Activity', () => {
  it(
    'is the default: one row per action, newest first, only a window of them in the DOM while older pages load as it scrolls',
    async () => {
      const { page, problems, context } = await openActivity();
      const newest = await api('actions.list', { limit: 10 });
      await rowOf(page, 'D').waitFor();
      expect(await page.getByTestId('activity-view').getAttribute('data-mode')).toBe('actions');
      // Newest first, in the API's order: the four scripted actions (the last appended) lead.
      expect(newest.actions.slice(0, 4).map((a) => a.action_id)).toEqual(
        ['D', 'C', 'B', 'A'].map((k) => timeline[k as TimelineAction['key']].action_id),
      );
      expect((await shownIds(page)).slice(0, 6)).toEqual(newest.actions.slice(0, 6).map((a) => a.action_id));
      const b = await rowOf(page, 'B').textContent();
      expect(b).toContain('approved by person:operator-1');
      expect(b).toContain('committed');
      expect(b).toContain('lane tl-deploy');
      expect(await rows(page).count()).toBeLessThan(domRowsMax);
      await shoot(page, 'actions.png');

      // Scroll the list down a few times: older pages join below (keyset), the DOM stays a window.
      const count = page.getByTestId('action-list-count');
      for (let i = 0; i < 4; i += 1)
        await page.getByTestId('action-list-scroller').evaluate((el) => el.scrollTo({ top: el.scrollHeight }));
      await page.waitForFunction(
        () => Number(document.querySelector('[data-testid="action-list-count"]')?.getAttribute('data-loaded')) >= 600,
      );
      expect(Number(await count.getAttribute('data-loaded'))).toBeGreaterThanOrEqual(600);
      expect(await rows(page).count()).toBeLessThan(domRowsMax);
      const ids = await shownIds(page);
      expect(new Set(ids).size).toBe(ids.length);
      expect(problems).toEqual([]);
      await context.close();
    },
    caseTimeoutMs,
  );

  it(
    "narrows by a filter, opens a row's detail with what it waited for, and comes back",
    async () => {
      const { page, problems, context } = await openActivity();
      await rowOf(page, 'D').waitFor();
      await page.getByTestId('actions-filter-lane').fill('tl-deploy');
      await page.getByRole('button', { name: 'Apply' }).click();
      await page
        .getByTestId('action-list-count')
        .filter({ hasText: /^2 matching actions$/ })
        .waitFor();
      expect(await shownIds(page)).toEqual([timeline.B.action_id, timeline.A.action_id]);
      await shoot(page, 'actions-filtered.png');

      await rowOf(page, 'B').click();
      const detail = page.getByTestId('action-detail');
      await detail.getByTestId('action-chronology').waitFor();
      expect(hashOf(page)).toBe(`#/action/${timeline.B.action_id}?from=activity/actions`);
      const [shownA, shownB] = await Promise.all([
        api('actions.show', { action_id: timeline.A.action_id }),
        api('actions.show', { action_id: timeline.B.action_id }),
      ]);
      expect(shownB.waited_for.map((w) => [w.action_id, w.ongoing])).toEqual([[timeline.A.action_id, false]]);
      expect(await detail.getByTestId('action-waited-for').textContent()).toBe(
        `#${shownB.state.ticket} waited 41 s for #${shownA.state.ticket}`,
      );
      await shoot(page, 'action-detail-waited.png');

      // Back returns to the list (the filter kept in the store).
      await page.goBack();
      await rowOf(page, 'A').waitFor();
      expect(await shownIds(page)).toEqual([timeline.B.action_id, timeline.A.action_id]);
      await page.getByRole('button', { name: 'Clear' }).click();
      await rowOf(page, 'D').waitFor();
      expect(problems).toEqual([]);
      await context.close();
    },
    caseTimeoutMs,
  );

  it(
    'shows every essential of a row whole at 800 px wide (wrapped, not cut)',
    async () => {
      const { page, problems, context } = await openActivity(800);
      await rowOf(page, 'D').waitFor();
      const clipped = await page
        .locator(
          '[data-testid="action-row"] :is(time, .action-ticket, strong, .badge, .action-code, .action-meta span)',
        )
        .evaluateAll((els) =>
          els
            .filter(
              (el) =>
                el.scrollWidth > el.clientWidth + 1 ||
                el.getBoundingClientRect().right >
                  (el.closest('[data-testid="action-row"]')?.getBoundingClientRect().right ?? 0) + 1,
            )
            .map((el) => el.textContent),
        );
      expect(clipped).toEqual([]);
      await shoot(page, 'actions-800.png');
      expect(problems).toEqual([]);
      await context.close();
    },
    caseTimeoutMs,
  );
});

describe('the Timeline mode of Activity', () => {
  it(
    'draws the loaded actions as bars by lane and by session, says what a bar waited for, and keeps its mode on reload and back',
    async () => {
      const { page, problems, context } = await openActivity();
      await rowOf(page, 'D').waitFor();
      await page.getByTestId('activity-mode-timeline').click();
      await barOf(page, 'B').waitFor();
      expect(hashOf(page)).toBe('#/activity/timeline');
      for (const key of ['A', 'B', 'C', 'D'] as const) expect(await barOf(page, key).count()).toBe(1);

      // By lane: the two deploy actions share a group; B's bar is mostly its wait in the lane.
      const deploy = page.locator('[data-testid="timeline-group"][data-key="tl-deploy"]');
      expect(await deploy.getByTestId('timeline-bar').count()).toBe(2);
      expect(await barOf(page, 'B').locator('.tl-lane').count()).toBe(1);
      const [shownA, shownB] = await Promise.all([
        api('actions.show', { action_id: timeline.A.action_id }),
        api('actions.show', { action_id: timeline.B.action_id }),
      ]);
      await barOf(page, 'B').focus();
      const readout = page.getByTestId('timeline-readout');
      await readout
        .filter({
          hasText: new RegExp(
            `^#${shownB.state.ticket} approved by person:operator-1[^·]*, waited 41 s for #${shownA.state.ticket} · `,
          ),
        })
        .waitFor();
      await shoot(page, 'timeline-by-lane.png');

      // By session: the alpha session holds A and B, the bravo one C and D.
      await page.getByTestId('timeline-by-session').check();
      await page.locator('[data-testid="timeline"][data-grouping="session"]').waitFor();
      const alpha = page.locator('[data-testid="timeline-group"][data-key="ses_tl_alpha"]');
      const bravo = page.locator('[data-testid="timeline-group"][data-key="ses_tl_bravo"]');
      expect(
        await alpha
          .getByTestId('timeline-bar')
          .evaluateAll((els) => els.map((el) => el.getAttribute('data-action-id')).sort()),
      ).toEqual([timeline.A.action_id, timeline.B.action_id]);
      expect(
        await bravo
          .getByTestId('timeline-bar')
          .evaluateAll((els) => els.map((el) => el.getAttribute('data-action-id')).sort()),
      ).toEqual([timeline.C.action_id, timeline.D.action_id]);
      await shoot(page, 'timeline-by-session.png');

      // Reload keeps the mode and the grouping (the address names both); back returns to the Actions mode.
      expect(hashOf(page)).toBe('#/activity/timeline?by=session');
      await handSessionToNextLoad(page, daemon.operatorUrl);
      await page.reload();
      await barOf(page, 'A').waitFor();
      expect(await page.getByTestId('activity-view').getAttribute('data-mode')).toBe('timeline');
      expect(await page.getByTestId('timeline').getAttribute('data-grouping')).toBe('session');
      expect(await page.getByTestId('timeline-by-session').isChecked()).toBe(true);
      await page.getByTestId('activity-mode-events').click();
      await page.locator('[data-testid="activity-count"][data-total]').waitFor();
      expect(hashOf(page)).toBe('#/activity/events');
      await page.goBack();
      await barOf(page, 'A').waitFor();
      // The grouping replaced the timeline's entry rather than adding one: one back leaves the timeline.
      expect(hashOf(page)).toBe('#/activity/timeline?by=session');
      await page.goBack();
      await page.getByTestId('action-list').waitFor();
      expect(await page.getByTestId('activity-view').getAttribute('data-mode')).toBe('actions');
      expect(problems).toEqual([]);
      await context.close();
    },
    caseTimeoutMs,
  );
});

describe('results coloured by effect, decisions and times worded once', () => {
  it(
    'shows a committed HTTP 500 as committed · failed in the error colour, in the list and on the timeline; an expiry as nobody decided; times with their zone',
    async () => {
      const { page, problems, context } = await openActivity();
      await rowOf(page, 'D').waitFor();
      expect(await page.getByTestId('action-list-time-heading').textContent()).toMatch(/^Time \(\S+\) · ticket$/);
      const okPill = rowOf(page, 'B').getByTestId('action-row-outcome');
      expect(await okPill.textContent()).toBe('committed');
      expect(await okPill.getAttribute('data-tone')).toBe('succeeded');
      const colourOf = (pill: typeof okPill) => pill.evaluate((el) => getComputedStyle(el).color);
      const okColour = await colourOf(okPill);

      // The seeded HTTP 500s (REMOTE_ERROR_STATUS): committed, but a failure, and never drawn green.
      await page.getByTestId('actions-filter-text').fill('REMOTE_ERROR_STATUS');
      await page.getByRole('button', { name: 'Apply' }).click();
      await page
        .getByTestId('action-list-count')
        .filter({ hasText: /matching actions/ })
        .waitFor();
      const failedPills = rows(page).getByTestId('action-row-outcome');
      await failedPills.first().waitFor();
      expect(new Set(await failedPills.allTextContents())).toEqual(new Set(['committed · failed']));
      expect(await failedPills.first().getAttribute('data-tone')).toBe('failed');
      expect(await colourOf(failedPills.first())).not.toBe(okColour);
      await shoot(page, 'actions-http500.png');
      await page.getByTestId('activity-mode-timeline').click();
      const bars = page.getByTestId('timeline-bar');
      await bars.first().waitFor();
      expect(new Set(await bars.evaluateAll((els) => els.map((el) => el.getAttribute('data-tone'))))).toEqual(
        new Set(['failed']),
      );
      expect(await bars.first().getAttribute('title')).toMatch(/ · committed · failed \(REMOTE_ERROR_STATUS\)$/);
      expect(await bars.first().evaluate((el) => getComputedStyle(el).borderTopColor)).not.toBe(okColour);
      await page.getByTestId('activity-mode-actions').click();

      // A card that expired undecided: said once, not "expired by nobody (expired)".
      await page.getByTestId('actions-filter-text').fill('nobody decided');
      await page.getByRole('button', { name: 'Apply' }).click();
      await page
        .getByTestId('action-list-count')
        .filter({ hasText: /matching actions/ })
        .waitFor();
      await rows(page).first().waitFor();
      const expired = await rows(page).first().textContent();
      expect(expired).toContain('expired: nobody decided');
      expect(expired).not.toContain('nobody (expired)');
      await page.getByRole('button', { name: 'Clear' }).click();
      await rowOf(page, 'D').waitFor();
      expect(problems).toEqual([]);
      await context.close();
    },
    caseTimeoutMs,
  );
});

describe("the action detail's back link", () => {
  it(
    'returns to the Activity mode the detail was opened from (actions, timeline by session, events), after a reload too',
    async () => {
      const { page, problems, context } = await openActivity();
      const back = page.getByTestId('action-detail').getByRole('link', { name: '← Activity' });

      // From the Actions mode, with the detail reloaded before going back.
      await rowOf(page, 'C').click();
      await page.getByTestId('action-detail').getByTestId('action-chronology').waitFor();
      await handSessionToNextLoad(page, daemon.operatorUrl);
      await page.reload();
      await page.getByTestId('action-detail').getByTestId('action-chronology').waitFor();
      await back.click();
      await rowOf(page, 'C').waitFor();
      expect(hashOf(page)).toBe('#/activity/actions');

      // From the timeline grouped by session: back to that grouping, not the default one.
      await page.getByTestId('activity-mode-timeline').click();
      await barOf(page, 'B').waitFor();
      await page.getByTestId('timeline-by-session').check();
      await page.locator('[data-testid="timeline"][data-grouping="session"]').waitFor();
      await page.waitForURL(/#\/activity\/timeline\?by=session$/);
      await barOf(page, 'B').click();
      await page.getByTestId('action-detail').getByTestId('action-chronology').waitFor();
      expect(hashOf(page)).toBe(`#/action/${timeline.B.action_id}?from=activity/timeline&by=session`);
      await shoot(page, 'action-detail-from-timeline.png');
      await back.click();
      await page.locator('[data-testid="timeline"][data-grouping="session"]').waitFor();
      expect(hashOf(page)).toBe('#/activity/timeline?by=session');
      expect(await page.getByTestId('activity-view').getAttribute('data-mode')).toBe('timeline');

      // From the raw event log: back to the event log.
      await page.getByTestId('activity-mode-events').click();
      const link = page.locator('[data-testid="activity-row"] a[href^="#/action/"]').first();
      await link.waitFor();
      await link.click();
      await page.getByTestId('action-detail').getByTestId('action-chronology').waitFor();
      expect(hashOf(page)).toMatch(/^#\/action\/act_[^?]+\?from=activity\/events$/);
      await back.click();
      await page.locator('[data-testid="activity-count"][data-total]').waitFor();
      expect(hashOf(page)).toBe('#/activity/events');
      expect(await page.getByTestId('activity-view').getAttribute('data-mode')).toBe('events');
      expect(problems).toEqual([]);
      await context.close();
    },
    caseTimeoutMs,
  );
});
