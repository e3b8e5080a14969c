import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { Browser, Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBearerRouteDaemon, type BearerRouteDaemon } from '../tests/support/bearer-route-daemon.js';
import { DrillAgent, type ToolReply } from '../tests/support/drill-agent.js';
import { repoRoot } from '../tests/support/postern-process.js';
import { assertRendererBuilt, launchChromium, openOperatorPage, type OperatorPage } from './fixtures/browser.js';
import { filesUnder, filesHolding } from '../tests/support/data-dir-files.js';

/**
 * request_credential by clicks (issue #19): a real daemon, the agent a real MCP SDK client in its own process through
 * `postern mcp`, and a person answering in the Approvals view of the page the daemon serves. The agent asks with a
 * docs_url; the card shows it as text until "Show link"; the person pastes a canary secret and submits; the agent's
 * waiting call answers `provisioned` with the name. The canary must appear in no agent answer, no DOM after the form,
 * no API response the page received, no journal or vault byte and no log line. A second request is declined by click.
 * Waits are on the page (auto-waiting locators) or on the agent's answer, never sleeps.
 */
const prefix = 'pe2e-crq-';
const screenshots = path.join(repoRoot, 'test-results', 'e2e');
const routeCanary = 'CANARY-e2e-route-token-4d21';
const pasted = 'CANARY-pasted-in-the-browser-3b7d';
const docsUrl = 'https://example.com/settings/tokens?scope=issues';

let browser: Browser;
let running: BearerRouteDaemon;
let agent: DrillAgent;
let operator: OperatorPage;
const answers: string[] = [];
/** Every operator API response body the page received, with whether the secret had been pasted by then. */
const responses: Array<{ url: string; afterPaste: boolean; body: string }> = [];
let pastedYet = false;
/** The bodies still being read, awaited before they are checked. */
const reading: Array<Promise<void>> = [];

beforeAll(async () => {
  assertRendererBuilt(repoRoot);
  mkdirSync(screenshots, { recursive: true });
  browser = await launchChromium();
  running = await startBearerRouteDaemon({ prefix, canary: routeCanary, respond: (_req, res) => res.end('ok') });
  // Its own process: the control socket refuses operator calls from an agent's process tree; this one plays the agent.
  agent = await DrillAgent.start(running.dataDir, 'credential-asking-agent');
  operator = await openOperatorPage(browser, running.daemon.operatorUrl);
  operator.page.on('response', (response) => {
    const url = new URL(response.url());
    // The change stream never ends, so its body is not read; it carries topics and positions only.
    if (!url.pathname.startsWith('/api/') || url.pathname === '/api/events') return;
    const afterPaste = pastedYet;
    reading.push(
      response.text().then(
        (body) => void responses.push({ url: url.pathname, afterPaste, body }),
        () => undefined,
      ),
    );
  });
  await operator.page.getByRole('tab', { name: /^Approvals/ }).click();
  await operator.page.getByTestId('approvals-view').waitFor();
}, 90_000);

afterAll(async () => {
  await operator?.context.close();
  await browser?.close();
  await agent?.stop();
  await running?.stop();
});

function ask(args: Record<string, unknown>): Promise<ToolReply> {
  return agent.call('request_credential', { timeout_ms: 60_000, ...args }).reply.then((reply) => {
    answers.push(JSON.stringify(reply));
    return reply;
  });
}

/** The pending card showing `purpose`, and its request id (from its test id). */
async function cardFor(page: Page, purpose: string): Promise<{ card: Locator; id: string }> {
  const card = page.getByRole('article', { name: /^Credential request crq_/ }).filter({ hasText: purpose });
  await card.waitFor();
  const testId = await card.getAttribute('data-testid');
  if (testId === null || !testId.startsWith('crq-')) throw new Error(`no request id on the card: ${testId}`);
  return { card, id: testId.slice('crq-'.length) };
}

async function shoot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: path.join(screenshots, name), fullPage: true });
}

describe('an agent asks for a credential and a person provisions it by clicks', () => {
  it('shows the request as text, the link only on request, and the agent hears provisioned with the name', async () => {
    const { page } = operator;
    const purpose = 'Open issues on the tracker for the weekly triage';
    const waiting = ask({
      purpose,
      for: { route: 'docs' },
      kind: 'bearer',
      docs_url: docsUrl,
      scopes: ['issues:write'],
    });
    const { card, id } = await cardFor(page, purpose);
    expect(await page.getByTestId(`crq-${id}-purpose`).textContent()).toBe(purpose);
    expect(await card.textContent()).toContain('issues:write');
    // The agent chose the URL: it is text, and no anchor exists on the card until a person asks for one.
    expect(await page.getByTestId(`crq-${id}-docs`).textContent()).toContain(docsUrl);
    expect(await card.locator('a').count()).toBe(0);
    await shoot(page, 'credential-request-card.png');
    await card.getByRole('button', { name: 'Show link' }).click();
    const link = page.getByTestId(`crq-${id}-docs-link`);
    expect(await link.getAttribute('href')).toBe(docsUrl);
    expect(await link.getAttribute('target')).toBe('_blank');
    expect(await link.getAttribute('rel')).toBe('noopener noreferrer');

    // The form is prefilled from the route: its credential name, which the vault already holds — a refusal, with its code.
    const form = page.getByTestId(`crq-${id}-provision`);
    expect(await form.getByLabel('Credential name').inputValue()).toBe('docs-token');
    expect(await form.getByLabel(/^May be sent to/).inputValue()).toBe('docs, 127.0.0.1');
    const secret = page.getByTestId(`crq-${id}-secret`);
    pastedYet = true;
    await secret.fill(pasted);
    await form.getByRole('button', { name: 'Provision' }).click();
    await card.getByRole('alert').filter({ hasText: 'CREDENTIAL_EXISTS' }).waitFor();
    expect(await secret.inputValue()).toBe('');

    await form.getByLabel('Credential name').fill('tracker-token');
    await form.getByLabel(/^May be sent to/).fill('api.example.com');
    await secret.fill(pasted);
    await form.getByRole('button', { name: 'Provision' }).click();
    // Accepted, the card stops waiting and its form (with the field) leaves the page; until then the field is empty.
    await page.waitForFunction((testId) => {
      const field = document.querySelector<HTMLInputElement>(`[data-testid="${testId}"]`);
      return field === null || field.value === '';
    }, `crq-${id}-secret`);

    const result = await waiting;
    expect(result.isError).toBe(false);
    expect(result.structuredContent).toEqual({ status: 'provisioned', request_id: id, credential: 'tracker-token' });
    await page.getByTestId(`crq-${id}-status`).filter({ hasText: 'Provisioned: tracker-token (added)' }).waitFor();
    await shoot(page, 'credential-request-provisioned.png');
    expect(await page.content()).not.toContain(pasted);
  }, 90_000);
});

describe('a person declines a request by click', () => {
  it('the agent hears declined with the reason', async () => {
    const { page } = operator;
    const purpose = 'Deploy previews to the staging host';
    const waiting = ask({ purpose, for: { host: '*.staging.example.com' } });
    const { card, id } = await cardFor(page, purpose);
    await card.getByRole('button', { name: 'Decline…' }).click();
    await card.getByRole('textbox', { name: /^Why decline\?/ }).fill('use the preview bot instead');
    await card.getByRole('button', { name: 'Decline request' }).click();
    const result = await waiting;
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toEqual({
      status: 'declined',
      request_id: id,
      reason: 'use the preview bot instead',
    });
    await page.getByTestId(`crq-${id}-status`).filter({ hasText: 'Declined' }).waitFor();
    expect(await page.getByTestId(`crq-${id}-status`).textContent()).toContain('use the preview bot instead');
    expect(operator.problems).toEqual([]);
  }, 90_000);
});

describe('a person answers with a credential the vault holds', () => {
  it('binds it to the requested host and the agent hears its name', async () => {
    const { page } = operator;
    const purpose = 'Read the docs mirror';
    const waiting = ask({ purpose, for: { host: 'mirror.example.com' } });
    const { card, id } = await cardFor(page, purpose);
    await card.getByRole('button', { name: 'Use existing credential…' }).click();
    const form = page.getByTestId(`crq-${id}-existing`);
    await form.getByRole('option', { name: /^tracker-token / }).waitFor({ state: 'attached' });
    await form.getByLabel('Credential').selectOption('docs-token');
    expect(await form.getByLabel(/^Also allow it for/).inputValue()).toBe('mirror.example.com');
    const answered = page.waitForResponse((r) => new URL(r.url()).pathname === '/api/credential_requests.provision');
    await form.getByRole('button', { name: 'Use this credential' }).click();
    const result = await waiting;
    expect(result.structuredContent).toEqual({ status: 'provisioned', request_id: id, credential: 'docs-token' });
    await page.getByTestId(`crq-${id}-status`).filter({ hasText: 'Provisioned: docs-token (an existing' }).waitFor();
    expect(await (await answered).json()).toMatchObject({
      ok: true,
      value: {
        how: 'bound_existing',
        credential: { name: 'docs-token', bindings: expect.arrayContaining(['mirror.example.com']) },
      },
    });
    expect(operator.problems).toEqual([]);
  }, 90_000);
});

describe('the value a person pasted', () => {
  it('is in no agent answer, page response, data-directory file or log line', async () => {
    expect(answers).toHaveLength(3);
    await Promise.all(reading);
    expect(answers.join('\n')).not.toContain(pasted);
    // Responses after the paste were seen (the refusal, the provision, the re-lists): none carries the value.
    expect(responses.filter((r) => r.afterPaste).map((r) => r.url)).toEqual(
      expect.arrayContaining(['/api/credential_requests.provision', '/api/credential_requests.list']),
    );
    for (const response of responses) expect(response.body, response.url).not.toContain(pasted);
    expect(await operator.page.content()).not.toContain(pasted);
    expect(running.daemon.process.stdout).not.toContain(pasted);
    expect(running.daemon.process.stderr).not.toContain(pasted);
    // Stopped first so every byte the daemon wrote is in the files (journal, -wal, vault).
    await running.daemon.process.stop('SIGTERM');
    expect(filesUnder(running.dataDir).some((f) => f.endsWith('journal.sqlite'))).toBe(true);
    expect(filesHolding(running.dataDir, Buffer.from(pasted))).toEqual([]);
  }, 60_000);
});
