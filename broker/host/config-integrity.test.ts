import { existsSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { agentRefusalSchema } from '../contract/index.js';
import { systemClock, type OperatorActor } from '../ports/index.js';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import { openVault, type Vault } from '../vault/index.js';
import {
  acceptedConfigDirName,
  acceptedConfigFileName,
  digestOf,
  loadConfigIntegrity,
  sealConfigAtVaultCreation,
} from './config-integrity.js';
import { editConfigFile } from './edit-config-file.js';

/**
 * The configuration gate with real files and a real vault (fast KDF, test only): an agent that
 * writes postern.yaml, or the accepted copy itself, changes nothing a person did not accept.
 */
const passphrase = Buffer.from('config integrity passphrase');
const person: OperatorActor = { kind: 'person', id: 'alice', surface: 'desktop', auth: 'desktop_window' };
const unattended: OperatorActor = {
  kind: 'process',
  id: '/usr/bin/node pid 7',
  surface: 'cli',
  auth: 'unattended_opt_out',
};

const yaml = (baseUrl: string, approval: string): string =>
  [
    'version: 1',
    'routes:',
    '  - name: docs',
    `    base_url: ${baseUrl}`,
    '    credential: docs-token',
    '    injection: bearer',
    `    approval: ${approval}`,
    '',
  ].join('\n');

let dir: TempDir;
const vaults: Vault[] = [];
afterEach(async () => {
  for (const v of vaults.splice(0)) await v.close();
  dir.remove();
});

async function unlockedVault(dataDir: string): Promise<Vault> {
  const vault = await openVault({ dataDir, clock: systemClock, kdf: 'min', idleLockMs: 0 });
  vaults.push(vault);
  if (vault.state() === 'uninitialized') await vault.init(passphrase);
  else await vault.unlock(passphrase);
  return vault;
}

const configFile = (): string => path.join(dir.path, 'postern.yaml');
const acceptedFile = (): string => path.join(dir.path, acceptedConfigDirName, acceptedConfigFileName);
const load = () => loadConfigIntegrity({ dataDir: dir.path, clock: systemClock });
/** These tests' data directories have no journal: the broker's own history is driven in tests/config-integrity.test.ts. */
const newDir = { earlierRun: null };

/** A person creates the vault in the running broker (operator vault.init): the one moment of trust on first use. */
async function personCreatesVault(integrity: ReturnType<typeof load>): Promise<Vault> {
  const vault = await openVault({ dataDir: dir.path, clock: systemClock, kdf: 'min', idleLockMs: 0 });
  vaults.push(vault);
  integrity.attach(vault, newDir);
  await integrity.createVault(() => vault.init(passphrase));
  return vault;
}

/** First start: the file present when the person creates the vault is trusted on first use and sealed then. */
async function acceptedOnFirstUse(): Promise<void> {
  dir = createTempDir('pci-');
  writeFileSync(configFile(), yaml('http://127.0.0.1:1111', 'per_call'));
  const first = load();
  expect(first.trust()).toBe('first_use');
  expect(existsSync(acceptedFile())).toBe(false);
  await personCreatesVault(first);
  expect(first.trust()).toBe('verified');
  expect(statSync(acceptedFile()).mode & 0o777).toBe(0o600);
  for (const v of vaults.splice(0)) await v.close();
}

describe('when postern.yaml is changed outside Postern', () => {
  it('the accepted configuration stays in force, the card shows the diff, and an accepted change is in force at once', async () => {
    await acceptedOnFirstUse();
    // The agent re-points the route and drops its approval.
    writeFileSync(configFile(), yaml('http://127.0.0.1:2222', 'none'));
    const second = load();
    expect(second.trust()).toBe('unverified');
    expect(second.config.routes.get('docs')).toMatchObject({ base_url: 'http://127.0.0.1:1111', approval: 'per_call' });

    // Locked: nothing can be accepted (the copy is sealed with the vault's key).
    const vault = await openVault({ dataDir: dir.path, clock: systemClock, kdf: 'min', idleLockMs: 0 });
    vaults.push(vault);
    second.attach(vault, newDir);
    // Unverified (locked): the copy is only what the file claims, so the card is the whole file, not a diff.
    const card = second.pending();
    expect(card.change?.routes).toEqual([
      expect.objectContaining({
        name: 'docs',
        change: 'added',
        fields: expect.arrayContaining([
          { field: 'base_url', before: null, after: 'http://127.0.0.1:2222' },
          { field: 'approval', before: null, after: 'none' },
        ]),
      }),
    ]);
    const digest = card.change?.digest ?? '';
    expect(digest).toBe(digestOf(readFileSync(configFile(), 'utf8')));
    // What accepting would do is not known yet.
    expect(card.accept_applies).toBe('next_start');
    expect(() => second.accept(digest, person)).toThrow(expect.objectContaining({ code: 'VAULT_LOCKED' }));

    await vault.unlock(passphrase);
    expect(second.trust()).toBe('verified');
    // Verified: the card is the difference from what a person accepted.
    expect(second.pending()).toMatchObject({
      accept_applies: 'now',
      change: {
        routes: [
          {
            name: 'docs',
            change: 'changed',
            fields: [
              { field: 'base_url', before: 'http://127.0.0.1:1111', after: 'http://127.0.0.1:2222' },
              { field: 'approval', before: 'per_call', after: 'none' },
            ],
          },
        ],
      },
    });
    expect(() => second.accept(digestOf('something else'), person)).toThrow(
      expect.objectContaining({ code: 'DECISION_CONFLICT', field: 'digest' }),
    );
    // An action admitted before the acceptance holds the route it read then.
    const admitted = second.config.routes.get('docs');
    const by = 'person:alice (desktop window)';
    expect(second.accept(digest, person)).toEqual({
      digest,
      applies: 'now',
      restart_needed_for: [],
      applied: { digest, by, how: 'accepted', restart_needed_for: [] },
    });
    expect(second.pending()).toMatchObject({
      change: null,
      restart_needed: false,
      accepted: { how: 'accepted', by, digest },
    });
    // In force now for every new read, with no restart; the admitted action keeps what it was admitted under.
    expect(second.config.routes.get('docs')).toMatchObject({ base_url: 'http://127.0.0.1:2222', approval: 'none' });
    expect(admitted).toMatchObject({ base_url: 'http://127.0.0.1:1111', approval: 'per_call' });
    // The next start loads the same accepted copy.
    const third = load();
    expect(third.config.routes.get('docs')).toMatchObject({ base_url: 'http://127.0.0.1:2222', approval: 'none' });
  });

  it('an edit through config.edit is refused while a change waits, and is itself the accepted configuration', async () => {
    await acceptedOnFirstUse();
    writeFileSync(configFile(), yaml('http://127.0.0.1:2222', 'none'));
    const running = load();
    running.attach(await unlockedVault(dir.path), newDir);
    const edit = { op: 'remove_route' as const, name: 'docs' };
    const before = readFileSync(configFile());
    expect(() => editConfigFile(configFile(), edit, { checkBase: (t) => running.assertNothingPending(t) })).toThrow(
      expect.objectContaining({ code: 'CONFIG_PENDING' }),
    );
    expect(readFileSync(configFile()).equals(before)).toBe(true);

    writeFileSync(configFile(), yaml('http://127.0.0.1:1111', 'per_call'));
    const edited = editConfigFile(configFile(), edit, { checkBase: (t) => running.assertNothingPending(t) });
    expect(running.edited(edited.text, person)).toEqual({
      digest: digestOf(edited.text),
      by: 'person:alice (desktop window)',
      how: 'edited',
      restart_needed_for: [],
    });
    expect(running.pending()).toMatchObject({ change: null, restart_needed: false, accepted: { how: 'edited' } });
    // Verified and unlocked: the edit is in force at once.
    expect([...running.config.routes.keys()]).toEqual([]);
    expect([...load().config.routes.keys()]).toEqual([]);
  });
});

describe('when the accepted copy no longer loads under a rule this version added', () => {
  it('the start names the field to fix; fixed, every route is refused until a person accepts the file again', async () => {
    await acceptedOnFirstUse();
    const record = JSON.parse(readFileSync(acceptedFile(), 'utf8')) as Record<string, unknown>;
    // What an older version accepted, still the file: a stdio server's env credential without expose_env_credentials.
    const older = [
      'version: 1',
      'mcp_servers:',
      '  - name: files',
      '    transport: stdio',
      '    command: /usr/bin/node',
      "    env: { T: '{credential:t}' }",
      '',
    ].join('\n');
    writeFileSync(acceptedFile(), JSON.stringify({ ...record, text: older }));
    writeFileSync(configFile(), older);
    // The start names the field and the fix.
    expect(() => load()).toThrow(
      expect.objectContaining({
        code: 'CONFIG_INVALID',
        field: 'mcp_servers[0].env.T',
        message: expect.stringContaining('set expose_env_credentials: true on this server'),
      }),
    );
    // Fixed, the file loads; the old copy does not, so every route is refused until a person accepts the file again.
    writeFileSync(configFile(), `${older}    expose_env_credentials: true\n`);
    const card = load().pending();
    expect(card.trust).toBe('untrusted');
    // Neutral: the copy's seal is not checked when it does not parse, so its text is not quoted as a reason.
    expect(card.untrusted_reason).toBe('the accepted copy does not load as a configuration');
    expect(card.change?.mcp_servers).toEqual([expect.objectContaining({ name: 'files', change: 'added' })]);
  });
});

describe('when the accepted copy itself is tampered with', () => {
  it.each<[string, (record: Record<string, unknown>) => Record<string, unknown> | string]>([
    ['its text re-pointed', (r) => ({ ...r, text: String(r['text']).replace('1111', '2222') })],
    ['its MAC replaced', (r) => ({ ...r, mac: 'ab'.repeat(32) })],
    ['its sealed key swapped for garbage', (r) => ({ ...r, key: Buffer.alloc(80, 7).toString('base64') })],
    ['not JSON any more', () => 'routes: []'],
  ])('with %s, every route is refused at unlock until a person accepts again', async (_when, tamper) => {
    await acceptedOnFirstUse();
    const record = JSON.parse(readFileSync(acceptedFile(), 'utf8')) as Record<string, unknown>;
    const changed = tamper(record);
    writeFileSync(acceptedFile(), typeof changed === 'string' ? changed : JSON.stringify(changed));
    const running = load();
    running.attach(await unlockedVault(dir.path), newDir);
    expect(running.trust()).toBe('untrusted');
    expect(running.agentRefusal('http_request')).toMatchObject({
      isError: true,
      structured: { error: { code: 'CONFIG_UNTRUSTED', outcome: 'not_attempted' } },
    });
    expect(running.agentRefusal('ssh_exec')?.structured).toMatchObject({ error: { code: 'CONFIG_UNTRUSTED' } });
    // Built without a parse in production (issue 18): the contract's schema is checked here.
    const untrusted = running.agentRefusal('http_request')?.structured;
    expect(agentRefusalSchema.parse(untrusted)).toEqual(untrusted);
    expect(running.agentRefusal('list_routes')).toBeUndefined();
    const vault = running.guardVault(vaults[0] as Vault);
    expect(vault.state()).toBe('locked');
    await expect(vault.withSecret('docs-token', () => 1)).rejects.toMatchObject({ code: 'VAULT_LOCKED' });

    // The card shows the whole file as new (the old copy proves nothing) and only a person may accept it.
    const card = running.pending();
    expect(card.untrusted_reason).toMatch(/accepted copy/);
    expect(card.change?.routes).toEqual([expect.objectContaining({ name: 'docs', change: 'added' })]);
    const digest = card.change?.digest ?? '';
    expect(() => running.accept(digest, unattended)).toThrow(
      expect.objectContaining({ code: 'OPERATOR_PROOF_REQUIRED' }),
    );
    expect(card.accept_applies).toBe('next_start');
    // Untrusted: the acceptance is sealed for the next start; this run keeps refusing every route.
    expect(running.accept(digest, person)).toEqual({ digest, applies: 'next_start' });
    expect(running.trust()).toBe('untrusted');
    expect(running.pending()).toMatchObject({ change: null, restart_needed: true });
    expect(running.agentRefusal('http_request')?.structured).toMatchObject({ error: { code: 'CONFIG_UNTRUSTED' } });
    for (const v of vaults.splice(0)) await v.close();

    const next = load();
    next.attach(await unlockedVault(dir.path), newDir);
    expect(next.trust()).toBe('verified');
    expect(next.config.routes.get('docs')?.base_url).toBe('http://127.0.0.1:1111');
  });

  it('a copy sealed by another vault does not verify', async () => {
    await acceptedOnFirstUse();
    const copy = readFileSync(acceptedFile());
    rmSync(dir.path, { recursive: true, force: true });
    await acceptedOnFirstUse();
    writeFileSync(acceptedFile(), copy);
    const running = load();
    running.attach(await unlockedVault(dir.path), newDir);
    expect(running.trust()).toBe('untrusted');
  });
});

describe('when there is no file', () => {
  it('no routes are accepted on first use, and a file written later waits for a person', async () => {
    dir = createTempDir('pci-');
    const first = load();
    await personCreatesVault(first);
    expect(first.pending()).toMatchObject({
      trust: 'verified',
      change: null,
      accepted: { how: 'first_use', digest: digestOf('') },
    });
    for (const v of vaults.splice(0)) await v.close();
    writeFileSync(configFile(), yaml('http://127.0.0.1:2222', 'none'));
    const second = load();
    expect([...second.config.routes.keys()]).toEqual([]);
    expect(second.pending().change?.routes).toEqual([expect.objectContaining({ name: 'docs', change: 'added' })]);
  });
});

describe('when a person accepts or edits while the configuration is verified', () => {
  it('a change to a setting read only at start applies the rest at once and names that setting as waiting for a restart', async () => {
    await acceptedOnFirstUse();
    const running = load();
    running.attach(await unlockedVault(dir.path), newDir);
    const startedRetention = running.config.results.retention_seconds;
    writeFileSync(configFile(), `results:\n  retention_seconds: 120\n${yaml('http://127.0.0.1:2222', 'none')}`);
    const digest = running.pending().change?.digest ?? '';
    const accepted = running.accept(digest, person);
    expect(accepted).toMatchObject({ digest, applies: 'now', restart_needed_for: ['results.retention_seconds'] });
    expect(accepted.applied).toMatchObject({ how: 'accepted', restart_needed_for: ['results.retention_seconds'] });
    expect(running.config.routes.get('docs')?.base_url).toBe('http://127.0.0.1:2222');
    expect(running.config.results.retention_seconds).toBe(startedRetention);
    // Nothing pending on the card, but honestly: part of what was accepted waits for a restart.
    expect(running.pending()).toMatchObject({ change: null, restart_needed: true });
    expect(load().config.results.retention_seconds).toBe(120);
  });

  it('an edit while the vault is locked is not applied: it is sealed at the next unlock and waits for the next start', async () => {
    await acceptedOnFirstUse();
    const running = load();
    const vault = await openVault({ dataDir: dir.path, clock: systemClock, kdf: 'min', idleLockMs: 0 });
    vaults.push(vault);
    running.attach(vault, newDir);
    const edited = editConfigFile(
      configFile(),
      { op: 'remove_route', name: 'docs' },
      { checkBase: (t) => running.assertNothingPending(t) },
    );
    expect(running.edited(edited.text, person)).toBeUndefined();
    expect([...running.config.routes.keys()]).toEqual(['docs']);
    expect(running.pending()).toMatchObject({ change: null, restart_needed: true, accepted: { how: 'edited' } });
    await vault.unlock(passphrase);
    expect([...running.config.routes.keys()]).toEqual(['docs']);
    expect([...load().config.routes.keys()]).toEqual([]);
  });

  it('the first acceptance with credentials in the vault (no accepted copy) is applied and reported for the journal', async () => {
    dir = createTempDir('pci-');
    writeFileSync(configFile(), yaml('http://127.0.0.1:1111', 'per_call'));
    const vault = await unlockedVault(dir.path);
    await vault.add({
      name: 'docs-token',
      kind: 'bearer',
      secret: Buffer.from('not-a-real-token'),
      bindings: ['127.0.0.1'],
    });
    const running = load();
    running.attach(vault, newDir);
    expect(running.trust()).toBe('untrusted');
    const digest = running.pending().change?.digest ?? '';
    expect(running.accept(digest, person)).toEqual({
      digest,
      applies: 'now',
      restart_needed_for: [],
      applied: { digest, by: 'person:alice (desktop window)', how: 'accepted', restart_needed_for: [] },
    });
    expect(running.trust()).toBe('verified');
    expect(running.config.routes.get('docs')?.base_url).toBe('http://127.0.0.1:1111');
  });
});

describe('trust on first use is the creation of the vault, nothing else (THREAT-MODEL 3)', () => {
  it('an existing, empty vault with no history and no accepted copy is not first use: the file waits for a person, and the unlock seals nothing', async () => {
    dir = createTempDir('pci-');
    // What an agent can make an established directory look like: no journal, no anchor, no accepted copy, no rows.
    const vault = await openVault({ dataDir: dir.path, clock: systemClock, kdf: 'min', idleLockMs: 0 });
    vaults.push(vault);
    await vault.init(passphrase);
    vault.lock('operator');
    writeFileSync(configFile(), yaml('http://127.0.0.1:6666', 'none'));
    const running = load();
    running.attach(vault, newDir);
    expect(running.trust()).toBe('untrusted');
    await vault.unlock(passphrase);
    expect(running.pending()).toMatchObject({
      trust: 'untrusted',
      accepted: null,
      untrusted_reason: expect.stringMatching(/only the file present when a person creates the vault/),
      change: { routes: [expect.objectContaining({ name: 'docs', change: 'added' })] },
    });
    expect(running.agentRefusal('http_request')?.structured).toMatchObject({ error: { code: 'CONFIG_UNTRUSTED' } });
    expect(existsSync(acceptedFile())).toBe(false);
  });

  it('a vault created outside this broker while it ran (found uninitialized at start) is no creation it saw: unlocking it seals nothing', async () => {
    dir = createTempDir('pci-');
    writeFileSync(configFile(), yaml('http://127.0.0.1:6666', 'none'));
    const running = load();
    const vault = await openVault({ dataDir: dir.path, clock: systemClock, kdf: 'min', idleLockMs: 0 });
    vaults.push(vault);
    running.attach(vault, newDir);
    expect(running.trust()).toBe('first_use');
    // Another process (a `postern vault init` with a passphrase it chose) creates it; this one is then unlocked.
    const other = await openVault({ dataDir: dir.path, clock: systemClock, kdf: 'min', idleLockMs: 0 });
    await other.init(passphrase);
    await other.close();
    await vault.unlock(passphrase);
    expect(running.trust()).toBe('untrusted');
    expect(existsSync(acceptedFile())).toBe(false);
  });

  it('postern vault init seals the file present as first use; with the opt-out, a bad file or an earlier run it seals nothing', async () => {
    dir = createTempDir('pci-');
    writeFileSync(configFile(), yaml('http://127.0.0.1:1111', 'per_call'));
    const vault = await unlockedVault(dir.path);
    const env = { POSTERN_ANCHOR_DIR: path.join(dir.path, 'anchors') };
    expect(sealConfigAtVaultCreation({ dataDir: dir.path, vault, clock: systemClock, env })).toEqual({
      sealed: true,
      digest: digestOf(readFileSync(configFile(), 'utf8')),
      file: configFile(),
      present: true,
    });
    expect(JSON.parse(readFileSync(acceptedFile(), 'utf8'))).toMatchObject({ how: 'first_use' });
    // A second call (a copy is there) seals nothing over it.
    expect(sealConfigAtVaultCreation({ dataDir: dir.path, vault, clock: systemClock, env })).toMatchObject({
      sealed: false,
      reason: 'an accepted copy is already there',
    });
    const running = load();
    running.attach(vault, newDir);
    expect(running.pending()).toMatchObject({ trust: 'verified', accepted: { how: 'first_use' }, change: null });

    rmSync(acceptedFile());
    writeFileSync(configFile(), `operator:\n  unattended_decisions: true\n${yaml('http://127.0.0.1:1111', 'none')}`);
    expect(sealConfigAtVaultCreation({ dataDir: dir.path, vault, clock: systemClock, env })).toMatchObject({
      sealed: false,
      reason: expect.stringMatching(/unattended_decisions/),
    });
    writeFileSync(configFile(), 'routes: [');
    expect(sealConfigAtVaultCreation({ dataDir: dir.path, vault, clock: systemClock, env })).toMatchObject({
      sealed: false,
      reason: expect.stringMatching(/CONFIG_INVALID/),
    });
    expect(existsSync(acceptedFile())).toBe(false);
  });
});
