import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { agentRouteListSchema, agentToolReplySchema, isCodedError, type AgentPeer, type AgentToolReply } from '../contract/index.js';
import { createRandomIdSource, type ToolAnswer } from '../ports/index.js';
import { canary } from '../testing/http-action-harness.js';
import { openQueueFixture, person, type QueueFixture } from '../testing/queue-fixture.js';
import { waitForCardCount } from '../testing/queue-waits.js';
import { createAgentBackend, sessionIdFor, type RunningAgentBackend } from './agent-backend.js';

let f: QueueFixture;
let backend: RunningAgentBackend;
const alive = new Set<number>();

const peer = (pid: number): AgentPeer => ({ pid, uid: 1000, gid: 1000, start_time: String(pid * 7), ppid: 1, exe: '/usr/bin/agent', cwd: '/work', parent_exe: '/usr/bin/editor' });

async function open(agentsYaml?: string): Promise<void> {
  f = await openQueueFixture(agentsYaml === undefined ? {} : { agentsYaml });
  backend = await createAgentBackend({
    journal: f.h.temp.journal,
    results: f.h.results,
    queue: f.queue,
    config: f.config,
    clock: f.h.temp.clock,
    ids: createRandomIdSource(f.h.temp.clock),
    vault: f.h.vault,
    httpChannel: f.h.channel,
    processAlive: (pid) => alive.has(pid),
    sweepMs: 3_600_000,
    bootId: 'boot-test',
  });
}

afterEach(async () => {
  backend.close();
  await f.dispose();
  alive.clear();
});

type ActionReply = Extract<AgentToolReply, { invocation_id: string }>;
const reply = (answer: ToolAnswer): AgentToolReply => agentToolReplySchema.parse(answer.structured);
/** An answer that belongs to an action (not a refusal): narrows for ticket, effect, queue. */
function actionReply(answer: ToolAnswer): ActionReply {
  const r = reply(answer);
  if (r.invocation_id === null) throw new Error(`expected an action's answer, got a refusal: ${JSON.stringify(r)}`);
  return r as ActionReply;
}
const never = new AbortController().signal;

async function approvedSession(pid: number): Promise<string> {
  alive.add(pid);
  const { session_id } = await backend.openSession(peer(pid), { name: 'test-agent', version: '1.0' });
  await f.queue.approveSession(session_id, person);
  return session_id;
}

describe('when an agent process connects', () => {
  beforeEach(async () => {
    await open();
  });

  it('records SESSION_STARTED with the kernel identity; the same process maps to the same session', async () => {
    alive.add(501);
    const first = await backend.openSession(peer(501), { name: 'claude', version: '2' });
    expect(first.session_id).toBe(sessionIdFor('boot-test', peer(501)));
    expect((await backend.openSession(peer(501), { name: 'other label' })).session_id).toBe(first.session_id);
    expect(f.h.temp.journal.getSession(first.session_id)).toMatchObject({ status: 'pending', pid: 501, exe: '/usr/bin/agent', client_name: 'claude' });
    expect(f.queue.isConnected(first.session_id)).toBe(true);
    backend.sessionDisconnected(first.session_id);
    expect(f.queue.isConnected(first.session_id)).toBe(true);
    backend.sessionDisconnected(first.session_id);
    expect(f.queue.isConnected(first.session_id)).toBe(false);
  });

  it('a revoked session is refused: its process cannot reconnect and its calls are SESSION_REVOKED', async () => {
    const sessionId = await approvedSession(502);
    await f.queue.revokeSession(sessionId, person, 'unknown agent');
    const answer = await backend.call(sessionId, 'http_request', { route: 'plain', method: 'POST', path: '/documents/1', body: 'x' }, never);
    expect(reply(answer)).toMatchObject({ invocation_id: null, error: { code: 'SESSION_REVOKED' } });
    await expect(backend.openSession(peer(502), {})).rejects.toSatisfy((e) => isCodedError(e) && e.code === 'SESSION_REVOKED');
    expect(f.server.arrivals).toHaveLength(0);
  });
});

describe('when observe mode is configured', () => {
  it('a new session is approved by policy (observe) and journaled, with no card', async () => {
    await open('  session_approval: observe');
    alive.add(503);
    const { session_id } = await backend.openSession(peer(503), {});
    expect(f.h.temp.journal.getSession(session_id)).toMatchObject({ status: 'approved', approved_by: 'policy:observe' });
    const answer = await backend.call(session_id, 'http_request', { route: 'sess', method: 'POST', path: '/x', body: '{"marker":"S"}' }, never);
    expect(reply(answer).error).toBeUndefined();
    expect(f.server.markers()).toEqual(['S']);
  });
});

describe('when an agent calls a tool', () => {
  beforeEach(async () => {
    await open();
  });

  it('a successful call answers the envelope, the response, ticket and lane, and a short text', async () => {
    const sessionId = await approvedSession(601);
    const answer = await backend.call(sessionId, 'http_request', { route: 'plain', method: 'POST', path: '/documents/3', body: '{"marker":"ok"}' }, never);
    const r = actionReply(answer);
    expect(answer.isError).toBe(false);
    expect(r).toMatchObject({ lane: 'document-3', caller_disposition: 'completed', response: { status: 200, body_encoding: 'utf8', body: '{"received":"ok"}' } });
    expect(answer.text).toBe(`ticket #${r.ticket ?? 0} committed: HTTP 200`);
  });

  it('the caller’s timeout: CALLER_DEADLINE_EXCEEDED, timed_out with its queue position; the action keeps its place and is fetched later', async () => {
    const sessionId = await approvedSession(602);
    const answer = await backend.call(sessionId, 'http_request', { route: 'docs', method: 'POST', path: '/documents/7', body: '{"marker":"late"}', timeout_ms: 50 }, never);
    const r = actionReply(answer);
    const actionId = r.invocation_id;
    expect(r).toMatchObject({ caller_disposition: 'timed_out', queue: { waiting: 'approval', text: 'waiting for approval' } });
    expect(answer.text).toBe(`ticket #${r.ticket ?? 0} waiting for approval (timed out after 50 ms; action ${actionId} keeps its place)`);
    expect(f.events(actionId).map((e) => e.kind)).toEqual(['ACTION_ACCEPTED', 'PREFLIGHT_VALIDATED', 'CARD_SHOWN', 'CALLER_DEADLINE_EXCEEDED']);
    const [card] = await waitForCardCount(f.queue, 1);
    expect(card?.action_id).toBe(actionId);
    await f.queue.approve(card?.ticket ?? 0, person);
    await f.server.waitForArrivals(1);
    const status = async () => actionReply(await backend.call(sessionId, 'action_status', { action_id: actionId }, never));
    // The executor records the result right after the arrival; wait for that event, not a time.
    await new Promise<void>((resolve) => {
      const stop = f.queue.onChange(() => {
        if (f.h.temp.journal.getAction(actionId)?.result_id !== null) {
          stop();
          resolve();
        }
      });
      if (f.h.temp.journal.getAction(actionId)?.result_id !== null) resolve();
    });
    expect((await status()).effect).toBe('succeeded');
    const fetched = await backend.call(sessionId, 'fetch_result', { action_id: actionId }, never);
    expect(reply(fetched)).toMatchObject({ response: { status: 200, body: '{"received":"late"}' }, caller_disposition: 'timed_out' });
    await backend.call(sessionId, 'fetch_result', { action_id: actionId }, never);
    expect(f.events(actionId).filter((e) => e.kind === 'RESULT_DELIVERED')).toHaveLength(1);
    expect(f.server.markers()).toEqual(['late']);
  });

  it('the caller cancelling before dispatch: caller event and CANCELLED in one commit, nothing is ever sent', async () => {
    const sessionId = await approvedSession(603);
    const controller = new AbortController();
    const call = backend.call(sessionId, 'http_request', { route: 'docs', method: 'POST', path: '/documents/7', body: '{"marker":"x"}' }, controller.signal);
    const [card] = await waitForCardCount(f.queue, 1);
    controller.abort('cancelled');
    const r = reply(await call);
    expect(r).toMatchObject({ caller_disposition: 'canceled', error: { code: 'CALLER_CANCELLED', outcome: 'not_attempted' } });
    const events = f.events(r.invocation_id as string);
    expect(events.map((e) => e.kind).slice(-2)).toEqual(['CALLER_CANCELLED', 'CANCELLED']);
    expect(events.at(-1)?.seq).toBe((events.at(-2)?.seq ?? 0) + 1);
    await expect(f.queue.approve(card?.ticket ?? 0, person)).rejects.toThrow(/already cancelled/);
    expect(f.server.arrivals).toHaveLength(0);
  });

  it('the connection going away before dispatch: CALLER_DISCONNECTED and CANCELLED, nothing sent', async () => {
    const sessionId = await approvedSession(610);
    const controller = new AbortController();
    const call = backend.call(sessionId, 'http_request', { route: 'docs', method: 'POST', path: '/documents/4', body: '{"marker":"d"}' }, controller.signal);
    await waitForCardCount(f.queue, 1);
    controller.abort('disconnected');
    const r = actionReply(await call);
    expect(r).toMatchObject({ caller_disposition: 'disconnected', error: { code: 'CALLER_CANCELLED', outcome: 'not_attempted' }, outcome_basis: 'caller_disconnected_before_dispatch' });
    expect(f.events(r.invocation_id).map((e) => e.kind).slice(-2)).toEqual(['CALLER_DISCONNECTED', 'CANCELLED']);
    expect(f.queue.cards()).toEqual([]);
  });

  it('cancel_action, action_status and fetch_result see only this session’s actions', async () => {
    const mine = await approvedSession(604);
    const theirs = await approvedSession(605);
    const done = reply(await backend.call(mine, 'http_request', { route: 'plain', method: 'POST', path: '/documents/1', body: '{"marker":"m"}' }, never));
    for (const tool of ['action_status', 'fetch_result', 'cancel_action'] as const) {
      expect(reply(await backend.call(theirs, tool, { action_id: done.invocation_id }, never))).toMatchObject({ invocation_id: null, error: { code: 'NOT_FOUND', field: 'action_id' } });
    }
    expect(reply(await backend.call(mine, 'action_status', { action_id: done.invocation_id }, never))).toMatchObject({ invocation_id: done.invocation_id, effect: 'succeeded' });
  });

  it('cancel_action on a waiting action closes it before dispatch', async () => {
    const sessionId = await approvedSession(606);
    const call = backend.call(sessionId, 'http_request', { route: 'docs', method: 'POST', path: '/documents/9', body: '{"marker":"c"}' }, never);
    const [card] = await waitForCardCount(f.queue, 1);
    const cancelled = reply(await backend.call(sessionId, 'cancel_action', { action_id: card?.action_id }, never));
    expect(cancelled).toMatchObject({ caller_disposition: 'canceled', error: { code: 'CALLER_CANCELLED', outcome: 'not_attempted' } });
    expect(reply(await call).error?.code).toBe('CALLER_CANCELLED');
    expect(f.server.arrivals).toHaveLength(0);
  });

  it('an invalid timeout_ms is refused with its field and nothing is journaled; other bad fields are journaled by the executor', async () => {
    const sessionId = await approvedSession(607);
    const before = f.h.temp.journal.stats().events;
    const bad = reply(await backend.call(sessionId, 'http_request', { route: 'plain', method: 'POST', path: '/x', timeout_ms: 0 }, never));
    expect(bad).toMatchObject({ invocation_id: null, error: { code: 'INVALID_ARGUMENT', field: 'timeout_ms' } });
    expect(f.h.temp.journal.stats().events).toBe(before);
    const malformed = actionReply(await backend.call(sessionId, 'http_request', { route: 'plain', method: 'POST' }, never));
    expect(malformed).toMatchObject({ error: { code: 'INVALID_ARGUMENT', field: 'path', outcome: 'not_attempted' } });
    expect(malformed.ticket).toBeGreaterThan(0);
  });

  it('list_routes names routes and modes, never credentials', async () => {
    const sessionId = await approvedSession(608);
    const answer = await backend.call(sessionId, 'list_routes', {}, never);
    const list = agentRouteListSchema.parse(answer.structured);
    expect(list.routes.map((r) => [r.name, r.approval])).toEqual([['docs', 'per_call'], ['plain', 'none'], ['sess', 'session']]);
    expect(JSON.stringify(answer)).not.toContain('docs-token');
  });

  it('no answer carries the canary credential', async () => {
    const sessionId = await approvedSession(609);
    const answers = [
      await backend.call(sessionId, 'http_request', { route: 'plain', method: 'POST', path: '/documents/1', body: '{"marker":"s"}' }, never),
      await backend.call(sessionId, 'list_routes', {}, never),
    ];
    expect(JSON.stringify(answers)).not.toContain(canary);
    expect(f.logLines.join('')).not.toContain(canary);
  });
});

describe('when an agent process is gone', () => {
  beforeEach(async () => {
    await open();
  });

  it('the sweeper ends its session and cancels its undispatched tickets ("session ended")', async () => {
    const sessionId = await approvedSession(701);
    const call = backend.call(sessionId, 'http_request', { route: 'docs', method: 'POST', path: '/documents/7', body: '{"marker":"g"}' }, never);
    await waitForCardCount(f.queue, 1);
    alive.delete(701);
    expect(await backend.sweep()).toBe(1);
    expect(f.h.temp.journal.getSession(sessionId)).toMatchObject({ status: 'ended', end_reason: 'process_exited' });
    const r = reply(await call);
    expect(r.error).toMatchObject({ code: 'SESSION_REVOKED', outcome: 'not_attempted' });
    expect(f.events(r.invocation_id as string).find((e) => e.kind === 'CANCELLED')?.payload).toMatchObject({ reason: 'session ended' });
    expect(await backend.sweep()).toBe(0);
  });
});
