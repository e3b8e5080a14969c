import { existsSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { systemClock, type OperatorActor } from '../ports/index.js';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import { openVault, type Vault } from '../vault/index.js';
import { acceptedConfigDirName, acceptedConfigFileName, digestOf, loadConfigIntegrity } from './config-integrity.js';
import { editConfigFile } from './edit-config-file.js';

/**
 * The configuration gate with real files and a real vault (fast KDF, test only): an agent that
 * writes postern.yaml, or the accepted copy itself, changes nothing a person did not accept.
 */
const passphrase = Buffer.from('config integrity passphrase');
const person: OperatorActor = { kind: 'person', id: 'alice', surface: 'desktop', auth: 'desktop_window' };
const unattended: OperatorActor = { kind: 'process', id: '/usr/bin/node pid 7', surface: 'cli', auth: 'unattended_opt_out' };

const yaml = (baseUrl: string, approval: string): string =>
  ['version: 1', 'routes:', '  - name: docs', `    base_url: ${baseUrl}`, '    credential: docs-token', '    injection: bearer', `    approval: ${approval}`, ''].join('\n');

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

/** First start: the file is trusted on first use and sealed at the first unlock. */
async function acceptedOnFirstUse(): Promise<void> {
  dir = createTempDir('pci-');
  writeFileSync(configFile(), yaml('http://127.0.0.1:1111', 'per_call'));
  const first = load();
  expect(first.trust()).toBe('first_use');
  expect(existsSync(acceptedFile())).toBe(false);
  first.attach(await unlockedVault(dir.path));
  expect(first.trust()).toBe('verified');
  expect(statSync(acceptedFile()).mode & 0o777).toBe(0o600);
  for (const v of vaults.splice(0)) await v.close();
}

describe('when postern.yaml is changed outside Postern', () => {
  it('the accepted configuration stays in force, the card shows the diff, and only an accepted change applies at the next start', async () => {
    await acceptedOnFirstUse();
    // The agent re-points the route and drops its approval.
    writeFileSync(configFile(), yaml('http://127.0.0.1:2222', 'none'));
    const second = load();
    expect(second.trust()).toBe('unverified');
    expect(second.config.routes.get('docs')).toMatchObject({ base_url: 'http://127.0.0.1:1111', approval: 'per_call' });

    // Locked: nothing can be accepted (the copy is sealed with the vault's key).
    const vault = await openVault({ dataDir: dir.path, clock: systemClock, kdf: 'min', idleLockMs: 0 });
    vaults.push(vault);
    second.attach(vault);
    const card = second.pending();
    expect(card.change?.routes).toEqual([
      {
        name: 'docs',
        change: 'changed',
        fields: [
          { field: 'base_url', before: 'http://127.0.0.1:1111', after: 'http://127.0.0.1:2222' },
          { field: 'approval', before: 'per_call', after: 'none' },
        ],
      },
    ]);
    const digest = card.change?.digest ?? '';
    expect(digest).toBe(digestOf(readFileSync(configFile(), 'utf8')));
    expect(() => second.accept(digest, person)).toThrow(expect.objectContaining({ code: 'VAULT_LOCKED' }));

    await vault.unlock(passphrase);
    expect(second.trust()).toBe('verified');
    expect(() => second.accept(digestOf('something else'), person)).toThrow(expect.objectContaining({ code: 'DECISION_CONFLICT', field: 'digest' }));
    expect(second.accept(digest, person)).toEqual({ digest, applies: 'next_start' });
    expect(second.pending()).toMatchObject({ change: null, restart_needed: true, accepted: { how: 'accepted', by: 'person:alice (desktop window)', digest } });
    // This run keeps what it started with; the next start applies the accepted change.
    expect(second.config.routes.get('docs')?.base_url).toBe('http://127.0.0.1:1111');
    const third = load();
    expect(third.config.routes.get('docs')).toMatchObject({ base_url: 'http://127.0.0.1:2222', approval: 'none' });
  });

  it('an edit through config.edit is refused while a change waits, and is itself the accepted configuration', async () => {
    await acceptedOnFirstUse();
    writeFileSync(configFile(), yaml('http://127.0.0.1:2222', 'none'));
    const running = load();
    running.attach(await unlockedVault(dir.path));
    const edit = { op: 'remove_route' as const, name: 'docs' };
    const before = readFileSync(configFile());
    expect(() => editConfigFile(configFile(), edit, { checkBase: (t) => running.assertNothingPending(t) })).toThrow(expect.objectContaining({ code: 'CONFIG_PENDING' }));
    expect(readFileSync(configFile()).equals(before)).toBe(true);

    writeFileSync(configFile(), yaml('http://127.0.0.1:1111', 'per_call'));
    const edited = editConfigFile(configFile(), edit, { checkBase: (t) => running.assertNothingPending(t) });
    running.edited(edited.text, person);
    expect(running.pending()).toMatchObject({ change: null, accepted: { how: 'edited' } });
    expect([...load().config.routes.keys()]).toEqual([]);
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
    running.attach(await unlockedVault(dir.path));
    expect(running.trust()).toBe('untrusted');
    expect(running.agentRefusal('http_request')).toMatchObject({ isError: true, structured: { error: { code: 'CONFIG_UNTRUSTED', outcome: 'not_attempted' } } });
    expect(running.agentRefusal('ssh_exec')?.structured).toMatchObject({ error: { code: 'CONFIG_UNTRUSTED' } });
    expect(running.agentRefusal('list_routes')).toBeUndefined();
    const vault = running.guardVault(vaults[0] as Vault);
    expect(vault.state()).toBe('locked');
    await expect(vault.withSecret('docs-token', () => 1)).rejects.toMatchObject({ code: 'VAULT_LOCKED' });

    // The card shows the whole file as new (the old copy proves nothing) and only a person may accept it.
    const card = running.pending();
    expect(card.untrusted_reason).toMatch(/accepted copy/);
    expect(card.change?.routes).toEqual([expect.objectContaining({ name: 'docs', change: 'added' })]);
    const digest = card.change?.digest ?? '';
    expect(() => running.accept(digest, unattended)).toThrow(expect.objectContaining({ code: 'OPERATOR_PROOF_REQUIRED' }));
    running.accept(digest, person);
    expect(running.trust()).toBe('untrusted');
    expect(running.pending()).toMatchObject({ change: null, restart_needed: true });
    for (const v of vaults.splice(0)) await v.close();

    const next = load();
    next.attach(await unlockedVault(dir.path));
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
    running.attach(await unlockedVault(dir.path));
    expect(running.trust()).toBe('untrusted');
  });
});

describe('when there is no file', () => {
  it('no routes are accepted on first use, and a file written later waits for a person', async () => {
    dir = createTempDir('pci-');
    const first = load();
    first.attach(await unlockedVault(dir.path));
    expect(first.pending()).toMatchObject({ trust: 'verified', change: null, accepted: { how: 'first_use', digest: digestOf('') } });
    for (const v of vaults.splice(0)) await v.close();
    writeFileSync(configFile(), yaml('http://127.0.0.1:2222', 'none'));
    const second = load();
    expect([...second.config.routes.keys()]).toEqual([]);
    expect(second.pending().change?.routes).toEqual([expect.objectContaining({ name: 'docs', change: 'added' })]);
  });
});
