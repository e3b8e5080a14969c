import { describe, expect, it } from 'vitest';
import { drillForFile, drillPassphrase, laneCards, waitFor } from './support/drill.js';
import type { DrillAgent, ToolReply } from './support/drill-agent.js';
import { unlockAsPerson } from './support/person-decision.js';
import { startDaemon } from './support/postern-process.js';
import { within } from './support/recovery-rig.js';

/**
 * What an agent hears about its action after the broker died under its card: a real daemon, a real MCP SDK client
 * through `postern mcp` (the same agent process, so the same session after the restart), a per-call route. The agent
 * asks; the card waits; the daemon is SIGKILLed and started again locked. Before the person unlocks, the card's
 * events are sealed: action_status and fetch_result answer the plaintext record — closed by the restart, not_attempted —
 * with the decision marked `sealed` (its expiry null, to be read after the unlock), never "after_correction" (nothing is
 * wrong with the call). After the unlock, they say the card was closed without a decision by the restart (never
 * `waiting` with an expiry nobody will act on), with its expiry, as approvals list agrees: no open card.
 */
const theDrill = drillForFile('pclosed-', 'closed', 120);
const lane = 'doc-k';

function read(agent: DrillAgent, tool: 'action_status' | 'fetch_result', actionId: string): Promise<ToolReply> {
  return within(agent.call(tool, { action_id: actionId }).reply, `${tool} after the restart`);
}

/** The decision of a card the restart closed without one; its expiry is in its events (null while they are sealed). */
function closedByTheRestart(expiresAtMs: number | null | undefined) {
  return {
    state: 'closed',
    by: null,
    reason: null,
    decided_at_ms: null,
    expires_at_ms: expiresAtMs,
    closed_code: 'BROKER_RESTARTED',
    closed_at_ms: expect.any(Number) as number,
  };
}

describe('when the broker is killed while an agent waits on its card', () => {
  it('tells the agent what the plaintext record says before the unlock, then that the card was closed without a decision', async () => {
    const d = theDrill();
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

    for (const tool of ['action_status', 'fetch_result'] as const) {
      const locked = await read(d.p1, tool, actionId);
      // The plaintext record answers: closed by the restart, nothing sent; the card's expiry is in its sealed events.
      expect(locked.isError).toBe(true);
      expect(locked.structuredContent).toMatchObject({
        invocation_id: actionId,
        lane,
        error: { code: 'BROKER_RESTARTED', outcome: 'not_attempted' },
        decision: { ...closedByTheRestart(null), sealed: true },
      });
      const text = locked.content?.[0]?.text ?? '';
      // Nothing asks the agent to change its call, and the answer says what it cannot read yet.
      expect(text).not.toContain('after_correction');
      expect(text).toContain('sealed in the journal: read again once a person unlocks the vault');
      expect(text).not.toContain('"state": "waiting"');
      expect(text).not.toContain('CANARY-drill-token-never-shown');
    }

    await unlockAsPerson(d.dataDir, drillPassphrase);
    expect(await laneCards(d.dataDir, lane)).toEqual([]);
    for (const tool of ['action_status', 'fetch_result'] as const) {
      const reply = await read(d.p1, tool, actionId);
      expect(reply.isError).toBe(true);
      expect(reply.structuredContent).toMatchObject({
        invocation_id: actionId,
        error: { code: 'BROKER_RESTARTED', outcome: 'not_attempted' },
        decision: closedByTheRestart(card?.expires_at_ms),
      });
      expect(reply.structuredContent).not.toHaveProperty('decision.sealed');
      const text = reply.content?.[0]?.text ?? '';
      expect(text).toContain('"state": "closed"');
      expect(text).not.toContain('"state": "waiting"');
      expect(text).not.toContain('CANARY-drill-token-never-shown');
    }
  }, 120_000);
});
