import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrokerApi } from '../broker/contract/index.js';
import { controlSocketPath, sendControlRequest } from '../broker/host/index.js';
import { startBearerRouteDaemon, type BearerRouteDaemon } from './support/bearer-route-daemon.js';
import { DrillAgent } from './support/drill-agent.js';
import { decideAsPerson } from './support/person-decision.js';

/**
 * Progress notes reach an agent through a real daemon, not only through the in-process backend
 * (tests/mcp-client-waits.test.ts): a call that asked for progress (a progressToken) and waits on a per-call card
 * hears "card shown" and the heartbeat while the person has not decided, then gets the committed result. The daemon's
 * composition once dropped the backend's progress callback, so only a test through `postern start` catches that.
 */
const prefix = 'pprog-';
const passphrase = `${prefix} passphrase (test only)`;
let running: BearerRouteDaemon;
let agent: DrillAgent;

beforeAll(async () => {
  running = await startBearerRouteDaemon({
    prefix,
    canary: 'CANARY-progress-route-2b7c',
    respond: (_req, res) => res.end('ok'),
    approval: 'per_call',
    agents: ['  wait_ms_default: 20000', '  progress_heartbeat_ms: 300'],
  });
  // Its own process: the control socket refuses a person's decision from an agent's process tree.
  agent = await DrillAgent.start(running.dataDir, 'progress-agent');
}, 60_000);

afterAll(async () => {
  await agent?.stop();
  await running?.stop();
});

async function cards(): Promise<BrokerApi['approvals.list']['output']['cards']> {
  const reply = await sendControlRequest(controlSocketPath(running.dataDir), {
    op: 'api',
    method: 'approvals.list',
    input: {},
  });
  if (!reply.ok) throw new Error(reply.error.code);
  return (reply.value as BrokerApi['approvals.list']['output']).cards;
}

describe('when an agent behind `postern mcp` asks for progress on a call that waits for a person', () => {
  it('hears the card and the heartbeat while it waits, then gets the committed result', async () => {
    const call = agent.call(
      'http_request',
      { route: 'docs', method: 'POST', path: '/p', body: '{}' },
      { progress: true },
    );
    let ticket = 0;
    await expect
      .poll(async () => (ticket = (await cards())[0]?.ticket ?? 0), { timeout: 20_000, interval: 50 })
      .toBeGreaterThan(0);
    // The premise: the person takes several heartbeats to decide, with no state change meanwhile.
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    await decideAsPerson(running.dataDir, passphrase, 'approvals.approve', { ticket });
    const reply = await call.reply;
    expect(reply.structuredContent).toMatchObject({ effect: 'succeeded' });
    expect(reply.progress?.some((m) => m.startsWith('card shown'))).toBe(true);
    expect(reply.progress?.some((m) => m.endsWith('(still waiting)'))).toBe(true);
  }, 60_000);
});
