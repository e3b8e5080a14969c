import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeDrill, drillPassphrase, laneCards, openDrill, waitFor, type Drill } from './support/drill.js';
import type { DrillAgent, ToolReply } from './support/drill-agent.js';
import { unlockAsPerson } from './support/person-decision.js';
import { startDaemon } from './support/postern-process.js';
import { within } from './support/recovery-rig.js';

/**
 * What an agent hears about its action after the broker died under its card: a real daemon, a real MCP SDK client
 * through `postern mcp` (the same agent process, so the same session after the restart), a per-call route. The agent
 * asks; the card waits; the daemon is SIGKILLed and started again locked. Before the person unlocks, reading the
 * action needs the vault: the agent is told to wait and read again (never "after_correction": nothing is wrong with
 * its call), and the refusal names no outcome. After the unlock, action_status and fetch_result say the card was
 * closed without a decision by the restart (never `waiting` with an expiry nobody will act on), as approvals list
 * agrees: no open card.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'pclosed-'));
const lane = 'doc-k';
let drill: Drill | undefined;

beforeAll(async () => {
  drill = await openDrill(scratch, 'closed', 120);
}, 90_000);
afterAll(async () => {
  await closeDrill(drill);
  rmSync(scratch, { recursive: true, force: true });
}, 30_000);

function read(agent: DrillAgent, tool: 'action_status' | 'fetch_result', actionId: string): Promise<ToolReply> {
  return within(agent.call(tool, { action_id: actionId }).reply, `${tool} after the restart`);
}

describe('when the broker is killed while an agent waits on its card', () => {
  it('tells the agent to wait for the unlock, then that the card was closed without a decision', async () => {
    if (drill === undefined) throw new Error('the drill did not start');
    const d = drill;
    const lost = d.p1
      .call('http_request', {
        route: 'docs',
        method: 'POST',
        path: '/docs/k',
        body: JSON.stringify({ marker: 'K' }),
        timeout_ms: 60_000,
      })
      .reply.then(
        () => undefined,
        (error: unknown) => (error as { data?: unknown }).data,
      );
    const [card] = await waitFor(
      () => laneCards(d.dataDir, lane),
      (c) => c.length === 1 && c[0]?.state === 'pending',
      'the card pending',
    );
    const actionId = card?.action_id ?? '';
    expect(actionId).toMatch(/^act_/);

    await d.daemon.process.stop('SIGKILL');
    // The shim answers the lost call (naming the action once the broker told it; that race is not this test's).
    expect(await within(lost, 'the lost call')).toMatchObject({ code: 'BROKER_RESTARTED' });
    // Started locked: the earlier run's events open only once a person unlocks.
    d.daemon = await startDaemon(d.dataDir);

    for (const [tool, retry] of [
      ['action_status', 'backoff'],
      ['fetch_result', 'fetch_result'],
    ] as const) {
      const locked = await read(d.p1, tool, actionId);
      expect(locked.isError).toBe(true);
      expect(locked.structuredContent).toMatchObject({
        invocation_id: null,
        error: { code: 'AUDIT_KEY_UNAVAILABLE', retry },
      });
      // A refused read says nothing about the action's outcome, and nothing asks the agent to change its call.
      expect(locked.structuredContent).not.toHaveProperty('error.outcome');
      const text = locked.content?.[0]?.text ?? '';
      expect(text).toContain(`retry: ${retry}`);
      expect(text).not.toContain('after_correction');
      expect(text).not.toContain('not_attempted');
    }

    await unlockAsPerson(d.dataDir, drillPassphrase);
    expect(await laneCards(d.dataDir, lane)).toEqual([]);
    for (const tool of ['action_status', 'fetch_result'] as const) {
      const reply = await read(d.p1, tool, actionId);
      expect(reply.isError).toBe(true);
      expect(reply.structuredContent).toMatchObject({
        invocation_id: actionId,
        error: { code: 'BROKER_RESTARTED', outcome: 'not_attempted' },
        decision: {
          state: 'closed',
          by: null,
          reason: null,
          decided_at_ms: null,
          expires_at_ms: card?.expires_at_ms,
          closed_code: 'BROKER_RESTARTED',
          closed_at_ms: expect.any(Number) as number,
        },
      });
      const text = reply.content?.[0]?.text ?? '';
      expect(text).toContain('"state": "closed"');
      expect(text).not.toContain('"state": "waiting"');
      expect(text).not.toContain('CANARY-drill-token-never-shown');
    }
  }, 120_000);
});
