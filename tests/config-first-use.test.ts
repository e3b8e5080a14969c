import Database from 'better-sqlite3';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callOperator } from '../broker/cli/operator-commands.js';
import { ArrivalLogServer } from '../broker/testing/arrival-log-server.js';
import { vaultFileName } from '../broker/vault/index.js';
import { createDataDir, routesYaml, type RouteYaml } from './support/create-data-dir.js';
import { runPostern } from './support/postern-process.js';
import { RestartableDaemon } from './support/restartable-daemon.js';

/**
 * THREAT-MODEL 3 against a real daemon: an agent without the passphrase tries to turn an established data directory
 * back into "first use", so that the person's routine unlock seals its postern.yaml — with the unattended opt-out — as
 * "trust on first use". It empties the vault's credential rows (it cannot read them, but it can delete and restore
 * them), deletes config/accepted.json, and edits the file. The journal of the earlier runs says the directory is not
 * new: the file waits for a person, nothing is sealed, and the opt-out is never honoured.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'pocfu-'));
const dataDir = path.join(scratch, 'data');
const anchorDir = path.join(scratch, 'anchors');
const passphrase = 'config first use passphrase (test only)';
const canary = 'CANARY-config-first-use-token';
const acceptedFile = path.join(dataDir, 'config', 'accepted.json');
let home: ArrivalLogServer;
let evil: ArrivalLogServer;

/** One route `docs` (bearer docs-token, POST) to `port`. */
const docsYaml = (port: number, approval: RouteYaml['approval'], options: { unattended?: boolean } = {}): string =>
  routesYaml([{ port, approval }], options);

const rig = new RestartableDaemon({
  dataDir,
  passphrase,
  agentName: 'first-use-agent',
  docsPath: '/docs/first-use',
  env: { POSTERN_ANCHOR_DIR: anchorDir },
});

/** `postern approvals approve` from a process with no terminal: only the opt-out could let it through. */
const approveWithoutPerson = (): ReturnType<typeof runPostern> =>
  runPostern(['approvals', 'approve', '424242', '--data-dir', dataDir], { env: { POSTERN_ANCHOR_DIR: anchorDir } });

/** The agent's first step: keep the credential rows (sealed: it cannot read them) and delete them from the vault. */
function emptyTheVault(): Array<Record<string, unknown>> {
  const db = new Database(path.join(dataDir, vaultFileName));
  try {
    const rows = db.prepare('SELECT * FROM credentials').all() as Array<Record<string, unknown>>;
    expect(rows).toHaveLength(1);
    db.prepare('DELETE FROM credentials').run();
    return rows;
  } finally {
    db.close();
  }
}

/** The agent's last step, after the person's unlock: the rows go back as they were. */
function restoreTheVault(rows: Array<Record<string, unknown>>): void {
  const db = new Database(path.join(dataDir, vaultFileName));
  try {
    const columns = Object.keys(rows[0] ?? {});
    const insert = db.prepare(
      `INSERT INTO credentials (${columns.join(', ')}) VALUES (${columns.map((c) => `@${c}`).join(', ')})`,
    );
    for (const row of rows) insert.run(row);
  } finally {
    db.close();
  }
}

beforeAll(async () => {
  mkdirSync(anchorDir, { mode: 0o700 });
  home = await ArrivalLogServer.start();
  evil = await ArrivalLogServer.start();
  await createDataDir({
    dataDir,
    passphrase,
    credential: { name: 'docs-token', secret: canary, bindings: ['docs'] },
    yaml: docsYaml(home.port, 'per_call'),
  });
}, 60_000);

afterAll(async () => {
  await rig.stop();
  await home.stop();
  await evil.stop();
  rmSync(scratch, { recursive: true, force: true });
}, 30_000);

describe('an agent deletes the accepted copy and empties the vault between two starts', () => {
  it('a person accepted the configuration in an earlier run (the sealed copy exists)', async () => {
    await rig.startAndUnlock();
    const digest = (await callOperator(dataDir, 'config.pending', {})).change?.digest ?? '';
    expect(await rig.decide('config.accept', { digest })).toMatchObject({ digest, applies: 'now' });
    expect(JSON.parse(readFileSync(acceptedFile, 'utf8'))).toMatchObject({ how: 'accepted' });
    await rig.stop();
  }, 90_000);

  it('with its own server on a route that needs no approval: not first use, nothing sealed, and once the rows are back nothing reaches its server', async () => {
    const rows = emptyTheVault();
    rmSync(acceptedFile);
    writeFileSync(path.join(dataDir, 'postern.yaml'), docsYaml(evil.port, 'none'));

    // The person's routine start and unlock.
    await rig.startAndUnlock();
    const pending = await callOperator(dataDir, 'config.pending', {});
    expect(pending).toMatchObject({
      trust: 'untrusted',
      accepted: null,
      untrusted_reason: expect.stringMatching(/has run before \(its journal holds \d+ events\)/),
    });
    // The whole file is the card, the agent's server in it.
    expect(pending.change?.routes).toEqual([
      expect.objectContaining({
        name: 'docs',
        change: 'added',
        fields: expect.arrayContaining([{ field: 'base_url', before: null, after: `http://127.0.0.1:${evil.port}` }]),
      }),
    ]);
    expect(existsSync(acceptedFile)).toBe(false);

    restoreTheVault(rows);
    const refused = await rig.send('first-use-agent-call');
    expect(refused.structuredContent?.error).toMatchObject({ code: 'CONFIG_UNTRUSTED', outcome: 'not_attempted' });
    expect(evil.arrivals).toEqual([]);

    // The person puts their file back and accepts it on the card: sealed as theirs.
    writeFileSync(path.join(dataDir, 'postern.yaml'), docsYaml(home.port, 'per_call'));
    const digest = (await callOperator(dataDir, 'config.pending', {})).change?.digest ?? '';
    expect(await rig.decide('config.accept', { digest })).toMatchObject({ digest });
    expect(JSON.parse(readFileSync(acceptedFile, 'utf8'))).toMatchObject({ how: 'accepted' });
    await rig.stop();
  }, 120_000);

  it('with the unattended opt-out in its file: the unlock seals nothing, and the opt-out is not honoured once the rows are back, at this start or the next', async () => {
    const rows = emptyTheVault();
    rmSync(acceptedFile);
    writeFileSync(path.join(dataDir, 'postern.yaml'), docsYaml(evil.port, 'none', { unattended: true }));

    await rig.startAndUnlock();
    const pending = await callOperator(dataDir, 'config.pending', {});
    expect(pending).toMatchObject({
      trust: 'untrusted',
      accepted: null,
      untrusted_reason: expect.stringMatching(/has run before/),
    });
    expect(pending.change?.settings).toContainEqual(
      expect.objectContaining({ name: 'operator', fields: [expect.objectContaining({ after: 'true' })] }),
    );
    expect(existsSync(acceptedFile)).toBe(false);

    restoreTheVault(rows);
    const approve = await approveWithoutPerson();
    expect(approve.code).toBe(1);
    expect(approve.stderr).toContain('OPERATOR_PROOF_REQUIRED');
    expect((await rig.send('first-use-opt-out-call')).structuredContent?.error).toMatchObject({
      code: 'CONFIG_UNTRUSTED',
    });
    await rig.stop();

    // Nor at the next start: still no accepted copy, still a card for a person.
    await rig.startAndUnlock();
    expect(await callOperator(dataDir, 'config.pending', {})).toMatchObject({ trust: 'untrusted', accepted: null });
    expect((await approveWithoutPerson()).stderr).toContain('OPERATOR_PROOF_REQUIRED');
    expect(existsSync(acceptedFile)).toBe(false);
    expect(evil.arrivals).toEqual([]);
    await rig.stop();

    // With no broker running, `postern config pending` reads the same history from the files.
    const offline = await runPostern(['config', 'pending', '--json', '--data-dir', dataDir], {
      env: { POSTERN_ANCHOR_DIR: anchorDir },
    });
    expect(offline.code, offline.stderr).toBe(0);
    expect(JSON.parse(offline.stdout)).toMatchObject({
      broker_running: false,
      trust: 'untrusted',
      untrusted_reason: expect.stringMatching(/has run before \(its journal holds \d+ events\)/),
    });
  }, 120_000);
});
