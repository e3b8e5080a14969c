import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type BrowserContext, type Locator, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { op } from '../tests/support/drill.js';
import { nextPrintedSignIn, repoRoot, startDaemon, type RunningDaemon } from '../tests/support/postern-process.js';
import {
  assertRendererBuilt,
  chromiumArgs,
  chromiumPath,
  profileFilesHolding,
  secretFieldExpected,
  secretFieldShape,
  typeSignInCode,
} from './fixtures/browser.js';

/**
 * The attack: a same-user agent reads the person's browser profile on disk (THREAT-MODEL: it reads every file the user
 * can). A secret typed into the page must not be there afterwards. Two ways a browser keeps what was typed:
 * - a password field's value, in the password store, once the person accepts "Save password?" (a bubble headless
 *   Chromium never shows, so this spec checks the cause instead: no field of the page is a password field);
 * - a text field's value, in the form history (`Web Data`), written at submit without asking unless the field says
 *   `autocomplete="off"`: this spec performs that one, with a control field that says nothing, which Chromium keeps.
 * Every secret's field is typed into and its form sent in real Chromium with a profile on disk: the sign-in code, the
 * first run's new passphrase twice, a credential's secret and session token, Unlock, the passphrase at sign-in, and
 * "Confirm it is you"; then every file of the profile is searched for each value.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'pe2e-secret-fields-'));
const dataDir = path.join(scratch, 'data');
const profile = path.join(scratch, 'profile');
const passphrase = 'CANARY-secret-fields-passphrase-5b1e';
const secretKey = 'CANARY-secret-fields-aws-secret-0c7d';
const sessionToken = 'CANARY-secret-fields-session-token-a2f4';

let daemon: RunningDaemon | undefined;
let context: BrowserContext | undefined;
beforeAll(async () => {
  assertRendererBuilt(repoRoot);
  [daemon, context] = await Promise.all([
    startDaemon(dataDir),
    chromium.launchPersistentContext(profile, {
      executablePath: chromiumPath,
      args: chromiumArgs,
      headless: true,
      viewport: { width: 1100, height: 900 },
    }),
  ]);
  context.setDefaultTimeout(15_000);
}, 30_000);
afterAll(async () => {
  await context?.close();
  await daemon?.process.stop();
  rmSync(scratch, { recursive: true, force: true });
});

/** Each field is built as a secret's field, and nothing on the page is a password field. */
async function expectSecretFields(page: Page, fields: Locator[]): Promise<void> {
  for (const field of fields) expect(await secretFieldShape(field)).toEqual(secretFieldExpected);
  expect(await page.locator('input[type="password" i]').count()).toBe(0);
}

/**
 * A form of the test's own with one text field that says nothing about autocomplete, sent as the page's forms are
 * (submit prevented, the form removed once answered): the control, which Chromium's form history keeps.
 */
async function sendControlForm(page: Page, value: string): Promise<void> {
  await page.evaluate(() => {
    const form = document.createElement('form');
    form.id = 'e2e-control';
    form.innerHTML = '<input type="text" name="e2e-control" id="e2e-control-field"><button type="submit">go</button>';
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      form.remove();
    });
    document.body.append(form);
  });
  await page.locator('#e2e-control-field').fill(value);
  await page.locator('#e2e-control-field').press('Enter');
  await page.locator('#e2e-control').waitFor({ state: 'detached' });
}

describe("when a same-user agent reads the person's browser profile after they typed every secret into the page", () => {
  it('finds none of them (nor any password field to offer saving), where it finds a control field’s value', async () => {
    if (daemon === undefined || context === undefined) throw new Error('the daemon or the browser did not start');
    const codes = [daemon.signInCode];

    // Sign in: the code (and an empty passphrase field: no vault yet).
    const page = await context.newPage();
    await page.goto(daemon.operatorUrl);
    await expectSecretFields(page, [page.getByTestId('sign-in-code'), page.getByTestId('sign-in-passphrase')]);
    await typeSignInCode(page, daemon.signInCode);

    // The first run creates the vault (which proves this tab).
    await page.goto(`${daemon.origin}/#/welcome`);
    const first = page.getByTestId('first-run-passphrase');
    const again = page.getByTestId('first-run-passphrase-again');
    await expectSecretFields(page, [first, again]);
    await first.fill(passphrase);
    await again.fill(passphrase);
    await page.getByRole('button', { name: 'Create the vault' }).click();
    await page.locator('[data-testid="first-run-step-vault"][data-state="done"]').waitFor();
    expect((await op(dataDir, 'vault.status', {})).state).toBe('unlocked');

    // A credential with a secret key and a session token.
    await page.getByRole('tab', { name: /^Credentials/ }).click();
    const form = page.getByRole('form', { name: 'Add credential' });
    await form.getByLabel('Name', { exact: true }).fill('cloud');
    await form.getByLabel('Kind', { exact: true }).selectOption('aws_sigv4');
    await form.getByLabel('Access key id').fill('AKIDEXAMPLE000000001');
    await form.getByLabel(/^May be sent to/).fill('127.0.0.1');
    const secretField = form.getByLabel('Secret access key');
    const tokenField = form.getByLabel(/^Session token/);
    await expectSecretFields(page, [secretField, tokenField]);
    await secretField.fill(secretKey);
    await tokenField.fill(sessionToken);
    await form.getByRole('button', { name: 'Add credential' }).click();
    await page.getByTestId('credential-added').filter({ hasText: 'Added cloud' }).waitFor();

    // Lock, then Unlock in the page.
    await page.getByRole('tab', { name: /^Vault/ }).click();
    await page.getByRole('button', { name: 'Lock now' }).click();
    const unlockField = page.getByTestId('vault-passphrase');
    await unlockField.waitFor();
    await expectSecretFields(page, [unlockField]);
    await unlockField.fill(passphrase);
    await page.getByRole('button', { name: 'Unlock', exact: true }).click();
    await page.getByTestId('vault-lock').waitFor();

    // A second tab presents the passphrase at sign-in.
    const second = await context.newPage();
    const withPassphrase = nextPrintedSignIn(daemon);
    codes.push(withPassphrase.code);
    await second.goto(withPassphrase.url);
    await typeSignInCode(second, withPassphrase.code, passphrase);

    // A third signs in with the code only and is asked at its first decision.
    const third = await context.newPage();
    const codeOnly = nextPrintedSignIn(daemon);
    codes.push(codeOnly.code);
    await third.goto(codeOnly.url);
    await typeSignInCode(third, codeOnly.code);
    await third.getByRole('tab', { name: /^Vault/ }).click();
    await third.getByRole('button', { name: 'Lock now' }).click();
    const proofField = third.getByTestId('proof-passphrase');
    await proofField.waitFor();
    await expectSecretFields(third, [proofField]);
    await proofField.fill(passphrase);
    await third.getByTestId('proof-submit').click();
    await third.locator('[data-testid="vault-state"]', { hasText: /^locked$/ }).waitFor();
    expect((await op(dataDir, 'vault.status', {})).state).toBe('locked');

    const control = `control-${Date.now()}-not-a-secret`;
    await sendControlForm(third, control);
    // What Chromium writes at exit is on disk once the context is closed.
    await context.close();
    context = undefined;
    expect(profileFilesHolding(profile, control).length).toBeGreaterThan(0);
    for (const secret of [passphrase, secretKey, sessionToken, ...codes])
      expect({ secret, files: profileFilesHolding(profile, secret) }).toEqual({ secret, files: [] });
  }, 90_000);
});
