import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArrivalLogServer } from '../broker/testing/arrival-log-server.js';
import { createDataDir, routesYaml } from './support/create-data-dir.js';
import { DrillAgent } from './support/drill-agent.js';
import { runOnTerminal } from './support/operator-terminal.js';
import { startDaemon, type RunningDaemon } from './support/postern-process.js';

/**
 * `postern actions reconcile|retry` on a person's terminal (no unattended opt-out) for an unknown action that neither
 * can help: the route declares no lookup, read-back or retry policy. The refusal comes before the passphrase prompt
 * (the CLI asks the read-only `actions.precheck` first), so a person is never asked for the secret for nothing.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'poprecheck-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const passphrase = 'precheck passphrase (test only)';

describe('when reconcile or retry cannot work for an action', () => {
  const dataDir = path.join(scratch, 'pre');
  let target: ArrivalLogServer | undefined;
  let daemon: RunningDaemon | undefined;
  let agent: DrillAgent | undefined;
  beforeAll(async () => {
    const passphraseFile = path.join(scratch, 'pre.pass');
    target = await ArrivalLogServer.start({ behave: () => 'apply_then_drop' });
    await createDataDir({
      dataDir,
      passphrase,
      credential: { name: 'pre-token', secret: 'CANARY-pre-token-never-shown', bindings: ['docs', '127.0.0.1'] },
      yaml: routesYaml([{ port: target.port, credential: 'pre-token', approval: 'none' }]),
      acceptWith: passphraseFile,
    });
    daemon = await startDaemon(dataDir, { env: { POSTERN_PASSPHRASE_FILE: passphraseFile } });
    agent = await DrillAgent.start(dataDir, 'pre-agent');
  }, 90_000);
  afterAll(async () => {
    await agent?.stop();
    await daemon?.process.stop('SIGTERM');
    await target?.stop();
  }, 30_000);

  it('refuses with the coded reason before asking for the passphrase, and sends nothing', async () => {
    if (agent === undefined || target === undefined) throw new Error('the setup did not start');
    const reply = await agent.call('http_request', {
      route: 'docs',
      method: 'POST',
      path: '/docs/1',
      body: JSON.stringify({ marker: 'pre-unknown' }),
      timeout_ms: 60_000,
    }).reply;
    expect(reply.structuredContent?.error?.outcome).toBe('unknown');
    const actionId = reply.structuredContent?.invocation_id ?? '';
    const arrivals = target.arrivals.length;

    const reconcile = await runOnTerminal(['actions', 'reconcile', actionId, '--data-dir', dataDir], passphrase);
    expect(reconcile.prompted, reconcile.screen).toBe(false);
    expect(reconcile.code).toBe(1);
    expect(reconcile.screen).toMatch(/UNSUPPORTED_ACTION .*declares no lookup operation/);

    const retry = await runOnTerminal(['actions', 'retry', actionId, '--data-dir', dataDir], passphrase);
    expect(retry.prompted, retry.screen).toBe(false);
    expect(retry.code).toBe(1);
    expect(retry.screen).toMatch(/NOT_FOUND .*no kept request/);
    expect(target.arrivals.length).toBe(arrivals);
  }, 90_000);
});
