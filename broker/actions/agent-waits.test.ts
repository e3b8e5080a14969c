import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { agentToolReplySchema, type AgentToolReply } from '../contract/index.js';
import { type CallProgress, type ToolAnswer } from '../ports/index.js';
import type { PosternConfig } from '../config/index.js';
import { localRouteConfig } from '../testing/http-action-harness.js';
import {
  agentPeer,
  fixtureAgentBackend,
  openQueueFixture,
  person,
  type QueueFixture,
} from '../testing/queue-fixture.js';
import { waitForCardCount } from '../testing/queue-waits.js';
import { DiskSyncGate } from '../testing/disk-sync-gate.js';
import type { RunningAgentBackend } from './agent-backend.js';

let f: QueueFixture;
let backend: RunningAgentBackend;
const alive = new Set<number>();
const held: HeldRemote[] = [];
const never = new AbortController().signal;

afterEach(async () => {
  backend.close();
  await Promise.all(held.splice(0).map((remote) => remote.stop()));
  await f.dispose();
  alive.clear();
});

async function open(agentsYaml?: string, config?: PosternConfig, gate?: DiskSyncGate): Promise<void> {
  f = await openQueueFixture({
    ...(agentsYaml === undefined ? {} : { agentsYaml }),
    ...(gate === undefined ? {} : { beforeSync: gate.beforeSync }),
  });
  backend = await fixtureAgentBackend(f, 'boot-waits', {
    config: config ?? f.config,
    processAlive: (pid) => alive.has(pid),
  });
}

async function approvedSession(pid: number): Promise<string> {
  alive.add(pid);
  const { session_id } = await backend.openSession(agentPeer(pid), { name: 'waits-agent' });
  await f.queue.approveSession(session_id, person);
  return session_id;
}

const reply = (answer: ToolAnswer): AgentToolReply => agentToolReplySchema.parse(answer.structured);
function actionReply(answer: ToolAnswer): Extract<AgentToolReply, { invocation_id: string }> {
  const r = reply(answer);
  if (r.invocation_id === null) throw new Error(`expected an action's answer, got ${JSON.stringify(r)}`);
  return r as Extract<AgentToolReply, { invocation_id: string }>;
}

/** A remote that takes each request and answers only when the test releases it (no sleeps: events). */
interface HeldRemote {
  readonly port: number;
  /** Resolves when the next request has fully arrived. */
  arrived(): Promise<void>;
  /** Answers every held request 200 with `{"done":true}`. */
  release(): void;
  stop(): Promise<void>;
}

async function heldRemote(): Promise<HeldRemote> {
  const waiting: ServerResponse[] = [];
  const arrivals: Array<() => void> = [];
  let arrivedCount = 0;
  let seen = 0;
  const server: Server = createServer((request: IncomingMessage, response: ServerResponse) => {
    request.resume();
    request.on('end', () => {
      waiting.push(response);
      arrivedCount += 1;
      for (const notify of arrivals.splice(0)) notify();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const remote: HeldRemote = {
    port: (server.address() as AddressInfo).port,
    arrived: () => {
      const want = (seen += 1);
      return new Promise<void>((resolve) => {
        const check = (): void => (arrivedCount >= want ? resolve() : void arrivals.push(check));
        check();
      });
    },
    release: () => {
      for (const response of waiting.splice(0))
        response.writeHead(200, { 'content-type': 'application/json' }).end('{"done":true}');
    },
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  held.push(remote);
  return remote;
}

describe('when the caller waits less than the remote takes', () => {
  it('after dispatch: an error answer (CALLER_DEADLINE_EXCEEDED, unknown, fetch_result); fetching before it settles is RESULT_NOT_READY (unknown); once complete fetch_result returns it', async () => {
    const remote = await heldRemote();
    await open(undefined, localRouteConfig(remote.port));
    const sessionId = await approvedSession(701);
    const arrived = remote.arrived();
    const answer = await backend.call(
      sessionId,
      'http_request',
      { route: 'docs', method: 'POST', path: '/slow', body: '{"n":1}', timeout_ms: 100 },
      never,
    );
    await arrived;
    const r = actionReply(answer);
    expect(answer.isError).toBe(true);
    expect(r).toMatchObject({
      caller_disposition: 'timed_out',
      error: { code: 'CALLER_DEADLINE_EXCEEDED', phase: 'remote_execution', outcome: 'unknown', retry: 'fetch_result' },
      evidence: { dispatch_started: true },
    });
    expect(r.effect).not.toBe('succeeded');
    expect(r.error?.message).toContain('action_status');
    // The caller's wait never cut the remote: the request is still open, and the record is not settled.
    expect(f.h.temp.journal.getAction(r.invocation_id)).toMatchObject({
      outcome: 'unknown',
      recorded: false,
      code: null,
      caller_disposition: 'timed_out',
    });
    // fetch_result before the outcome is recorded: a coded refusal saying what is known (unknown), never more.
    const early = await backend.call(sessionId, 'fetch_result', { action_id: r.invocation_id }, never);
    expect(early.isError).toBe(true);
    const notReady = actionReply(early);
    expect(notReady).toMatchObject({
      effect: 'unknown_effect',
      error: { code: 'RESULT_NOT_READY', phase: 'remote_execution', outcome: 'unknown', retry: 'fetch_result' },
      evidence: { dispatch_started: true },
    });
    expect(notReady.error?.message).toContain(`action_status {"action_id":"${r.invocation_id}","wait_ms":`);
    expect(notReady.response).toBeUndefined();
    remote.release();
    const polled = actionReply(
      await backend.call(sessionId, 'action_status', { action_id: r.invocation_id, wait_ms: 20_000 }, never),
    );
    expect(polled).toMatchObject({ effect: 'succeeded' });
    expect(polled.error).toBeUndefined();
    const fetched = actionReply(await backend.call(sessionId, 'fetch_result', { action_id: r.invocation_id }, never));
    expect(fetched.response).toMatchObject({ status: 200, body: '{"done":true}' });
  });

  it("a route's operation deadline shorter than the remote: OPERATION_TIMEOUT, unknown, a broker-side fact (caller completed)", async () => {
    const remote = await heldRemote();
    await open(undefined, localRouteConfig(remote.port, '    timeout_ms: 200'));
    const sessionId = await approvedSession(702);
    const answer = await backend.call(
      sessionId,
      'http_request',
      { route: 'docs', method: 'POST', path: '/slow', body: '{"n":2}', timeout_ms: 20_000 },
      never,
    );
    const r = actionReply(answer);
    expect(answer.isError).toBe(true);
    expect(r).toMatchObject({
      caller_disposition: 'completed',
      error: { code: 'OPERATION_TIMEOUT', phase: 'remote_execution', outcome: 'unknown' },
    });
    const kinds = f.events(r.invocation_id).map((e) => e.kind);
    expect(kinds).not.toContain('CALLER_DEADLINE_EXCEEDED');
    expect(f.h.temp.journal.getAction(r.invocation_id)).toMatchObject({
      code: 'OPERATION_TIMEOUT',
      outcome: 'unknown',
      caller_disposition: null,
    });
  });
});

describe('when the default wait is configured (agents.wait_ms_default)', () => {
  it('a call naming no timeout_ms answers timed_out at that wait, with its place (fetch_result: RESULT_NOT_READY, not_attempted), and polls to the committed result after approval', async () => {
    await open('  wait_ms_default: 150');
    const sessionId = await approvedSession(703);
    const answer = await backend.call(
      sessionId,
      'http_request',
      { route: 'docs', method: 'POST', path: '/documents/5', body: '{"marker":"w"}' },
      never,
    );
    const r = actionReply(answer);
    expect(answer.isError).toBe(false);
    expect(r).toMatchObject({ caller_disposition: 'timed_out', queue: { waiting: 'approval' } });
    expect(f.queue.cards().map((c) => c.action_id)).toEqual([r.invocation_id]);
    // A short poll before the decision answers with the place, still waiting.
    const early = actionReply(
      await backend.call(sessionId, 'action_status', { action_id: r.invocation_id, wait_ms: 50 }, never),
    );
    expect(early.queue).toMatchObject({ waiting: 'approval' });
    // fetch_result while it waits for a person: coded, not_attempted so far (nothing was sent), with its place.
    const unsent = await backend.call(sessionId, 'fetch_result', { action_id: r.invocation_id }, never);
    expect(unsent.isError).toBe(true);
    const notReady = actionReply(unsent);
    expect(notReady).toMatchObject({
      effect: null,
      error: {
        code: 'RESULT_NOT_READY',
        phase: 'credential_injection',
        outcome: 'not_attempted',
        retry: 'fetch_result',
      },
      evidence: { dispatch_started: false },
      queue: { waiting: 'approval' },
    });
    expect(notReady.error?.message).toContain('wait_ms');
    const [card] = await waitForCardCount(f.queue, 1);
    await f.queue.approve(card?.ticket ?? 0, person);
    const polled = actionReply(
      await backend.call(sessionId, 'action_status', { action_id: r.invocation_id, wait_ms: 20_000 }, never),
    );
    expect(polled).toMatchObject({
      effect: 'succeeded',
      decision: { state: 'approved', by: { kind: 'person', id: 'reviewer' } },
    });
    expect(f.server.markers()).toEqual(['w']);
  });
});

describe('when a person decides', () => {
  it("the rejection's reason, who decided and the card's expiry reach the agent", async () => {
    await open();
    const sessionId = await approvedSession(704);
    const call = backend.call(
      sessionId,
      'http_request',
      { route: 'docs', method: 'POST', path: '/documents/6', body: '{"marker":"r"}' },
      never,
    );
    const [card] = await waitForCardCount(f.queue, 1);
    await f.queue.reject(card?.ticket ?? 0, person, 'not on a Friday');
    const answer = await call;
    const r = actionReply(answer);
    expect(answer.isError).toBe(true);
    expect(r.error).toMatchObject({ code: 'APPROVAL_DENIED', outcome: 'not_attempted' });
    expect(r.error?.message).toContain('not on a Friday');
    expect(r.decision).toMatchObject({
      state: 'rejected',
      by: { kind: 'person', id: 'reviewer' },
      reason: 'not on a Friday',
    });
    expect(r.decision?.expires_at_ms).toBeGreaterThan(0);
    expect(f.server.arrivals).toHaveLength(0);
  });
});

describe('when the client asked for progress', () => {
  it('each state change is reported once, with increasing progress: card shown, approved, then the answer', async () => {
    await open();
    const sessionId = await approvedSession(705);
    const progress: CallProgress[] = [];
    let firstNote: () => void = () => undefined;
    const noted = new Promise<void>((resolve) => (firstNote = resolve));
    const call = backend.call(
      sessionId,
      'http_request',
      { route: 'docs', method: 'POST', path: '/documents/8', body: '{"marker":"p"}' },
      never,
      (p) => {
        progress.push(p);
        firstNote();
      },
    );
    const [card] = await waitForCardCount(f.queue, 1);
    // A note leaves once what it describes is on disk (agent-backend's write-ahead for answers).
    await noted;
    expect(progress.map((p) => p.message)).toEqual([`card shown (ticket #${card?.ticket ?? 0}), waiting for a person`]);
    await f.queue.approve(card?.ticket ?? 0, person);
    expect(reply(await call).error).toBeUndefined();
    const messages = progress.map((p) => p.message);
    expect(messages[0]).toContain('card shown');
    expect(messages.at(-1)).toBe('remote answered: committed');
    expect(new Set(messages).size).toBe(messages.length);
    expect(progress.map((p) => p.progress)).toEqual(progress.map((_, i) => i + 1));
    // Nothing of the request's content is in a progress line.
    expect(JSON.stringify(progress)).not.toContain('marker');
  });
});

describe('when the disk has not yet synced what an answer names (write-ahead for answers)', () => {
  it('a timed-out answer naming the action leaves only after a sync covered its admission and its card', async () => {
    const gate = new DiskSyncGate();
    await open(undefined, undefined, gate);
    const sessionId = await approvedSession(704);
    gate.hold();
    const journal = f.h.temp.journal;
    // The caller's wait ends while the card waits for a person: the answer is ready, and names the action.
    const deadlineRecorded = new Promise<void>((resolve) => {
      const stop = journal.onCommit((commit) => {
        if (commit.kinds.includes('CALLER_DEADLINE_EXCEEDED')) {
          stop();
          resolve();
        }
      });
    });
    let answered = false;
    const call = backend
      .call(
        sessionId,
        'http_request',
        { route: 'docs', method: 'POST', path: '/documents/6', body: '{"marker":"durable"}', timeout_ms: 100 },
        never,
      )
      .then((answer) => {
        answered = true;
        return { answer, durableSeq: journal.durableSeq() };
      });
    await deadlineRecorded;
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(gate.waiting()).toBe(1);
    expect(answered).toBe(false);
    gate.release();
    const { answer, durableSeq } = await call;
    const r = actionReply(answer);
    expect(r).toMatchObject({ caller_disposition: 'timed_out', queue: { waiting: 'approval' } });
    // When the answer left, every record of the action it names was on disk.
    const seqs = f.events(r.invocation_id).map((e) => e.seq);
    expect(seqs.length).toBeGreaterThanOrEqual(3);
    expect(durableSeq).toBeGreaterThanOrEqual(Math.max(...seqs));
  });

  it("the caller's connection is told the action's id only once a sync covered its admission, before the answer", async () => {
    const gate = new DiskSyncGate();
    await open(undefined, undefined, gate);
    const sessionId = await approvedSession(705);
    gate.hold();
    const journal = f.h.temp.journal;
    const told: Array<{ what: string; durableSeq: number; actionId?: string }> = [];
    const call = backend
      .call(
        sessionId,
        'http_request',
        { route: 'docs', method: 'POST', path: '/documents/7', body: '{}', timeout_ms: 100 },
        never,
        undefined,
        (actionId) => told.push({ what: 'recorded', durableSeq: journal.durableSeq(), actionId }),
      )
      .then((answer) => {
        told.push({ what: 'answered', durableSeq: journal.durableSeq() });
        return answer;
      });
    await gate.nextRequest();
    for (let turn = 0; turn < 3; turn += 1) await new Promise<void>((resolve) => setImmediate(resolve));
    // Admitted and committed, the card waiting, the disk not synced: nothing names the action yet.
    expect(told).toEqual([]);
    gate.release();
    const r = actionReply(await call);
    expect(told.map((t) => t.what)).toEqual(['recorded', 'answered']);
    expect(told[0]?.actionId).toBe(r.invocation_id);
    const admission = f.events(r.invocation_id).find((e) => e.kind === 'ACTION_ACCEPTED');
    expect(told[0]?.durableSeq).toBeGreaterThanOrEqual(admission?.seq ?? Number.POSITIVE_INFINITY);
  });
});
