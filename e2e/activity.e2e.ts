import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrokerApi, BrokerApiMethod } from '../broker/contract/index.js';
import { repoRoot, type RunningDaemon } from '../tests/support/postern-process.js';
import { openOperatorPage, operatorCall, type OperatorPage } from './fixtures/browser.js';
import { tearDownSpec } from './fixtures/data-dir.js';
import { seededDaemon } from './fixtures/seeded-daemon.js';
import type { SeededAction, SeededJournal } from './fixtures/seed-activity.js';

/**
 * Activity, action detail and metrics on the real headless daemon over a journal of 100,000 events
 * seeded BEFORE the daemon starts (through the journal's API, e2e/fixtures/seed-activity.ts). The
 * list must stay virtualized (the DOM holds about the visible rows), keep journal positions under a
 * filter, and the detail must show the three orders and the chronology marked by source. Every wait
 * is on a selector or on the page's state; none is a sleep. Screenshots go to test-results/e2e/.
 */
const seededEvents = 100_000;
/** "About the visible rows": the list's viewport holds ~20 rows, plus overscan; never thousands. */
const domRowsMax = 200;
const caseTimeoutMs = 60_000;

const scratch = mkdtempSync(path.join(os.tmpdir(), 'pe2e-activity-'));
const dataDir = path.join(scratch, 'data');
const screenshots = path.join(repoRoot, 'test-results', 'e2e');

let seeded: SeededJournal;
let daemon: RunningDaemon;
let browser: Browser;

beforeAll(async () => {
  ({ seeded, browser, daemon } = await seededDaemon({ dataDir, screenshots, events: seededEvents }));
}, 90_000);

afterAll(() => tearDownSpec(daemon, browser, scratch), 30_000);

/** One operator call as the page makes it. */
function api<M extends BrokerApiMethod>(method: M, input: BrokerApi[M]['input']): Promise<BrokerApi[M]['output']> {
  return operatorCall(daemon.operatorUrl, method, input);
}

/** Every seq activity.list matches for `filter`, paging on by next_seq as the view does (bounded). */
async function apiMatches(filter: Omit<BrokerApi['activity.list']['input'], 'from_seq' | 'limit'>): Promise<number[]> {
  const seqs: number[] = [];
  for (let from: number | null = 1, pages = 0; from !== null && pages < 100; pages += 1) {
    const page: BrokerApi['activity.list']['output'] = await api('activity.list', {
      ...filter,
      from_seq: from,
      limit: 500,
    });
    seqs.push(...page.events.map((e) => e.seq));
    from = page.next_seq;
  }
  return seqs;
}

function firstOf(name: keyof SeededJournal['firsts']): SeededAction {
  const action = seeded.firsts[name];
  if (action === undefined) throw new Error(`the seed has no ${name} action`);
  return action;
}

async function openActivity(zone?: string): Promise<OperatorPage> {
  const opened = await openOperatorPage(browser, daemon.operatorUrl, undefined, zone);
  await opened.page.getByRole('tab', { name: /^Activity/ }).click();
  // The raw event log is the Events mode of the tab (its default is the Actions list).
  await opened.page.getByTestId('activity-mode-events').click();
  await opened.page.getByTestId('activity-view').waitFor();
  return opened;
}

const rowsInDom = (page: Page): Promise<number> =>
  page.locator('[data-testid="activity-row"], [data-testid="activity-placeholder"]').count();
const rowAt = (page: Page, seq: number): Locator => page.locator(`[data-testid="activity-row"][data-seq="${seq}"]`);
const shownSeqs = async (page: Page): Promise<number[]> =>
  (await page.getByTestId('activity-seq').allTextContents()).map(Number);

async function applyFilter(
  page: Page,
  fields: Partial<Record<'session' | 'lane' | 'code' | 'text', string>> & { outcome?: string },
): Promise<void> {
  await page.getByRole('button', { name: 'Clear' }).click();
  for (const [name, value] of Object.entries(fields)) {
    if (name === 'outcome') await page.getByTestId('activity-filter-outcome').selectOption(value);
    else await page.getByTestId(`activity-filter-${name}`).fill(value);
  }
  await page.getByRole('button', { name: 'Apply' }).click();
}

/** Waits until the filtered scan reached the log's end with `n` matches (the count loses "so far"). */
async function scanFinished(page: Page, n: number): Promise<void> {
  await page
    .getByTestId('activity-count')
    .filter({ hasText: new RegExp(`^${n.toLocaleString('en-US')} matching events?$`) })
    .waitFor({ timeout: 30_000 });
}

async function shoot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: path.join(screenshots, name), fullPage: true });
}

describe('the Activity view over 100,000 journal events', () => {
  it(
    'lists every position while the DOM holds only about the visible rows, down to the last seq',
    async () => {
      const { page, problems, context } = await openActivity();
      const status = await api('status', {});
      expect(status.journal).toMatchObject({ events: seededEvents, last_seq: seededEvents, recovered_at_open: 0 });

      // The list reports the whole journal and shows its first positions.
      await page.locator(`[data-testid="activity-count"][data-total="${seededEvents}"]`).waitFor();
      expect(await page.getByTestId('activity-count').textContent()).toBe('100,000 events');
      await rowAt(page, 1).waitFor();
      expect(await page.getByRole('table', { name: 'Journal events' }).getAttribute('aria-rowcount')).toBe(
        String(seededEvents + 1),
      );
      const firstRows = await shownSeqs(page);
      expect(firstRows.slice(0, 5)).toEqual([1, 2, 3, 4, 5]);
      expect(await rowsInDom(page)).toBeLessThan(domRowsMax);
      await shoot(page, 'activity.png');

      // Scroll the list itself to its end: the last position shows, with the last seeded action.
      await page.getByTestId('activity-scroller').evaluate((el) => el.scrollTo({ top: el.scrollHeight }));
      const lastRow = rowAt(page, seededEvents);
      await lastRow.waitFor();
      expect(await lastRow.textContent()).toContain(seeded.last.action_id);
      expect(await rowsInDom(page)).toBeLessThan(domRowsMax);
      const endRows = await shownSeqs(page);
      expect(endRows.at(-1)).toBe(seededEvents);
      // Contiguous positions at the end too: nothing renumbered, nothing skipped.
      expect(endRows).toEqual(Array.from({ length: endRows.length }, (_, i) => seededEvents - endRows.length + 1 + i));

      // Jump back to the oldest with the button; still only the visible rows.
      await page.getByRole('button', { name: 'Oldest' }).click();
      await rowAt(page, 1).waitFor();
      expect(await rowsInDom(page)).toBeLessThan(domRowsMax);
      expect(problems).toEqual([]);
      await context.close();
    },
    caseTimeoutMs,
  );

  it(
    'filters by lane and outcome, by text and by session, each row keeping its original seq',
    async () => {
      const { page, problems, context } = await openActivity();
      await rowAt(page, 1).waitFor();

      // The first unknown head: its lane holds one event whose classification says unknown.
      const head = firstOf('callerCancelledAfterDispatch');
      await applyFilter(page, { lane: head.lane, outcome: 'unknown' });
      await scanFinished(page, 1);
      expect(await shownSeqs(page)).toEqual([head.seqs.at(-1)]);

      // An action id as text: exactly its events, at the positions the journal gave them.
      const reconciled = firstOf('lostThenReconciled');
      await applyFilter(page, { text: reconciled.action_id });
      await scanFinished(page, reconciled.seqs.length);
      expect(await shownSeqs(page)).toEqual(reconciled.seqs);
      await shoot(page, 'activity-filtered.png');

      // A session and a code: the rows match the API's own filtered pages, in order, same seqs.
      const expected = await apiMatches({ session_id: 'ses_seed_bravo', code: 'REMOTE_ERROR_STATUS' });
      await applyFilter(page, { session: 'ses_seed_bravo', code: 'REMOTE_ERROR_STATUS' });
      expect(expected.length).toBeGreaterThan(20);
      await rowAt(page, expected[0] ?? 0).waitFor();
      expect((await shownSeqs(page)).slice(0, 10)).toEqual(expected.slice(0, 10));
      expect(await rowsInDom(page)).toBeLessThan(domRowsMax);

      // Clearing the filter brings back every position.
      await page.getByRole('button', { name: 'Clear' }).click();
      await page.locator(`[data-testid="activity-count"][data-total="${seededEvents}"]`).waitFor();
      expect(problems).toEqual([]);
      await context.close();
    },
    caseTimeoutMs,
  );

  it(
    "finds a card by the expiry it shows in the viewer's zone, not by the UTC time it does not show",
    async () => {
      // A person in Berlin: every seeded card expires at 1,900,000,000,000 ms, 2030-03-17T17:46:40.000Z.
      const { page, problems, context } = await openActivity('Europe/Berlin');
      await rowAt(page, 1).waitFor();
      // The page is in Berlin (winter or summer time, by today's date), not the machine's zone.
      expect(await page.getByRole('columnheader', { name: /^Time/ }).textContent()).toMatch(/^Time \(CES?T\)$/);

      // What the row shows, typed as seen: the cards, and each row's evidence reads that text.
      const shown = '2030-03-17 18:46:40 CET';
      await applyFilter(page, { text: shown });
      const firstCard = await api('activity.list', { text: shown, zone: 'Europe/Berlin', limit: 10 });
      expect(firstCard.events.length).toBe(10);
      expect(firstCard.events.every((e) => e.kind === 'CARD_SHOWN')).toBe(true);
      await rowAt(page, firstCard.events[0]?.seq ?? 0).waitFor();
      expect((await shownSeqs(page)).slice(0, 10)).toEqual(firstCard.events.map((e) => e.seq));
      const evidence = await page.getByTestId('activity-evidence').allTextContents();
      expect(evidence.length).toBeGreaterThanOrEqual(10);
      expect(evidence.every((text) => text === `expires at ${shown}`)).toBe(true);

      // The UTC time the page shows nowhere finds nothing, over the whole journal.
      await applyFilter(page, { text: '17:46:40' });
      await scanFinished(page, 0);
      expect(await rowsInDom(page)).toBe(0);
      expect(problems).toEqual([]);
      await context.close();
    },
    caseTimeoutMs,
  );
});

describe('the action detail', () => {
  it(
    'opened from an Activity row: three orders, classification, attempts and the chronology with the reconciliation marked',
    async () => {
      const { page, problems, context } = await openActivity();
      const reconciled = firstOf('lostThenReconciled');
      await applyFilter(page, { text: reconciled.action_id });
      await rowAt(page, reconciled.seqs[0] ?? 0)
        .getByRole('link', { name: reconciled.action_id })
        .click();

      const detail = page.getByTestId('action-detail');
      await detail.getByTestId('action-chronology').waitFor();
      expect(page.url()).toContain(`#/action/${reconciled.action_id}`);
      const shown = await api('actions.show', { action_id: reconciled.action_id });
      const seqOf = (kind: string) => shown.events.find((e) => e.kind === kind)?.seq;

      expect(await detail.getByTestId('order-card').textContent()).toBe(
        `ticket #${shown.state.ticket} (accepted at seq ${reconciled.seqs[0]}; no card was shown)`,
      );
      expect(await detail.getByTestId('order-dispatch').textContent()).toBe(
        `DISPATCH_STARTED at seq ${seqOf('DISPATCH_STARTED')}`,
      );
      expect(await detail.getByTestId('order-completion').textContent()).toBe(
        `committed at seq ${seqOf('RECONCILIATION_RESULT')} (RECONCILIATION_RESULT)`,
      );
      expect(await detail.getByTestId('action-phase').textContent()).toBe(shown.state.phase);
      expect(await detail.getByTestId('action-outcome').textContent()).toBe('committed');
      expect(await detail.getByTestId('action-retry').textContent()).toBe(shown.state.retry);
      expect(await detail.getByTestId('action-effect').textContent()).toBe(shown.state.effect);
      expect(await detail.getByTestId('action-basis').textContent()).toBe(shown.state.outcome_basis);
      expect(await detail.getByTestId('attempt-row').count()).toBe(shown.state.attempts.length);
      expect(await detail.getByTestId('action-released-by').textContent()).toContain(
        `Lane released at seq ${seqOf('RECONCILIATION_RESULT')}: a reconciliation lookup settled it`,
      );

      // The chronology: every event, in seq order, with wall time; the reconciliation marked as such.
      const entries = detail.getByTestId('chronology-entry');
      expect(await entries.evaluateAll((rows) => rows.map((r) => Number(r.getAttribute('data-seq'))))).toEqual(
        reconciled.seqs,
      );
      const reconciliation = detail.locator(
        `[data-testid="chronology-entry"][data-seq="${seqOf('RECONCILIATION_RESULT')}"]`,
      );
      expect(await reconciliation.getAttribute('data-source')).toBe('reconciliation');
      expect(await reconciliation.textContent()).toContain('released the lane');
      expect(await detail.locator('[data-testid="chronology-entry"][data-source="operator"]').count()).toBe(0);
      expect(await detail.locator('[data-testid="chronology-entry"] time').first().getAttribute('datetime')).toMatch(
        /^\d{4}-\d\d-\d\dT/,
      );
      await shoot(page, 'action-detail.png');

      // Back to the list it came from.
      await detail.getByRole('link', { name: '← Activity' }).click();
      await page.getByTestId('activity-view').waitFor();
      expect(problems).toEqual([]);
      await context.close();
    },
    caseTimeoutMs,
  );

  it(
    "marks a person's attestation as an operator entry, and opens from an Approvals card (a blocked head)",
    async () => {
      const { page, problems, context } = await openActivity();
      const attested = firstOf('sshClosedNoExitAttested');
      await page.goto(`${daemon.origin}/#/action/${attested.action_id}`);
      const detail = page.getByTestId('action-detail');
      await detail.getByTestId('action-chronology').waitFor();
      const operatorEntries = detail.locator('[data-testid="chronology-entry"][data-source="operator"]');
      expect(await operatorEntries.count()).toBe(1);
      expect(await operatorEntries.getAttribute('data-seq')).toBe(String(attested.seqs.at(-1)));
      expect(await detail.getByTestId('action-released-by').textContent()).toContain(
        'a person attested the outcome by person:operator-1',
      );

      // The Approvals tab lists the seeded unknown heads as blocked; a card's action id opens its detail.
      const head = firstOf('callerCancelledAfterDispatch');
      await page.getByRole('tab', { name: /^Approvals/ }).click();
      await page.getByTestId('approvals-view').getByRole('link', { name: head.action_id }).click();
      await detail.getByTestId('action-chronology').waitFor();
      expect(await detail.getByTestId('action-detail-id').textContent()).toBe(head.action_id);
      expect(await detail.getByTestId('action-outcome').textContent()).toBe('unknown');
      expect(await detail.getByTestId('order-completion').textContent()).toBe(
        `unknown at seq ${head.seqs.at(-1)} (OUTCOME_RECORDED)`,
      );
      expect(problems).toEqual([]);
      await context.close();
    },
    caseTimeoutMs,
  );
});

describe('the Metrics view', () => {
  it(
    'shows the phase × outcome table from the metrics, with the non-zero cells the seed produced',
    async () => {
      const { page, problems, context } = await openActivity();
      await page.getByRole('tab', { name: /^Metrics/ }).click();
      await page.getByTestId('phase-outcome').waitFor();
      const metrics = await api('metrics', {});
      expect(metrics.total).toBe((await api('status', {})).actions.total);
      expect(await page.getByTestId('metrics-total').textContent()).toContain(
        `${metrics.total.toLocaleString('en-US')} actions`,
      );
      const nonZero = metrics.by_phase_outcome.filter((r) => r.count > 0);
      expect(nonZero.length).toBeGreaterThanOrEqual(5);
      for (const { phase, outcome, count } of nonZero) {
        expect(await page.getByTestId(`cell-${phase}-${outcome}`).getAttribute('data-count')).toBe(String(count));
      }
      // Different alarms stay apart: the three unknown heads are remote_execution / unknown.
      expect(await page.getByTestId('cell-remote_execution-unknown').getAttribute('data-count')).toBe('3');
      expect(await page.getByTestId('cell-connection_setup-not_attempted').getAttribute('data-count')).not.toBe('0');
      expect(await page.getByTestId('cell-validation-committed').getAttribute('data-count')).toBe('0');
      await shoot(page, 'metrics.png');
      expect(problems).toEqual([]);
      await context.close();
    },
    caseTimeoutMs,
  );
});
