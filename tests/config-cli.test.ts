import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import Database from 'better-sqlite3';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callOperator } from '../broker/cli/operator-commands.js';
import { systemClock } from '../broker/ports/index.js';
import { openVault } from '../broker/vault/index.js';
import { runOnTerminal } from './support/operator-terminal.js';
import { runPostern, startDaemon } from './support/postern-process.js';
import { unlockAsPerson } from './support/person-decision.js';

/**
 * `postern config pending|accept` through real subprocesses: the CLI way for a person to accept
 * postern.yaml when the vault holds credentials and no configuration was accepted yet (docs/config.md),
 * with no broker running and with one. Accepting is a decision: the passphrase typed on a real
 * pseudo-terminal; a process without a terminal (an agent's background tool) is refused.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'pocc-'));
const dataDir = path.join(scratch, 'data');
const passphrase = 'config cli passphrase (test only)';
const passphraseFile = path.join(scratch, 'pass');
const acceptedFile = path.join(dataDir, 'config', 'accepted.json');
const yaml = (port: number): string =>
  [
    'version: 1',
    'routes:',
    '  - name: docs',
    `    base_url: http://127.0.0.1:${port}`,
    '    credential: docs-token',
    '    injection: bearer',
    '    approval: per_call',
    '',
  ].join('\n');

beforeAll(async () => {
  mkdirSync(dataDir, { mode: 0o700 });
  const vault = await openVault({ dataDir, clock: systemClock, kdf: 'min', idleLockMs: 0 });
  await vault.init(Buffer.from(passphrase));
  await vault.add({ name: 'docs-token', kind: 'bearer', secret: Buffer.from('CANARY-config-cli'), bindings: ['docs'] });
  await vault.close();
  writeFileSync(passphraseFile, `${passphrase}\n`, { mode: 0o600 });
  writeFileSync(path.join(dataDir, 'postern.yaml'), yaml(4001));
}, 60_000);

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const pendingJson = async (): Promise<{
  broker_running: boolean;
  trust: string;
  accept_applies: string;
  change: { digest: string } | null;
}> => {
  const result = await runPostern(['config', 'pending', '--json', '--data-dir', dataDir]);
  expect(result.code, result.stderr).toBe(0);
  return JSON.parse(result.stdout);
};

describe('postern config with no broker running', () => {
  it('pending shows the whole file as a card and the command that accepts it', async () => {
    const text = await runPostern(['config', 'pending', '--data-dir', dataDir]);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain('Configuration trust: untrusted');
    expect(text.stdout).toContain('added route docs');
    expect(text.stdout).toContain('base_url: - → http://127.0.0.1:4001');
    const json = await pendingJson();
    expect(json).toMatchObject({ broker_running: false, trust: 'untrusted', accept_applies: 'now' });
    // No broker: whatever `accept_applies` says of a running one, an acceptance here is read at the next start.
    expect(text.stdout).toContain(
      `Accept it with: postern config accept ${json.change?.digest}  (it applies at the next start)`,
    );
  });

  it('accept is refused without a terminal (an agent) and for a malformed digest; nothing is written', async () => {
    const digest = (await pendingJson()).change?.digest ?? '';
    const agent = await runPostern(['config', 'accept', digest, '--data-dir', dataDir]);
    expect(agent.code).toBe(1);
    expect(agent.stderr).toContain('postern: OPERATOR_PROOF_REQUIRED proof:');
    const malformed = await runPostern(['config', 'accept', 'sha256:nothex', '--data-dir', dataDir]);
    expect(malformed.code).toBe(2);
    expect(malformed.stderr).toContain('postern: INVALID_ARGUMENT digest:');
    expect(existsSync(acceptedFile)).toBe(false);
  });

  it('a person accepts on a terminal; a digest that no longer names the file accepts nothing', async () => {
    const stale = await runOnTerminal(
      ['config', 'accept', `sha256:${'0'.repeat(64)}`, '--data-dir', dataDir],
      passphrase,
    );
    expect(stale.prompted).toBe(true);
    expect(stale.code, stale.screen).toBe(1);
    expect(stale.screen).toContain('DECISION_CONFLICT');
    expect(existsSync(acceptedFile)).toBe(false);

    const digest = (await pendingJson()).change?.digest ?? '';
    const accepted = await runOnTerminal(['config', 'accept', digest, '--data-dir', dataDir], passphrase);
    expect(accepted.code, accepted.screen).toBe(0);
    expect(accepted.screen).toContain(`Accepted ${digest}`);
    expect(accepted.screen).not.toContain(passphrase);
    expect(JSON.parse(readFileSync(acceptedFile, 'utf8'))).toMatchObject({
      how: 'accepted',
      accepted_by: expect.stringMatching(/^person:.+ \(cli, passphrase on tty\)$/),
    });
  }, 60_000);
});

describe('postern config in a data directory with no vault, no broker running', () => {
  const freshDir = path.join(scratch, 'fresh');

  it('pending reads the files and creates nothing: no vault file, no journal', async () => {
    mkdirSync(freshDir, { mode: 0o700 });
    writeFileSync(path.join(freshDir, 'postern.yaml'), yaml(4002));
    const result = await runPostern(['config', 'pending', '--json', '--data-dir', freshDir]);
    expect(result.code, result.stderr).toBe(0);
    // No vault yet: the file present when a person creates one is the one trusted on first use.
    expect(JSON.parse(result.stdout)).toMatchObject({ broker_running: false, trust: 'first_use', change: null });
    expect(readdirSync(freshDir).sort()).toEqual(['postern.yaml']);
  });

  it('a file that does not load is named with its error, on one coded line, and nothing is created', async () => {
    const brokenDir = path.join(scratch, 'broken');
    mkdirSync(brokenDir, { mode: 0o700 });
    writeFileSync(path.join(brokenDir, 'postern.yaml'), 'version: 1\nroutes: [\n');
    const result = await runPostern(['config', 'pending', '--data-dir', brokenDir]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^postern: CONFIG_INVALID: the configuration is not valid YAML at line \d+/);
    expect(readdirSync(brokenDir)).toEqual(['postern.yaml']);
  });

  it('accept is refused before the passphrase is asked, and creates nothing', async () => {
    const run = await runOnTerminal(
      ['config', 'accept', `sha256:${'0'.repeat(64)}`, '--data-dir', freshDir],
      passphrase,
    );
    expect(run.prompted).toBe(false);
    expect(run.code, run.screen).toBe(1);
    expect(run.screen).toContain('VAULT_NOT_INITIALIZED');
    expect(readdirSync(freshDir).sort()).toEqual(['postern.yaml']);
  }, 60_000);
});

describe('postern config with no broker, beside a vault file opening would upgrade or a damaged credential row', () => {
  /** A copy of the data directory with a vault holding a key and a credential, changed by `change`. */
  const vaultDir = async (name: string, change: (db: Database.Database) => void): Promise<string> => {
    const at = path.join(scratch, name);
    mkdirSync(at, { mode: 0o700 });
    const vault = await openVault({ dataDir: at, clock: systemClock, kdf: 'min', idleLockMs: 0 });
    await vault.init(Buffer.from(passphrase));
    await vault.add({
      name: 'docs-token',
      kind: 'bearer',
      secret: Buffer.from('CANARY-config-cli'),
      bindings: ['docs'],
    });
    await vault.close();
    const db = new Database(path.join(at, 'vault.sqlite'));
    try {
      change(db);
    } finally {
      db.close();
    }
    writeFileSync(path.join(at, 'postern.yaml'), yaml(4003));
    return at;
  };
  const pendingAt = async (at: string): Promise<{ trust: string; change: { digest: string } | null }> => {
    const result = await runPostern(['config', 'pending', '--json', '--data-dir', at]);
    expect(result.code, result.stderr).toBe(0);
    return JSON.parse(result.stdout);
  };
  const userVersion = (at: string): number => {
    const db = new Database(path.join(at, 'vault.sqlite'), { readonly: true });
    try {
      return Number(db.pragma('user_version', { simple: true }));
    } finally {
      db.close();
    }
  };

  it('a vault file of the older schema (v1) is opened, and upgraded, as before: the same card as a current one', async () => {
    const at = await vaultDir('v1', (db) => {
      db.exec('ALTER TABLE vault_key DROP COLUMN protected_by');
      db.pragma('user_version = 1');
    });
    // A vault with a key and no accepted copy: the whole file waits for a person (untrusted), as in the first describe.
    expect(await pendingAt(at)).toMatchObject({ trust: 'untrusted', change: { digest: expect.any(String) } });
    expect(userVersion(at)).toBe(2);
  });

  it('a planted credential row does not stop the card (it needs only whether a vault exists)', async () => {
    const at = await vaultDir('planted-row', (db) => db.prepare("UPDATE credentials SET kind = 'planted'").run());
    expect(await pendingAt(at)).toMatchObject({ trust: 'untrusted', change: { digest: expect.any(String) } });
  });
});

describe('postern config with a broker running', () => {
  it('the accepted file is in force; a later edit shows as a change that a person accepts, in force at once', async () => {
    // Unlocked as a person does it: a passphrase file's passphrase would prove no person for the accept below.
    const daemon = await startDaemon(dataDir);
    try {
      await unlockAsPerson(dataDir, passphrase);
      expect(await callOperator(dataDir, 'config.pending', {})).toMatchObject({ trust: 'verified', change: null });
      writeFileSync(path.join(dataDir, 'postern.yaml'), yaml(4002));
      const pending = await pendingJson();
      expect(pending).toMatchObject({ broker_running: true, trust: 'verified', accept_applies: 'now' });
      const text = await runPostern(['config', 'pending', '--data-dir', dataDir]);
      expect(text.stdout).toContain('changed route docs');
      expect(text.stdout).toContain('base_url: http://127.0.0.1:4001 → http://127.0.0.1:4002');
      const agent = await runPostern(['config', 'accept', pending.change?.digest ?? '', '--data-dir', dataDir]);
      expect(agent.code).toBe(1);
      expect(agent.stderr).toContain('OPERATOR_PROOF_REQUIRED');
      const person = await runOnTerminal(
        ['config', 'accept', pending.change?.digest ?? '', '--data-dir', dataDir],
        passphrase,
      );
      expect(person.code, person.screen).toBe(0);
      expect(person.screen).toContain('it is in force now');
      expect(await callOperator(dataDir, 'config.pending', {})).toMatchObject({
        change: null,
        restart_needed: false,
        accepted: { how: 'accepted' },
      });
    } finally {
      await daemon.process.stop('SIGTERM');
    }
  }, 90_000);
});
