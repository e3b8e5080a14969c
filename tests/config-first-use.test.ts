import Database from 'better-sqlite3';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callOperator } from '../broker/cli/operator-commands.js';
import { ArrivalLogServer } from '../broker/testing/arrival-log-server.js';
import { journalFileName } from '../broker/journal/index.js';
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

/** A config card's routes when the agent's file is the whole change: one route `docs`, added, sending to its server. */
const agentRouteAdded = (): unknown[] => [
  expect.objectContaining({
    name: 'docs',
    change: 'added',
    fields: expect.arrayContaining([{ field: 'base_url', before: null, after: `http://127.0.0.1:${evil.port}` }]),
  }),
];

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
    expect(pending.change?.routes).toEqual(agentRouteAdded());
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

/**
 * The same attack, with everything that said "this directory ran before" deleted too: the journal (and its WAL) and its
 * integrity anchor outside the data directory. Every file left then looks like a new data directory whose vault holds
 * nothing: only the person's own act of creating the vault may trust a file on first use, and the person's routine
 * unlock of a vault that exists is not that act.
 */
describe('an agent deletes the journal and its anchor too, so the directory looks new', () => {
  /** The CONFIG_APPLIED rows of Activity, as summaries ("<how> by <who>: <digest>"). */
  const configEvents = async (): Promise<string[]> =>
    (await callOperator(dataDir, 'activity.list', { text: 'CONFIG_APPLIED' })).events
      .filter((row) => row.kind === 'CONFIG_APPLIED')
      .map((row) => row.summary);

  it('the directory is established: a person accepted the configuration, the journal holds events and is anchored', async () => {
    writeFileSync(path.join(dataDir, 'postern.yaml'), docsYaml(home.port, 'per_call'));
    await rig.startAndUnlock();
    const digest = (await callOperator(dataDir, 'config.pending', {})).change?.digest ?? '';
    expect(await rig.decide('config.accept', { digest })).toMatchObject({ digest, applies: 'now' });
    expect(await callOperator(dataDir, 'config.pending', {})).toMatchObject({ trust: 'verified', change: null });
    await rig.stop();
    expect(JSON.parse(readFileSync(acceptedFile, 'utf8'))).toMatchObject({ how: 'accepted' });
    expect(readdirSync(anchorDir)).not.toEqual([]);
  }, 90_000);

  it('the person unlocks as every day: the agent route is not in force, a card shows it, nothing is sealed or journaled as first use, at this start or the next', async () => {
    // The agent: journal and anchor gone, the accepted copy gone, the credential rows out, its own file in place.
    const rows = emptyTheVault();
    for (const name of readdirSync(dataDir).filter((n) => n.startsWith(journalFileName)))
      rmSync(path.join(dataDir, name));
    for (const name of readdirSync(anchorDir)) rmSync(path.join(anchorDir, name));
    rmSync(acceptedFile);
    writeFileSync(path.join(dataDir, 'postern.yaml'), docsYaml(evil.port, 'none'));

    await rig.startAndUnlock();
    // Every fact the start read says "new": no anchor (first use of one, not a quarantine), a new journal.
    expect(await callOperator(dataDir, 'integrity.anchor', {})).toMatchObject({ state: 'first_use', code: null });
    const pending = await callOperator(dataDir, 'config.pending', {});
    expect(pending).toMatchObject({
      trust: 'untrusted',
      accepted: null,
      untrusted_reason: expect.stringMatching(/only the file present when a person creates the vault/),
      accept_applies: 'now',
    });
    expect(pending.change?.routes).toEqual(agentRouteAdded());
    expect(existsSync(acceptedFile)).toBe(false);

    // The rows go back: the agent's route would now send the credential to its server, but nothing is in force.
    restoreTheVault(rows);
    const refused = await rig.send('looks-new-agent-call');
    expect(refused.structuredContent?.error).toMatchObject({ code: 'CONFIG_UNTRUSTED', outcome: 'not_attempted' });
    expect(await configEvents()).toEqual([]);
    await rig.stop();

    // Nor at the next start, whose journal now holds this run's events.
    await rig.startAndUnlock();
    expect(await callOperator(dataDir, 'config.pending', {})).toMatchObject({ trust: 'untrusted', accepted: null });
    expect((await rig.send('looks-new-agent-call-2')).structuredContent?.error).toMatchObject({
      code: 'CONFIG_UNTRUSTED',
    });
    expect((await configEvents()).filter((summary) => summary.startsWith('first_use'))).toEqual([]);
    expect(existsSync(acceptedFile)).toBe(false);
    expect(evil.arrivals).toEqual([]);
    await rig.stop();
  }, 120_000);
});
