import type { ServerResponse } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { Journal } from '../broker/journal/index.js';
import { systemClock } from '../broker/ports/index.js';
import { openVault } from '../broker/vault/index.js';
import { startBearerRouteDaemon, type BearerRouteDaemon } from './support/bearer-route-daemon.js';
import { DrillAgent } from './support/drill-agent.js';

/**
 * SIGTERM while an agent's http_request is dispatched (docs/operator.md "Stopping"): the daemon stops admitting, lets
 * the dispatched action finish within the drain (lowered here with --test-drain-ms), records it and answers its caller,
 * then closes the journal. What is still in flight when the drain ends is cut at once — the daemon waits for no remote —
 * and the next start records it unknown after dispatch, with no "journal is closed" error in the log.
 */
const drainMs = 3_000;
let running: BearerRouteDaemon | undefined;
let agent: DrillAgent | undefined;
const held = new Set<ServerResponse>();

afterEach(async () => {
  await agent?.stop();
  for (const res of held) res.destroy();
  held.clear();
  await running?.stop();
  agent = undefined;
  running = undefined;
});

/** A daemon whose target answers `/hold-<ms>` after that many ms; `arrived` resolves when the request reached it. */
async function start(prefix: string): Promise<{ arrived: Promise<void> }> {
  let arrive = (): void => undefined;
  const arrived = new Promise<void>((resolve) => (arrive = resolve));
  running = await startBearerRouteDaemon({
    prefix,
    canary: `CANARY-${prefix}7c1`,
    args: ['--test-drain-ms', String(drainMs)],
    respond: (req, res) => {
      held.add(res);
      arrive();
      const ms = Number(/^\/hold-(\d+)/.exec(req.url ?? '')?.[1] ?? 0);
      setTimeout(() => res.end('answered late'), ms).unref();
    },
  });
  agent = await DrillAgent.start(running.dataDir, `${prefix}agent`);
  return { arrived };
}

/**
 * The next start's record of the action, its vault unlocked as a daemon started with its passphrase does: a GET's
 * restart record advises a retry (idempotent), which is taken from its own sealed events, so it waits for the unlock.
 */
async function recordAfterRestart(daemon: BearerRouteDaemon, actionId: string) {
  const vault = await openVault({ dataDir: daemon.dataDir, clock: systemClock, kdf: 'min', idleLockMs: 0 });
  try {
    await vault.unlock(Buffer.from(daemon.passphrase));
    const journal = await Journal.open({ dataDir: daemon.dataDir, clock: systemClock, vault });
    try {
      return { state: journal.getAction(actionId), kinds: [...journal.subjectKinds(actionId)] };
    } finally {
      await journal.close();
    }
  } finally {
    await vault.close();
  }
}

describe('SIGTERM while an http_request is dispatched', () => {
  it('an answer within the drain is recorded (RESULT_COMMITTED) and reaches its caller before the daemon exits', async () => {
    const { arrived } = await start('pdrain-a-');
    const call = (agent as DrillAgent).call('http_request', { route: 'docs', method: 'GET', path: '/hold-1000' });
    await arrived;
    const daemon = (running as BearerRouteDaemon).daemon.process;
    const exit = daemon.stop('SIGTERM', 20_000);
    const reply = await call.reply;
    expect(reply.isError ?? false).toBe(false);
    expect(JSON.stringify(reply.structuredContent)).toContain('"status":200');
    expect(await exit).toEqual({ code: 0, signal: null });
    const actionId = reply.structuredContent?.invocation_id ?? '';
    const { state, kinds } = await recordAfterRestart(running as BearerRouteDaemon, actionId);
    expect(kinds).toContain('RESULT_COMMITTED');
    expect(state).toMatchObject({ outcome: 'committed', code: null });
    expect(daemon.stderr).not.toMatch(/journal is closed|"level":50/);
  }, 60_000);

  it('an answer later than the drain is cut: the daemon exits within drain + slack, the next start records unknown', async () => {
    const { arrived } = await start('pdrain-b-');
    const call = (agent as DrillAgent).call('http_request', { route: 'docs', method: 'GET', path: '/hold-15000' });
    const lost = call.reply.then(
      (reply) => reply,
      (error: unknown) => error,
    );
    await arrived;
    const daemon = (running as BearerRouteDaemon).daemon.process;
    const startedMs = Date.now();
    expect(await daemon.stop('SIGTERM', 20_000)).toEqual({ code: 0, signal: null });
    const tookMs = Date.now() - startedMs;
    expect(tookMs).toBeGreaterThanOrEqual(drainMs - 100);
    expect(tookMs).toBeLessThan(drainMs + 3_000);
    // The shim answers the cut call itself, naming the action the broker told it about.
    const actionId = ((await lost) as { data?: { action_id?: string } }).data?.action_id ?? '';
    expect(actionId).not.toBe('');
    const { state, kinds } = await recordAfterRestart(running as BearerRouteDaemon, actionId);
    expect(kinds).toContain('DISPATCH_STARTED');
    expect(kinds).not.toContain('RESULT_COMMITTED');
    expect(state).toMatchObject({ outcome: 'unknown', code: 'BROKER_RESTARTED', retry: 'backoff' });
    expect(daemon.stderr).toContain('still in flight');
    expect(daemon.stderr).not.toMatch(/journal is closed|"level":50/);
  }, 60_000);
});
