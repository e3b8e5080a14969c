import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApprovalCard } from '../broker/contract/index.js';
import { closeDrill, laneCards, op, openDrill, waitFor, type Drill } from '../tests/support/drill.js';
import { DrillAgent, type ToolReply } from '../tests/support/drill-agent.js';
import { repoRoot } from '../tests/support/postern-process.js';
import { assertRendererBuilt, launchChromium, openOperatorPage, type OperatorPage } from './fixtures/browser.js';

/**
 * Article 001's race drill by clicks: the real daemon, two separate agent processes (the real MCP
 * SDK through `postern mcp`, tests/support/drill.ts), one lane per case, a per-call route whose
 * effect is the arrival log — and a person deciding in the Approvals view of the page the daemon
 * serves. Every wait is on the page (Playwright's auto-waiting locators) or on the broker's state
 * (drill.ts waitFor, bounded); none is a sleep. Screenshots go to test-results/e2e/.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'pe2e-approvals-'));
const screenshots = path.join(repoRoot, 'test-results', 'e2e');
/** The vault's secret for the route (tests/support/drill.ts); it must never reach the page. */
const credentialValue = 'CANARY-drill-token-never-shown';
const caseTimeoutMs = 60_000;

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

/** One agent call as sent, its card once listed, and how the agent's call ended (never rejects). */
interface Sent {
  agent: DrillAgent;
  marker: string;
  callId: number;
  answer: Promise<{ reply?: ToolReply; error?: string }>;
  card: ApprovalCard;
}

/** Two conflicting writes to /docs/<run> (lane doc-<run>), one from each agent process, sent in one tick; A is the older ticket. */
async function sendPair(drill: Drill, run: string): Promise<{ lane: string; A: Sent; B: Sent }> {
  const lane = `doc-${run}`;
  const send = (agent: DrillAgent, marker: string) => {
    const call = agent.call('http_request', {
      route: 'docs',
      method: 'POST',
      path: `/docs/${run}`,
      body: JSON.stringify({ marker }),
      timeout_ms: 120_000,
    });
    const answer = call.reply.then(
      (reply) => ({ reply }),
      (error: unknown) => ({ error: String(error) }),
    );
    return { agent, marker, callId: call.id, answer };
  };
  const sent = [send(drill.p1, `${run}:p1`), send(drill.p2, `${run}:p2`)];
  const cards = await waitFor(
    () => laneCards(drill.dataDir, lane),
    (c) => c.length === 2 && c.every((x) => x.state === 'pending'),
    `two pending cards in ${lane}`,
  );
  const withCard = (card: ApprovalCard | undefined): Sent => {
    const marker = (JSON.parse(card?.body_preview ?? '{}') as { marker?: string }).marker;
    const found = sent.find((s) => s.marker === marker);
    if (card === undefined || found === undefined) throw new Error(`no sent call for card ${JSON.stringify(card)}`);
    return { ...found, card };
  };
  return { lane, A: withCard(cards[0]), B: withCard(cards[1]) };
}

/** This pair's arrivals at the endpoint, in arrival order (other cases share it). */
function arrivals(drill: Drill, ...sent: Sent[]): string[] {
  const markers = sent.map((s) => s.marker);
  return drill.log.markers().filter((m) => markers.includes(m));
}

async function journalKinds(drill: Drill, sent: Sent): Promise<string[]> {
  return (await op(drill.dataDir, 'actions.show', { action_id: sent.card.action_id })).events.map((e) => e.kind);
}

/** Signs in with the printed URL and opens the Approvals tab. */
async function openApprovals(drill: Drill): Promise<OperatorPage> {
  const opened = await openOperatorPage(browser, drill.daemon.operatorUrl);
  await opened.page.getByRole('tab', { name: /^Approvals/ }).click();
  await opened.page.getByTestId('approvals-view').waitFor();
  return opened;
}

const cardOf = (page: Page, sent: Sent): Locator =>
  page.getByRole('article', { name: `Ticket #${sent.card.ticket}`, exact: true });
const statusOf = (page: Page, sent: Sent): Locator => page.getByTestId(`card-${sent.card.ticket}-status`);
/** Waits until the locator's text contains `text` (auto-waiting: resolves when the page shows it). */
const showing = (locator: Locator, text: string): Promise<void> => locator.filter({ hasText: text }).waitFor();
const closedReason = (page: Page, sent: Sent): Locator => page.getByTestId(`closed-${sent.card.ticket}`);

async function approveByClick(page: Page, sent: Sent): Promise<void> {
  await cardOf(page, sent).getByRole('button', { name: 'Approve', exact: true }).click();
}

async function shoot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: path.join(screenshots, name), fullPage: true });
}

/** Nothing the page shows or holds may carry the credential's value; and no script or CSP problem occurred. */
async function expectCleanPage({ page, problems }: OperatorPage): Promise<void> {
  expect(await page.content()).not.toContain(credentialValue);
  expect(problems).toEqual([]);
}

describe('the Approvals view: the race drill by clicks (two agent processes, one lane)', () => {
  let drill: Drill | undefined;
  beforeAll(async () => {
    drill = await openDrill(scratch, 'ui', 120);
  }, 90_000);
  afterAll(() => closeDrill(drill), 30_000);
  const theDrill = (): Drill => {
    if (drill === undefined) throw new Error('the drill did not start');
    return drill;
  };

  it(
    'approve B first: B reads "approved, waiting for #A" and nothing arrives; approve A: A then B arrive',
    async () => {
      const d = theDrill();
      const ui = await openApprovals(d);
      const { page } = ui;
      const { lane, A, B } = await sendPair(d, 'race');
      expect(A.card.ticket).toBeLessThan(B.card.ticket);

      // Both cards, in their lane, in ticket order, each with what a person needs to decide.
      const laneSection = page.getByTestId(`lane-${lane}`);
      await cardOf(page, B).waitFor();
      expect(
        await laneSection.getByRole('article').evaluateAll((cards) => cards.map((c) => c.getAttribute('data-testid'))),
      ).toEqual([`card-${A.card.ticket}`, `card-${B.card.ticket}`]);
      const cardA = cardOf(page, A);
      expect(await cardA.getByTestId(`card-${A.card.ticket}-request`).textContent()).toBe('POST /docs/race');
      expect(await cardA.getByTestId(`card-${A.card.ticket}-credential`).textContent()).toBe('drill-token');
      expect(await cardA.getByTestId(`card-${A.card.ticket}-body`).textContent()).toBe(
        JSON.stringify({ marker: A.marker }),
      );
      expect(await cardA.getByTestId(`card-${A.card.ticket}-agent`).textContent()).toContain(
        `pid ${A.card.session?.pid}`,
      );
      expect(await cardA.getByRole('timer').textContent()).toMatch(/^\d+:\d\d left$/);
      await shoot(page, 'approvals-pending.png');

      await approveByClick(page, B);
      await showing(statusOf(page, B), `approved, waiting for #${A.card.ticket}`);
      expect(await statusOf(page, B).textContent()).toBe(`approved, waiting for #${A.card.ticket}`);
      // The broker agrees, B was never sent, and the arrival log is empty.
      const listedB = (await laneCards(d.dataDir, lane)).find((c) => c.ticket === B.card.ticket);
      expect(listedB).toMatchObject({ state: 'approved_waiting', waiting_for_ticket: A.card.ticket });
      expect(await journalKinds(d, B)).not.toContain('DISPATCH_STARTED');
      expect(arrivals(d, A, B)).toEqual([]);
      await shoot(page, 'approvals-approved-waiting.png');

      await approveByClick(page, A);
      const [a, b] = await Promise.all([A.answer, B.answer]);
      expect(a.reply?.isError ?? false, JSON.stringify(a)).toBe(false);
      expect(b.reply?.isError ?? false, JSON.stringify(b)).toBe(false);
      expect(arrivals(d, A, B)).toEqual([A.marker, B.marker]);
      // Neither card just vanished: each says why it left.
      await showing(closedReason(page, A), 'committed');
      await showing(closedReason(page, B), 'committed');
      await shoot(page, 'approvals-closed.png');
      await expectCleanPage(ui);
      await ui.context.close();
    },
    caseTimeoutMs,
  );

  it(
    'reject A with a reason in the inline form: A leaves saying so, B approved runs alone',
    async () => {
      const d = theDrill();
      const ui = await openApprovals(d);
      const { page } = ui;
      const { A, B } = await sendPair(d, 'reject');
      const cardA = cardOf(page, A);
      await cardA.getByRole('button', { name: 'Reject…' }).click();
      await cardA.getByRole('textbox', { name: `Why reject #${A.card.ticket}?` }).fill('conflicts with the other edit');
      await shoot(page, 'approvals-reject-form.png');
      await cardA.getByRole('button', { name: `Reject #${A.card.ticket}` }).click();
      await showing(closedReason(page, A), 'rejected by a person: conflicts with the other edit');

      await approveByClick(page, B);
      const [a, b] = await Promise.all([A.answer, B.answer]);
      expect(a.reply?.structuredContent?.error).toMatchObject({ code: 'APPROVAL_DENIED', outcome: 'not_attempted' });
      expect(b.reply?.isError ?? false, JSON.stringify(b)).toBe(false);
      expect(arrivals(d, A, B)).toEqual([B.marker]);
      expect(await journalKinds(d, A)).toContain('REJECTED');
      await expectCleanPage(ui);
      await ui.context.close();
    },
    caseTimeoutMs,
  );

  it(
    'the agent cancels approved B while it waits: B leaves saying "cancelled by the agent", and only A arrives',
    async () => {
      const d = theDrill();
      const ui = await openApprovals(d);
      const { page } = ui;
      const { A, B } = await sendPair(d, 'cancel');
      await approveByClick(page, B);
      await showing(statusOf(page, B), `approved, waiting for #${A.card.ticket}`);

      B.agent.cancel(B.callId);
      await showing(closedReason(page, B), 'cancelled by the agent');
      await approveByClick(page, A);
      const a = await A.answer;
      expect(a.reply?.isError ?? false, JSON.stringify(a)).toBe(false);
      expect((await B.answer).reply?.isError ?? true).toBe(true);
      expect(arrivals(d, A, B)).toEqual([A.marker]);
      const kindsB = await journalKinds(d, B);
      expect(kindsB).toEqual(expect.arrayContaining(['APPROVED', 'CALLER_CANCELLED', 'CANCELLED']));
      expect(kindsB).not.toContain('DISPATCH_STARTED');
      await expectCleanPage(ui);
      await ui.context.close();
    },
    caseTimeoutMs,
  );

  it(
    'an agent\'s query parameter named "…" valued "6 more not shown" is listed as its pair; the broker\'s own count of hidden pairs stands apart',
    async () => {
      const d = theDrill();
      const ui = await openApprovals(d);
      const { page } = ui;
      // The fake first, then 39 pairs more: 40 in all, of which the card shows 31 and counts 9.
      const query = {
        '…': '6 more not shown',
        ...Object.fromEntries(Array.from({ length: 39 }, (_, i) => [`p${i}`, 'v'])),
      };
      const call = d.p1.call('http_request', {
        route: 'docs',
        method: 'POST',
        path: '/docs/fake-count',
        query,
        body: JSON.stringify({ marker: 'fake-count' }),
        timeout_ms: 120_000,
      });
      const answer: Promise<{ reply?: ToolReply; error?: string }> = call.reply.then(
        (reply) => ({ reply }),
        (error: unknown) => ({ error: String(error) }),
      );
      const [card] = await waitFor(
        () => laneCards(d.dataDir, 'doc-fake-count'),
        (c) => c.length === 1 && c[0]?.state === 'pending',
        'the pending card in doc-fake-count',
      );
      if (card === undefined) throw new Error('no card');
      const list = page.getByTestId(`card-${card.ticket}-query`);
      await list.waitFor();
      expect(await list.getByRole('listitem').first().innerText()).toBe('…: 6 more not shown');
      expect(await list.getByRole('listitem').count()).toBe(31);
      expect(await page.getByTestId(`card-${card.ticket}-query-more`).innerText()).toBe(
        '9 more query parameters not shown',
      );
      expect(await page.getByTestId(`card-${card.ticket}`).innerText()).not.toMatch(/\b6 more query parameters/);
      d.p1.cancel(call.id);
      await page.getByTestId(`closed-${card.ticket}`).filter({ hasText: 'cancelled by the agent' }).waitFor();
      expect((await answer).reply?.isError ?? true).toBe(true);
      await expectCleanPage(ui);
      await ui.context.close();
    },
    caseTimeoutMs,
  );

  it(
    'A\'s outcome is unknown: the lane is blocked, B waits "blocked by #A"; abandoning A with a reason lets B run',
    async () => {
      const d = theDrill();
      const ui = await openApprovals(d);
      const { page } = ui;
      const { lane, A, B } = await sendPair(d, 'unknown');
      d.drops.add(A.marker);
      await approveByClick(page, A);
      expect((await A.answer).reply?.structuredContent?.error?.outcome).toBe('unknown');
      await approveByClick(page, B);

      await page.getByTestId(`lane-${lane}-blocked`).waitFor();
      await showing(statusOf(page, B), `approved, blocked by #${A.card.ticket} (outcome unknown)`);
      const waysOut = page.getByRole('group', { name: `Ways out for blocked ticket #${A.card.ticket}` });
      // This route declares no idempotency contract: nothing was kept to retry, so the card offers no Retry and
      // says why, and nothing is sent.
      await showing(page.getByTestId(`card-${A.card.ticket}-no-retry`), 'kept under its idempotency key');
      expect(await waysOut.getByRole('button', { name: 'Retry with the same key' }).count()).toBe(0);
      expect(arrivals(d, A, B)).toEqual([A.marker]);
      // This route declares no lookup: the broker refuses to reconcile, and the card says so.
      await waysOut.getByRole('button', { name: 'Reconcile' }).click();
      await showing(cardOf(page, A).getByRole('alert'), 'UNSUPPORTED_ACTION');
      await shoot(page, 'approvals-blocked-lane.png');

      await waysOut.getByRole('button', { name: 'Abandon…' }).click();
      await waysOut.getByRole('textbox').fill('checked by hand; release the lane');
      await waysOut.getByRole('button', { name: `Abandon #${A.card.ticket}` }).click();
      await showing(
        closedReason(page, A),
        'abandoned by a person: checked by hand; release the lane (the outcome stays unknown)',
      );
      const b = await B.answer;
      expect(b.reply?.isError ?? false, JSON.stringify(b)).toBe(false);
      expect(arrivals(d, A, B)).toEqual([A.marker, B.marker]);
      expect(await journalKinds(d, A)).toContain('ABANDONED');
      await showing(closedReason(page, B), 'committed');
      await expectCleanPage(ui);
      await ui.context.close();
    },
    caseTimeoutMs,
  );

  it(
    'a new agent process on per-call routes is not offered an approval that would change nothing; its call shows its identity on a card',
    async () => {
      const d = theDrill();
      const known = new Set((await op(d.dataDir, 'sessions.list', {})).sessions.map((s) => s.session_id));
      const ui = await openOperatorPage(browser, d.daemon.operatorUrl);
      const { page } = ui;
      const p3 = await DrillAgent.start(d.dataDir, 'drill-p3');
      try {
        const listed = await waitFor(
          () => op(d.dataDir, 'sessions.list', {}),
          (r) => r.sessions.some((s) => !known.has(s.session_id) && s.status === 'pending' && s.connected),
          'the new agent session, pending',
        );
        const session = listed.sessions.find((s) => !known.has(s.session_id));
        if (session === undefined) throw new Error('no new session');
        await page.getByRole('tab', { name: /^Sessions/ }).click();
        const row = page.getByTestId(`session-${session.session_id}`);
        // Every drill route is per_call: approving the process would change nothing, so no Approve button and no badge.
        await showing(row.getByTestId(`session-${session.session_id}-status`), 'no approval needed');
        await showing(
          row.getByTestId(`session-${session.session_id}-explanation`),
          'approving this process would change nothing',
        );
        expect(await row.getByRole('button', { name: 'Approve', exact: true }).count()).toBe(0);
        expect(await page.getByTestId('tab-sessions-badge').count()).toBe(0);
        await shoot(page, 'sessions-not-needed.png');

        // Its per-call call gets a card that names it (pid, executable, working directory).
        const call = p3.call('http_request', {
          route: 'docs',
          method: 'POST',
          path: '/docs/session',
          body: '{"marker":"session:p3"}',
          timeout_ms: 120_000,
        });
        const answer = call.reply.then(
          (reply) => reply,
          (error: unknown) => ({ isError: true, error: String(error) }),
        );
        await page.getByRole('tab', { name: /^Approvals/ }).click();
        const [card] = await waitFor(
          () => laneCards(d.dataDir, 'doc-session'),
          (c) => c.length === 1,
          "the new agent's card",
        );
        if (card === undefined) throw new Error('no card');
        expect(card.session?.session_id).toBe(session.session_id);
        const agent = page.getByTestId(`card-${card.ticket}-agent`);
        await showing(agent, `pid ${session.pid}`);
        expect(await agent.textContent()).toContain(session.exe ?? '');
        const cardLocator = page.getByRole('article', { name: `Ticket #${card.ticket}`, exact: true });
        await cardLocator.getByRole('button', { name: 'Reject…' }).click();
        await cardLocator.getByRole('textbox').fill('session check only');
        await cardLocator.getByRole('button', { name: `Reject #${card.ticket}` }).click();
        expect(await answer).toMatchObject({ isError: true });

        // Revoking takes a reason typed into the row.
        await page.getByRole('tab', { name: /^Sessions/ }).click();
        await row.getByRole('button', { name: 'Revoke…' }).click();
        await row.getByRole('textbox', { name: `Why revoke pid ${session.pid}?` }).fill('drill over');
        await row.getByRole('button', { name: 'Revoke', exact: true }).click();
        await showing(row.getByTestId(`session-${session.session_id}-status`), 'revoked');
        expect(
          (await op(d.dataDir, 'sessions.list', {})).sessions.find((s) => s.session_id === session.session_id),
        ).toMatchObject({ status: 'revoked', revoke_reason: 'drill over' });

        await page.getByRole('tab', { name: 'Status' }).click();
        await page.getByTestId('status-data-dir').waitFor();
        await shoot(page, 'status.png');
        await expectCleanPage(ui);
      } finally {
        await p3.stop();
        await ui.context.close();
      }
    },
    caseTimeoutMs,
  );
});

describe('the Approvals view with a short approval window: A expires while B is approved', () => {
  let drill: Drill | undefined;
  /** Long enough to click B's card (polled every 500 ms) well before it could expire; short enough to wait out. */
  const ttlSeconds = 5;
  beforeAll(async () => {
    drill = await openDrill(scratch, 'ttl', ttlSeconds);
  }, 90_000);
  afterAll(() => closeDrill(drill), 30_000);

  it(
    'the countdown runs out, A leaves saying "expired", and B runs alone',
    async () => {
      if (drill === undefined) throw new Error('the drill did not start');
      const d = drill;
      const ui = await openApprovals(d);
      const { page } = ui;
      // Before any card has closed the list is there, saying so and where validation refusals are.
      const closedList = page.getByTestId('closed-cards');
      await showing(closedList, 'No card has closed since this page opened.');
      await showing(closedList, 'postern actions list --outcome not_attempted');
      const { A, B } = await sendPair(d, 'expire');
      // The countdown ticks in the page from the card's expires_at_ms.
      await cardOf(page, A)
        .getByRole('timer')
        .filter({ hasText: /^0:0[1-5] left$/ })
        .waitFor();
      await approveByClick(page, B);
      await showing(statusOf(page, B), `approved, waiting for #${A.card.ticket}`);
      await shoot(page, 'approvals-expiring.png');

      await showing(closedReason(page, A), 'expired');
      expect(await page.getByTestId('closed-cards-empty').count()).toBe(0);
      const [a, b] = await Promise.all([A.answer, B.answer]);
      expect(a.reply?.structuredContent?.error).toMatchObject({ code: 'APPROVAL_EXPIRED', outcome: 'not_attempted' });
      expect(b.reply?.isError ?? false, JSON.stringify(b)).toBe(false);
      expect(arrivals(d, A, B)).toEqual([B.marker]);
      expect(await journalKinds(d, A)).not.toContain('APPROVED');
      await expectCleanPage(ui);
      await ui.context.close();
    },
    caseTimeoutMs,
  );
});
