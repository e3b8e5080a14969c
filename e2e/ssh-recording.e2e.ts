import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestSshd } from '../broker/testing/test-sshd.js';
import { DrillAgent } from '../tests/support/drill-agent.js';
import { repoRoot, runPostern, startDaemon, type RunningDaemon } from '../tests/support/postern-process.js';
import { createVaultAsPerson } from '../tests/support/accepted-config.js';
import { assertRendererBuilt, launchChromium, openOperatorPage } from './fixtures/browser.js';

/**
 * An SSH action's session recording, end to end: a real agent process calls ssh_exec through `postern mcp` on the
 * real daemon against a real OpenSSH sshd; `postern actions recording` prints and exports the cast; the action
 * detail view replays it by clicks (play, speed) until the last line shows, stderr marked apart. Waits are on the
 * page or the broker, never sleeps. Screenshots go to test-results/e2e/.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'pe2e-recording-'));
const dataDir = path.join(scratch, 'data');
const passphraseFile = path.join(scratch, 'passphrase');
const screenshots = path.join(repoRoot, 'test-results', 'e2e');
const passphrase = 'e2e recording passphrase (test only)';
const caseTimeoutMs = 90_000;
const unavailable = TestSshd.unavailableReason();

let sshd: TestSshd | undefined;
let daemon: RunningDaemon | undefined;
let agent: DrillAgent | undefined;
let browser: Browser;

beforeAll(async () => {
  if (unavailable !== undefined) {
    console.warn(`ssh recording e2e skipped: ${unavailable}`);
    return;
  }
  assertRendererBuilt(repoRoot);
  mkdirSync(dataDir, { mode: 0o700 });
  mkdirSync(screenshots, { recursive: true });
  writeFileSync(passphraseFile, passphrase, { mode: 0o600 });
  sshd = await TestSshd.start();
  writeFileSync(
    path.join(dataDir, 'postern.yaml'),
    [
      'version: 1',
      'routes: []',
      'ssh_hosts:',
      '  - name: lab',
      '    host: 127.0.0.1',
      `    port: ${sshd.port}`,
      `    user: ${sshd.user}`,
      '    credential: lab-key',
      `    host_key: {pinned: [${sshd.hostKey.fingerprint}]}`,
      '    approval: none',
      '',
    ].join('\n'),
  );
  // The file present when the person creates the vault is trusted on first use; the key is added after it.
  await createVaultAsPerson(dataDir, passphrase);
  [browser, daemon] = await Promise.all([
    launchChromium(),
    startDaemon(dataDir, { env: { POSTERN_PASSPHRASE_FILE: passphraseFile } }),
  ]);
  const added = await runPostern(
    [
      ...['vault', 'add', 'lab-key', '--kind', 'ssh_key', '--bind', '127.0.0.1', '--from-stdin'],
      ...['--data-dir', dataDir, '--passphrase-file', passphraseFile],
    ],
    { stdin: sshd.userKey.privateKey.toString('utf8') },
  );
  if (added.code !== 0) throw new Error(`postern vault add failed: ${added.stderr}`);
  agent = await DrillAgent.start(dataDir, 'recording-agent');
}, 60_000);

afterAll(async () => {
  await agent?.stop();
  await browser?.close();
  await daemon?.process.stop('SIGTERM');
  await sshd?.dispose();
  rmSync(scratch, { recursive: true, force: true });
}, 30_000);

describe('an SSH action’s session recording', () => {
  it(
    'is exported by the CLI and replayed in the action detail view by clicks, in order, stderr apart',
    async (ctx) => {
      if (sshd === undefined || daemon === undefined || agent === undefined)
        return ctx.skip(`real sshd unavailable: ${unavailable ?? 'not started'}`);
      const reply = await agent.call('ssh_exec', {
        host: 'lab',
        command: "printf 'first line\\n'; sleep 0.4; printf 'second line\\n' >&2; sleep 0.4; printf 'third line\\n'",
      }).reply;
      expect(reply.structuredContent?.error, JSON.stringify(reply.structuredContent)).toBeUndefined();
      const actionId = reply.structuredContent?.invocation_id ?? '';
      expect(actionId).toMatch(/^act_/);

      // The CLI: the cast on stdout, then the same bytes into a new 0600 file (never over an existing one).
      const printed = await runPostern(['actions', 'recording', actionId, '--data-dir', dataDir]);
      expect(printed.code, printed.stderr).toBe(0);
      const lines = printed.stdout.trimEnd().split('\n');
      expect(JSON.parse(lines[0] ?? '')).toMatchObject({ version: 2, width: 80, height: 24 });
      expect(lines.slice(1).map((l) => (JSON.parse(l) as unknown[]).slice(1))).toEqual([
        ['o', 'first line\n'],
        ['e', 'second line\n'],
        ['o', 'third line\n'],
      ]);
      const out = path.join(scratch, 'action.cast');
      const exported = await runPostern(['actions', 'recording', actionId, '--out', out, '--data-dir', dataDir]);
      expect(exported.code, exported.stderr).toBe(0);
      expect(readFileSync(out, 'utf8')).toBe(`${printed.stdout.trimEnd()}\n`);
      expect(statSync(out).mode & 0o777).toBe(0o600);
      const again = await runPostern(['actions', 'recording', actionId, '--out', out, '--data-dir', dataDir]);
      expect(again.code).not.toBe(0);
      expect(again.stderr).toContain('INVALID_ARGUMENT');

      // The page: open the action, play at 4×, and wait for the last line.
      const { page, problems, context } = await openOperatorPage(browser, daemon.operatorUrl);
      await page.goto(`${daemon.origin}/#/action/${actionId}`);
      const player = page.getByTestId('recording-player');
      await player.waitFor();
      const output = player.getByTestId('recording-output');
      // Paused at 0 s: the pauses the remote slept are in the recording, so the later lines are not shown yet.
      expect(await output.textContent()).not.toContain('second line');
      expect(await player.getAttribute('data-state')).toBe('paused');
      await player.getByLabel('Playback speed').selectOption('4');
      await player.getByRole('button', { name: 'Play' }).click();
      await page.locator('[data-testid="recording-player"][data-state="ended"]').waitFor();
      expect(await output.textContent()).toBe('first line\nsecond line\nthird line\n');
      expect(await output.locator('.cast-stderr').textContent()).toBe('second line\n');
      await page.screenshot({ path: path.join(screenshots, 'ssh-recording-played.png'), fullPage: true });

      // Restart goes back to 0 s: the later lines are gone again until played.
      await player.getByRole('button', { name: 'Restart' }).click();
      await page.locator('[data-testid="recording-player"][data-state="paused"]').waitFor();
      expect(await output.textContent()).not.toContain('second line');
      expect(problems).toEqual([]);
      await context.close();
    },
    caseTimeoutMs,
  );
});
