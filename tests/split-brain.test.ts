import { lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { agentSocketPath } from '../broker/agent/agent-socket.js';
import { brokerLockFileName } from '../broker/host/data-dir-lock.js';
import { controlSocketPath } from '../broker/host/index.js';
import { systemClock } from '../broker/ports/index.js';
import { ArrivalLogServer } from '../broker/testing/arrival-log-server.js';
import { openVault } from '../broker/vault/index.js';
import { DrillAgent } from './support/drill-agent.js';
import { laneCards, op, waitFor } from './support/drill.js';
import { HoldingProxy } from './support/holding-proxy.js';
import { PosternProcess, startDaemon, type RunningDaemon } from './support/postern-process.js';
import { waitForCount, within } from './support/recovery-rig.js';
import { acceptConfigAsPerson } from './support/accepted-config.js';

/**
 * Issue 14, "split brain": a live broker that does not answer (SIGSTOP here; a same-user process
 * holding every control connection looks the same from outside) is not a dead one. With a card
 * waiting for a person and a request in flight whose remote already answered 200, a second
 * `postern daemon` on the same data directory must refuse on the kernel lock (data-dir-lock.ts)
 * before it touches anything: no recovery under the live broker (no BROKER_RESTARTED), no socket of
 * it deleted, its journal still open and writing. Once the first is really gone (SIGKILL), the
 * kernel has released the lock and the next daemon starts and recovers normally.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'psplit-'));
const dataDir = path.join(scratch, 'data');
const passphraseFile = path.join(scratch, 'pass');
/** The refusal is a non-blocking lock: no probe, no timeout to wait out (the old probe waited 15 s). */
const refusalWithinMs = 10_000;

const cleanup: Array<() => Promise<unknown>> = [];
afterAll(async () => {
  for (const step of cleanup.splice(0).reverse()) await step().catch(() => undefined);
  rmSync(scratch, { recursive: true, force: true });
}, 60_000);

/** A vault (fast KDF, test only), route `docs` (per-call approval) and route `now` (no approval, through a holding proxy). */
async function prepare(logPort: number, proxyPort: number): Promise<void> {
  mkdirSync(dataDir, { mode: 0o700 });
  const passphrase = 'split passphrase (test only)';
  const vault = await openVault({ dataDir, clock: systemClock, kdf: 'min', idleLockMs: 0 });
  await vault.init(Buffer.from(passphrase));
  await vault.add({
    name: 'docs-token',
    kind: 'bearer',
    secret: Buffer.from('CANARY-split-docs'),
    bindings: ['docs', '127.0.0.1'],
  });
  await vault.add({
    name: 'now-token',
    kind: 'bearer',
    secret: Buffer.from('CANARY-split-now'),
    bindings: ['now', '127.0.0.1'],
  });
  await vault.close();
  writeFileSync(passphraseFile, `${passphrase}\n`, { mode: 0o600 });
  const route = (name: string, port: number, approval: string): string[] => [
    `  - name: ${name}`,
    `    base_url: http://127.0.0.1:${port}`,
    `    credential: ${name}-token`,
    '    injection: bearer',
    `    approval: ${approval}`,
    '    methods: [POST]',
    '    lanes:',
    `      - { methods: ['*'], path: '/{doc}', lane: '${name}-{doc}' }`,
  ];
  const yaml = [
    'version: 1',
    'agents:',
    '  session_approval: observe',
    'routes:',
    ...route('docs', logPort, 'per_call'),
    ...route('now', proxyPort, 'none'),
    '',
  ];
  writeFileSync(path.join(dataDir, 'postern.yaml'), yaml.join('\n'));
  await acceptConfigAsPerson(dataDir, passphraseFile);
}

async function daemon(): Promise<RunningDaemon> {
  const started = await startDaemon(dataDir, { env: { POSTERN_PASSPHRASE_FILE: passphraseFile } });
  cleanup.push(async () => {
    signalQuietly(started.process.child.pid, 'SIGCONT');
    await started.process.stop('SIGKILL');
  });
  return started;
}

async function agent(name: string): Promise<DrillAgent> {
  const started = await DrillAgent.start(dataDir, name);
  cleanup.push(() => started.stop());
  return started;
}

function signalQuietly(pid: number | undefined, signal: NodeJS.Signals): void {
  try {
    if (pid !== undefined) process.kill(pid, signal);
  } catch {
    // Already gone.
  }
}

function socketInode(file: string): number {
  const stat = lstatSync(file);
  expect(stat.isSocket()).toBe(true);
  return stat.ino;
}

/** A call whose reply is awaited later; if the test fails first, its rejection is not an unhandled one. */
function later<T>(reply: Promise<T>): Promise<T> {
  reply.catch(() => undefined);
  return reply;
}

const lockHolder = (): unknown => JSON.parse(readFileSync(path.join(dataDir, brokerLockFileName), 'utf8'));
const post = (marker: string, doc: string): Record<string, unknown> => ({
  method: 'POST',
  path: `/${doc}`,
  body: JSON.stringify({ marker }),
  timeout_ms: 120_000,
});

describe('a second daemon on the data directory of a stopped (SIGSTOP) live broker', () => {
  it('refuses on the lock naming the live pid; the live broker keeps its sockets, its card, its in-flight request and a healthy journal', async () => {
    const log = await ArrivalLogServer.start();
    cleanup.push(() => log.stop());
    const proxy = await HoldingProxy.start(log.port);
    cleanup.push(() => proxy.stop());
    proxy.holdNext = 1;
    await prepare(log.port, proxy.port);
    const first = await daemon();
    const pidA = first.process.child.pid as number;
    expect(lockHolder()).toMatchObject({ pid: pidA });

    // A card waiting for a person, and a request the remote answered 200 whose answer is still on its way.
    const [p1, p2] = await Promise.all([agent('split-p1'), agent('split-p2')]);
    const pending = later(p1.call('http_request', { route: 'docs', ...post('split-card', 'one') }).reply);
    const inFlight = later(p2.call('http_request', { route: 'now', ...post('split-flight', 'one') }).reply);
    const [card] = await waitFor(
      () => laneCards(dataDir, 'docs-one'),
      (cards) => cards.length === 1,
      'the pending card',
    );
    if (card === undefined) throw new Error('no card');
    await waitForCount(() => proxy.held.length, 1, 'the 200 from the remote, held on its way back');
    // `postern status` is read-only and takes no lock: it works beside the live broker.
    const status = new PosternProcess(['status', '--json', '--data-dir', dataDir]);
    expect((await status.exitWithin()).code, status.stderr).toBe(0);
    const sockets = { control: controlSocketPath(dataDir), agent: agentSocketPath(dataDir) };
    const before = { control: socketInode(sockets.control), agent: socketInode(sockets.agent) };

    process.kill(pidA, 'SIGSTOP');
    const second = new PosternProcess(['daemon', '--data-dir', dataDir, '--port', '0'], {
      POSTERN_PASSPHRASE_FILE: passphraseFile,
    });
    cleanup.push(() => second.stop('SIGKILL'));
    const startedAt = Date.now();
    const exit = await second.exitWithin(refusalWithinMs);
    expect(Date.now() - startedAt).toBeLessThan(refusalWithinMs);
    expect(exit.code, second.stderr).toBe(1);
    const lines = second.stderr.trim().split('\n');
    expect(lines, second.stderr).toHaveLength(1);
    expect(lines[0]).toMatch(
      new RegExp(`^postern: BROKER_ALREADY_RUNNING --data-dir: another Postern broker \\(pid ${pidA}, started `),
    );
    expect(second.stdout).not.toContain('"event":"ready"');
    // Nothing of the live broker was removed or replaced while it could not answer.
    expect({ control: socketInode(sockets.control), agent: socketInode(sockets.agent) }).toEqual(before);
    expect(lockHolder()).toMatchObject({ pid: pidA });

    process.kill(pidA, 'SIGCONT');
    expect((await op(dataDir, 'status', {})).journal).toMatchObject({ state: 'open', recovered_at_open: 0 });
    expect((await op(dataDir, 'approvals.list', {})).cards.map((c) => c.ticket)).toContain(card.ticket);
    // The in-flight request settles as what it was: committed with the remote's 200.
    proxy.release();
    const settled = await within(inFlight, 'the in-flight call');
    expect(settled.structuredContent, JSON.stringify(settled.structuredContent)).toMatchObject({
      effect: 'succeeded',
      response: { status: 200 },
    });
    const flightId = String(settled.structuredContent?.invocation_id);
    for (const id of [card.action_id, flightId]) {
      const shown = await op(dataDir, 'actions.show', { action_id: id });
      expect(shown.events.map((e) => e.code)).not.toContain('BROKER_RESTARTED');
    }
    expect((await op(dataDir, 'actions.show', { action_id: flightId })).state).toMatchObject({ outcome: 'committed' });
    // The live journal still records: a new call gets its card.
    const next = later(p1.call('http_request', { route: 'docs', ...post('split-card-2', 'two') }).reply);
    await waitFor(
      () => laneCards(dataDir, 'docs-two'),
      (cards) => cards.length === 1,
      'a new card after SIGCONT',
    );

    // Gone for real: the kernel released the lock with the process, and the next daemon starts and recovers.
    expect((await first.process.stop('SIGKILL')).signal).toBe('SIGKILL');
    await within(Promise.allSettled([pending, next]), 'the agent calls ending with the broker');
    const third = await daemon();
    expect(lockHolder()).toMatchObject({ pid: third.process.child.pid });
    expect((await op(dataDir, 'status', {})).journal).toMatchObject({ state: 'open' });
    expect((await op(dataDir, 'actions.show', { action_id: flightId })).state).toMatchObject({ outcome: 'committed' });
    const waited = await op(dataDir, 'actions.show', { action_id: card.action_id });
    expect(waited.events.map((e) => e.kind)).not.toContain('DISPATCH_STARTED');
    expect(log.markers()).toEqual(['split-flight']);
  }, 180_000);
});
