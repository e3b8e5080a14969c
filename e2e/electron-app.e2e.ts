import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ElectronApplication, Page } from 'playwright-core';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { brokerApiMethods } from '../broker/contract/index.js';
import { journalFileName, readJournalSnapshot } from '../broker/journal/index.js';
import { repoRoot } from '../tests/support/postern-process.js';
import { electronAvailability, launchDesktopApp, skippedLine } from './electron-app.js';

/**
 * The desktop app itself, through Playwright's Electron driver: the window shows the broker's real
 * status over IPC, the page has no Node and only the allow-listed bridge, window.open and
 * navigation go nowhere, and quitting closes the journal cleanly. Where Electron's binary is not
 * installed (this build machine cannot download it), every test here is skipped with the reason,
 * and the same operator flows are covered against the headless daemon (operator-ui, approvals).
 */
const availability = electronAvailability(repoRoot);
if (!availability.available) process.stdout.write(`${skippedLine(availability)}\n`);

const scratch = mkdtempSync(path.join(os.tmpdir(), 'postern-electron-e2e-'));
const dataDir = path.join(scratch, 'data');
let app: ElectronApplication | undefined;
let page: Page;

beforeAll(async () => {
  if (!availability.available) return;
  app = await launchDesktopApp(availability.electronPath, repoRoot, dataDir);
  page = await app.firstWindow();
});

afterAll(async () => {
  await app?.close();
  rmSync(scratch, { recursive: true, force: true });
});

beforeEach((ctx) => {
  if (!availability.available) ctx.skip(availability.reason);
});

describe('the desktop app (Electron)', () => {
  it('shows the broker’s real status through IPC', async () => {
    await page.getByTestId('status-data-dir').waitFor();
    expect(await page.getByTestId('status-data-dir').textContent()).toBe(dataDir);
    expect(await page.getByTestId('status-mode').textContent()).toBe('desktop');
  });

  it('gives the page no Node, and a bridge of exactly the operator methods', async () => {
    const seen = await page.evaluate(() => {
      const scope = globalThis as unknown as Record<string, unknown>;
      return {
        require: typeof scope['require'],
        process: typeof scope['process'],
        bridge: Object.keys((scope['postern'] ?? {}) as object).sort(),
      };
    });
    expect(seen).toEqual({ require: 'undefined', process: 'undefined', bridge: [...brokerApiMethods].sort() });
  });

  it('refuses window.open and navigation away from the page', async () => {
    const before = page.url();
    expect(await page.evaluate(() => window.open('https://example.com/') === null)).toBe(true);
    await page.evaluate(() => {
      window.location.href = 'https://example.com/';
    });
    await page.getByTestId('status-data-dir').waitFor();
    expect(page.url()).toBe(before);
  });

  it('closes the journal when it quits', async () => {
    await app!.close();
    app = undefined;
    // A clean close checkpoints the WAL into the database and removes it; a killed process leaves it.
    expect(readJournalSnapshot(dataDir).exists).toBe(true);
    expect(existsSync(path.join(dataDir, `${journalFileName}-wal`))).toBe(false);
  });
});
