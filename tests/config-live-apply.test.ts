import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configSubjectId, type BrokerApi, type BrokerApiMethod } from '../broker/contract/index.js';
import { callOperator } from '../broker/cli/operator-commands.js';
import { digestOf } from '../broker/host/config-integrity.js';
import { ArrivalLogServer } from '../broker/testing/arrival-log-server.js';
import { createDataDir, routesYaml, type RouteYaml } from './support/create-data-dir.js';
import { waitFor } from './support/drill.js';
import { DrillAgent } from './support/drill-agent.js';
import { runPostern, startDaemon, type RunningDaemon } from './support/postern-process.js';
import { decideAsPerson } from './support/person-decision.js';

/**
 * A configuration a person accepts while the broker runs is in force at once, with no restart: a
 * real daemon, a real agent process, two real HTTP servers. The route is re-pointed from `first` to
 * `second` and its approval dropped from per_call to none while a call waits for its card: that call
 * keeps what it was admitted under (its card decides it, and it goes to `first`), a new call runs
 * under the new configuration (no card, to `second`). The journal records CONFIG_APPLIED with the
 * digest, and `postern audit verify` still passes over the data directory.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'pocfglive-'));
const dataDir = path.join(scratch, 'data');
const passphraseFile = path.join(scratch, 'passphrase');
const passphrase = 'config live apply passphrase (test only)';
let first: ArrivalLogServer;
let second: ArrivalLogServer;
let daemon: RunningDaemon | undefined;
let agent: DrillAgent | undefined;

/** One route; each document id is its own lane, so a waiting call never holds up a new one. */
const docsYaml = (port: number, approval: RouteYaml['approval']): string =>
  routesYaml([
    { port, approval, lines: ['    lanes:', "      - { methods: ['*'], path: '/docs/{id}', lane: 'doc:{id}' }"] },
  ]);

/** A decision with a person's proof over the real control socket (tests/support/person-decision.ts). */
const decide = <M extends BrokerApiMethod>(method: M, input: BrokerApi[M]['input']): Promise<BrokerApi[M]['output']> =>
  decideAsPerson(dataDir, passphrase, method, input);

const send = (route: string, id: string, marker: string) => {
  const args = { route, method: 'POST', path: `/docs/${id}`, body: JSON.stringify({ marker }), timeout_ms: 30_000 };
  return (agent as DrillAgent).call('http_request', args).reply;
};

/** Every Activity row of the log, page by page (bounded). */
async function activity(): Promise<BrokerApi['activity.list']['output']['events']> {
  const rows: BrokerApi['activity.list']['output']['events'] = [];
  let from: number | null = 1;
  for (let page = 0; from !== null && page < 50; page += 1) {
    const answer: BrokerApi['activity.list']['output'] = await callOperator(dataDir, 'activity.list', {
      from_seq: from,
      limit: 1000,
    });
    rows.push(...answer.events);
    from = answer.next_seq;
  }
  return rows;
}

beforeAll(async () => {
  first = await ArrivalLogServer.start();
  second = await ArrivalLogServer.start();
  await createDataDir({
    dataDir,
    passphrase,
    // Bound to the host, so it may go to either server (both listen on 127.0.0.1).
    credential: { name: 'docs-token', secret: 'CANARY-config-live-token', bindings: ['127.0.0.1'] },
    yaml: docsYaml(first.port, 'per_call'),
    acceptWith: passphraseFile,
  });
  daemon = await startDaemon(dataDir);
  agent = await DrillAgent.start(dataDir, 'cfg-live-agent');
  await decide('vault.unlock', { passphrase });
}, 60_000);

afterAll(async () => {
  await agent?.stop();
  await daemon?.process.stop('SIGTERM');
  await first?.stop();
  await second?.stop();
  rmSync(scratch, { recursive: true, force: true });
}, 30_000);

describe('when a person accepts a changed postern.yaml while the broker runs', () => {
  it('a call waiting for its card keeps per_call and its host; a new call runs under the new configuration, with no restart', async () => {
    const waiting = send('docs', 'a', 'admitted-before');
    const [card] = (
      await waitFor(
        () => callOperator(dataDir, 'approvals.list', {}),
        (r) => r.cards.length === 1,
        'the card',
      )
    ).cards;
    if (card === undefined) throw new Error('no card');
    const pid = daemon?.process.child.pid;

    // Re-pointed to the second server, approval dropped; the card shows it and says accepting applies now.
    writeFileSync(path.join(dataDir, 'postern.yaml'), docsYaml(second.port, 'none'));
    const pending = await callOperator(dataDir, 'config.pending', {});
    expect(pending).toMatchObject({ trust: 'verified', accept_applies: 'now' });
    const digest = pending.change?.digest ?? '';
    expect(digest).toBe(digestOf(readFileSync(path.join(dataDir, 'postern.yaml'), 'utf8')));
    expect(await decide('config.accept', { digest })).toEqual({ digest, applies: 'now', restart_needed_for: [] });
    const after = await callOperator(dataDir, 'config.pending', {});
    expect(after).toMatchObject({ change: null, restart_needed: false, accepted: { how: 'accepted', digest } });
    expect((await callOperator(dataDir, 'config.show', {})).routes).toEqual([
      expect.objectContaining({ name: 'docs', base_url: `http://127.0.0.1:${second.port}`, approval: 'none' }),
    ]);

    // A new call: no card, straight to the second server, while the first call's card is still open.
    const newCall = await send('docs', 'b', 'admitted-after');
    expect(newCall.structuredContent?.error).toBeUndefined();
    expect(await second.waitForArrivals(1)).toEqual(['admitted-after']);
    expect((await callOperator(dataDir, 'approvals.list', {})).cards.map((c) => c.ticket)).toEqual([card.ticket]);
    expect(first.markers()).toEqual([]);

    // The waiting call is decided by its card, and goes where it was admitted to go.
    await decide('approvals.approve', { ticket: card.ticket });
    expect((await waiting).structuredContent?.error).toBeUndefined();
    expect(await first.waitForArrivals(1)).toEqual(['admitted-before']);
    expect(second.markers()).toEqual(['admitted-after']);
    // The same broker process throughout: nothing restarted it.
    expect(daemon?.process.child.pid).toBe(pid);
    expect(daemon?.process.child.exitCode).toBeNull();

    const applied = (await activity()).filter((row) => row.kind === 'CONFIG_APPLIED');
    expect(applied).toEqual([
      expect.objectContaining({ action_id: configSubjectId(digest), ticket: null, session_id: null }),
    ]);
    expect(applied[0]?.summary).toContain(digest);
    expect(applied[0]?.summary).toMatch(/^accepted by person:/);
  }, 90_000);

  it('an edit from an operator surface is in force at once: a route added through config.edit takes calls with no restart', async () => {
    const edited = await decide('config.edit', {
      op: 'add_route',
      route: {
        name: 'extra',
        base_url: `http://127.0.0.1:${second.port}`,
        credential: 'docs-token',
        injection: 'bearer',
        approval: 'none',
        methods: ['POST'],
      },
    });
    expect(edited).toMatchObject({ routes: ['docs', 'extra'], applies: 'now', restart_needed_for: [] });
    expect((await callOperator(dataDir, 'config.show', {})).edited_since_start).toBe(false);
    const reply = await send('extra', 'c', 'on-edited-route');
    expect(reply.structuredContent?.error).toBeUndefined();
    expect(await second.waitForArrivals(2)).toEqual(['admitted-after', 'on-edited-route']);

    const digest = digestOf(readFileSync(path.join(dataDir, 'postern.yaml'), 'utf8'));
    const applied = (await activity()).filter((row) => row.kind === 'CONFIG_APPLIED');
    expect(applied.map((row) => row.action_id)).toEqual([
      expect.stringMatching(/^cfg_[0-9a-f]{16}$/),
      configSubjectId(digest),
    ]);
    expect(applied[1]?.summary).toMatch(/^edited by person:/);
  }, 60_000);

  it('the audit log still verifies over the data directory with the configuration events in it', async () => {
    await agent?.stop();
    await daemon?.process.stop('SIGTERM');
    agent = undefined;
    daemon = undefined;
    const verified = await runPostern(['audit', 'verify', '--data-dir', dataDir, '--json']);
    expect(verified.stderr).toBe('');
    expect(verified.code).toBe(0);
    expect(JSON.parse(verified.stdout.trim())).toMatchObject({ ok: true });
  }, 60_000);
});
