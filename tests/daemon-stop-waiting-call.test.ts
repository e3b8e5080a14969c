import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Journal } from '../broker/journal/index.js';
import { systemClock } from '../broker/ports/index.js';
import { startBearerRouteDaemon, type BearerRouteDaemon } from './support/bearer-route-daemon.js';
import { DrillAgent } from './support/drill-agent.js';
import { op } from './support/drill.js';

/**
 * An operator stops the daemon (SIGTERM) while an agent's write waits on a per-call card. The daemon closing the
 * agent's connection is not the agent cancelling: the record must not say CALLER_DISCONNECTED or CANCELLED "by agent"
 * (THREAT-MODEL 3: nothing is recorded as a decision someone did not make). The action stays open, and the next start's
 * recovery closes it as after a crash — BROKER_RESTARTED, not_attempted, retry backoff — the same record a SIGKILL gives.
 * And the agent, whose call the shim answers BROKER_RESTARTED, is told which action it was: the id was announced while
 * the card waited, though nothing else synced the journal meanwhile.
 */
const prefix = 'pstop-';
let running: BearerRouteDaemon;
let agent: DrillAgent;
let arrivals = 0;

beforeAll(async () => {
  running = await startBearerRouteDaemon({
    prefix,
    canary: 'CANARY-stop-route-5e1d',
    respond: (_req, res) => {
      arrivals += 1;
      res.end('ok');
    },
    approval: 'per_call',
    agents: ['  wait_ms_default: 30000'],
  });
  agent = await DrillAgent.start(running.dataDir, 'stop-agent');
}, 60_000);

afterAll(async () => {
  await agent?.stop();
  await running?.stop();
});

describe('when the daemon is stopped while an agent waits on a card', () => {
  it('records nothing in the agent’s name; the next open closes the action as BROKER_RESTARTED, not_attempted', async () => {
    const call = agent.call('http_request', { route: 'docs', method: 'POST', path: '/stop', body: '{}' });
    const lost = call.reply.then(
      () => undefined,
      (error: unknown) => error,
    );
    let actionId = '';
    await expect
      .poll(async () => (actionId = (await op(running.dataDir, 'approvals.list', {})).cards[0]?.action_id ?? ''), {
        timeout: 20_000,
        interval: 50,
      })
      .not.toBe('');
    // The card's wait starts no other sync: the action's id reaches the shim by the sync it asks for itself (20 ms).
    await new Promise((resolve) => setTimeout(resolve, 500));
    await running.daemon.process.stop('SIGTERM');
    // The shim answers the lost call itself, naming the action the broker told it about (action_status works later).
    expect(await lost).toMatchObject({ data: { code: 'BROKER_RESTARTED', action_id: actionId } });

    const journal = await Journal.open({ dataDir: running.dataDir, clock: systemClock });
    try {
      const kinds = [...journal.subjectKinds(actionId)];
      expect(kinds).toContain('ACTION_ACCEPTED');
      expect(kinds).not.toContain('CALLER_DISCONNECTED');
      expect(kinds).not.toContain('CANCELLED');
      expect(journal.getAction(actionId)).toMatchObject({
        outcome: 'not_attempted',
        outcome_basis: 'broker_restart_before_dispatch',
        code: 'BROKER_RESTARTED',
        retry: 'backoff',
        dispatch_seq: null,
      });
    } finally {
      await journal.close();
    }
    expect(arrivals).toBe(0);
  }, 60_000);
});
