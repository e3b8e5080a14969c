import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArrivalLogServer } from '../broker/testing/arrival-log-server.js';
import { DrillAgent } from './support/drill-agent.js';
import { op } from './support/drill.js';
import { PosternProcess, startDaemon, type RunningDaemon } from './support/postern-process.js';
import { createDataDir, routesYaml } from './support/create-data-dir.js';

/**
 * `postern actions reconcile` end to end: a real daemon, a real agent process whose keyed POST
 * takes effect and loses its connection (unknown), then the CLI asks the route's lookup. The
 * original reads as source remote_query in `postern actions show`, the lookup is its own action.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'popreco-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

async function cli(args: readonly string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const proc = new PosternProcess(args);
  const exit = await proc.exitWithin();
  return { code: exit.code, stdout: proc.stdout, stderr: proc.stderr };
}

describe('postern actions reconcile against a running daemon', () => {
  const dataDir = path.join(scratch, 'reco');
  let target: ArrivalLogServer | undefined;
  let daemon: RunningDaemon | undefined;
  let agent: DrillAgent | undefined;
  beforeAll(async () => {
    const passphrase = 'reconcile passphrase (test only)';
    const passphraseFile = path.join(scratch, 'reco.pass');
    let retryArrivals = 0;
    target = await ArrivalLogServer.start({
      behave: ({ method, path, marker }) => {
        if (method === 'POST' && (marker === 'cli-unknown' || marker === 'cli-early')) return 'apply_then_drop';
        // The remote has not recorded the early key yet: "no record", asked before the route trusts one.
        if (method === 'GET' && path === '/operations/cli-key-early') return 'not_found';
        // The first send of the retried action loses its answer; the person's retry is answered.
        if (method === 'POST' && marker === 'cli-retry')
          return (retryArrivals += 1) === 1 ? 'apply_then_drop' : 'respond';
        return 'respond';
      },
    });
    const idempotency =
      '    idempotency: { header: Idempotency-Key, scope: docs.account, retention_seconds: 86400, fingerprint: [method, path, body] }';
    await createDataDir({
      dataDir,
      passphrase,
      credential: { name: 'reco-token', secret: 'CANARY-reco-token-never-shown', bindings: ['docs', '127.0.0.1'] },
      yaml: routesYaml(
        [
          {
            port: target.port,
            credential: 'reco-token',
            approval: 'none',
            lines: [idempotency, "    lookup: { method: GET, path: '/operations/{idempotency_key}' }"],
          },
          {
            name: 'docs-retry',
            port: target.port,
            credential: 'reco-token',
            approval: 'none',
            lines: [idempotency, '    retry: { attempts_max: 1, automatic: false }'],
          },
        ],
        // Reconcile and retry are decisions; this test runs them without a terminal (the CI opt-out).
        { unattended: true },
      ),
      acceptWith: passphraseFile,
    });
    daemon = await startDaemon(dataDir, { env: { POSTERN_PASSPHRASE_FILE: passphraseFile } });
    agent = await DrillAgent.start(dataDir, 'reco-agent');
  }, 90_000);
  afterAll(async () => {
    await agent?.stop();
    await daemon?.process.stop('SIGTERM');
    await target?.stop();
  }, 30_000);

  it('settles the unknown action by the lookup and shows it as source remote_query', async () => {
    if (agent === undefined || target === undefined) throw new Error('the setup did not start');
    const dir = ['--data-dir', dataDir];
    const reply = await agent.call('http_request', {
      route: 'docs',
      method: 'POST',
      path: '/docs/7',
      body: JSON.stringify({ marker: 'cli-unknown' }),
      idempotency_key: 'cli-key-1',
      timeout_ms: 60_000,
    }).reply;
    expect(reply.structuredContent?.error?.outcome).toBe('unknown');
    const actionId = reply.structuredContent?.invocation_id ?? '';

    const reconciled = await cli(['actions', 'reconcile', actionId, '--json', ...dir]);
    expect(reconciled.code).toBe(0);
    const r = JSON.parse(reconciled.stdout) as {
      action_id: string;
      lookup_action_id: string;
      correlation: string;
      outcome: string;
      journal_seq: number;
    };
    expect(r).toMatchObject({ action_id: actionId, correlation: 'idempotency_token', outcome: 'committed' });
    expect(target.arrivals.map((a) => `${a.method} ${a.path}`)).toEqual(['POST /docs/7', 'GET /operations/cli-key-1']);

    const shown = await cli(['actions', 'show', actionId, ...dir]);
    expect(shown.stdout).toContain('source remote_query');
    expect(shown.stdout).toContain('RECONCILIATION_RESULT');
    // The lane this unknown head blocked was released by the lookup; this test asked without a terminal
    // under the unattended opt-out, so the record names the CLI process, never a person.
    expect(shown.stdout).toMatch(
      new RegExp(
        `lane released by: reconciliation \\(remote_query\\) by process:\\S+ pid \\d+ \\(cli, unattended\\) at seq ${r.journal_seq}; outcome committed`,
      ),
    );
    expect((await op(dataDir, 'actions.show', { action_id: actionId })).released_by).toMatchObject({
      kind: 'reconciliation',
      seq: r.journal_seq,
      source: 'remote_query',
      outcome: 'committed',
    });
    const lookup = await op(dataDir, 'actions.show', { action_id: r.lookup_action_id });
    expect(lookup.state).toMatchObject({ lane: null, approval: 'none', outcome: 'committed' });

    const again = await cli(['actions', 'reconcile', actionId, ...dir]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/DECISION_CONFLICT .*already settled/);
  }, 90_000);

  it('says on the terminal why an early "no record" left the action unknown (the note), not only in --json', async () => {
    if (agent === undefined || target === undefined) throw new Error('the setup did not start');
    const dir = ['--data-dir', dataDir];
    const reply = await agent.call('http_request', {
      route: 'docs',
      method: 'POST',
      path: '/docs/8',
      body: JSON.stringify({ marker: 'cli-early' }),
      idempotency_key: 'cli-key-early',
      timeout_ms: 60_000,
    }).reply;
    expect(reply.structuredContent?.error?.outcome).toBe('unknown');
    const actionId = reply.structuredContent?.invocation_id ?? '';

    const reconciled = await cli(['actions', 'reconcile', actionId, ...dir]);
    expect(reconciled.code).toBe(0);
    const lines = reconciled.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/reconciled by lookup \S+ via idempotency_token: inconclusive, still unknown/);
    expect(lines[1]).toMatch(
      /^note: no record under the key, asked \d+ s after the original's last attempt ended; the route counts "no record" only from 60 s after it \(lookup\.not_found_after_seconds\)/,
    );
    const shown = await op(dataDir, 'actions.show', { action_id: actionId });
    expect(shown.state).toMatchObject({ outcome: 'unknown' });
  }, 90_000);

  it('postern actions retry resends the kept request with the same key under a lease; the lane is shown released by the same-key retry', async () => {
    if (agent === undefined || target === undefined) throw new Error('the setup did not start');
    const dir = ['--data-dir', dataDir];
    const reply = await agent.call('http_request', {
      route: 'docs-retry',
      method: 'POST',
      path: '/docs/9',
      body: JSON.stringify({ marker: 'cli-retry' }),
      idempotency_key: 'cli-key-9',
      timeout_ms: 60_000,
    }).reply;
    expect(reply.structuredContent?.error).toMatchObject({ outcome: 'unknown', retry: 'same_idempotency_key' });
    const actionId = reply.structuredContent?.invocation_id ?? '';
    const before = target.arrivals.length;

    const retried = await cli(['actions', 'retry', actionId, ...dir]);
    expect(retried.code).toBe(0);
    expect(retried.stdout).toContain('retried under lease generation 1; now committed (succeeded)');
    expect(target.arrivals.slice(before).map((a) => `${a.method} ${a.path}`)).toEqual(['POST /docs/9']);
    const shown = await op(dataDir, 'actions.show', { action_id: actionId });
    expect(shown.released_by).toMatchObject({
      kind: 'same_key_retry',
      actor: { kind: 'process', surface: 'cli', auth: 'unattended_opt_out' },
    });
    expect(shown.state).toMatchObject({ outcome: 'committed', retry_generation: 1 });

    // Settled: nothing is kept any more, and nothing is sent.
    const again = await cli(['actions', 'retry', actionId, ...dir]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/NOT_FOUND/);
    expect(target.arrivals.length).toBe(before + 1);
  }, 90_000);
});
