import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArrivalLogServer } from '../broker/testing/arrival-log-server.js';
import { createDataDir, routesYaml } from './support/create-data-dir.js';
import { pendingCard } from './support/drill.js';
import { DrillAgent } from './support/drill-agent.js';
import { PosternProcess, startDaemon, type RunningDaemon } from './support/postern-process.js';

/**
 * `postern actions list --text` finds an action by the words the list prints for who decided — `allowed by policy
 * (approval: none[; <rule>])` for a call policy allowed at admission, `approved by …` for one a person approved — as
 * real CLI processes against a running daemon, the calls made by a real agent process through `postern mcp`.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'palpolicy-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const passphrase = 'policy list passphrase (test only)';
const getRule = 'rules[0]: GET HEAD /** → none';

async function cli(args: readonly string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const proc = new PosternProcess(args);
  const exit = await proc.exitWithin();
  return { code: exit.code, stdout: proc.stdout, stderr: proc.stderr };
}

describe('postern actions list --text on who decided, against a running daemon', () => {
  const dataDir = path.join(scratch, 'data');
  let log: ArrivalLogServer | undefined;
  let daemon: RunningDaemon | undefined;
  let agent: DrillAgent | undefined;

  beforeAll(async () => {
    log = await ArrivalLogServer.start();
    const passphraseFile = path.join(scratch, 'data.pass');
    await createDataDir({
      dataDir,
      passphrase,
      credential: {
        name: 'token',
        secret: 'CANARY-policy-list-token-never-shown',
        bindings: ['docs', 'plain', '127.0.0.1'],
      },
      yaml: routesYaml(
        [
          {
            name: 'docs',
            port: log.port,
            credential: 'token',
            approval: 'per_call',
            methods: 'all',
            lines: [
              '    rules_may_loosen: true',
              '    rules:',
              '      - { methods: [GET, HEAD], path: /**, approval: none }',
            ],
          },
          { name: 'plain', port: log.port, credential: 'token', approval: 'none', methods: 'all' },
        ],
        { unattended: true }, // this test process approves the write (the CI opt-out)
      ),
      acceptWith: passphraseFile,
    });
    daemon = await startDaemon(dataDir, { env: { POSTERN_PASSPHRASE_FILE: passphraseFile } });
    agent = await DrillAgent.start(dataDir, 'policy-list-agent');
  }, 90_000);

  afterAll(async () => {
    await agent?.stop();
    await daemon?.process.stop('SIGTERM');
    await log?.stop();
  }, 30_000);

  it('finds the calls policy allowed by "policy" and by the words it prints for them, and a person-approved one by "approved by"', async () => {
    if (agent === undefined) throw new Error('the setup did not start');
    const dir = ['--data-dir', dataDir];
    const ruled = await agent.call('http_request', {
      route: 'docs',
      method: 'GET',
      path: '/docs/7',
      timeout_ms: 30_000,
    }).reply;
    const plain = await agent.call('http_request', { route: 'plain', method: 'GET', path: '/p/1', timeout_ms: 30_000 })
      .reply;
    expect([ruled.isError ?? false, plain.isError ?? false]).toEqual([false, false]);
    const post = agent.call('http_request', {
      route: 'docs',
      method: 'POST',
      path: '/docs/7',
      body: JSON.stringify({ marker: 'policy-list-write' }),
      timeout_ms: 60_000,
    });
    const card = await pendingCard(dataDir, 'the POST card');
    expect((await cli(['approvals', 'approve', String(card.ticket), ...dir])).code).toBe(0);
    expect((await post.reply).isError ?? false).toBe(false);
    const ids = {
      ruled: ruled.structuredContent?.invocation_id as string,
      plain: plain.structuredContent?.invocation_id as string,
      approved: card.action_id,
    };

    const rows = JSON.parse((await cli(['actions', 'list', '--json', ...dir])).stdout) as {
      actions: Array<{ action_id: string; ticket: number | null }>;
    };
    const ticketOf = new Map(rows.actions.map((r) => [r.action_id, r.ticket]));
    const listed = (await cli(['actions', 'list', ...dir])).stdout.split('\n');
    const lineOf = (id: string) => listed.find((l) => l.includes(`  #${ticketOf.get(id) ?? '?'}  `)) ?? '';
    expect(lineOf(ids.ruled)).toContain(`allowed by policy (approval: none; ${getRule})`);
    expect(lineOf(ids.plain)).toContain('allowed by policy (approval: none)  ');
    expect(lineOf(ids.approved)).toMatch(/approved by process:/);

    const found = async (text: string) =>
      (JSON.parse((await cli(['actions', 'list', '--json', '--text', text, ...dir])).stdout) as typeof rows).actions
        .map((r) => r.action_id)
        .sort();
    expect(await found('policy')).toEqual([ids.ruled, ids.plain].sort());
    expect(await found('allowed by policy (approval: none)')).toEqual([ids.plain]);
    expect(await found(`allowed by policy (approval: none; ${getRule.slice(0, 12)}`)).toEqual([ids.ruled]);
    expect(await found('approved by process:')).toEqual([ids.approved]);
    const text = await cli(['actions', 'list', '--text', 'Allowed By Policy', ...dir]);
    expect(text.code).toBe(0);
    expect(text.stdout.trim().split('\n')).toHaveLength(2);
    expect(text.stdout).not.toContain('CANARY');
  }, 90_000);
});
