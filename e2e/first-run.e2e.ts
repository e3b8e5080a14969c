import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArrivalLogServer } from '../broker/testing/arrival-log-server.js';
import { DrillAgent } from '../tests/support/drill-agent.js';
import { posternBin, repoRoot, startDaemon, type RunningDaemon } from '../tests/support/postern-process.js';
import { assertRendererBuilt, launchChromium, openOperatorPage, operatorAuthorization } from './fixtures/browser.js';

/**
 * The first run by clicks (issue #16): `postern daemon` on an EMPTY data directory, the operator
 * opens the printed URL, and the guide takes them from no vault to an agent's first call: create the
 * vault, add a credential, add a route to a local target, copy the hookup line, then a real agent
 * (MCP SDK client through `postern mcp`) calls the route and the guide links to its card and action.
 * Every wait is on a selector, an event or an arrival; none is a sleep.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'postern-e2e-first-run-'));
const dataDir = path.join(scratch, 'data');
const screenshots = path.join(repoRoot, 'test-results', 'e2e');
const passphrase = 'CANARY first run vault passphrase 71c4';
const secret = 'CANARY-first-run-bearer-secret-3e9a';

let daemon: RunningDaemon;
let browser: Browser;
let target: ArrivalLogServer;
let agent: DrillAgent | undefined;

beforeAll(async () => {
  assertRendererBuilt(repoRoot);
  mkdirSync(screenshots, { recursive: true });
  [daemon, browser, target] = await Promise.all([startDaemon(dataDir), launchChromium(), ArrivalLogServer.start()]);
});

afterAll(async () => {
  await agent?.stop();
  await browser?.close();
  await daemon?.process.stop();
  await target?.stop();
  rmSync(scratch, { recursive: true, force: true });
});

async function api<T>(method: string): Promise<T> {
  const answer = await fetch(`${daemon.origin}/api/${method}`, {
    headers: await operatorAuthorization(daemon.operatorUrl),
  });
  return ((await answer.json()) as { value: T }).value;
}

describe('the first run on an empty data directory', () => {
  it('guides from no vault to the agent’s first call, by clicks', async () => {
    const { context, page, problems } = await openOperatorPage(browser, daemon.operatorUrl);
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: daemon.origin });
    const step = (id: string) => page.getByTestId(`first-run-step-${id}`);
    const stepDone = (id: string) => page.locator(`[data-testid="first-run-step-${id}"][data-state="done"]`).waitFor();

    // Offered on its own while the data directory is fresh, above the Status tab (which still shows).
    const strip = page.getByTestId('first-run-strip');
    await strip.waitFor();
    await page.getByTestId('status-data-dir').waitFor();
    expect(await page.getByTestId('first-run-strip-open').textContent()).toBe('Start: create the vault');
    await page.screenshot({ path: path.join(screenshots, 'first-run-strip.png'), fullPage: true });
    await page.getByTestId('first-run-strip-open').click();
    await page.waitForURL(`${daemon.origin}/#/welcome`);
    await page.getByTestId('first-run').waitFor();
    expect(await step('vault').getAttribute('data-state')).toBe('current');
    expect(await page.getByTestId('first-run-next').textContent()).toBe('Next: add the first credential.');

    // 1. The vault: a strength hint while typing, the passphrase twice.
    const first = page.getByTestId('first-run-passphrase');
    await first.fill('short');
    expect(await page.getByTestId('first-run-strength').getAttribute('data-strength')).toBe('too_short');
    await first.fill(passphrase);
    expect(await page.getByTestId('first-run-strength').getAttribute('data-strength')).toBe('strong');
    await page.getByTestId('first-run-passphrase-again').fill(passphrase);
    await page.screenshot({ path: path.join(screenshots, 'first-run-vault.png'), fullPage: true });
    await page.getByRole('button', { name: 'Create the vault' }).click();
    await stepDone('vault');
    expect(await api<{ state: string }>('vault.status')).toEqual({ state: 'unlocked', credentials: 0 });
    // Created in the UI, the first unlock sealed the (empty) first-use configuration.
    expect((await api<{ trust: string }>('config.pending')).trust).toBe('verified');

    // 2. The first credential, with the Credentials tab's own form, bound to the target's host.
    expect(await step('credential').getAttribute('data-state')).toBe('current');
    const form = page.getByRole('form', { name: 'Add credential' });
    await form.getByLabel('Name', { exact: true }).fill('demo-token');
    await form.getByLabel(/^May be sent to/).fill('127.0.0.1');
    await page.getByTestId('credential-secret').fill(secret);
    await form.getByRole('button', { name: 'Add credential' }).click();
    await stepDone('credential');
    expect(await page.getByTestId('first-run-step-credential-status').textContent()).toBe('1 credential in the vault.');

    // 3. The first route, with the Routes tab's own form, to the local target; in force at once (verified, unlocked).
    const routeForm = page.getByRole('form', { name: 'Add route' });
    await routeForm.getByLabel('Route name').fill('demo');
    await routeForm.getByLabel('Base URL').fill(`http://127.0.0.1:${target.port}`);
    await routeForm.getByLabel('Credential name').fill('demo-token');
    await routeForm.getByLabel('Approval').selectOption('per_call');
    await routeForm.getByRole('button', { name: 'Add route to the file' }).click();
    await stepDone('route');
    expect(await page.getByTestId('first-run-step-route-status').textContent()).toBe('1 route or host in force.');
    // No longer fresh: the strip is gone, the guide stays at #/welcome.
    expect(await strip.count()).toBe(0);

    // 4. The hookup line for this broker, exactly what `postern agent-config claude-code --data-dir` prints.
    const expected = `claude mcp add postern -- ${process.execPath} --inspect-port=192.0.2.1:9229 ${posternBin} mcp --data-dir ${dataDir}`;
    const line = page.getByTestId('first-run-hookup-text');
    await line.waitFor();
    expect(await line.textContent()).toBe(expected);
    await page.screenshot({ path: path.join(screenshots, 'first-run-hookup.png'), fullPage: true });
    await page.getByTestId('first-run-copy').click();
    await stepDone('hookup');
    expect(await page.getByTestId('first-run-step-hookup-status').textContent()).toBe(
      'Hookup line copied: paste it into your MCP client.',
    );
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(expected);

    // 5. Waiting, until a real agent connects and calls the route.
    await page.getByTestId('first-run-waiting').waitFor();
    agent = await DrillAgent.start(dataDir, 'first-run-agent');
    const call = agent.call('http_request', { route: 'demo', method: 'GET', path: '/hello', timeout_ms: 60_000 });
    const cardLink = page.getByTestId('first-run-card-link');
    await cardLink.waitFor();
    await stepDone('first_call');
    expect(await page.getByTestId('first-run-step-first_call-status').textContent()).toMatch(
      /^First call: GET demo\/hello \(ticket #\d+, waiting for approval\)\.$/,
    );
    const actionLink = page.getByTestId('first-run-action-link');
    const actionHref = await actionLink.getAttribute('href');
    expect(actionHref).toMatch(/^#\/action\/act_/);
    await page.screenshot({ path: path.join(screenshots, 'first-run-first-call.png'), fullPage: true });

    // The link leads to the card; approving it there sends the call, with the credential, to the target.
    await cardLink.click();
    await page.waitForURL(`${daemon.origin}/#/approvals`);
    await page.getByRole('article').first().getByRole('button', { name: 'Approve', exact: true }).click();
    await target.waitForArrivals(1, 30_000);
    expect(target.arrivals[0]).toMatchObject({ method: 'GET', path: '/hello' });
    expect(target.arrivals[0]?.headerNames).toContain('authorization');
    const reply = await call.reply;
    expect(reply.isError ?? false).toBe(false);

    // The guide's action link opens that action's detail, which names the guide as where it was opened (its back link).
    await page.goto(`${daemon.origin}/#/welcome`);
    await actionLink.click();
    await page.getByTestId('action-detail').waitFor();
    expect(actionHref).toBe(
      `#/action/${(await page.getByTestId('action-detail-id').textContent()) ?? ''}?from=welcome`,
    );
    const back = page.getByTestId('action-detail').getByRole('link', { name: '← First run' });
    expect(await back.getAttribute('href')).toBe('#/welcome');
    await page.screenshot({ path: path.join(screenshots, 'first-run-action.png'), fullPage: true });

    // Reachable afterwards, all done.
    await page.goBack();
    await page.waitForURL(`${daemon.origin}/#/welcome`);
    await page.locator('[data-testid="first-run-step-first_call"][data-state="done"]').waitFor();
    expect(await page.getByTestId('first-run-next').textContent()).toMatch(/^All done/);

    const shown = await page.content();
    expect(shown).not.toContain(secret);
    expect(shown).not.toContain(passphrase);
    expect(daemon.process.stdout + daemon.process.stderr).not.toContain(secret);
    expect(daemon.process.stdout + daemon.process.stderr).not.toContain(passphrase);
    expect(problems).toEqual([]);
    await context.close();
  });
});
