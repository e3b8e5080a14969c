import { afterEach, describe, expect, it } from 'vitest';
import { foldMetrics } from '../core/index.js';
import { type ToolAnswer } from '../ports/index.js';
import {
  agentPeer,
  fixtureAgentBackend,
  openQueueFixture,
  person,
  type QueueFixture,
} from '../testing/queue-fixture.js';
import { waitForCardCount } from '../testing/queue-waits.js';
import type { RunningAgentBackend } from './agent-backend.js';

/**
 * `postern metrics` (foldMetrics over the journal's stored counters) after real closures before dispatch, each
 * made the way it happens: the agent's cancel_action, its connection dropping, its client giving up
 * (notifications/cancelled), a person's cancel and rejection, a person revoking the session. The caller's own
 * stops are `withdrawn` (docs/operator.md), never a person's `cancelled` — although each writes a CANCELLED.
 */
let f: QueueFixture;
let backend: RunningAgentBackend;
const never = new AbortController().signal;

afterEach(async () => {
  backend.close();
  await f.dispose();
});

async function approvedSession(pid: number): Promise<string> {
  const { session_id } = await backend.openSession(agentPeer(pid), { name: 'metrics-agent' });
  await f.queue.approveSession(session_id, person);
  return session_id;
}

/** A per-call write on its own lane, started; resolves once its card is the only one shown. */
async function carded(
  sessionId: string,
  n: number,
  signal: AbortSignal = never,
): Promise<{ actionId: string; ticket: number; answer: Promise<ToolAnswer> }> {
  const answer = backend.call(
    sessionId,
    'http_request',
    { route: 'docs', method: 'POST', path: `/documents/${n}`, body: `{"marker":"m${n}"}`, timeout_ms: 60_000 },
    signal,
  );
  const [card] = await waitForCardCount(f.queue, 1);
  if (card === undefined) throw new Error('no card');
  return { actionId: card.action_id, ticket: card.ticket, answer };
}

describe('when tickets are closed before dispatch by the caller and by people', () => {
  it('the caller’s cancel, disconnect and client give-up count as withdrawn; a person’s cancel and a revocation as cancelled', async () => {
    f = await openQueueFixture();
    backend = await fixtureAgentBackend(f, 'boot-metrics');
    const sessionId = await approvedSession(801);
    const closed: Record<string, string> = {};

    const byTool = await carded(sessionId, 1);
    await backend.call(sessionId, 'cancel_action', { action_id: byTool.actionId }, never);
    await byTool.answer;
    closed['cancel_action'] = byTool.actionId;

    const gone = new AbortController();
    const dropped = await carded(sessionId, 2, gone.signal);
    gone.abort('disconnected');
    await dropped.answer;
    closed['disconnected'] = dropped.actionId;

    const gaveUp = new AbortController();
    const timedOut = await carded(sessionId, 3, gaveUp.signal);
    gaveUp.abort('cancelled');
    await timedOut.answer;
    closed['client gave up'] = timedOut.actionId;

    const byPerson = await carded(sessionId, 4);
    await f.queue.cancel(byPerson.ticket, person, 'not today');
    await byPerson.answer;
    closed['person cancelled'] = byPerson.actionId;

    const rejected = await carded(sessionId, 5);
    await f.queue.reject(rejected.ticket, person, 'no');
    await rejected.answer;

    const other = await approvedSession(802);
    const revoked = await carded(other, 6);
    await f.queue.revokeSession(other, person, 'not my agent');
    await revoked.answer;
    closed['session revoked'] = revoked.actionId;

    // The premise: each closure is a CANCELLED in the journal, by the agent only for the caller's own stops.
    const cancelledBy = Object.fromEntries(
      Object.entries(closed).map(([what, id]) => [
        what,
        f.events(id).find((e) => e.kind === 'CANCELLED')?.payload as { actor: { kind: string } } | undefined,
      ]),
    );
    expect(cancelledBy).toMatchObject({
      cancel_action: { actor: { kind: 'agent' } },
      disconnected: { actor: { kind: 'agent' } },
      'client gave up': { actor: { kind: 'agent' } },
      'person cancelled': { actor: { kind: 'person' } },
      'session revoked': { actor: { kind: 'person' } },
    });
    expect(f.server.arrivals).toHaveLength(0);

    const m = foldMetrics(f.h.temp.journal.outcomeCounts());
    expect(m.decisions).toEqual([
      { decision: 'rejected', count: 1 },
      { decision: 'cancelled', count: 2 },
      { decision: 'withdrawn', count: 3 },
    ]);
    // None of them is a failure of a phase or listed under its code.
    expect(m.by_phase_outcome).toEqual([]);
    expect(m.by_code).toEqual([]);
    expect(m).toMatchObject({ open: 0, total: 6 });
  });
});

describe('when the session sweeper ends a session whose process is gone, with a ticket still waiting', () => {
  it('the ticket counts as withdrawn (the caller went away), not as cancelled by a person or a revocation', async () => {
    f = await openQueueFixture();
    const gone = new Set<number>();
    backend = await fixtureAgentBackend(f, 'boot-metrics', {
      processAlive: (pid) => !gone.has(pid),
    });
    const sessionId = await approvedSession(803);
    const waiting = await carded(sessionId, 7);

    gone.add(803);
    expect(await backend.sweep()).toBe(1);
    await waiting.answer;

    expect(f.h.temp.journal.getSession(sessionId)).toMatchObject({ status: 'ended' });
    expect(f.events(waiting.actionId).find((e) => e.kind === 'CANCELLED')).toMatchObject({
      payload: { actor: { kind: 'broker', id: 'session-sweeper' }, reason: 'session ended' },
      classification: { outcome: 'not_attempted', code: 'SESSION_ENDED' },
    });
    expect(f.server.arrivals).toHaveLength(0);
    const m = foldMetrics(f.h.temp.journal.outcomeCounts());
    expect(m.decisions).toEqual([{ decision: 'withdrawn', count: 1 }]);
    expect(m.by_code).toEqual([]);
    expect(m).toMatchObject({ open: 0, total: 1 });
  });
});
