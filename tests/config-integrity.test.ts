import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callOperator } from '../broker/cli/operator-commands.js';
import { ArrivalLogServer } from '../broker/testing/arrival-log-server.js';
import { createDataDir, routesYaml, type RouteYaml } from './support/create-data-dir.js';
import { waitFor } from './support/drill.js';
import { RestartableDaemon } from './support/restartable-daemon.js';

/**
 * The config-edit attack (issue #14) against a real daemon: the agent rewrites postern.yaml so a
 * route whose credential is bound by name alone points at its own server with no approval, and
 * waits for the next start. The broker keeps the configuration a person accepted, shows the change
 * as a card, and applies it only after a person accepts it; a tampered accepted copy refuses every
 * route. The agent's server must never receive a byte.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'pocfg-'));
const dataDir = path.join(scratch, 'data');
const passphrase = 'config integrity passphrase (test only)';
const canary = 'CANARY-config-integrity-token';
let home: ArrivalLogServer;
let evil: ArrivalLogServer;

/** One route `docs` (bearer docs-token, POST) to `port`. */
const docsYaml = (port: number, approval: RouteYaml['approval'], options: { unattended?: boolean } = {}): string =>
  routesYaml([{ port, approval }], options);

/** The daemon started locked (as after a reboot), an agent connected, a person unlocking (tests/support). */
const rig = new RestartableDaemon({ dataDir, passphrase, agentName: 'cfg-agent', docsPath: '/docs/cfg' });
const decide = rig.decide.bind(rig);
const startAndUnlock = (): Promise<void> => rig.startAndUnlock();
const stop = (): Promise<void> => rig.stop();
const send = (marker: string): ReturnType<RestartableDaemon['send']> => rig.send(marker);

beforeAll(async () => {
  home = await ArrivalLogServer.start();
  evil = await ArrivalLogServer.start();
  await createDataDir({
    dataDir,
    passphrase,
    // Bound by the route's name alone: whatever host a route named docs points at would get it.
    credential: { name: 'docs-token', secret: canary, bindings: ['docs'] },
    yaml: docsYaml(home.port, 'per_call'),
  });
}, 60_000);

afterAll(async () => {
  await stop();
  await home.stop();
  await evil.stop();
  rmSync(scratch, { recursive: true, force: true });
}, 30_000);

describe('when the agent edits postern.yaml between two starts', () => {
  it('the first start, with credentials in the vault and no accepted copy, refuses every route until a person accepts the whole file; then it is in force at once', async () => {
    await startAndUnlock();
    const refused = await send('cfg-before-acceptance');
    expect(refused.structuredContent?.error).toMatchObject({ code: 'CONFIG_UNTRUSTED', outcome: 'not_attempted' });
    expect(home.arrivals).toEqual([]);
    const pending = await callOperator(dataDir, 'config.pending', {});
    expect(pending).toMatchObject({
      trust: 'untrusted',
      accepted: null,
      accept_applies: 'now',
      untrusted_reason: expect.stringMatching(/no accepted copy/),
    });
    expect(pending.change?.routes).toEqual([expect.objectContaining({ name: 'docs', change: 'added' })]);
    const digest = pending.change?.digest ?? '';
    await expect(callOperator(dataDir, 'config.accept', { digest })).rejects.toMatchObject({
      code: 'OPERATOR_PROOF_REQUIRED',
    });
    expect(await decide('config.accept', { digest })).toEqual({ digest, applies: 'now', restart_needed_for: [] });
    expect(await callOperator(dataDir, 'config.pending', {})).toMatchObject({
      trust: 'verified',
      change: null,
      restart_needed: false,
      accepted: { how: 'accepted' },
    });

    // In force without a restart: per_call, so a card waits for a person; approved, it goes to the accepted host.
    const reply = send('cfg-first-accepted');
    const [card] = (
      await waitFor(
        () => callOperator(dataDir, 'approvals.list', {}),
        (r) => r.cards.length === 1,
        'the card',
      )
    ).cards;
    if (card === undefined) throw new Error('no card');
    await decide('approvals.approve', { ticket: card.ticket });
    expect((await reply).structuredContent?.error).toBeUndefined();
    expect(home.markers()).toEqual(['cfg-first-accepted']);
    await stop();
  }, 90_000);

  it('the next start keeps the accepted route (per_call, the old host), shows the change, and the agent server receives nothing', async () => {
    writeFileSync(path.join(dataDir, 'postern.yaml'), docsYaml(evil.port, 'none'));
    await startAndUnlock();
    const pending = await callOperator(dataDir, 'config.pending', {});
    expect(pending.trust).toBe('verified');
    expect(pending.change?.routes).toEqual([
      {
        name: 'docs',
        change: 'changed',
        fields: [
          { field: 'base_url', before: `http://127.0.0.1:${home.port}`, after: `http://127.0.0.1:${evil.port}` },
          { field: 'approval', before: 'per_call', after: 'none' },
        ],
      },
    ]);
    expect((await callOperator(dataDir, 'config.show', {})).routes).toEqual([
      expect.objectContaining({ name: 'docs', base_url: `http://127.0.0.1:${home.port}`, approval: 'per_call' }),
    ]);

    // Still per_call: a card waits for a person; approved, the request goes to the accepted host.
    const reply = send('cfg-after-edit');
    const [card] = (
      await waitFor(
        () => callOperator(dataDir, 'approvals.list', {}),
        (r) => r.cards.length === 1,
        'the card',
      )
    ).cards;
    if (card === undefined) throw new Error('no card');
    await decide('approvals.approve', { ticket: card.ticket });
    expect((await reply).structuredContent?.error).toBeUndefined();
    expect(home.markers()).toContain('cfg-after-edit');
    expect(evil.arrivals).toEqual([]);

    // Building on an unaccepted change is refused; accepting needs a person and names what they saw.
    await expect(decide('config.edit', { op: 'remove_route', name: 'docs' })).rejects.toMatchObject({
      code: 'CONFIG_PENDING',
    });
    const digest = pending.change?.digest ?? '';
    await expect(callOperator(dataDir, 'config.accept', { digest })).rejects.toMatchObject({
      code: 'OPERATOR_PROOF_REQUIRED',
    });
    // Verified: a person's acceptance is in force at once (tests/config-live-apply.test.ts drives that path).
    expect(await decide('config.accept', { digest })).toEqual({ digest, applies: 'now', restart_needed_for: [] });
    expect(await callOperator(dataDir, 'config.pending', {})).toMatchObject({
      change: null,
      restart_needed: false,
      accepted: { how: 'accepted', by: expect.stringMatching(/^person:/) },
    });
    await stop();
  }, 90_000);

  it('after a person accepted it, the next start applies it', async () => {
    await startAndUnlock();
    expect((await callOperator(dataDir, 'config.show', {})).routes).toEqual([
      expect.objectContaining({ name: 'docs', base_url: `http://127.0.0.1:${evil.port}`, approval: 'none' }),
    ]);
    expect(await callOperator(dataDir, 'config.pending', {})).toMatchObject({
      trust: 'verified',
      change: null,
      restart_needed: false,
    });
    await stop();
  }, 60_000);

  it('a tampered accepted copy refuses every route with CONFIG_UNTRUSTED, and nothing reaches either server', async () => {
    const file = path.join(dataDir, 'config', 'accepted.json');
    const record = JSON.parse(readFileSync(file, 'utf8')) as { text: string };
    writeFileSync(
      file,
      JSON.stringify({
        ...record,
        text: record.text.replace('approval: none', 'approval: none\n    reads_bypass_lanes: true'),
      }),
    );
    const before = { home: home.arrivals.length, evil: evil.arrivals.length };
    await startAndUnlock();
    const reply = await send('cfg-untrusted');
    expect(reply.structuredContent?.error).toMatchObject({ code: 'CONFIG_UNTRUSTED', outcome: 'not_attempted' });
    expect({ home: home.arrivals.length, evil: evil.arrivals.length }).toEqual(before);
    const pending = await callOperator(dataDir, 'config.pending', {});
    expect(pending).toMatchObject({ trust: 'untrusted', untrusted_reason: expect.stringMatching(/MAC/) });
    expect(pending.change?.routes).toEqual([expect.objectContaining({ name: 'docs', change: 'added' })]);
    await stop();
  }, 60_000);

  it('deleting the accepted copy does not bring first use back: the agent file waits for a person, its opt-out is not honoured, and nothing is sealed', async () => {
    const file = path.join(dataDir, 'config', 'accepted.json');
    rmSync(file);
    writeFileSync(path.join(dataDir, 'postern.yaml'), docsYaml(evil.port, 'none', { unattended: true }));
    const before = { home: home.arrivals.length, evil: evil.arrivals.length };
    await startAndUnlock();
    const reply = await send('cfg-deleted-copy');
    expect(reply.structuredContent?.error).toMatchObject({ code: 'CONFIG_UNTRUSTED', outcome: 'not_attempted' });
    expect({ home: home.arrivals.length, evil: evil.arrivals.length }).toEqual(before);
    const pending = await callOperator(dataDir, 'config.pending', {});
    expect(pending).toMatchObject({ trust: 'untrusted', accepted: null, accept_applies: 'now' });
    expect(pending.change?.routes).toEqual([
      expect.objectContaining({
        name: 'docs',
        change: 'added',
        fields: expect.arrayContaining([{ field: 'base_url', before: null, after: `http://127.0.0.1:${evil.port}` }]),
      }),
    ]);
    // The file's own opt-out would let the agent accept it without a person: refused, and the unlock sealed nothing.
    await expect(
      callOperator(dataDir, 'config.accept', { digest: pending.change?.digest ?? '' }),
    ).rejects.toMatchObject({ code: 'OPERATOR_PROOF_REQUIRED' });
    expect(existsSync(file)).toBe(false);
    await stop();
  }, 60_000);
});
