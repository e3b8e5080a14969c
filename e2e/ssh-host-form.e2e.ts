import { createHash, generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { op } from '../tests/support/drill.js';
import { repoRoot, runPostern, startDaemon, type RunningDaemon } from '../tests/support/postern-process.js';
import { createVaultAsPerson } from '../tests/support/accepted-config.js';
import { assertRendererBuilt, launchChromium, openOperatorPage } from './fixtures/browser.js';

/**
 * The Routes & hosts forms by clicks against the real headless daemon (vault unlocked, so an edit
 * is in force at once): an SSH host entry with an IPv6 address and a pinned fingerprint is added;
 * a bad port is refused next to the SSH form naming the field (and a broker refusal the same way,
 * for the SSH and the route form); the SSH key credential the entry names is shown with its binding,
 * warned about while it is bound elsewhere and shown bound once `postern vault bind` (the command
 * the page prints) ran. Waits are on the page or the broker, never sleeps. Screenshots go to
 * test-results/e2e/.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'pe2e-sshform-'));
const dataDir = path.join(scratch, 'data');
const passphraseFile = path.join(scratch, 'passphrase');
const screenshots = path.join(repoRoot, 'test-results', 'e2e');
const passphrase = 'e2e ssh form passphrase (test only)';
const caseTimeoutMs = 90_000;
/** A fingerprint as `ssh-keygen -lf` prints it: SHA256 of a key blob, base64 without padding. */
const fingerprint = `SHA256:${createHash('sha256').update(randomBytes(32)).digest('base64').replace(/=+$/, '')}`;

let daemon: RunningDaemon | undefined;
let browser: Browser;

beforeAll(async () => {
  assertRendererBuilt(repoRoot);
  mkdirSync(dataDir, { mode: 0o700 });
  mkdirSync(screenshots, { recursive: true });
  writeFileSync(passphraseFile, passphrase, { mode: 0o600 });
  writeFileSync(path.join(dataDir, 'postern.yaml'), 'version: 1\nroutes: []\nssh_hosts: []\n');
  // The file present when the person creates the vault is trusted on first use, so edits apply at once.
  await createVaultAsPerson(dataDir, passphrase);
  [browser, daemon] = await Promise.all([launchChromium(), startDaemon(dataDir, { person: { passphraseFile } })]);
  // The key as a person adds it: from stdin, bound to another host only, so the form must say the new entry could not use it.
  const { privateKey } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    privateKeyEncoding: { type: 'pkcs1', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
  const added = await runPostern(
    [
      'vault',
      'add',
      'deploy-key',
      '--kind',
      'ssh_key',
      '--bind',
      'other-host',
      '--from-stdin',
      '--data-dir',
      dataDir,
      '--passphrase-file',
      passphraseFile,
    ],
    {
      stdin: privateKey,
    },
  );
  if (added.code !== 0) throw new Error(`postern vault add failed: ${added.stderr}`);
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await daemon?.process.stop('SIGTERM');
  rmSync(scratch, { recursive: true, force: true });
}, 30_000);

async function shoot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: path.join(screenshots, name), fullPage: true });
}

describe('the Add SSH host form, by clicks', () => {
  it(
    'refuses a bad port next to itself, warns about an unbound key until it is bound, and adds an IPv6 host with a pinned key',
    async () => {
      if (daemon === undefined) throw new Error('no daemon');
      const { page, problems, context } = await openOperatorPage(browser, daemon.operatorUrl);
      await page.setViewportSize({ width: 1000, height: 900 });
      await page.getByRole('tab', { name: /^Routes/ }).click();
      const form = page.getByRole('form', { name: 'Add SSH host' });
      const routeForm = page.getByRole('form', { name: 'Add route' });
      await form.waitFor();

      // A port out of range: said next to this form, naming the field; nothing is written.
      await form.getByLabel('Host entry name').fill('v6-host');
      await form.getByLabel('Host name or address').fill('2001:db8::5');
      await form.getByLabel('Port').fill('70000');
      await form.getByLabel('User').fill('deploy');
      await form.getByLabel('SSH key credential name').fill('deploy-key');
      await form.getByRole('button', { name: 'Add SSH host to the file' }).click();
      const error = form.getByTestId('ssh-host-form-error');
      await error.filter({ hasText: 'Port:' }).waitFor();
      expect(await error.getAttribute('data-field')).toBe('port');
      expect(await error.textContent()).toContain('from 1 to 65535');
      expect(await form.getByLabel('Port').getAttribute('aria-invalid')).toBe('true');
      expect(await routeForm.getByTestId('route-form-error').count()).toBe(0);
      expect(await page.getByTestId('config-edit-result').count()).toBe(0);
      expect(readFileSync(path.join(dataDir, 'postern.yaml'), 'utf8')).not.toContain('v6-host');

      // The key is named, and bound elsewhere: a warning with the command that fixes it.
      const use = form.getByTestId('ssh-host-credential');
      await page.locator('[data-testid="ssh-host-credential"][data-state="unbound"]').waitFor();
      expect(await use.textContent()).toContain("deploy-key is bound to other-host, not to this entry's host");
      const fix = (await form.getByTestId('ssh-host-credential-fix').textContent()) ?? '';
      expect(fix).toBe(`postern vault bind deploy-key --bind other-host --bind 2001:db8::5 --data-dir ${dataDir}`);
      await shoot(page, 'ssh-host-form-refused.png');

      // Run exactly what the page printed (the passphrase from a file, as a person's terminal would ask it).
      const bound = await runPostern([...fix.split(' ').slice(1), '--passphrase-file', passphraseFile]);
      expect(bound.code, bound.stderr).toBe(0);
      await form.getByTestId('ssh-host-credential-recheck').click();
      await page.locator('[data-testid="ssh-host-credential"][data-state="bound"]').waitFor();
      expect(await use.textContent()).toMatch(/^Uses deploy-key \(ssh_key, v\S+\), bound to 2001:db8::5\.$/);

      // Fixed: the address in brackets with its port, the fingerprint as ssh-keygen -lf prints it.
      await form.getByLabel('Host name or address').fill('[2001:db8::5]:2222');
      await form.getByLabel('Port').fill('');
      await form.getByLabel(/^Pinned host key fingerprints/).fill(`256 ${fingerprint} root@v6-host (ED25519)`);
      await form.getByTestId('ssh-host-key-mode').filter({ hasText: 'Host key: pinned (1)' }).waitFor();
      await form.getByRole('button', { name: 'Add SSH host to the file' }).click();
      // Whichever answer comes, its text is the failure message when it is not the one expected.
      const answer = form.locator('[data-testid="ssh-host-form-result"], [data-testid="ssh-host-form-error"]');
      await answer.waitFor();
      expect(await answer.textContent()).toMatch(/^Added SSH host v6-host to .*postern\.yaml: in force now\.$/);
      const row = page.getByTestId('ssh-host-v6-host');
      await row.filter({ hasText: 'deploy@2001:db8::5:2222' }).waitFor();
      expect(await row.textContent()).toContain('pinned (1)');
      expect((await op(dataDir, 'config.show', {})).ssh_hosts).toEqual([
        expect.objectContaining({
          name: 'v6-host',
          host: '2001:db8::5',
          port: 2222,
          user: 'deploy',
          credential: 'deploy-key',
          host_key: 'pinned (1)',
          credential_missing: false,
        }),
      ]);
      expect(readFileSync(path.join(dataDir, 'postern.yaml'), 'utf8')).toContain(fingerprint);
      await shoot(page, 'ssh-host-form-added.png');

      // The broker's own refusal (a name used twice) lands next to the SSH form too, naming its field.
      await form.getByLabel('Host entry name').fill('v6-host');
      await form.getByLabel('Host name or address').fill('::1');
      await form.getByLabel('User').fill('deploy');
      await form.getByLabel('SSH key credential name').fill('deploy-key');
      await form.getByRole('button', { name: 'Add SSH host to the file' }).click();
      await error.filter({ hasText: 'CONFIG_INVALID' }).waitFor();
      expect(await error.getAttribute('data-field')).toBe('name');
      expect(await error.textContent()).toContain('Host entry name:');
      expect(await page.getByTestId('config-edit-result').count()).toBe(0);

      // And the route form's refusal lands next to the route form, not the SSH one.
      await routeForm.getByLabel('Route name').fill('docs');
      await routeForm.getByLabel('Base URL').fill('ftp://docs.example.com');
      await routeForm.getByLabel('Credential name').fill('docs-token');
      await routeForm.getByRole('button', { name: 'Add route to the file' }).click();
      const routeError = routeForm.getByTestId('route-form-error');
      await routeError.waitFor();
      expect(await routeError.getAttribute('data-field')).toBe('base_url');
      expect(await routeError.textContent()).toContain('Base URL:');
      expect(await form.getByTestId('ssh-host-form-error').count()).toBe(0);
      await shoot(page, 'route-form-refused.png');
      expect(problems).toEqual([]);
      await context.close();
    },
    caseTimeoutMs,
  );
});

describe('the Add route form, by clicks', () => {
  it(
    'asks for what the chosen injection needs: an aws_sigv4 scope, an OAuth2 token endpoint, refused next to its field',
    async () => {
      if (daemon === undefined) throw new Error('no daemon');
      const { page, problems, context } = await openOperatorPage(browser, daemon.operatorUrl);
      await page.getByRole('tab', { name: /^Routes/ }).click();
      const form = page.getByRole('form', { name: 'Add route' });
      await form.waitFor();
      const error = form.getByTestId('route-form-error');
      // Whichever answer comes, its text is the failure message when it is not the one expected.
      const answer = form.locator('[data-testid="route-form-result"], [data-testid="route-form-error"]');

      // A plain injection shows neither section.
      expect(await form.getByLabel('AWS region').count()).toBe(0);
      expect(await form.getByLabel('Token URL').count()).toBe(0);

      await form.getByLabel('Route name').fill('gateway');
      await form.getByLabel('Base URL').fill('https://abc.execute-api.eu-west-1.amazonaws.com');
      await form.getByLabel('Credential name').fill('cloud-key');
      await form.getByLabel('Injection').selectOption('aws_sigv4');
      await form.getByLabel('AWS service (signing name)').fill('execute-api');
      await form.getByRole('button', { name: 'Add route to the file' }).click();
      await error.waitFor();
      expect(await error.getAttribute('data-field')).toBe('aws_region');
      expect(await error.textContent()).toContain('AWS region:');
      expect(await form.getByLabel('AWS region').getAttribute('aria-invalid')).toBe('true');
      expect(readFileSync(path.join(dataDir, 'postern.yaml'), 'utf8')).not.toContain('gateway');

      await form.getByLabel('AWS region').fill('eu-west-1');
      await form.getByRole('button', { name: 'Add route to the file' }).click();
      await answer.filter({ hasText: 'gateway' }).waitFor();
      expect(await answer.textContent()).toMatch(/^Added route gateway to .*postern\.yaml: in force now\.$/);

      // OAuth2: a token endpoint over plain http to another host is refused, naming the field; https is written.
      await form.getByLabel('Route name').fill('crm');
      await form.getByLabel('Base URL').fill('https://crm.example.com');
      await form.getByLabel('Credential name').fill('crm-client');
      await form.getByLabel('Injection').selectOption('oauth2_client_credentials');
      expect(await form.getByLabel('AWS region').count()).toBe(0);
      await form.getByLabel('Token URL').fill('http://auth.example.com/token');
      await form.getByLabel('Scopes (space separated; optional)').fill('contacts.read contacts.write');
      await form.getByRole('button', { name: 'Add route to the file' }).click();
      await error.filter({ hasText: 'Token URL:' }).waitFor();
      expect(await error.getAttribute('data-field')).toBe('token_url');
      await form.getByLabel('Token URL').fill('https://auth.example.com/token');
      await form.getByRole('button', { name: 'Add route to the file' }).click();
      await answer.filter({ hasText: 'crm' }).waitFor();
      expect(await answer.textContent()).toMatch(/^Added route crm to .*postern\.yaml: in force now\.$/);

      const routes = (await op(dataDir, 'config.show', {})).routes;
      expect(routes.find((r) => r.name === 'gateway')).toMatchObject({ injection: 'aws_sigv4' });
      expect(routes.find((r) => r.name === 'crm')).toMatchObject({ injection: 'oauth2_client_credentials' });
      const text = readFileSync(path.join(dataDir, 'postern.yaml'), 'utf8');
      expect(text).toContain('service: execute-api');
      expect(text).toContain('token_url: https://auth.example.com/token');
      await shoot(page, 'route-form-injections.png');
      expect(problems).toEqual([]);
      await context.close();
    },
    caseTimeoutMs,
  );
});
