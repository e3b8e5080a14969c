import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApprovalCard } from '../broker/contract/index.js';
import {
  drillPassphrase,
  laneCards,
  op,
  postMarker,
  quarantineWithPendingCard,
  waitFor,
  type Drill,
} from '../tests/support/drill.js';
import { DrillAgent } from '../tests/support/drill-agent.js';
import { repoRoot } from '../tests/support/postern-process.js';
import { openOperatorPage } from './fixtures/browser.js';
import { browserOverDrill, tearDownDrillSpec } from './fixtures/drill-spec.js';

/**
 * DESIGN §4 by clicks, for an unknown a quarantined journal's recovery recorded before dispatch: the real daemon stops
 * while A waits on its card, its integrity anchor is edited, and the next start is quarantined, so recovery records A
 * unknown (broker_restart_journal_quarantined). The Approvals view shows A as the blocked head of its lane with its ways
 * out, and no Retry (the journal refuses a retry lease on it) but the reason; after Re-adopt, B of the same lane, approved by a click, reads "blocked by #A" and is not sent; a person's
 * attestation on A's card releases the lane and B is sent. Waits are on the page or the broker's state, never sleeps.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'pe2e-qcard-'));
const screenshots = path.join(repoRoot, 'test-results', 'e2e');
const lane = 'doc-qcard';

let browser: Browser;
let drill: Drill | undefined;
let p3: DrillAgent | undefined;
beforeAll(async () => {
  ({ browser, drill } = await browserOverDrill({ scratch, screenshots, name: 'qcard', ttlSeconds: 120 }));
}, 90_000);
afterAll(async () => {
  await p3?.stop();
  await tearDownDrillSpec(drill, browser, scratch);
}, 30_000);

const post = (agent: DrillAgent, marker: string) => postMarker(agent, 'qcard', marker);

const cardOf = (page: Page, ticket: number): Locator =>
  page.getByRole('article', { name: `Ticket #${ticket}`, exact: true });
const showing = (locator: Locator, text: string): Promise<void> => locator.filter({ hasText: text }).waitFor();

describe("the Approvals view: an unknown a quarantined journal's recovery left before dispatch", () => {
  it('is the blocked head of its lane with its ways out; B waits for it until a person attests it', async () => {
    if (drill === undefined) throw new Error('the drill did not start');
    const d = drill;
    const a = await quarantineWithPendingCard(d, lane, 'qcard', drillPassphrase);

    const { page, problems, context } = await openOperatorPage(browser, d.daemon.operatorUrl);
    await page.getByTestId('quarantine-banner').waitFor();
    await page.getByRole('tab', { name: /^Approvals/ }).click();
    await page.getByTestId('approvals-view').waitFor();
    // A heads its lane as a blocked head, with the ways out a person has: attest, reconcile, abandon.
    await page.getByTestId(`lane-${lane}-blocked`).waitFor();
    const cardA = cardOf(page, a.ticket);
    await showing(
      page.getByTestId(`card-${a.ticket}-status`),
      `#${a.ticket} outcome unknown: the lane is blocked until it is settled or abandoned`,
    );
    const waysOut = cardA.getByRole('group', { name: `Ways out for blocked ticket #${a.ticket}` });
    for (const name of ['Attest…', 'Reconcile', 'Abandon…'])
      expect(await waysOut.getByRole('button', { name }).isEnabled()).toBe(true);
    // No retry is offered: the journal refuses a retry lease on an unknown with no dispatch recorded. The card says why,
    // and its Body line says what is known: the preview went with the restart, and whether the call was sent is not.
    expect(await cardA.getByRole('button', { name: /^Retry/ }).count()).toBe(0);
    await showing(
      page.getByTestId(`card-${a.ticket}-no-retry`),
      `No retry: no dispatch of #${a.ticket} is recorded, yet it may have been sent`,
    );
    await showing(page.getByTestId(`card-${a.ticket}-body-gone`), 'Whether the call was sent is unknown');
    expect(await cardA.getByText('previews live in memory until the call is sent').count()).toBe(0);
    await page.screenshot({ path: path.join(screenshots, 'approvals-quarantined-unknown.png'), fullPage: true });

    // Re-adopt, so agents are served again; a new agent process sends B to the same lane.
    await page.getByTestId('quarantine-readopt').click();
    await page.getByTestId('quarantine-banner').waitFor({ state: 'detached' });
    p3 = await DrillAgent.start(d.dataDir, 'qcard-p3');
    const sessions = await waitFor(
      () => op(d.dataDir, 'sessions.list', {}),
      (r) => r.sessions.some((s) => s.status === 'pending' && s.connected),
      'the new agent session, pending',
    );
    for (const s of sessions.sessions.filter((x) => x.status === 'pending' && x.connected))
      await op(d.dataDir, 'sessions.approve', { session_id: s.session_id });
    const answerB = post(p3, 'B');
    const [, pendingB] = await waitFor(
      () => laneCards(d.dataDir, lane),
      (c) => c.length === 2 && c[1]?.state === 'pending',
      'B pending behind A',
    );
    const b = pendingB as ApprovalCard;
    await cardOf(page, b.ticket).getByRole('button', { name: 'Approve', exact: true }).click();
    await showing(page.getByTestId(`card-${b.ticket}-status`), `approved, blocked by #${a.ticket} (outcome unknown)`);
    expect((await op(d.dataDir, 'actions.show', { action_id: b.action_id })).events.map((e) => e.kind)).not.toContain(
      'DISPATCH_STARTED',
    );
    expect(d.log.markers()).toEqual([]);

    // This route declares no lookup: Reconcile is refused with its code, on the card.
    await waysOut.getByRole('button', { name: 'Reconcile' }).click();
    await showing(cardA.getByRole('alert'), 'UNSUPPORTED_ACTION');
    // A person who checked attests it: it did not happen. The lane moves on and B is sent.
    await waysOut.getByRole('button', { name: 'Attest…' }).click();
    const form = cardA.getByRole('form', { name: `Attest the outcome of #${a.ticket}` });
    await form.getByLabel('Outcome').selectOption('rejected');
    await form.getByRole('textbox').fill('the document shows no change from this call');
    await form.getByRole('button', { name: `Attest #${a.ticket}` }).click();
    const sent = await answerB;
    expect(sent.reply?.isError ?? false).toBe(false);
    expect(d.log.markers()).toEqual(['B']);
    expect((await op(d.dataDir, 'actions.show', { action_id: a.action_id })).state).toMatchObject({
      dispatch_seq: null,
      outcome: 'rejected',
      source: 'operator_attested',
    });
    await page.getByTestId(`closed-${b.ticket}`).waitFor();
    expect(problems).toEqual([]);
    await context.close();
  }, 120_000);
});
