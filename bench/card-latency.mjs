/**
 * Card latency through the real UI: how long after an agent's tools/call is accepted (its
 * ACTION_ACCEPTED, journaled by the daemon) its approval card is in the page's DOM. The real daemon
 * and two agent processes through `postern mcp` (tests/support/drill.ts), Debian's chromium with
 * the e2e flags, the page signed in on the Approvals tab; a MutationObserver in the page stamps each
 * card when it is first added. Two modes:
 *
 *   push  GET /api/events open, every poll slowed to 10 min (?pollFloorMs): a card comes by push only.
 *   poll  /api/events refused by the browser, so the page polls as it does while the stream is down (500 ms).
 *
 *   npm run bench:card-latency [-- --calls 40]   (node --import tsx bench/card-latency.mjs)
 *
 * Calls run one at a time (each card is rejected before the next call), at most callsMax per mode.
 * Not part of the test run; .mjs like bench/activity-first-paint.mjs, since it drives the e2e fixtures (the
 * tools project), not only broker code. Needs `npm run build:renderer` first. Times are wall-clock ms on one
 * machine (the daemon's journal clock and the page's clock are the same clock).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { assertRendererBuilt, launchChromium, openOperatorPage } from '../e2e/fixtures/browser.ts';
import { closeDrill, op, openDrill, waitFor } from '../tests/support/drill.ts';
import { repoRoot } from '../tests/support/postern-process.ts';
import { anchorsInScratch } from './anchor-dir.ts';

const callsDefault = 30;
const callsMax = 200;
const cardWaitMs = 15_000;
const pollFloorMs = 600_000;

function callsFromArgs(argv) {
  const at = argv.indexOf('--calls');
  const asked = at === -1 ? callsDefault : Number(argv[at + 1]);
  if (!Number.isSafeInteger(asked) || asked < 1) throw new Error('--calls takes a whole number of calls >= 1');
  return Math.min(asked, callsMax);
}

/**
 * The page stamps every card article with the wall time it was first added to the DOM. A string, so it is evaluated
 * in the page as written (tsx's transform would name inner functions with a helper the page does not have).
 */
const stampCardsScript = `(() => {
  const seen = {};
  window.cardSeenAt = seen;
  const stamp = () => {
    const now = performance.timeOrigin + performance.now();
    for (const node of document.querySelectorAll('article[data-testid^="card-"]')) {
      const id = node.getAttribute('data-testid') || '';
      if (!(id in seen)) seen[id] = now;
    }
  };
  stamp();
  new MutationObserver(stamp).observe(document.body, { childList: true, subtree: true });
})()`;

async function stampCards(page) {
  await page.evaluate(stampCardsScript);
}

async function openApprovals(browser, drill, mode) {
  const { page } = await openOperatorPage(browser, drill.daemon.operatorUrl);
  const origin = new URL(drill.daemon.operatorUrl).origin;
  if (mode === 'poll') {
    await page.route(`${origin}/api/events`, (route) => route.abort());
    // A query makes it a new document (a hash alone would keep the page, and its open stream).
    await page.goto(`${origin}/?bench=poll#/approvals`);
  } else {
    const streamOpen = page.waitForResponse((r) => r.url() === `${origin}/api/events` && r.status() === 200);
    await page.goto(`${origin}/?pollFloorMs=${pollFloorMs}#/approvals`);
    await streamOpen;
  }
  await page.getByTestId('approvals-view').waitFor();
  await stampCards(page);
  return page;
}

/** One call: its card's times, as { acceptedToDomMs, cardShownToDomMs, sentToDomMs }. */
async function oneCall(drill, page, mode, i) {
  const lane = `doc-bench-${mode}-${i}`;
  const sentMs = Date.now();
  const call = drill.p1.call('http_request', {
    route: 'docs',
    method: 'POST',
    path: `/docs/bench-${mode}-${i}`,
    body: '{}',
    timeout_ms: 60_000,
  });
  const answered = call.reply.catch(() => undefined);
  await page.getByTestId(`lane-${lane}`).getByRole('article').first().waitFor({ timeout: cardWaitMs });
  const [card] = await waitFor(
    async () => (await op(drill.dataDir, 'approvals.list', {})).cards.filter((c) => c.lane === lane),
    (cards) => cards.length === 1,
    `the card of ${lane}`,
  );
  if (card === undefined) throw new Error(`no card in ${lane}`);
  const seenMs = await page.evaluate(`window.cardSeenAt[${JSON.stringify(`card-${card.ticket}`)}]`);
  if (seenMs === undefined) throw new Error(`the page never stamped card ${card.ticket}`);
  const events = (await op(drill.dataDir, 'actions.show', { action_id: card.action_id })).events;
  const at = (kind) => {
    const event = events.find((e) => e.kind === kind);
    if (event === undefined) throw new Error(`action ${card.action_id} has no ${kind}`);
    return event.at_ms;
  };
  await op(drill.dataDir, 'approvals.reject', { ticket: card.ticket, reason: 'bench' });
  await answered;
  return {
    acceptedToDomMs: seenMs - at('ACTION_ACCEPTED'),
    cardShownToDomMs: seenMs - at('CARD_SHOWN'),
    sentToDomMs: seenMs - sentMs,
  };
}

function quantile(sorted, q) {
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? Number.NaN;
}

function row(mode, what, values) {
  const sorted = [...values].sort((a, b) => a - b);
  const cell = (v) => v.toFixed(1).padStart(8);
  return `${mode.padEnd(5)} ${what.padEnd(22)} ${String(sorted.length).padStart(4)} ${cell(quantile(sorted, 0.5))} ${cell(quantile(sorted, 0.95))} ${cell(sorted.at(-1) ?? Number.NaN)}`;
}

async function main() {
  const calls = callsFromArgs(process.argv.slice(2));
  assertRendererBuilt(repoRoot);
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'postern-bench-card-'));
  anchorsInScratch(scratch);
  let drill;
  let browser;
  try {
    drill = await openDrill(scratch, 'bench', 300);
    browser = await launchChromium();
    const lines = [];
    for (const mode of ['push', 'poll']) {
      const page = await openApprovals(browser, drill, mode);
      // One call not measured: the first card pays for the page's and the daemon's cold paths.
      await oneCall(drill, page, mode, 0);
      const samples = [];
      for (let i = 1; i <= calls; i += 1) samples.push(await oneCall(drill, page, mode, i));
      lines.push(
        row(
          mode,
          'accepted -> card in DOM',
          samples.map((s) => s.acceptedToDomMs),
        ),
      );
      lines.push(
        row(
          mode,
          'CARD_SHOWN -> DOM',
          samples.map((s) => s.cardShownToDomMs),
        ),
      );
      lines.push(
        row(
          mode,
          'call sent -> DOM',
          samples.map((s) => s.sentToDomMs),
        ),
      );
      await page.context().close();
    }
    const cpu = os.cpus();
    console.log(
      `machine: ${cpu.length} x ${cpu[0]?.model ?? 'unknown cpu'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, ${os.platform()} ${os.release()}`,
    );
    console.log(`node ${process.version}, chromium ${browser.version()}, ${calls} calls per mode (one at a time)`);
    console.log(
      `${'mode'.padEnd(5)} ${'interval (ms)'.padEnd(22)} ${'n'.padStart(4)} ${'p50'.padStart(8)} ${'p95'.padStart(8)} ${'max'.padStart(8)}`,
    );
    for (const line of lines) console.log(line);
  } finally {
    await browser?.close();
    await closeDrill(drill);
    rmSync(scratch, { recursive: true, force: true });
  }
}

await main();
