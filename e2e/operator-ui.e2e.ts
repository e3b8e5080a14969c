import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { brokerStatusSchema, type BrokerStatus } from '../broker/contract/index.js';
import { Journal } from '../broker/journal/index.js';
import { systemClock } from '../broker/ports/index.js';
import { actionPaths } from '../broker/testing/action-paths.js';
import { stdioServerCommand } from '../broker/testing/upstream-mcp/index.js';
import { repoRoot, startDaemon, type RunningDaemon } from '../tests/support/postern-process.js';
import {
  assertRendererBuilt,
  launchChromium,
  openOperatorPage,
  browserStorageOf,
  operatorAuthorization,
  sessionSecretFor,
} from './fixtures/browser.js';

/**
 * The operator's first minute: run `postern daemon`, open the URL it printed, see the broker's
 * real status. Every wait is on a line, an event or a selector; none is a sleep.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'postern-e2e-'));
const dataDir = path.join(scratch, 'data');
const screenshots = path.join(repoRoot, 'test-results', 'e2e');

let daemon: RunningDaemon;
let browser: Browser;

/** A previous run that stopped right after DISPATCH_STARTED: the daemon must recover it as unknown. */
async function seedInterruptedDispatch(): Promise<number> {
  const journal = await Journal.open({ dataDir, clock: systemClock });
  const script = actionPaths.httpApproved('act_e2eseed00000001');
  const cut = script.findIndex((event) => event.kind === 'DISPATCH_STARTED') + 1;
  for (const event of script.slice(0, cut)) await journal.append(event);
  await journal.close();
  return cut;
}
let seededEvents = 0;

/** One upstream MCP server, never started yet: Status lists it as idle. */
function writeConfigWithUpstream(): void {
  const server = stdioServerCommand();
  const yaml = [
    'version: 1',
    'mcp_servers:',
    '  - name: files',
    '    transport: stdio',
    `    command: ${JSON.stringify(server.command)}`,
    `    args: ${JSON.stringify(server.args)}`,
    '',
  ];
  writeFileSync(path.join(dataDir, 'postern.yaml'), yaml.join('\n'));
}

beforeAll(async () => {
  assertRendererBuilt(repoRoot);
  seededEvents = await seedInterruptedDispatch();
  writeConfigWithUpstream();
  mkdirSync(screenshots, { recursive: true });
  [daemon, browser] = await Promise.all([startDaemon(dataDir), launchChromium()]);
});

afterAll(async () => {
  await browser?.close();
  await daemon?.process.stop();
  rmSync(scratch, { recursive: true, force: true });
});

async function statusFromApi(): Promise<BrokerStatus> {
  const answer = await fetch(`${daemon.origin}/api/status`, {
    headers: await operatorAuthorization(daemon.operatorUrl),
  });
  const reply = (await answer.json()) as { value: unknown };
  return brokerStatusSchema.parse(reply.value);
}

describe('the operator UI on the headless daemon', () => {
  it('signs in with the printed URL, drops the token from the address bar and shows the real status', async () => {
    const { context, page, problems: pageProblems } = await openOperatorPage(browser, daemon.operatorUrl);
    expect(page.url()).toBe(`${daemon.origin}/`);
    expect(page.url()).not.toContain(daemon.token);

    const dataDirCell = page.getByTestId('status-data-dir');
    await dataDirCell.waitFor();
    const expected = await statusFromApi();
    // The daemon holds a real journal and recovered the interrupted dispatch as unknown.
    expect(expected.journal).toMatchObject({ state: 'open', events: seededEvents + 1, recovered_at_open: 1 });
    expect(expected.actions).toEqual({ total: 1, in_flight: 0, unknown: 1 });
    expect(await dataDirCell.textContent()).toBe(dataDir);
    expect(await page.getByTestId('status-mode').textContent()).toBe('headless');
    expect(await page.getByTestId('status-journal-state').textContent()).toBe(expected.journal.state);
    expect(await page.getByTestId('status-journal-events').textContent()).toBe(String(expected.journal.events));
    expect(await page.getByTestId('status-journal-last-seq').textContent()).toBe(String(expected.journal.last_seq));
    expect(await page.getByTestId('status-actions-in-flight').textContent()).toBe(String(expected.actions.in_flight));
    expect(await page.getByTestId('status-actions-unknown').textContent()).toBe(String(expected.actions.unknown));
    expect(expected.vault).toMatchObject({ state: 'uninitialized', auto_lock_minutes: 15, last_lock: null });
    expect(await page.getByTestId('status-vault-state').textContent()).toBe(expected.vault.state);
    // The configured upstream MCP server, listed before anything started it.
    expect(expected.upstreams).toEqual([
      { server: 'files', transport: 'stdio', state: 'idle', restarts: 0, auth: 'none' },
    ]);
    expect(await page.getByTestId('status-upstream-files-state').textContent()).toBe('idle');
    expect(await page.getByTestId('status-error').count()).toBe(0);

    // The session lives in the page's memory only: no cookie (a cookie would go to every port), and nothing in the
    // browser storage Chromium writes into the profile on disk.
    expect(sessionSecretFor(daemon.operatorUrl)).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(await context.cookies()).toEqual([]);
    expect(await browserStorageOf(page)).toEqual({ session: [], local: [], cookie: '' });
    // Any CSP violation or script error would show up here.
    expect(pageProblems).toEqual([]);
    await page.screenshot({ path: path.join(screenshots, 'operator-status.png'), fullPage: true });
    await context.close();
  });

  it('gives a fresh browser context without the session only the public page, which asks to sign in; the API answers 401', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    const pageResponse = await page.goto(`${daemon.origin}/`);
    expect(pageResponse?.status()).toBe(200);
    await page.getByTestId('sign-in-view').waitFor();
    expect(await page.getByTestId('status-data-dir').count()).toBe(0);
    const apiResponse = await page.goto(`${daemon.origin}/api/status`);
    expect(apiResponse?.status()).toBe(401);
    expect(await context.cookies()).toEqual([]);
    await context.close();
  });

  it('refuses a context that brings a wrong token, and sets no cookie', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    const response = await page.goto(`${daemon.origin}/?token=${'x'.repeat(43)}`);
    expect(response?.status()).toBe(401);
    expect(await context.cookies()).toEqual([]);
    await context.close();
  });

  it('shows a clear error, keeping the last status only as a snapshot with its time, when the broker stops answering', async () => {
    const { context, page } = await openOperatorPage(browser, daemon.operatorUrl);
    await page.getByTestId('status-data-dir').waitFor();
    // While it answers: the vault's live state and its next step (no vault yet).
    expect(await page.getByTestId('status-vault-state').textContent()).toBe('uninitialized');
    await page.getByTestId('status-vault-lock-banner').waitFor();

    expect((await daemon.process.stop()).code).toBe(0);
    await page.getByTestId('status-refresh').click();
    const banner = page.getByTestId('status-error');
    await banner.waitFor();
    expect(await page.getByTestId('status-error-code').textContent()).toBe('BROKER_UNREACHABLE');
    // The snapshot says when it was taken, with its zone, and that it is not the broker's state now.
    expect(await page.getByTestId('status-stale').textContent()).toMatch(
      /last status received, as of \d\d:\d\d:\d\d \S+: a snapshot, not the broker's state now/,
    );
    expect(await page.getByTestId('status-details').getAttribute('data-stale')).toBe('true');
    // A gone broker has no vault state and no journal state to show; its counts are said as of their time.
    expect(await page.getByTestId('status-vault-state').getAttribute('data-state')).toBe('not_known');
    expect(await page.getByTestId('status-vault-state').textContent()).not.toContain('uninitialized');
    expect(await page.getByTestId('status-journal-state').getAttribute('data-state')).toBe('not_known');
    expect(await page.getByTestId('status-details').textContent()).toMatch(/unknown \(as of \d\d:\d\d:\d\d \S+\)/);
    expect(await page.getByTestId('status-vault-lock-banner').count()).toBe(0);
    expect(await page.getByTestId('status-upstreams').count()).toBe(0);
    expect(await page.getByTestId('status-data-dir').textContent()).toBe(dataDir);
    await page.screenshot({ path: path.join(screenshots, 'operator-status-error.png'), fullPage: true });
    await context.close();
  });
});
