import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../broker/ports/index.js';
import { ArrivalLogServer } from '../broker/testing/arrival-log-server.js';
import { openVault } from '../broker/vault/index.js';
import { acceptConfigAsPerson } from './support/accepted-config.js';
import { op, pendingCard } from './support/drill.js';
import { DrillAgent } from './support/drill-agent.js';
import { PosternProcess, startDaemon, type RunningDaemon } from './support/postern-process.js';

/**
 * Issue 16, "config without restarts": one base URL is one route whose method/path rules decide
 * approval per call (GET none, writes per_call), through a real daemon, a real agent process
 * (MCP SDK client → `postern mcp`) and a real HTTP endpoint; and `operator.port` fixes the operator
 * UI's port, a second broker on it failing with a coded error that names the field.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'prules-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const passphrase = 'rules passphrase (test only)';
const writeRule = 'rules[1]: POST PUT PATCH DELETE /docs/{doc} → per_call';

/** A data directory with an initialized vault (fast KDF, test only) holding `token`, and its passphrase file. */
async function dataDirWithVault(name: string): Promise<{ dataDir: string; passphraseFile: string }> {
  const dataDir = path.join(scratch, name);
  mkdirSync(dataDir, { mode: 0o700 });
  const vault = await openVault({ dataDir, clock: systemClock, kdf: 'min', idleLockMs: 0 });
  await vault.init(Buffer.from(passphrase));
  await vault.add({
    name: 'token',
    kind: 'bearer',
    secret: Buffer.from('CANARY-rules-token-never-shown'),
    bindings: ['docs', '127.0.0.1'],
  });
  await vault.close();
  const passphraseFile = path.join(scratch, `${name}.pass`);
  writeFileSync(passphraseFile, `${passphrase}\n`, { mode: 0o600 });
  return { dataDir, passphraseFile };
}

describe('when one route has a GET rule (none) and a write rule (per_call)', () => {
  let dataDir = '';
  let log: ArrivalLogServer | undefined;
  let daemon: RunningDaemon | undefined;
  let agent: DrillAgent | undefined;

  beforeAll(async () => {
    const made = await dataDirWithVault('rules');
    dataDir = made.dataDir;
    log = await ArrivalLogServer.start();
    writeFileSync(
      path.join(dataDir, 'postern.yaml'),
      [
        'version: 1',
        'operator:',
        '  unattended_decisions: true', // this test process is the person (the CI opt-out)
        'agents:',
        '  session_approval: observe',
        'routes:',
        '  - name: docs',
        `    base_url: http://127.0.0.1:${log.port}`,
        '    credential: token',
        '    injection: bearer',
        '    approval: per_call',
        '    rules_may_loosen: true',
        '    rules:',
        '      - { methods: [GET, HEAD], path: /**, approval: none }',
        "      - { methods: [POST, PUT, PATCH, DELETE], path: '/docs/{doc}', approval: per_call, lane: 'doc-{doc}' }",
        '',
      ].join('\n'),
    );
    await acceptConfigAsPerson(dataDir, made.passphraseFile);
    daemon = await startDaemon(dataDir, { env: { POSTERN_PASSPHRASE_FILE: made.passphraseFile } });
    agent = await DrillAgent.start(dataDir, 'rules-agent');
  }, 60_000);

  afterAll(async () => {
    await agent?.stop();
    await daemon?.process.stop('SIGTERM');
    await log?.stop();
  });

  it('sends the GET with no card, and holds the POST on a card that names the rule until a person approves', async () => {
    if (agent === undefined || log === undefined) throw new Error('setup failed');
    const get = await agent.call('http_request', { route: 'docs', method: 'GET', path: '/docs/7', timeout_ms: 30_000 })
      .reply;
    expect(get.isError ?? false).toBe(false);
    const getId = get.structuredContent?.invocation_id as string;
    const getShown = await op(dataDir, 'actions.show', { action_id: getId });
    expect(getShown.state).toMatchObject({
      approval: 'none',
      approval_rule: 'rules[0]: GET HEAD /** → none',
      outcome: 'committed',
    });
    expect(getShown.events.map((e) => e.kind)).not.toContain('CARD_SHOWN');
    expect(log.arrivals.map((a) => `${a.method} ${a.path}`)).toEqual(['GET /docs/7']);

    const post = agent.call('http_request', {
      route: 'docs',
      method: 'POST',
      path: '/docs/7',
      body: JSON.stringify({ marker: 'write-7' }),
      timeout_ms: 60_000,
    });
    const card = await pendingCard(dataDir, 'the POST card');
    expect(card).toMatchObject({ approval: 'per_call', approval_rule: writeRule, lane: 'doc-7', method: 'POST' });
    // Nothing left for the remote while the card waits: the arrival log still holds only the GET.
    expect(log.arrivals).toHaveLength(1);
    const accepted = (await op(dataDir, 'actions.show', { action_id: card.action_id })).events.find(
      (e) => e.kind === 'ACTION_ACCEPTED',
    );
    expect(accepted?.summary).toContain(`(approval per_call by ${writeRule})`);

    await op(dataDir, 'approvals.approve', { ticket: card.ticket });
    const reply = await post.reply;
    expect(reply.isError ?? false).toBe(false);
    expect(log.arrivals.map((a) => a.marker)).toEqual(['GET /docs/7', 'write-7']);
  });
});

/** A port nothing listens on right now (the kernel picks it; closed again before use). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (typeof address !== 'object' || address === null) throw new Error('no port');
  return address.port;
}

describe('when the configuration sets operator.port', () => {
  it('listens there without --port, and a second broker on the same port fails naming operator.port', async () => {
    const port = await freePort();
    const config = ['version: 1', 'operator:', `  port: ${port}`, ''].join('\n');
    const dirs = [path.join(scratch, 'port-a'), path.join(scratch, 'port-b')];
    for (const dir of dirs) {
      mkdirSync(dir, { mode: 0o700 });
      writeFileSync(path.join(dir, 'postern.yaml'), config);
    }
    const first = new PosternProcess(['daemon', '--data-dir', dirs[0] as string]);
    try {
      const ready = await first.waitForEvent('ready');
      expect(ready['port']).toBe(port);
      expect(first.stdout).toContain(`Operator UI: http://127.0.0.1:${port}/`);

      const second = new PosternProcess(['daemon', '--data-dir', dirs[1] as string]);
      const exit = await second.exitWithin();
      expect(exit.code).toBe(2);
      expect(second.stderr.trim().split('\n')).toContain(
        `postern: INVALID_ARGUMENT operator.port: port ${port} is already in use on 127.0.0.1 (set in the configuration; --port overrides it)`,
      );

      // --port still wins over the configuration (0: any free port).
      const third = new PosternProcess(['daemon', '--data-dir', dirs[1] as string, '--port', '0']);
      try {
        const thirdReady = await third.waitForEvent('ready');
        expect(thirdReady['port']).not.toBe(port);
      } finally {
        await third.stop('SIGTERM');
      }
    } finally {
      await first.stop('SIGTERM');
    }
  }, 60_000);
});
