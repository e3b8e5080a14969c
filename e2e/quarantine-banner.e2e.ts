import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { anchorFileOf } from '../broker/host/integrity-anchor.js';
import { op } from '../tests/support/drill.js';
import { DrillAgent } from '../tests/support/drill-agent.js';
import { repoRoot, startDaemon, type RunningDaemon } from '../tests/support/postern-process.js';
import { browserOverLockedDataDir, tearDownSpec } from './fixtures/data-dir.js';
import { openOperatorPage } from './fixtures/browser.js';

/**
 * Issue #20, the quarantine banner, by clicks against the real headless daemon: the signed integrity anchor (kept
 * outside the data directory) is edited between two starts, so the start quarantines the broker with ANCHOR_FORGED.
 * The page shows the stable code and what it means; "Re-adopt" (a person's decision on the signed-in operator UI)
 * signs a new anchor and the banner goes. Waits are on the page or the broker's state, never sleeps.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'pe2e-anchor-'));
const screenshots = path.join(repoRoot, 'test-results', 'e2e');
const passphrase = 'e2e anchor passphrase (test only)';
const dataDir = path.join(scratch, 'data');
const passphraseFile = path.join(scratch, 'pass');
const env = { POSTERN_PASSPHRASE_FILE: passphraseFile, POSTERN_ANCHOR_DIR: path.join(scratch, 'anchors') };

let browser: Browser;
let daemon: RunningDaemon | undefined;
beforeAll(async () => {
  browser = await browserOverLockedDataDir({ repoRoot, screenshots, dataDir, passphrase, passphraseFile });
}, 30_000);
afterAll(() => tearDownSpec(daemon, browser, scratch));

describe('a forged integrity anchor, by clicks', () => {
  it('shows ANCHOR_FORGED on the quarantine banner, and Re-adopt by the signed-in person clears it', async () => {
    daemon = await startDaemon(dataDir, { env, person: { passphraseFile } });
    // A session is an event: the checkpoint at stop then has a head to anchor.
    const agent = await DrillAgent.start(dataDir, 'anchor-e2e');
    await agent.stop();
    await daemon.process.stop('SIGTERM');
    const file = anchorFileOf(dataDir, env);
    const anchor = JSON.parse(readFileSync(file, 'utf8')) as { counter: number };
    writeFileSync(file, JSON.stringify({ ...anchor, counter: anchor.counter + 5 }));

    daemon = await startDaemon(dataDir, { env, person: { passphraseFile } });
    expect(await op(dataDir, 'integrity.anchor', {})).toMatchObject({ state: 'quarantined', code: 'ANCHOR_FORGED' });
    const { page, problems } = await openOperatorPage(browser, daemon.operatorUrl);
    const banner = page.getByTestId('quarantine-banner');
    await banner.waitFor();
    expect(await page.getByTestId('quarantine-code').textContent()).toBe('ANCHOR_FORGED');
    expect(await page.getByTestId('quarantine-words').textContent()).toContain('signature does not verify');
    expect(await banner.getAttribute('aria-label')).toBe('Journal quarantined');
    await page.screenshot({ path: path.join(screenshots, 'quarantine-banner.png'), fullPage: true });

    await page.getByTestId('quarantine-readopt').click();
    await banner.waitFor({ state: 'detached' });
    const report = await op(dataDir, 'integrity.anchor', {});
    expect(report).toMatchObject({ state: 'ok', readopted: { code: 'ANCHOR_FORGED' } });
    expect(report.readopted?.by).toBeTruthy();
    const readopted = (await op(dataDir, 'activity.list', {})).events.filter((e) => e.kind === 'INTEGRITY_READOPTED');
    expect(readopted.length).toBe(1);
    expect(problems).toEqual([]);
    await page.context().close();
  }, 90_000);
});
