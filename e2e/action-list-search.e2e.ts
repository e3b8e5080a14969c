import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrokerApi, BrokerApiMethod } from '../broker/contract/index.js';
import { repoRoot, type RunningDaemon } from '../tests/support/postern-process.js';
import { openOperatorPage, operatorCall } from './fixtures/browser.js';
import { tearDownSpec } from './fixtures/data-dir.js';
import { seededDaemon } from './fixtures/seeded-daemon.js';

/**
 * The Actions list's bounded search, by clicks, on the real headless daemon: a search examines at most
 * `--test-action-list-scan-rows` actions a page (lowered from 10,000 for this daemon only, so a small seeded
 * journal makes the bound bite), says how far back it looked, and reads on only when "Search older" is
 * pressed. The match lies beyond the first page's bound. Waits are on selectors, never sleeps.
 */
const seededEvents = 1_500;
const scanRows = 40;
const caseTimeoutMs = 60_000;

const scratch = mkdtempSync(path.join(os.tmpdir(), 'pe2e-search-'));
const dataDir = path.join(scratch, 'data');
const screenshots = path.join(repoRoot, 'test-results', 'e2e');

let daemon: RunningDaemon;
let browser: Browser;

beforeAll(async () => {
  ({ browser, daemon } = await seededDaemon({
    dataDir,
    screenshots,
    events: seededEvents,
    args: ['--test-action-list-scan-rows', String(scanRows)],
  }));
}, 90_000);

afterAll(() => tearDownSpec(daemon, browser, scratch), 30_000);

/** One operator call as the page makes it. */
function api<M extends BrokerApiMethod>(method: M, input: BrokerApi[M]['input']): Promise<BrokerApi[M]['output']> {
  return operatorCall(daemon.operatorUrl, method, input);
}

describe('a search in the Actions list that stops at its bound', () => {
  it(
    'says how far back it searched, and "Search older" finds the match beyond that bound',
    async () => {
      // The target: an action in the second stretch the search examines (the newest `scanRows` are the first).
      const newest = await api('actions.list', { limit: 3 * scanRows });
      const target = newest.actions[scanRows + scanRows / 2];
      if (target === undefined) throw new Error(`the seed holds fewer than ${1.5 * scanRows} actions`);
      const first = await api('actions.list', { text: target.action_id });
      expect(first.actions).toEqual([]);
      const searchedBefore = first.searched_before_seq;
      if (searchedBefore === null) throw new Error('the first page of the search did not stop at its bound');
      expect(target.first_seq).toBeLessThan(searchedBefore);

      const { page, problems, context } = await openOperatorPage(browser, daemon.operatorUrl);
      await page.setViewportSize({ width: 1100, height: 900 });
      await page.getByRole('tab', { name: /^Activity/ }).click();
      await page.getByTestId('action-list').waitFor();
      await page.getByTestId('actions-filter-text').fill(target.action_id);
      await page.getByRole('button', { name: 'Apply' }).click();

      // Stopped at the bound with nothing found yet: it says where, and offers to search on.
      const searched = page.getByTestId('action-list-searched');
      await page.locator(`[data-testid="action-list-searched"][data-searched-before="${searchedBefore}"]`).waitFor();
      expect(await searched.textContent()).toContain(
        `No match yet: searched the newest actions back to journal position ${searchedBefore.toLocaleString('en-US')}`,
      );
      expect(await page.getByTestId('action-row').count()).toBe(0);
      await page.screenshot({ path: path.join(screenshots, 'actions-search-stopped.png'), fullPage: true });

      // One press reads the next stretch, where the match is; the note moves to where that stretch ends.
      const second = await api('actions.list', { text: target.action_id, before_seq: searchedBefore });
      expect(second.actions.map((a) => a.action_id)).toEqual([target.action_id]);
      const deeper = second.searched_before_seq;
      if (deeper === null) throw new Error('the seed ends within the second stretch: seed more');
      await page.getByRole('button', { name: 'Search older' }).click();
      const row = page.locator(`[data-testid="action-row"][data-action-id="${target.action_id}"]`);
      await row.waitFor();
      await page.locator(`[data-testid="action-list-searched"][data-searched-before="${deeper}"]`).waitFor();
      expect(Number(await row.getAttribute('data-first-seq'))).toBe(target.first_seq);
      expect(await page.getByTestId('action-row').count()).toBe(1);
      expect(await searched.textContent()).toContain(
        `Searched the newest actions back to journal position ${deeper.toLocaleString('en-US')}`,
      );
      await page.screenshot({ path: path.join(screenshots, 'actions-search-older.png'), fullPage: true });
      expect(problems).toEqual([]);
      await context.close();
    },
    caseTimeoutMs,
  );
});
