import { randomBytes } from 'node:crypto';
import { webProofFor } from './web-proof.js';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import Database from 'better-sqlite3';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { brokerApiSchemas, operatorCredentialKinds, operatorSecretCharsMax, type Reply } from '../contract/index.js';
import { parseConfig } from '../config/index.js';
import { credentialKinds, systemClock } from '../ports/index.js';
import { verifyJournal } from '../audit/verify-journal.js';
import { actionPaths } from '../testing/action-paths.js';
import { createCapturedLogger } from '../testing/captured-logger.js';
import { swapKeyAndRewrite } from '../testing/key-swap-attack.js';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import { openVault } from '../vault/index.js';
import { sealConfigAtVaultCreation } from './config-integrity.js';
import { createBrokerRuntime, secretLogRedaction, type BrokerRuntime } from './broker-runtime.js';
import { sessionPath, startOperatorHttpHost, type OperatorHttpHost } from './http-host.js';
import { createOperatorHandlers, type OperatorHandlers } from './operator-handlers.js';

const passphrase = 'operator vault passphrase';
const canary = 'CANARY-op-api-secret-7f3a91';
const options = { mode: 'headless' as const, version: '0.0.0-test', startedAtMs: 1 };

let dir: TempDir;
let runtime: BrokerRuntime | undefined;
let host: OperatorHttpHost | undefined;
afterEach(async () => {
  await host?.close();
  await runtime?.close();
  host = undefined;
  runtime = undefined;
  dir.remove();
});

/** A locked vault (fast KDF, test only), a routes file, and a real runtime with a captured debug logger over it. */
async function lockedBroker(): Promise<{ handlers: OperatorHandlers; lines: string[]; runtime: BrokerRuntime }> {
  dir = createTempDir('pov-');
  writeFileSync(
    path.join(dir.path, 'postern.yaml'),
    [
      '# written by hand: this comment survives edits from the UI',
      'version: 1',
      'routes:',
      '  - name: docs',
      '    base_url: https://docs.example.com/api',
      '    credential: docs-token',
      '    injection: bearer',
      '    lanes:',
      "      - { methods: ['*'], path: '/docs/{doc}', lane: 'doc-{doc}' }",
      'ssh_hosts:',
      '  - { name: web-1, host: 10.0.0.5, user: deploy, credential: deploy-key, host_key: accept_new }',
      '',
    ].join('\n'),
  );
  // As a person's `postern vault init` creates it: the file present then is trusted on first use.
  const vault = await openVault({ dataDir: dir.path, clock: systemClock, kdf: 'min' });
  await vault.init(Buffer.from(passphrase));
  expect(sealConfigAtVaultCreation({ dataDir: dir.path, vault, clock: systemClock })).toMatchObject({ sealed: true });
  await vault.close();
  return startBroker();
}

/** A real runtime over `dir` as it is (its vault, journal and routes file), with a captured debug logger. */
async function startBroker(): Promise<{ handlers: OperatorHandlers; lines: string[]; runtime: BrokerRuntime }> {
  const { logger, lines } = createCapturedLogger();
  runtime = await createBrokerRuntime({ dataDir: dir.path, ...options, logger });
  // These calls come from a person's surface (the desktop window); the control socket's proof is control-socket.test.ts's.
  const raw = createOperatorHandlers(runtime.broker);
  const handlers = Object.fromEntries(
    Object.entries(raw).map(([method, handle]) => [method, (input: unknown) => handle(input, desktopCaller)]),
  ) as OperatorHandlers;
  return { handlers, lines, runtime };
}

const desktopCaller = { surface: 'desktop', auth: 'desktop_window' } as const;

function value<T>(reply: Reply<T>): T {
  if (!reply.ok) throw new Error(`expected ok, got ${JSON.stringify(reply.error)}`);
  return reply.value;
}

/** Every file under the data directory, as bytes (journal, WAL, vault, known hosts…). */
function filesUnder(root: string): Array<{ file: string; bytes: Buffer }> {
  const out: Array<{ file: string; bytes: Buffer }> = [];
  for (const name of readdirSync(root)) {
    const file = path.join(root, name);
    const stat = statSync(file);
    if (stat.isDirectory()) out.push(...filesUnder(file));
    else if (stat.isFile()) out.push({ file, bytes: readFileSync(file) });
  }
  return out;
}

describe('the vault methods of the operator API', () => {
  it('when the vault is locked, status says so, a wrong passphrase changes nothing, the right one unlocks, lock locks', async () => {
    const { handlers } = await lockedBroker();
    expect(value(await handlers['vault.status']({}))).toEqual({ state: 'locked', credentials: 0 });
    expect(await handlers['vault.unlock']({ passphrase: 'not the passphrase' })).toMatchObject({
      ok: false,
      error: { code: 'VAULT_PASSPHRASE_INVALID', field: 'passphrase' },
    });
    expect(value(await handlers['vault.status']({})).state).toBe('locked');
    expect(value(await handlers['vault.unlock']({ passphrase }))).toEqual({ state: 'unlocked' });
    expect(value(await handlers['vault.lock']({}))).toEqual({ state: 'locked' });
  });

  it('when the vault is locked, adding a credential answers VAULT_LOCKED', async () => {
    const { handlers } = await lockedBroker();
    expect(
      await handlers['credentials.add']({ name: 'docs-token', kind: 'bearer', secret: canary, bindings: ['docs'] }),
    ).toMatchObject({
      ok: false,
      error: { code: 'VAULT_LOCKED' },
    });
  });

  it('a credential added through the API is listed by name, kind, bindings and version, and removed; its secret is never answered, logged or written outside the vault', async () => {
    const { handlers, lines, runtime: rt } = await lockedBroker();
    // Some journal activity around the add, so the journal file is not trivially empty.
    for (const event of actionPaths.httpApproved('act_vaultapi000001').slice(0, 3)) await rt.journal.append(event);
    host = await startOperatorHttpHost({
      handlers,
      proof: webProofFor(rt, systemClock),
      rendererDir: path.join(dir.path, 'no-renderer'),
      port: 0,
    });
    const signIn = await fetch(`${host.origin}${sessionPath}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ token: host.token, code: host.signInCode }),
    });
    const { session } = ((await signIn.json()) as { value: { session: string } }).value;
    const post = async (method: string, input: unknown): Promise<{ status: number; text: string }> => {
      const response = await fetch(`${host?.origin}/api/${method}`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${session}`, 'Content-Type': 'application/json' },
        body: JSON.stringify(input),
      });
      return { status: response.status, text: await response.text() };
    };
    const answers: string[] = [];
    const unlocked = await post('vault.unlock', { passphrase });
    answers.push(unlocked.text);
    expect(unlocked.status).toBe(200);
    const added = await post('credentials.add', {
      name: 'docs-token',
      kind: 'header',
      header: 'X-Api-Key',
      template: 'Key {secret}',
      secret: canary,
      bindings: ['docs', 'Docs.Example.com'],
    });
    answers.push(added.text);
    expect(added.status).toBe(200);
    expect(JSON.parse(added.text)).toMatchObject({
      ok: true,
      value: {
        name: 'docs-token',
        kind: 'header',
        header: 'X-Api-Key',
        template: 'Key {secret}',
        bindings: ['docs', 'docs.example.com'],
      },
    });
    const listed = await post('credentials.list', {});
    answers.push(listed.text);
    const list = (JSON.parse(listed.text) as { value: { state: string; credentials: Array<Record<string, unknown>> } })
      .value;
    expect(list.state).toBe('unlocked');
    expect(list.credentials.map((c) => Object.keys(c).sort())).toEqual([
      ['bindings', 'header', 'id', 'kind', 'name', 'template', 'version_tag'],
    ]);
    expect(list.credentials[0]?.['version_tag']).toMatch(/^v1-[0-9a-f]{8}$/);
    // A refused add (bad binding) names the field and never quotes the secret either.
    const refused = await post('credentials.add', {
      name: 'other',
      kind: 'bearer',
      secret: canary,
      bindings: ['not a host!'],
    });
    answers.push(refused.text);
    expect(JSON.parse(refused.text)).toMatchObject({
      ok: false,
      error: { code: 'INVALID_ARGUMENT', field: 'bindings[0]' },
    });
    // The broker can use it (the vault holds the value), which is the only place it lives.
    expect(
      await rt.vault.withSecret('docs-token', (material) => (material.kind === 'header' ? material.value : '')),
    ).toBe(`Key ${canary}`);
    await rt.journal.append(actionPaths.httpApproved('act_vaultapi000001')[3] as never);

    const removed = await post('credentials.remove', { name: 'docs-token' });
    answers.push(removed.text);
    expect(JSON.parse(removed.text)).toEqual({ ok: true, value: { name: 'docs-token', removed: true } });
    expect(value(await handlers['credentials.list']({})).credentials).toEqual([]);

    for (const text of answers) expect(text).not.toContain(canary);
    expect(lines.join('')).not.toContain(canary);
    expect(lines.join('')).not.toContain(passphrase);
    expect(lines.some((line) => line.includes('credential added (operator)'))).toBe(true);
    for (const { file, bytes } of filesUnder(dir.path)) {
      expect(bytes.includes(Buffer.from(canary)), `${file} holds the canary`).toBe(false);
      expect(bytes.includes(Buffer.from(passphrase)), `${file} holds the passphrase`).toBe(false);
    }
  });

  it('every input is bounded: a too-long secret or passphrase, an unknown kind or an extra field is INVALID_ARGUMENT whose message never quotes the value', async () => {
    const { handlers } = await lockedBroker();
    const long = `${canary}${'x'.repeat(operatorSecretCharsMax)}`;
    const cases: Array<[keyof OperatorHandlers, unknown, string]> = [
      ['credentials.add', { name: 'n', kind: 'bearer', secret: long, bindings: [] }, 'secret'],
      ['credentials.add', { name: 'n', kind: 'password', secret: canary, bindings: [] }, 'kind'],
      ['credentials.add', { name: 'n', kind: 'bearer', secret: canary, bindings: [], extra: canary }, 'input'],
      [
        'credentials.add',
        { name: 'n', kind: 'bearer', secret: canary, bindings: Array.from({ length: 33 }, () => 'h') },
        'bindings',
      ],
      ['vault.unlock', { passphrase: long }, 'passphrase'],
      ['vault.unlock', { passphrase: '' }, 'passphrase'],
      ['credentials.remove', { name: 'x'.repeat(65) }, 'name'],
    ];
    for (const [method, input, field] of cases) {
      const reply = await handlers[method](input);
      expect(reply, `${method} ${field}`).toMatchObject({ ok: false, error: { code: 'INVALID_ARGUMENT' } });
      if (!reply.ok) expect(reply.error.field === field || reply.error.message.includes(field)).toBe(true);
      expect(JSON.stringify(reply)).not.toContain(canary);
    }
  });

  it('the kinds the API accepts are exactly the vault kinds', () => {
    expect([...operatorCredentialKinds]).toEqual([...credentialKinds]);
    expect(brokerApiSchemas['credentials.add'].input.shape.kind.options).toEqual([...credentialKinds]);
  });
});

describe('audit.verify and audit.last', () => {
  it('before any run, last is null; a run over the live journal is ok with its counts and time, and is kept as last', async () => {
    const { handlers, runtime: rt } = await lockedBroker();
    expect(value(await handlers['audit.last']({}))).toEqual({ last: null });
    for (const event of actionPaths.httpApproved('act_verifyapi00001')) await rt.journal.append(event);
    const events = rt.status().journal.events;
    const result = value(await handlers['audit.verify']({}));
    // Locked: checked under the journal's own key only, and the result says so.
    expect(result).toMatchObject({
      ok: true,
      events,
      checkpoints: expect.any(Number) as number,
      key_source: 'journal',
    });
    expect(result.checked_at_ms).toBeGreaterThan(0);
    expect(value(await handlers['audit.last']({}))).toEqual({ last: result });
    // Read-only: the broker keeps appending afterwards.
    await rt.journal.append(actionPaths.httpApproved('act_verifyapi00002')[0] as never);
    expect(value(await handlers['audit.verify']({}))).toMatchObject({ ok: true, events: events + 1 });
  });

  it('a journal rewritten and re-signed under a same-user key fails once the vault is unlocked (KEY_MISMATCH); locked, it is "key not checked", never vault-verified', async () => {
    const genuine = await lockedBroker();
    value(await genuine.handlers['vault.unlock']({ passphrase }));
    for (const id of ['act_keyswap_000001', 'act_keyswap_000002'])
      for (const event of actionPaths.httpApproved(id)) await genuine.runtime.journal.append(event);
    expect(value(await genuine.handlers['audit.verify']({}))).toMatchObject({ ok: true, key_source: 'vault' });
    await genuine.runtime.close();
    runtime = undefined;

    // The attack (THREAT-MODEL): the first action's events gone, the rest re-hashed, the agent's key and checkpoint
    // in audit_keys and checkpoints. The wrapped signing secret is the vault's still: the agent cannot open it.
    const swap = await swapKeyAndRewrite(path.join(dir.path, 'journal.sqlite'), 'act_keyswap_000001');
    expect(await verifyJournal({ dbPath: path.join(dir.path, 'journal.sqlite') })).toMatchObject({
      ok: true,
      key_source: 'journal',
    });

    const { handlers, lines } = await startBroker();
    const locked = value(await handlers['audit.verify']({}));
    expect(locked).toMatchObject({ ok: true, key_source: 'journal' });
    if (locked.ok) expect(locked.events).toBeGreaterThanOrEqual(swap.events);

    value(await handlers['vault.unlock']({ passphrase }));
    const unlocked = value(await handlers['audit.verify']({}));
    expect(unlocked).toMatchObject({ ok: false, code: 'KEY_MISMATCH', seq: null });
    expect(value(await handlers['audit.last']({}))).toEqual({ last: unlocked });
    expect(lines.join('\n')).not.toContain(passphrase);
  });

  it('with the wrapped signing secret replaced too, the unlocked verify fails VAULT_CORRUPT: only the vault can wrap one', async () => {
    const genuine = await lockedBroker();
    value(await genuine.handlers['vault.unlock']({ passphrase }));
    for (const event of actionPaths.httpApproved('act_keyswap_000003')) await genuine.runtime.journal.append(event);
    await genuine.runtime.close();
    runtime = undefined;
    const journalPath = path.join(dir.path, 'journal.sqlite');
    await swapKeyAndRewrite(journalPath, 'act_none_00000000');
    const db = new Database(journalPath);
    db.prepare(`UPDATE audit_keys SET sign_secret_wrapped = ?`).run(randomBytes(24 + 64 + 16));
    db.close();

    const { handlers } = await startBroker();
    expect(value(await handlers['audit.verify']({}))).toMatchObject({ ok: true, key_source: 'journal' });
    await handlers['vault.unlock']({ passphrase });
    expect(value(await handlers['audit.verify']({}))).toMatchObject({ ok: false, code: 'VAULT_CORRUPT', seq: null });
  });

  it('two clicks while one verification runs share it', async () => {
    const { handlers } = await lockedBroker();
    const [a, b] = await Promise.all([handlers['audit.verify']({}), handlers['audit.verify']({})]);
    expect(value(a)).toEqual(value(b));
  });
});

describe('config.show', () => {
  it('lists routes and SSH hosts as loaded, credentials by name only', async () => {
    const { handlers } = await lockedBroker();
    const shown = value(await handlers['config.show']({}));
    expect(shown.file).toBe(path.join(dir.path, 'postern.yaml'));
    expect(shown.routes).toEqual([
      expect.objectContaining({
        name: 'docs',
        base_url: 'https://docs.example.com/api',
        credential: 'docs-token',
        injection: 'bearer',
        approval: 'per_call',
        lanes: [{ methods: ['*'], path: '/docs/{doc}', lane: 'doc-{doc}' }],
      }),
    ]);
    expect(shown.ssh_hosts).toEqual([
      expect.objectContaining({
        name: 'web-1',
        host: '10.0.0.5',
        port: 22,
        user: 'deploy',
        credential: 'deploy-key',
        host_key: 'accept_new',
      }),
    ]);
  });
});

describe('config.edit', () => {
  it('adds a route and an SSH host to postern.yaml through the yaml library (comments kept), for the next start; this broker keeps what it loaded', async () => {
    const { handlers } = await lockedBroker();
    const file = path.join(dir.path, 'postern.yaml');
    const added = value(
      await handlers['config.edit']({
        op: 'add_route',
        route: {
          name: 'status',
          base_url: 'https://status.example.com',
          credential: 'status-token',
          injection: 'bearer',
          approval: 'none',
          methods: ['GET'],
        },
      }),
    );
    expect(added).toEqual({ file, routes: ['docs', 'status'], ssh_hosts: ['web-1'], applies: 'next_start' });
    value(
      await handlers['config.edit']({
        op: 'add_ssh_host',
        host: {
          name: 'db-1',
          host: 'db.internal',
          user: 'ops',
          credential: 'deploy-key',
          host_key: 'accept_new',
          approval: 'per_call',
        },
      }),
    );
    value(await handlers['config.edit']({ op: 'remove_ssh_host', name: 'web-1' }));
    const text = readFileSync(file, 'utf8');
    expect(text).toContain('# written by hand: this comment survives edits from the UI');
    const next = parseConfig(text, file);
    expect([...next.routes.keys()]).toEqual(['docs', 'status']);
    expect(next.routes.get('status')).toMatchObject({ approval: 'none', methods: ['GET'] });
    expect([...next.sshHosts.keys()]).toEqual(['db-1']);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const shown = value(await handlers['config.show']({}));
    expect(shown.routes.map((r) => r.name)).toEqual(['docs']);
    expect(shown.edited_since_start).toBe(true);
  });

  it('writes what an aws_sigv4 or oauth2_client_credentials route needs, and the file loads with it', async () => {
    const { handlers } = await lockedBroker();
    const file = path.join(dir.path, 'postern.yaml');
    const common = { credential: 'cloud', approval: 'per_call' } as const;
    value(
      await handlers['config.edit']({
        op: 'add_route',
        route: {
          ...common,
          name: 'gateway',
          base_url: 'https://abc.execute-api.eu-west-1.amazonaws.com',
          injection: 'aws_sigv4',
          aws: { region: 'eu-west-1', service: 'execute-api' },
        },
      }),
    );
    value(
      await handlers['config.edit']({
        op: 'add_route',
        route: {
          ...common,
          name: 'crm',
          base_url: 'https://crm.example.com',
          injection: 'oauth2_client_credentials',
          oauth2: { token_url: 'https://auth.example.com/token', scopes: ['contacts.read'], audience: 'crm' },
        },
      }),
    );
    const next = parseConfig(readFileSync(file, 'utf8'), file);
    expect(next.routes.get('gateway')).toMatchObject({ aws: { region: 'eu-west-1', service: 'execute-api' } });
    expect(next.routes.get('crm')).toMatchObject({
      oauth2: { token_url: 'https://auth.example.com/token', scopes: ['contacts.read'], audience: 'crm' },
    });
  });

  it.each<[string, unknown, string, string]>([
    [
      'an aws_sigv4 route without its scope',
      {
        op: 'add_route',
        route: {
          name: 'aws',
          base_url: 'https://x.example',
          credential: 'c',
          injection: 'aws_sigv4',
          approval: 'none',
        },
      },
      'CONFIG_INVALID',
      'routes[1].aws',
    ],
    [
      'a token endpoint over plain http to another host',
      {
        op: 'add_route',
        route: {
          name: 'o',
          base_url: 'https://x.example',
          credential: 'c',
          injection: 'oauth2_client_credentials',
          approval: 'none',
          oauth2: { token_url: 'http://auth.example.com/token' },
        },
      },
      'CONFIG_INVALID',
      'routes[1].oauth2.token_url',
    ],
    [
      'a bad base_url',
      {
        op: 'add_route',
        route: { name: 'bad', base_url: 'ftp://x', credential: 'c', injection: 'bearer', approval: 'none' },
      },
      'CONFIG_INVALID',
      'routes[1].base_url',
    ],
    [
      'a name used twice',
      {
        op: 'add_route',
        route: { name: 'docs', base_url: 'https://x.example', credential: 'c', injection: 'bearer', approval: 'none' },
      },
      'CONFIG_INVALID',
      'routes.name',
    ],
    [
      'a bad pin',
      {
        op: 'add_ssh_host',
        host: {
          name: 'h',
          host: 'h.example',
          user: 'u',
          credential: 'c',
          host_key: { pinned: ['md5:00'] },
          approval: 'none',
        },
      },
      'CONFIG_INVALID',
      'ssh_hosts[1].host_key',
    ],
    ['an unknown route', { op: 'remove_route', name: 'nope' }, 'NOT_FOUND', 'name'],
  ])(
    'when the edit has %s, it is refused naming the field and the file is unchanged',
    async (_when, input, code, field) => {
      const { handlers } = await lockedBroker();
      const file = path.join(dir.path, 'postern.yaml');
      const before = readFileSync(file);
      const reply = await handlers['config.edit'](input);
      expect(reply).toMatchObject({ ok: false, error: { code } });
      if (!reply.ok) expect(reply.error.field?.startsWith(field)).toBe(true);
      expect(readFileSync(file).equals(before)).toBe(true);
      expect(readdirSync(dir.path).filter((name) => name.endsWith('.tmp'))).toEqual([]);
    },
  );

  it('refuses a route whose name a credential is bound to when the credential is not bound to its host (no silent redirection)', async () => {
    const { handlers } = await lockedBroker();
    value(await handlers['vault.unlock']({ passphrase }));
    value(await handlers['credentials.add']({ name: 'ci-token', kind: 'bearer', secret: canary, bindings: ['ci'] }));
    const file = path.join(dir.path, 'postern.yaml');
    const before = readFileSync(file);
    const route = {
      name: 'ci',
      base_url: 'https://elsewhere.example.net',
      credential: 'ci-token',
      injection: 'bearer' as const,
      approval: 'none' as const,
    };
    expect(await handlers['config.edit']({ op: 'add_route', route })).toMatchObject({
      ok: false,
      error: { code: 'CONFIG_INVALID', field: 'route.name' },
    });
    expect(readFileSync(file).equals(before)).toBe(true);
    // Bound to the host as well, the person named where it may go: the route is written.
    value(await handlers['credentials.remove']({ name: 'ci-token' }));
    value(
      await handlers['credentials.add']({
        name: 'ci-token',
        kind: 'bearer',
        secret: canary,
        bindings: ['ci', 'elsewhere.example.net'],
      }),
    );
    expect(value(await handlers['config.edit']({ op: 'add_route', route })).routes).toContain('ci');
  });

  it('refuses an SSH host entry whose name a key is bound to when the key is not bound to its host (no silent redirection of an SSH key)', async () => {
    const { handlers } = await lockedBroker();
    value(await handlers['vault.unlock']({ passphrase }));
    // A bearer credential stands in for the key: the guard reads bindings, not kinds.
    value(
      await handlers['credentials.add']({ name: 'deploy-key', kind: 'bearer', secret: canary, bindings: ['prod-db'] }),
    );
    const file = path.join(dir.path, 'postern.yaml');
    const before = readFileSync(file);
    const host = {
      name: 'prod-db',
      host: 'attacker.example',
      user: 'ops',
      credential: 'deploy-key',
      host_key: 'accept_new' as const,
      approval: 'none' as const,
    };
    expect(await handlers['config.edit']({ op: 'add_ssh_host', host })).toMatchObject({
      ok: false,
      error: { code: 'CONFIG_INVALID', field: 'host.name' },
    });
    expect(readFileSync(file).equals(before)).toBe(true);
    value(await handlers['credentials.remove']({ name: 'deploy-key' }));
    value(
      await handlers['credentials.add']({
        name: 'deploy-key',
        kind: 'bearer',
        secret: canary,
        bindings: ['prod-db', 'attacker.example:22'],
      }),
    );
    expect(value(await handlers['config.edit']({ op: 'add_ssh_host', host })).ssh_hosts).toContain('prod-db');
  });

  it('when no file existed at start, the first edit creates postern.yaml in the data directory', async () => {
    // No file when the person created the vault: the empty configuration is the first-use one.
    dir = createTempDir('pov-');
    const vault = await openVault({ dataDir: dir.path, clock: systemClock, kdf: 'min' });
    await vault.init(Buffer.from(passphrase));
    expect(sealConfigAtVaultCreation({ dataDir: dir.path, vault, clock: systemClock })).toMatchObject({
      sealed: true,
      present: false,
    });
    await vault.close();
    runtime = await createBrokerRuntime({ dataDir: dir.path, ...options, logger: createCapturedLogger().logger });
    const handlers = createOperatorHandlers(runtime.broker);
    expect(value(await handlers['config.show']({}))).toMatchObject({ file: null, routes: [] });
    value(
      await handlers['config.edit'](
        {
          op: 'add_route',
          route: {
            name: 'docs',
            base_url: 'https://docs.example.com',
            credential: 'c',
            injection: 'bearer',
            approval: 'per_call',
          },
        },
        desktopCaller,
      ),
    );
    const file = path.join(dir.path, 'postern.yaml');
    expect(existsSync(file)).toBe(true);
    expect([...parseConfig(readFileSync(file, 'utf8'), file).routes.keys()]).toEqual(['docs']);
  });
});

describe('the broker log', () => {
  it('censors secret fields wherever a line would carry them', () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, callback) {
        lines.push(chunk.toString('utf8'));
        callback();
      },
    });
    const logger = pino({ level: 'debug', redact: secretLogRedaction }, sink);
    logger.info({ secret: canary, input: { passphrase: canary }, request: { input: { secret: canary } } }, 'x');
    expect(lines.join('')).not.toContain(canary);
    expect(lines.join('')).toContain('[redacted]');
  });
});
