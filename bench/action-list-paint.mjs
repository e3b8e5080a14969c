/**
 * Actions-mode first-paint benchmark: a journal of N events (seeded through the journal's API before
 * the daemon starts, e2e/fixtures/seed-activity.ts), the real headless daemon, Debian's chromium.
 * Per fresh page (its own context, cold cache, signed in first): navigation to the first row
 * of Activity's Actions mode painted, as the page clocks it (performance.now() from the navigation's
 * start, one task after the frame that first held a row) and as the driver sees it; then scrolling
 * down through several keyset pages, with the row elements left in the DOM. Prints a table.
 *
 *   node --import tsx bench/action-list-paint.mjs [events, default 100000] [runs, default 5]
 *
 * Plain JavaScript, as bench/activity-first-paint.mjs, because bench/*.ts compiles without the e2e
 * fixtures' project (tsconfig.test.json). Not part of the test run. Bounded: every wait has a deadline; the seed is written once.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { launchChromium, openOperatorPage } from '../e2e/fixtures/browser.ts';
import { seedActivityJournal } from '../e2e/fixtures/seed-activity.ts';
import { startDaemon } from '../tests/support/postern-process.ts';
import { anchorsInScratch } from './anchor-dir.ts';

const events = Number(process.argv[2] ?? 100_000);
const runs = Number(process.argv[3] ?? 5);
const waitMsMax = 60_000;
/** The bar the issue sets for the first paint. */
const firstPaintMsMax = 1_000;
/** Rows loaded before the scroll measure stops (several 200-row keyset pages). */
const scrolledRowsMin = 1_000;

/**
 * Runs in the page before its scripts: notes when the first action row enters the DOM, then waits
 * for the next frame and one task after it. A string, so it is evaluated in the page, never in Node.
 */
const paintProbe = `(() => {
  const observer = new MutationObserver(() => {
    if (document.querySelector('[data-testid="action-row"]') === null) return;
    observer.disconnect();
    requestAnimationFrame(() => setTimeout(() => {
      const nav = performance.getEntriesByType('navigation')[0];
      const list = performance.getEntriesByType('resource').find((r) => r.name.includes('/api/actions.list'));
      window.__actionsFirstPaint = { painted: performance.now(), ready: nav ? nav.domContentLoadedEventEnd : NaN, listed: list ? list.responseEnd : NaN };
    }, 0));
  });
  observer.observe(document, { childList: true, subtree: true });
})();`;

function stats(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return {
    median: sorted[Math.floor((sorted.length - 1) / 2)] ?? NaN,
    min: sorted[0] ?? NaN,
    max: sorted.at(-1) ?? NaN,
  };
}

const ms = (n) => n.toFixed(0);

async function measureOnce(browser, daemon, samples) {
  // Signed in (the printed URL signs in once; later pages get its session as the sign-in page leaves it),
  // then away, so the measured load is a cold one of the mode's address.
  const { context, page } = await openOperatorPage(browser, daemon.operatorUrl, waitMsMax);
  await context.addInitScript({ content: paintProbe });
  await page.goto('about:blank');
  const t0 = performance.now();
  await page.goto(`${daemon.origin}/#/activity/actions`);
  await page.locator('[data-testid="action-row"]').first().waitFor();
  samples.driver.push(performance.now() - t0);
  // Functions, not strings: the page's CSP has no 'unsafe-eval'.
  await page.waitForFunction(() => globalThis.__actionsFirstPaint !== undefined, undefined, { timeout: waitMsMax });
  const probe = await page.evaluate(() => globalThis.__actionsFirstPaint);
  samples.inPage.push(probe.painted);
  samples.ready.push(probe.ready);
  samples.listed.push(probe.listed);

  const t1 = performance.now();
  const scroller = page.getByTestId('action-list-scroller');
  const loaded = async () => Number(await page.getByTestId('action-list-count').getAttribute('data-loaded'));
  while ((await loaded()) < scrolledRowsMin && performance.now() - t1 < waitMsMax) {
    const before = await loaded();
    await scroller.evaluate((el) => el.scrollTo({ top: el.scrollHeight }));
    await page.waitForFunction(
      (n) =>
        Number(globalThis.document.querySelector('[data-testid="action-list-count"]')?.getAttribute('data-loaded')) > n,
      before,
      { timeout: waitMsMax },
    );
  }
  samples.scrolled.push(performance.now() - t1);
  samples.domRows.push(await page.getByTestId('action-row').count());
  await context.close();
}

async function main() {
  const scratch = mkdtempSync(join(tmpdir(), 'postern-bench-actions-'));
  anchorsInScratch(scratch);
  const dataDir = join(scratch, 'data');
  mkdirSync(dataDir, { mode: 0o700 });
  let daemon;
  let browser;
  try {
    const seeded = await seedActivityJournal(dataDir, events);
    daemon = await startDaemon(dataDir, { env: { POSTERN_PASSPHRASE_FILE: seeded.passphraseFile } });
    browser = await launchChromium();
    const cpu = cpus()[0]?.model ?? 'unknown CPU';
    console.log(
      `# Actions first paint — ${cpus().length} × ${cpu}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}, Chromium ${browser.version()}`,
    );
    console.log(
      `seeded ${seeded.events.toLocaleString('en-US')} events through Journal.appendBatch in ${(seeded.ms / 1000).toFixed(1)} s\n`,
    );
    const samples = { inPage: [], ready: [], listed: [], driver: [], scrolled: [], domRows: [] };
    for (let run = 0; run < runs; run += 1) await measureOnce(browser, daemon, samples);

    const rows = [
      ['navigation → page scripts loaded (DOMContentLoaded, in page)', stats(samples.ready)],
      ['navigation → first actions.list page answered (in page)', stats(samples.listed)],
      ['navigation → first action row painted (in page, from navigation start)', stats(samples.inPage)],
      ['navigation → first action row visible (driver, goto to selector)', stats(samples.driver)],
      [`scroll until ${scrolledRowsMin.toLocaleString('en-US')} actions are loaded (driver)`, stats(samples.scrolled)],
    ];
    console.log(
      `| measure (${events.toLocaleString('en-US')} events, ${runs} fresh pages) | median ms | min ms | max ms |`,
    );
    console.log('| --- | ---: | ---: | ---: |');
    for (const [name, s] of rows) console.log(`| ${name} | ${ms(s.median)} | ${ms(s.min)} | ${ms(s.max)} |`);
    console.log(`\naction rows in the DOM after the scroll: ${samples.domRows.join(', ')}`);
    const median = stats(samples.inPage).median;
    console.log(
      `first paint median ${ms(median)} ms: ${median < firstPaintMsMax ? 'under' : 'OVER'} the ${firstPaintMsMax} ms bar`,
    );
  } finally {
    await browser?.close();
    await daemon?.process.stop('SIGTERM');
    rmSync(scratch, { recursive: true, force: true });
  }
}

await main();
