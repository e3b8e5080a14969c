import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callOperator } from '../broker/cli/operator-commands.js';
import { anchorFileOf } from '../broker/host/integrity-anchor.js';
import { ArrivalLogServer } from '../broker/testing/arrival-log-server.js';
import { createDataDir, routesYaml } from './support/create-data-dir.js';
import { runPostern } from './support/postern-process.js';
import { RestartableDaemon } from './support/restartable-daemon.js';

/**
 * The rollback attack against a real daemon (issue #20): the whole data directory is put back to an earlier copy, which
 * erases the actions made since from the journal. The signed anchor outside the data directory still names the later
 * head, so the start quarantines: the agent's calls are refused with JOURNAL_QUARANTINED and nothing reaches the
 * remote, until a person re-adopts the journal as it is.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'poanc-'));
const dataDir = path.join(scratch, 'data');
const backup = path.join(scratch, 'backup');
const anchorDir = path.join(scratch, 'anchors');
const env = { POSTERN_ANCHOR_DIR: anchorDir };
const passphrase = 'integrity anchor passphrase (test only)';
let home: ArrivalLogServer;
const rig = new RestartableDaemon({ dataDir, passphrase, agentName: 'anchor-agent', docsPath: '/docs/anchor', env });
const decide = rig.decide.bind(rig);
const startAndUnlock = (): Promise<void> => rig.startAndUnlock();
const stop = (): Promise<void> => rig.stop();
const send = (marker: string): ReturnType<RestartableDaemon['send']> => rig.send(marker);

/** A stopped daemon removes its sockets; a copy skips any left behind (they cannot be copied). */
const notSocket = (source: string): boolean => !source.endsWith('.sock');

function anchorCounter(): number {
  return (JSON.parse(readFileSync(anchorFileOf(dataDir, env), 'utf8')) as { counter: number }).counter;
}

beforeAll(async () => {
  home = await ArrivalLogServer.start();
  await createDataDir({
    dataDir,
    passphrase,
    credential: { name: 'docs-token', secret: 'anchor-token', bindings: ['docs'] },
    yaml: routesYaml([{ port: home.port, approval: 'none' }]),
  });
}, 60_000);

afterAll(async () => {
  await stop();
  await home.stop();
  rmSync(scratch, { recursive: true, force: true });
}, 30_000);

describe('when the whole data directory is rolled back to an earlier copy', () => {
  it('a first run writes the anchor at its checkpoints (outside the data directory)', async () => {
    await startAndUnlock();
    // Credentials and no accepted copy: a person accepts the file first (config-integrity.ts).
    const digest = (await callOperator(dataDir, 'config.pending', {})).change?.digest ?? '';
    await decide('config.accept', { digest });
    expect((await send('before-copy')).structuredContent?.error).toBeUndefined();
    // No anchor before this run: first use, and the checkpoint at stop writes anchor 1.
    expect(await callOperator(dataDir, 'integrity.anchor', {})).toMatchObject({ state: 'first_use', code: null });
    await stop();
    expect(anchorFileOf(dataDir, env).startsWith(anchorDir)).toBe(true);
    expect(existsSync(anchorFileOf(dataDir, env))).toBe(true);
  }, 90_000);

  it('after more actions and a restore of the old copy, the start is quarantined with ANCHOR_ROLLBACK; agents are refused and nothing is sent', async () => {
    cpSync(dataDir, backup, { recursive: true, filter: notSocket });
    await startAndUnlock();
    expect((await send('after-copy-1')).structuredContent?.error).toBeUndefined();
    expect((await send('after-copy-2')).structuredContent?.error).toBeUndefined();
    await stop();
    const counterBefore = anchorCounter();
    rmSync(dataDir, { recursive: true });
    cpSync(backup, dataDir, { recursive: true, filter: notSocket });

    await startAndUnlock();
    const report = await callOperator(dataDir, 'integrity.anchor', {});
    expect(report).toMatchObject({ state: 'quarantined', code: 'ANCHOR_ROLLBACK', found: { counter: counterBefore } });
    expect(report.journal.last_seq).toBeLessThan(report.found?.head_seq ?? 0);
    // The CLI says it too, with the next step, and exits non-zero.
    const cli = await runPostern(['integrity', '--data-dir', dataDir]);
    expect(cli.code).toBe(1);
    expect(cli.stdout).toContain('QUARANTINED (ANCHOR_ROLLBACK)');
    expect(cli.stdout).toContain('postern integrity readopt ANCHOR_ROLLBACK');
    const arrivalsBefore = home.arrivals.length;
    const refused = await send('while-quarantined');
    expect(refused.structuredContent?.error).toMatchObject({
      code: 'JOURNAL_QUARANTINED',
      phase: 'validation',
      outcome: 'not_attempted',
    });
    expect(home.arrivals.length).toBe(arrivalsBefore);
    expect(home.markers()).not.toContain('while-quarantined');
    // No action was admitted for it either: the refusal comes before admission.
    const listed = await callOperator(dataDir, 'actions.list', {});
    expect(listed.actions.length).toBe(1);
    // A person's retry or reconcile may send too: refused the same way while quarantined, before looking at the action.
    const actionId = listed.actions[0]?.action_id ?? '';
    for (const method of ['actions.retry', 'actions.reconcile'] as const)
      await expect(decide(method, { action_id: actionId })).rejects.toMatchObject({ code: 'JOURNAL_QUARANTINED' });
    expect(home.arrivals.length).toBe(arrivalsBefore);
  }, 90_000);

  it('re-adoption needs a person; then a new anchor is signed, agents are served, and the next start is ok', async () => {
    await expect(callOperator(dataDir, 'integrity.readopt', { code: 'ANCHOR_ROLLBACK' })).rejects.toMatchObject({
      code: 'OPERATOR_PROOF_REQUIRED',
    });
    const counterBefore = anchorCounter();
    const readopted = await decide('integrity.readopt', { code: 'ANCHOR_ROLLBACK' });
    expect(readopted).toMatchObject({ state: 'ok', code: null, readopted: { code: 'ANCHOR_ROLLBACK' } });
    expect(anchorCounter()).toBe(counterBefore + 1);
    expect((await send('after-readopt')).structuredContent?.error).toBeUndefined();
    expect(home.markers()).toContain('after-readopt');
    await stop();
    await startAndUnlock();
    expect(await callOperator(dataDir, 'integrity.anchor', {})).toMatchObject({ state: 'ok' });
    await stop();
  }, 90_000);
});
