import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../broker/ports/index.js';
import { freePort, generateKey } from '../broker/testing/test-sshd.js';
import { openVault } from '../broker/vault/index.js';
import { acceptConfigAsPerson } from '../tests/support/accepted-config.js';
import { op, waitFor } from '../tests/support/drill.js';
import { DrillAgent, type ToolReply } from '../tests/support/drill-agent.js';
import { repoRoot, startDaemon, type RunningDaemon } from '../tests/support/postern-process.js';
import { assertRendererBuilt, launchChromium, openOperatorPage } from './fixtures/browser.js';

/**
 * An SSH command's card shows every character the agent sent: a real agent process calls ssh_exec through
 * `postern mcp` on the real daemon, the host asks per_call, and the command hides its tail behind 4100 spaces,
 * a newline and a terminal escape. The card in Chromium must show the tail, mark what would not show, and
 * say the command's size. The command never runs: the card is rejected (no sshd is needed, nothing listens on
 * the host's port). Waits are on the page or the broker, never sleeps. Screenshots go to test-results/e2e/.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'pe2e-ssh-card-'));
const dataDir = path.join(scratch, 'data');
const passphraseFile = path.join(scratch, 'passphrase');
const screenshots = path.join(repoRoot, 'test-results', 'e2e');
const passphrase = 'e2e ssh card passphrase (test only)';
const hiddenTail = `uptime${' '.repeat(4100)}; rm -rf /srv/data\nreboot\u001b[1A`;

let daemon: RunningDaemon | undefined;
let agent: DrillAgent | undefined;
let browser: Browser;

beforeAll(async () => {
  assertRendererBuilt(repoRoot);
  mkdirSync(dataDir, { mode: 0o700 });
  mkdirSync(screenshots, { recursive: true });
  writeFileSync(passphraseFile, passphrase, { mode: 0o600 });
  const key = generateKey(scratch, 'lab-key', 'postern-e2e');
  const vault = await openVault({ dataDir, clock: systemClock, kdf: 'min', idleLockMs: 0 });
  await vault.init(Buffer.from(passphrase));
  await vault.add({ name: 'lab-key', kind: 'ssh_key', secret: key.privateKey, bindings: ['lab', '127.0.0.1'] });
  await vault.close();
  writeFileSync(
    path.join(dataDir, 'postern.yaml'),
    [
      'version: 1',
      // The person here is this test process without a terminal: the CI opt-out, journaled as the process.
      'operator:',
      '  unattended_decisions: true',
      'ssh_hosts:',
      '  - name: lab',
      '    host: 127.0.0.1',
      `    port: ${await freePort()}`,
      '    user: tester',
      '    credential: lab-key',
      '    host_key: accept_new',
      '    approval: per_call',
      '',
    ].join('\n'),
  );
  await acceptConfigAsPerson(dataDir, passphraseFile);
  [browser, daemon] = await Promise.all([
    launchChromium(),
    startDaemon(dataDir, { env: { POSTERN_PASSPHRASE_FILE: passphraseFile } }),
  ]);
  agent = await DrillAgent.start(dataDir, 'ssh-card-agent');
  const sessions = await waitFor(
    () => op(dataDir, 'sessions.list', {}),
    (r) => r.sessions.some((s) => s.status === 'pending' && s.connected),
    'a pending agent session',
  );
  for (const s of sessions.sessions.filter((x) => x.status === 'pending'))
    await op(dataDir, 'sessions.approve', { session_id: s.session_id });
}, 60_000);

afterAll(async () => {
  await agent?.stop();
  await browser?.close();
  await daemon?.process.stop('SIGTERM');
  rmSync(scratch, { recursive: true, force: true });
}, 30_000);

describe('an SSH command on its approval card', () => {
  it('is shown whole: the tail behind 4100 spaces, the newline and the escape are marked and visible', async () => {
    if (daemon === undefined || agent === undefined) throw new Error('the daemon or agent did not start');
    const call = agent.call('ssh_exec', { host: 'lab', command: hiddenTail, timeout_ms: 120_000 });
    const answer: Promise<{ reply?: ToolReply; error?: string }> = call.reply.then(
      (reply) => ({ reply }),
      (error: unknown) => ({ error: String(error) }),
    );
    const [card] = (
      await waitFor(
        () => op(dataDir, 'approvals.list', {}),
        (r) => r.cards.some((c) => c.channel === 'ssh' && c.state === 'pending'),
        'a pending ssh card',
      )
    ).cards.filter((c) => c.channel === 'ssh');
    if (card === undefined) throw new Error('no ssh card');
    expect(card.command).toBe(hiddenTail);

    const { page, problems, context } = await openOperatorPage(browser, daemon.operatorUrl);
    await page.getByRole('tab', { name: /^Approvals/ }).click();
    const shown = page.getByTestId(`card-${card.ticket}-request`);
    await shown.waitFor();
    expect(await shown.textContent()).toBe('uptime[4100 spaces]; rm -rf /srv/data\\n\nreboot\\x1b[1A');
    expect(await shown.locator('.invisible-char').allTextContents()).toEqual(['[4100 spaces]', '\\n', '\\x1b']);
    expect(await page.getByTestId(`card-${card.ticket}-request-size`).textContent()).toContain(
      '4,135 characters on 2 lines',
    );
    // The tail is inside the command's box as laid out, not past its edge or below its fold.
    const tailInView = await shown.evaluate((pre) => {
      const box = pre.getBoundingClientRect();
      const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
      for (let node = walker.nextNode(); node !== null; node = walker.nextNode()) {
        const at = node.textContent?.indexOf('rm -rf /srv/data') ?? -1;
        if (at < 0) continue;
        const range = document.createRange();
        range.setStart(node, at);
        range.setEnd(node, at + 'rm -rf /srv/data'.length);
        const r = range.getBoundingClientRect();
        return r.width > 0 && r.left >= box.left && r.right <= box.right && r.bottom <= box.bottom;
      }
      return false;
    });
    expect(tailInView).toBe(true);
    expect(await shown.evaluate((pre) => getComputedStyle(pre).whiteSpace)).toBe('break-spaces');
    await page.screenshot({ path: path.join(screenshots, 'ssh-card-whole-command.png'), fullPage: true });

    await op(dataDir, 'approvals.reject', { ticket: card.ticket, reason: 'hides a second command' });
    const ended = await answer;
    expect(ended.reply?.structuredContent?.error).toMatchObject({ code: 'APPROVAL_DENIED', outcome: 'not_attempted' });
    expect(problems).toEqual([]);
    await context.close();
  });
});
