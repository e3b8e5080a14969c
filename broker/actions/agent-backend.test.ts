import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  agentRouteListSchema,
  agentToolReplySchema,
  CodedError,
  isCodedError,
  type AgentPeer,
  type AgentToolReply,
} from '../contract/index.js';
import { SessionRegistry } from '../agent/session-registry.js';
import { type CredentialVault, type ToolAnswer } from '../ports/index.js';
import type { PosternConfig } from '../config/index.js';
import type { ResultStore } from '../journal/index.js';
import {
  AdversarialHttpServer,
  type AdversarialServerOptions,
  type Behavior,
} from '../testing/adversarial-http-server.js';
import { canary, localRouteConfig, retryPolicyYaml, type RetryPolicyYaml } from '../testing/http-action-harness.js';
import { fixtureAgentBackend, openQueueFixture, person, type QueueFixture } from '../testing/queue-fixture.js';
import { waitForCardCount, waitForCards } from '../testing/queue-waits.js';
import { sessionStartedEvent } from '../testing/session-events.js';
import { describeCutShutdown, shutDownRuntime } from '../host/shutdown-sequence.js';
import { sessionIdFor, type RunningAgentBackend } from './agent-backend.js';
import { openActionsPerSessionMax, runningActionsPerSessionMax } from './open-actions.js';
import { secretParts, secretScrubber } from './secret-scrubber.js';

let f: QueueFixture;
let backend: RunningAgentBackend;
const alive = new Set<number>();

const peer = (pid: number): AgentPeer => ({
  pid,
  uid: 1000,
  gid: 1000,
  start_time: String(pid * 7),
  ppid: 1,
  exe: '/usr/bin/agent',
  cwd: '/work',
  parent_exe: '/usr/bin/editor',
});

async function open(
  agentsYaml?: string,
  over: {
    config?: PosternConfig;
    results?: (real: ResultStore) => ResultStore;
    vault?: (real: CredentialVault) => CredentialVault;
    openActionsMax?: number;
    runningActionsMax?: number;
  } = {},
): Promise<void> {
  f = await openQueueFixture(agentsYaml === undefined ? {} : { agentsYaml });
  backend = await fixtureAgentBackend(f, 'boot-test', {
    results: over.results === undefined ? f.h.results : over.results(f.h.results),
    config: over.config ?? f.config,
    vault: over.vault === undefined ? f.h.vault : over.vault(f.h.vault),
    processAlive: (pid) => alive.has(pid),
    ...(over.openActionsMax === undefined ? {} : { openActionsPerSessionMax: over.openActionsMax }),
    ...(over.runningActionsMax === undefined ? {} : { runningActionsPerSessionMax: over.runningActionsMax }),
  });
}

afterEach(async () => {
  backend.close();
  await f.dispose();
  alive.clear();
  await Promise.all(servers.splice(0).map((server) => server.stop()));
});

const servers: AdversarialHttpServer[] = [];
/** A backend whose one route (docs, approval none, lane route:docs) goes to a scripted remote. */
async function openWithRemote(
  behavior: Behavior,
  results?: (real: ResultStore) => ResultStore,
): Promise<AdversarialHttpServer> {
  const remote = await AdversarialHttpServer.start({ script: () => behavior });
  servers.push(remote);
  await open(undefined, { config: localRouteConfig(remote.port), ...(results === undefined ? {} : { results }) });
  return remote;
}

/** The same with a retry policy on the route and a remote that may answer each request differently. */
async function openWithRetryingRemote(
  script: NonNullable<AdversarialServerOptions['script']>,
  retry: RetryPolicyYaml,
): Promise<AdversarialHttpServer> {
  const remote = await AdversarialHttpServer.start({ script });
  servers.push(remote);
  await open(undefined, { config: localRouteConfig(remote.port, retryPolicyYaml(retry)) });
  return remote;
}
/** A result store whose commit fails (INTERNAL) after the remote answered: the action is left a recorded unknown. */
function failingCommit(real: ResultStore): ResultStore {
  return new Proxy(real, {
    get(target, key) {
      if (key === 'rowsOf')
        return () => {
          throw new CodedError('INTERNAL', 'the result store failed');
        };
      const value = Reflect.get(target, key) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/** The remote's answer that makes the retry tests retry. */
const throttled = (): Behavior => ({ kind: 'respond', status: 429, body: '{"slow":"down"}' });
/** The write the retry tests send (and retry). */
const put = { route: 'docs', method: 'PUT', path: '/documents/9', body: '{"v":1}' };

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

/**
 * Sends `put` (its call aborted by `signal`, as the agent socket does on a disconnect) without waiting for its answer; returns once its first attempt is answered 429 and recorded (the
 * executor now waits out the backoff before the next round), with the action's id and the call still open.
 */
async function putWaitingOutBackoff(
  sessionId: string,
  signal: AbortSignal = never,
): Promise<{ id: string; call: Promise<ToolAnswer> }> {
  let id = '';
  const call = backend.call(sessionId, 'http_request', put, signal, undefined, (actionId) => {
    id = actionId;
  });
  await vi.waitFor(() => expect(f.h.temp.journal.getAction(id)?.outcome).toBe('rejected'), { timeout: 5000 });
  return { id, call };
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
    expect(f.h.temp.journal.getSession(first.session_id)).toMatchObject({
      status: 'pending',
      pid: 501,
      exe: '/usr/bin/agent',
      client_name: 'claude',
    });
    expect(f.queue.isConnected(first.session_id)).toBe(true);
  });

  it('two connections of one process: connected until the last one closes, then not (the socket reports only the last close)', async () => {
    alive.add(504);
    // The agent socket's own bookkeeping: openSession per connection, sessionDisconnected on the last detach.
    const registry = new SessionRegistry(4, (sessionId) => backend.sessionDisconnected(sessionId));
    const connect = async (): Promise<string> => {
      const { session_id } = await backend.openSession(peer(504), { name: 'agent' });
      registry.attach(session_id);
      return session_id;
    };
    const sessionId = await connect();
    expect(await connect()).toBe(sessionId);
    expect(f.queue.isConnected(sessionId)).toBe(true);
    registry.detach(sessionId);
    expect(f.queue.isConnected(sessionId)).toBe(true);
    registry.detach(sessionId);
    expect(f.queue.isConnected(sessionId)).toBe(false);
    // A new connection later: connected again, and one close disconnects it.
    await connect();
    expect(f.queue.isConnected(sessionId)).toBe(true);
    registry.detach(sessionId);
    expect(f.queue.isConnected(sessionId)).toBe(false);
  });

  it('rows another process writes in the sessions table approve nothing: its own pending session set to approved, a forged approved session for its child (THREAT-MODEL 3)', async () => {
    alive.add(505);
    alive.add(506);
    const own = (await backend.openSession(peer(505), { name: 'agent' })).session_id;
    const forgedId = 'ses_forged_child_506';
    const forger = new Database(f.h.temp.path, { timeout: 5_000 });
    try {
      const row = forger.prepare('SELECT state FROM sessions WHERE session_id = ?').get(own) as { state: string };
      const approved = {
        ...JSON.parse(row.state),
        status: 'approved',
        approved_by: 'person:ann (cli, passphrase on tty)',
      };
      forger
        .prepare('UPDATE sessions SET status = ?, state = ? WHERE session_id = ?')
        .run('approved', JSON.stringify(approved), own);
      const child = { ...approved, session_id: forgedId, pid: 506, start_time: peer(506).start_time };
      forger
        .prepare(
          'INSERT INTO sessions (session_id, status, pid, start_time, first_seq, last_seq, state) VALUES (?, ?, ?, ?, ?, ?, ?)',
        )
        .run(
          forgedId,
          'approved',
          506,
          peer(506).start_time,
          approved.first_seq,
          approved.last_seq,
          JSON.stringify(child),
        );
    } finally {
      forger.close();
    }
    // Reconnecting, the agent's own session is still pending; the child gets a new pending session, not the forged one.
    expect((await backend.openSession(peer(505), { name: 'agent' })).session_id).toBe(own);
    expect(f.h.temp.journal.getSession(own)).toMatchObject({ status: 'pending', approved_by: null, reconnects: 1 });
    const child = (await backend.openSession(peer(506), { name: 'agent' })).session_id;
    expect(child).not.toBe(forgedId);
    expect(f.h.temp.journal.getSession(child)).toMatchObject({ status: 'pending', pid: 506 });
    // A call on a session-approval route waits for the person: no APPROVED, nothing sent.
    const answer = actionReply(
      await backend.call(
        child,
        'http_request',
        { route: 'sess', method: 'POST', path: '/documents/1', body: '{"x":1}', timeout_ms: 1 },
        never,
      ),
    );
    expect(answer.caller_disposition).toBe('timed_out');
    expect(f.events(answer.invocation_id).map((e) => e.kind)).not.toContain('APPROVED');
    expect(f.server.arrivals).toHaveLength(0);
  });

  it('a revoked session is refused: its process cannot reconnect and its calls are SESSION_REVOKED', async () => {
    const sessionId = await approvedSession(502);
    await f.queue.revokeSession(sessionId, person, 'unknown agent');
    const answer = await backend.call(
      sessionId,
      'http_request',
      { route: 'plain', method: 'POST', path: '/documents/1', body: 'x' },
      never,
    );
    expect(reply(answer)).toMatchObject({ invocation_id: null, error: { code: 'SESSION_REVOKED' } });
    await expect(backend.openSession(peer(502), {})).rejects.toSatisfy(
      (e) => isCodedError(e) && e.code === 'SESSION_REVOKED',
    );
    expect(f.server.arrivals).toHaveLength(0);
  });
});

describe('when observe mode is configured', () => {
  it('a new session is approved by policy (observe) and journaled, with no card', async () => {
    await open('  session_approval: observe');
    alive.add(503);
    // No reader may ever see it pending (a session card would flash): started and approved land in one commit.
    const commits: string[][] = [];
    const stop = f.h.temp.journal.onCommit((commit) => commits.push([...commit.kinds]));
    const { session_id } = await backend.openSession(peer(503), {});
    stop();
    expect(commits).toEqual([['SESSION_STARTED', 'SESSION_APPROVED']]);
    expect(f.h.temp.journal.getSession(session_id)).toMatchObject({
      status: 'approved',
      approved_by: 'policy:observe',
    });
    const answer = await backend.call(
      session_id,
      'http_request',
      { route: 'sess', method: 'POST', path: '/x', body: '{"marker":"S"}' },
      never,
    );
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
    const answer = await backend.call(
      sessionId,
      'http_request',
      { route: 'plain', method: 'POST', path: '/documents/3', body: '{"marker":"ok"}' },
      never,
    );
    const r = actionReply(answer);
    expect(answer.isError).toBe(false);
    expect(r).toMatchObject({
      lane: 'document-3',
      caller_disposition: 'completed',
      response: { status: 200, body_encoding: 'utf8', body: '{"received":"ok"}' },
    });
    expect(answer.text).toBe(`ticket #${r.ticket ?? 0} committed: HTTP 200`);
  });

  it('an auto-approved call’s answer reads no events: its state says no card and no decision', async () => {
    const sessionId = await approvedSession(611);
    const journal = f.h.temp.journal;
    const eventReads: string[] = [];
    for (const method of ['subjectKinds', 'subjectEvents'] as const) {
      const real = journal[method].bind(journal);
      vi.spyOn(journal, method).mockImplementation((id: string, ...rest: unknown[]) => {
        eventReads.push(`${method} ${id}`);
        return (real as (id: string, ...rest: unknown[]) => never)(id, ...rest);
      });
    }
    try {
      const answer = await backend.call(
        sessionId,
        'http_request',
        { route: 'plain', method: 'POST', path: '/documents/4', body: '{"marker":"ok"}' },
        never,
      );
      expect(actionReply(answer)).toMatchObject({ effect: 'succeeded' });
      expect(actionReply(answer)).not.toHaveProperty('decision');
      expect(eventReads).toEqual([]);
    } finally {
      vi.restoreAllMocks();
    }
  });

  /** A call on an approval route that timed out waiting (50 ms), then approved by a person: a decided action. */
  async function approvedAfterTimeout(
    sessionSeed: number,
    document: number,
  ): Promise<{ sessionId: string; late: ReturnType<typeof actionReply> }> {
    const sessionId = await approvedSession(sessionSeed);
    const late = actionReply(
      await backend.call(
        sessionId,
        'http_request',
        { route: 'docs', method: 'POST', path: `/documents/${document}`, body: '{"marker":"late"}', timeout_ms: 50 },
        never,
      ),
    );
    const [card] = await waitForCardCount(f.queue, 1);
    await f.queue.approve(card?.ticket ?? 0, person);
    return { sessionId, late };
  }

  it('a decided call’s answer reads its events through readCurrent (never draining the writer on the loop)', async () => {
    const { sessionId, late } = await approvedAfterTimeout(612, 8);
    const journal = f.h.temp.journal;
    let inside = 0;
    const eventReads: string[] = [];
    const readCurrent = journal.readCurrent.bind(journal);
    vi.spyOn(journal, 'readCurrent').mockImplementation(<T>(read: () => T) =>
      readCurrent(() => {
        inside += 1;
        try {
          return read();
        } finally {
          inside -= 1;
        }
      }),
    );
    for (const method of ['subjectKinds', 'subjectEvents'] as const) {
      const real = journal[method].bind(journal);
      vi.spyOn(journal, method).mockImplementation((id: string, ...rest: unknown[]) => {
        if (id === late.invocation_id) eventReads.push(`${method}${inside > 0 ? '' : ' outside readCurrent'}`);
        return (real as (id: string, ...rest: unknown[]) => never)(id, ...rest);
      });
    }
    try {
      const polled = actionReply(
        await backend.call(sessionId, 'action_status', { action_id: late.invocation_id, wait_ms: 20_000 }, never),
      );
      expect(polled).toMatchObject({ decision: { state: 'approved', by: { kind: 'person' } } });
      expect(eventReads).toContain('subjectKinds');
      expect(eventReads.filter((read) => read.endsWith('outside readCurrent'))).toEqual([]);
    } finally {
      vi.restoreAllMocks();
    }
  });

  it('a decision read that fails leaves the action’s answer as it is (never a refusal naming no action)', async () => {
    const { sessionId, late } = await approvedAfterTimeout(613, 9);
    const journal = f.h.temp.journal;
    await f.h.temp.journal.durable();
    vi.spyOn(journal, 'readCurrent').mockImplementation(() =>
      Promise.reject(Object.assign(new Error('the journal is closing'), { code: 'JOURNAL_UNAVAILABLE' })),
    );
    try {
      const polled = actionReply(
        await backend.call(sessionId, 'action_status', { action_id: late.invocation_id, wait_ms: 20_000 }, never),
      );
      expect(polled.invocation_id).toBe(late.invocation_id);
      expect(polled).not.toHaveProperty('decision');
    } finally {
      vi.restoreAllMocks();
    }
  });

  it('the caller’s timeout: CALLER_DEADLINE_EXCEEDED, timed_out with its queue position; the action keeps its place and is fetched later', async () => {
    const sessionId = await approvedSession(602);
    const answer = await backend.call(
      sessionId,
      'http_request',
      { route: 'docs', method: 'POST', path: '/documents/7', body: '{"marker":"late"}', timeout_ms: 50 },
      never,
    );
    const r = actionReply(answer);
    const actionId = r.invocation_id;
    expect(r).toMatchObject({
      caller_disposition: 'timed_out',
      queue: { waiting: 'approval', text: 'waiting for approval' },
    });
    expect(answer.isError).toBe(false);
    expect(answer.text).toContain(
      `ticket #${r.ticket ?? 0} waiting for approval (stopped waiting after 50 ms, waiting for approval; action ${actionId} keeps its place`,
    );
    expect(answer.text).toContain('action_status');
    expect(f.events(actionId).map((e) => e.kind)).toEqual([
      'ACTION_ACCEPTED',
      'PREFLIGHT_VALIDATED',
      'CARD_SHOWN',
      'CALLER_DEADLINE_EXCEEDED',
    ]);
    const [card] = await waitForCardCount(f.queue, 1);
    expect(card?.action_id).toBe(actionId);
    await f.queue.approve(card?.ticket ?? 0, person);
    // The long-poll waits for the record, not a time: it answers once the outcome is recorded.
    const polled = actionReply(
      await backend.call(sessionId, 'action_status', { action_id: actionId, wait_ms: 20_000 }, never),
    );
    expect(polled).toMatchObject({ effect: 'succeeded', decision: { state: 'approved', by: { kind: 'person' } } });
    expect(f.h.temp.journal.getAction(actionId)?.result_id).not.toBeNull();
    const fetched = await backend.call(sessionId, 'fetch_result', { action_id: actionId }, never);
    expect(reply(fetched)).toMatchObject({
      response: { status: 200, body: '{"received":"late"}' },
      caller_disposition: 'timed_out',
    });
    // A fetch is a read: it journals nothing; RESULT_DELIVERED follows the socket's report that the answer was written.
    const handoff = fetched.handoff ?? expect.unreachable('a fetched result names its handoff');
    expect(handoff).toEqual({ action_id: actionId, result_id: f.h.temp.journal.getAction(actionId)?.result_id });
    await backend.call(sessionId, 'fetch_result', { action_id: actionId }, never);
    expect(f.events(actionId).filter((e) => e.kind === 'RESULT_DELIVERED')).toHaveLength(0);
    await backend.resultDelivered?.(sessionId, handoff);
    await backend.resultDelivered?.(sessionId, handoff);
    expect(f.events(actionId).filter((e) => e.kind === 'RESULT_DELIVERED')).toHaveLength(1);
    expect(f.server.markers()).toEqual(['late']);
  });

  it('the caller cancelling before dispatch: caller event and CANCELLED in one commit, nothing is ever sent', async () => {
    const sessionId = await approvedSession(603);
    const controller = new AbortController();
    const call = backend.call(
      sessionId,
      'http_request',
      { route: 'docs', method: 'POST', path: '/documents/7', body: '{"marker":"x"}' },
      controller.signal,
    );
    const [card] = await waitForCardCount(f.queue, 1);
    controller.abort('cancelled');
    const r = reply(await call);
    expect(r).toMatchObject({
      caller_disposition: 'canceled',
      error: { code: 'CALLER_CANCELLED', outcome: 'not_attempted' },
    });
    const events = f.events(r.invocation_id as string);
    expect(events.map((e) => e.kind).slice(-2)).toEqual(['CALLER_CANCELLED', 'CANCELLED']);
    expect(events.at(-1)?.seq).toBe((events.at(-2)?.seq ?? 0) + 1);
    await expect(f.queue.approve(card?.ticket ?? 0, person)).rejects.toThrow(/already cancelled/);
    expect(f.server.arrivals).toHaveLength(0);
  });

  it('the connection going away before dispatch: CALLER_DISCONNECTED and CANCELLED, nothing sent', async () => {
    const sessionId = await approvedSession(610);
    const controller = new AbortController();
    const call = backend.call(
      sessionId,
      'http_request',
      { route: 'docs', method: 'POST', path: '/documents/4', body: '{"marker":"d"}' },
      controller.signal,
    );
    await waitForCardCount(f.queue, 1);
    controller.abort('disconnected');
    const r = actionReply(await call);
    expect(r).toMatchObject({
      caller_disposition: 'disconnected',
      error: { code: 'CALLER_CANCELLED', outcome: 'not_attempted' },
      outcome_basis: 'caller_disconnected_before_dispatch',
    });
    expect(
      f
        .events(r.invocation_id)
        .map((e) => e.kind)
        .slice(-2),
    ).toEqual(['CALLER_DISCONNECTED', 'CANCELLED']);
    expect(f.queue.cards()).toEqual([]);
  });

  it('cancel_action, action_status and fetch_result see only this session’s actions', async () => {
    const mine = await approvedSession(604);
    const theirs = await approvedSession(605);
    const done = reply(
      await backend.call(
        mine,
        'http_request',
        { route: 'plain', method: 'POST', path: '/documents/1', body: '{"marker":"m"}' },
        never,
      ),
    );
    for (const tool of ['action_status', 'fetch_result', 'cancel_action'] as const) {
      const refused = reply(await backend.call(theirs, tool, { action_id: done.invocation_id }, never));
      expect(refused).toMatchObject({ invocation_id: null, error: { code: 'NOT_FOUND', field: 'action_id' } });
      // A refusal to read says nothing about the action: it was dispatched and committed, yet no outcome is named.
      expect(refused.error).not.toHaveProperty('outcome');
    }
    expect(reply(await backend.call(mine, 'action_status', { action_id: done.invocation_id }, never))).toMatchObject({
      invocation_id: done.invocation_id,
      effect: 'succeeded',
    });
  });

  it('cancel_action on a waiting action closes it before dispatch', async () => {
    const sessionId = await approvedSession(606);
    const call = backend.call(
      sessionId,
      'http_request',
      { route: 'docs', method: 'POST', path: '/documents/9', body: '{"marker":"c"}' },
      never,
    );
    const [card] = await waitForCardCount(f.queue, 1);
    const cancelled = reply(await backend.call(sessionId, 'cancel_action', { action_id: card?.action_id }, never));
    expect(cancelled).toMatchObject({
      caller_disposition: 'canceled',
      error: { code: 'CALLER_CANCELLED', outcome: 'not_attempted' },
    });
    expect(reply(await call).error?.code).toBe('CALLER_CANCELLED');
    expect(f.server.arrivals).toHaveLength(0);
  });

  it('an invalid timeout_ms is refused with its field and nothing is journaled; other bad fields are journaled by the executor', async () => {
    const sessionId = await approvedSession(607);
    const before = f.h.temp.journal.stats().events;
    const bad = reply(
      await backend.call(
        sessionId,
        'http_request',
        { route: 'plain', method: 'POST', path: '/x', timeout_ms: 0 },
        never,
      ),
    );
    expect(bad).toMatchObject({ invocation_id: null, error: { code: 'INVALID_ARGUMENT', field: 'timeout_ms' } });
    expect(f.h.temp.journal.stats().events).toBe(before);
    const malformed = actionReply(
      await backend.call(sessionId, 'http_request', { route: 'plain', method: 'POST' }, never),
    );
    expect(malformed).toMatchObject({ error: { code: 'INVALID_ARGUMENT', field: 'path', outcome: 'not_attempted' } });
    expect(malformed.ticket).toBeGreaterThan(0);
  });

  it('list_routes names routes and modes, never credentials', async () => {
    const sessionId = await approvedSession(608);
    const answer = await backend.call(sessionId, 'list_routes', {}, never);
    const list = agentRouteListSchema.parse(answer.structured);
    expect(list.routes.map((r) => [r.name, r.approval])).toEqual([
      ['docs', 'per_call'],
      ['plain', 'none'],
      ['sess', 'session'],
    ]);
    expect(JSON.stringify(answer)).not.toContain('docs-token');
  });

  it('no answer carries the canary credential', async () => {
    const sessionId = await approvedSession(609);
    const answers = [
      await backend.call(
        sessionId,
        'http_request',
        { route: 'plain', method: 'POST', path: '/documents/1', body: '{"marker":"s"}' },
        never,
      ),
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
    const call = backend.call(
      sessionId,
      'http_request',
      { route: 'docs', method: 'POST', path: '/documents/7', body: '{"marker":"g"}' },
      never,
    );
    await waitForCardCount(f.queue, 1);
    alive.delete(701);
    expect(await backend.sweep()).toBe(1);
    expect(f.h.temp.journal.getSession(sessionId)).toMatchObject({ status: 'ended', end_reason: 'process_exited' });
    const r = reply(await call);
    // Nobody revoked it: the process is gone (SESSION_ENDED, counted as withdrawn in metrics).
    expect(r.error).toMatchObject({ code: 'SESSION_ENDED', outcome: 'not_attempted' });
    expect(f.events(r.invocation_id as string).find((e) => e.kind === 'CANCELLED')?.payload).toMatchObject({
      reason: 'session ended',
    });
    expect(await backend.sweep()).toBe(0);
  });

  it('the sweeper ends it behind more than 1,000 newer live sessions too (the Sessions page holds the newest 1,000)', async () => {
    const oldest = await approvedSession(702);
    const newer = Array.from({ length: 1_001 }, (_, i) =>
      sessionStartedEvent(`ses_newer_${String(i).padStart(5, '0')}`, 20_000 + i),
    );
    for (const event of newer) alive.add((event.payload as { pid: number }).pid);
    await Promise.all(newer.map((event) => f.h.temp.journal.appendSession(event)));
    expect(f.h.temp.journal.listSessions({ status: ['pending', 'approved', 'revoked'] })).not.toContainEqual(
      expect.objectContaining({ session_id: oldest }),
    );
    alive.delete(702);
    expect(await backend.sweep()).toBe(1);
    expect(f.h.temp.journal.getSession(oldest)).toMatchObject({ status: 'ended', end_reason: 'process_exited' });
    expect(f.h.temp.journal.unendedSessions()).toHaveLength(1_001);
  });
});

describe('when fetch_result asks while a retry of a throttled attempt is in flight', () => {
  it("answers RESULT_NOT_READY, outcome unknown — never the earlier attempt's 429 as the action's result", async () => {
    let requests = 0;
    await openWithRetryingRemote(() => (++requests === 1 ? throttled() : { kind: 'apply_then_hang' }), {
      attempts_max: 2,
      automatic: false,
      backoff_ms: 0,
    });
    const sessionId = await approvedSession(812);
    const first = actionReply(await backend.call(sessionId, 'http_request', put, never));
    expect(first.error).toMatchObject({ outcome: 'rejected', retry: 'backoff' });
    const id = first.invocation_id;
    expect(f.h.temp.journal.getAction(id)?.result_id).not.toBeNull();
    const retried = actionReply(
      await backend.call(sessionId, 'http_request', { ...put, retry_of: id, timeout_ms: 300 }, never),
    );
    expect(retried.error).toMatchObject({ code: 'CALLER_DEADLINE_EXCEEDED', outcome: 'unknown' });
    expect(requests).toBe(2);
    const fetched = await backend.call(sessionId, 'fetch_result', { action_id: id }, never);
    expect(fetched.isError).toBe(true);
    expect(fetched.handoff).toBeUndefined();
    expect(actionReply(fetched)).toMatchObject({
      invocation_id: id,
      error: { code: 'RESULT_NOT_READY', outcome: 'unknown', retry: 'fetch_result' },
    });
    expect(reply(fetched)).not.toHaveProperty('response');
    expect(fetched.text).not.toContain('429');
  });
});

describe('when an agent asks for a retry_of while the broker stops (the queue holds releases)', () => {
  it('answers a SHUTTING_DOWN refusal (backoff, nothing recorded), never the earlier record, and sends nothing', async () => {
    const remote = await openWithRetryingRemote(throttled, {
      attempts_max: 2,
      automatic: false,
      backoff_ms: 0,
    });
    const sessionId = await approvedSession(813);
    const first = actionReply(await backend.call(sessionId, 'http_request', put, never));
    expect(first.error).toMatchObject({ outcome: 'rejected', retry: 'backoff' });
    const id = first.invocation_id;
    const recorded = f.events(id).length;
    f.queue.holdReleases();
    const answer = await backend.call(sessionId, 'http_request', { ...put, retry_of: id }, never);
    expect(answer.isError).toBe(true);
    expect(reply(answer)).toMatchObject({
      invocation_id: null,
      error: { code: 'SHUTTING_DOWN', outcome: 'not_attempted', retry: 'backoff', field: 'retry_of' },
    });
    expect(answer.text).toContain('the broker is stopping');
    expect(remote.requests).toHaveLength(1);
    expect(f.events(id)).toHaveLength(recorded);
  });
});

describe('when cancel_action names an action whose automatic retry waits out its backoff', () => {
  it('is not closed: the cancel is recorded, the call answers at once (not at the backoff’s end) and no further attempt reaches the remote', async () => {
    // A backoff far longer than the test may wait: the call must answer because of the cancel, not the timer.
    const remote = await openWithRetryingRemote(throttled, { attempts_max: 3, automatic: true, backoff_ms: 60000 });
    const sessionId = await approvedSession(814);
    const { id, call } = await putWaitingOutBackoff(sessionId);
    expect(f.queue.isExecuting(id)).toBe(true);

    const answer = await backend.call(sessionId, 'cancel_action', { action_id: id }, never);
    expect(reply(answer).error?.code).not.toBe('ACTION_CLOSED');
    expect(actionReply(answer)).toMatchObject({ invocation_id: id, caller_disposition: 'canceled' });
    expect(f.events(id).map((e) => e.kind)).toContain('CALLER_CANCELLED');

    // The recorded cancel ends the backoff wait: the call answers the recorded 429 now, not in a minute, and no
    // further round starts.
    const stillWaiting = new Promise<'still waiting'>((resolve) => setTimeout(() => resolve('still waiting'), 3000));
    const answered = await Promise.race([call, stillWaiting]);
    if (answered === 'still waiting') throw new Error('the call still waits out its backoff after the cancel');
    expect(actionReply(answered).error).toMatchObject({ outcome: 'rejected', retry: 'backoff' });
    expect(remote.requests).toHaveLength(1);
    expect(f.events(id).map((e) => e.kind)).not.toContain('RETRY_LEASED');
    expect(f.queue.isExecuting(id)).toBe(false);
  });
});

describe('when the agent disconnects while its action’s automatic retry waits out its backoff', () => {
  it('no further round is sent: CALLER_DISCONNECTED is recorded, the executor ends at once and the record answers the last attempt', async () => {
    const remote = await openWithRetryingRemote(throttled, { attempts_max: 3, automatic: true, backoff_ms: 60000 });
    const sessionId = await approvedSession(816);
    const connection = new AbortController();
    const { id, call } = await putWaitingOutBackoff(sessionId, connection.signal);
    expect(f.queue.isExecuting(id)).toBe(true);

    // The agent socket aborts every call of a closed connection with reason 'disconnected'.
    connection.abort('disconnected');
    expect(actionReply(await call)).toMatchObject({ invocation_id: id, caller_disposition: 'disconnected' });
    // The executor leaves its backoff at once (not in a minute), sends nothing more and frees its lane.
    await vi.waitFor(() => expect(f.queue.isExecuting(id)).toBe(false), { timeout: 3000 });
    expect(remote.requests).toHaveLength(1);
    const kinds = f.events(id).map((e) => e.kind);
    expect(kinds).toContain('CALLER_DISCONNECTED');
    expect(kinds).not.toContain('RETRY_LEASED');
    // The record answers for the agent that comes back: the last attempt's 429, its disposition kept.
    const status = actionReply(await backend.call(sessionId, 'action_status', { action_id: id }, never));
    expect(status).toMatchObject({
      caller_disposition: 'disconnected',
      error: { outcome: 'rejected', retry: 'backoff' },
    });
  });
});

describe('when the broker stops while an automatic retry waits out a long backoff (Retry-After)', () => {
  it('the hold ends the wait: the drain finishes at once, drained, with no cut line, and nothing more is sent', async () => {
    const remote = await openWithRetryingRemote(() => ({ ...throttled(), headers: { 'retry-after': '50' } }), {
      attempts_max: 3,
      automatic: true,
      backoff_ms: 30000,
    });
    const { id, call } = await putWaitingOutBackoff(await approvedSession(815));
    expect(f.queue.releasedCount()).toBe(1);

    const startedMs = Date.now();
    const report = await shutDownRuntime(
      {
        stopIntake: () => Promise.resolve(f.queue.holdReleases()),
        inFlight: () => f.queue.releasedCount(),
        close: () => Promise.resolve(),
      },
      { stopHostIntake: () => undefined, bounds: { drainBoundMs: 10_000, drainPollMs: 20 } },
    );
    expect(report).toMatchObject({ drained: true, leftInFlight: 0 });
    expect(Date.now() - startedMs).toBeLessThan(3000);
    expect(describeCutShutdown(report)).toBeUndefined();
    expect(actionReply(await call).error).toMatchObject({ outcome: 'rejected', retry: 'backoff' });
    expect(remote.requests).toHaveLength(1);
    expect(f.events(id).map((e) => e.kind)).not.toContain('RETRY_LEASED');
  });
});

describe('when the caller cancels after dispatch (DESIGN §3: the cause is the caller, the outcome unknown)', () => {
  it('cancel_action answers CALLER_CANCELLED, outcome unknown, retry fetch_result — the operation goes on and is not stopped', async () => {
    const remote = await openWithRemote({ kind: 'apply_then_hang' });
    const sessionId = await approvedSession(811);
    const first = actionReply(
      await backend.call(
        sessionId,
        'http_request',
        { route: 'docs', method: 'POST', path: '/x', body: '{"a":1}', timeout_ms: 300 },
        never,
      ),
    );
    expect(first.error).toMatchObject({ code: 'CALLER_DEADLINE_EXCEEDED', outcome: 'unknown' });
    const answer = await backend.call(sessionId, 'cancel_action', { action_id: first.invocation_id }, never);
    expect(answer.isError).toBe(true);
    expect(actionReply(answer)).toMatchObject({
      invocation_id: first.invocation_id,
      caller_disposition: 'canceled',
      effect: 'unknown_effect',
      error: { code: 'CALLER_CANCELLED', phase: 'remote_execution', outcome: 'unknown', retry: 'fetch_result' },
    });
    expect(answer.text).toContain('CALLER_CANCELLED');
    expect(answer.text).toContain('the remote operation was not stopped');
    expect(answer.text).toContain('fetch_result');
    // Only a caller event was recorded: nothing classified the action, and the remote got the one request.
    const state = f.h.temp.journal.getAction(first.invocation_id);
    expect(state).toMatchObject({ recorded: false, result_id: null });
    const kinds = f.events(first.invocation_id).map((e) => e.kind);
    expect(kinds).toContain('CALLER_CANCELLED');
    expect(kinds).not.toContain('OUTCOME_RECORDED');
    expect(kinds).not.toContain('RESULT_COMMITTED');
    expect(remote.requests).toHaveLength(1);
  });

  it('a call whose own signal aborts after dispatch is answered the same way', async () => {
    await openWithRemote({ kind: 'apply_then_hang' });
    const sessionId = await approvedSession(812);
    const stop = new AbortController();
    const call = backend.call(
      sessionId,
      'http_request',
      { route: 'docs', method: 'POST', path: '/y', body: '{"b":2}' },
      stop.signal,
    );
    await vi.waitFor(
      () => {
        const dispatched = f.h.temp.journal
          .listActions({ fromTicket: 1, limit: 10 })
          .find((s) => s.dispatch_seq !== null);
        if (dispatched === undefined) throw new Error('not dispatched yet');
      },
      { timeout: 10_000 },
    );
    stop.abort();
    const answer = await call;
    expect(answer.isError).toBe(true);
    expect(actionReply(answer)).toMatchObject({
      caller_disposition: 'canceled',
      error: { code: 'CALLER_CANCELLED', outcome: 'unknown', retry: 'fetch_result' },
    });
  });
});

describe('when the caller cancels while the complete answer is being scrubbed (the settlement not yet appended)', () => {
  it('the cancel is recorded before the settlement, the result still commits whole, and fetch_result gives it', async () => {
    // ~600 KB of base64 over binary with a zlib look-alike every 64 bytes: the scrub runs for hundreds of ms in slices
    // (scrubAsync) between the response's last byte and the settlement's append, the window this test cancels in.
    const binary = Buffer.alloc(450 * 1024);
    for (let i = 0; i < binary.length; i++) binary[i] = (i * 2654435761) >>> 24;
    for (let i = 0; i + 1 < binary.length; i += 64) [binary[i], binary[i + 1]] = [0x78, 0x9c];
    const body = binary.toString('base64');
    const remote = await openWithRemote({ kind: 'respond', status: 200, body, applyEffect: true });
    const sessionId = await approvedSession(813);
    const stop = new AbortController();
    const call = backend.call(
      sessionId,
      'http_request',
      { route: 'docs', method: 'POST', path: '/scrubbed', body: '{"c":3}' },
      stop.signal,
    );
    await remote.waitFor((e) => e.event === 'responded' && e.complete);
    const [action] = f.h.temp.journal.listActions({ fromTicket: 1, limit: 10 });
    const id = action?.action_id ?? expect.unreachable('the action is listed');
    // The remote's answer is complete and the action not settled yet: the scrub is what it waits for.
    expect(f.h.temp.journal.getAction(id)?.result_id).toBeNull();
    const abortedAt = performance.now();
    stop.abort();
    const answer = await call;
    expect(actionReply(answer)).toMatchObject({
      invocation_id: id,
      caller_disposition: 'canceled',
      error: { code: 'CALLER_CANCELLED', outcome: 'unknown', retry: 'fetch_result' },
    });

    const polled = actionReply(
      await backend.call(sessionId, 'action_status', { action_id: id, wait_ms: 20_000 }, never),
    );
    const settledAfterMs = performance.now() - abortedAt;
    expect(polled).toMatchObject({ effect: 'succeeded', caller_disposition: 'canceled' });
    // The settlement waited for the scrub after the cancel: at least a third of what the body's scrub takes at once.
    const syncStarted = performance.now();
    secretScrubber(secretParts({ kind: 'bearer', token: canary })).scrub(Buffer.from(body));
    const syncMs = performance.now() - syncStarted;
    expect(syncMs).toBeGreaterThan(100);
    expect(settledAfterMs).toBeGreaterThan(syncMs / 3);
    // The cancel landed in the window: recorded before the held observations and the settlement, which commit together.
    const kinds = f.events(id).map((e) => e.kind);
    expect(kinds.indexOf('CALLER_CANCELLED')).toBeGreaterThan(kinds.indexOf('DISPATCH_STARTED'));
    expect(kinds.indexOf('CALLER_CANCELLED')).toBeLessThan(kinds.indexOf('REMOTE_RESPONSE_COMPLETE'));
    expect(kinds.indexOf('REMOTE_RESPONSE_COMPLETE')).toBeLessThan(kinds.indexOf('RESULT_COMMITTED'));
    expect(kinds).not.toContain('OUTCOME_RECORDED');
    const fetched = reply(await backend.call(sessionId, 'fetch_result', { action_id: id }, never));
    expect(fetched).toMatchObject({ response: { status: 200 }, caller_disposition: 'canceled' });
    expect(JSON.stringify(fetched)).not.toContain(canary);
    expect(remote.requests).toHaveLength(1);
  });
});

describe('when the executor throws after the action was admitted', () => {
  it.each([
    ['a job id that is an empty string', { 'content-type': 'application/json' }, '{"id":""}'],
    ['an empty Location header', { location: '' }, 'queued'],
  ])(
    'a 202 with %s is answered committed (never "not_attempted, fix and resend"), and no empty job is tracked',
    async (_what, headers, body) => {
      const remote = await openWithRemote({ kind: 'respond', status: 202, headers, body, applyEffect: true });
      const sessionId = await approvedSession(801);
      const answer = await backend.call(
        sessionId,
        'http_request',
        { route: 'docs', method: 'POST', path: '/jobs', body: '{"run":1}' },
        never,
      );
      const r = actionReply(answer);
      expect(r).toMatchObject({
        effect: 'succeeded',
        outcome_basis: 'submission_accepted_track_job_separately',
        response: { status: 202 },
      });
      expect(r.error).toBeUndefined();
      expect(f.events(r.invocation_id).map((e) => e.kind)).not.toContain('OPERATION_SUBMITTED');
      expect(remote.requests).toHaveLength(1);
    },
  );

  it('after DISPATCH_STARTED: OUTCOME_RECORDED unknown (INTERNAL, reconcile), the agent hears that envelope, the lane is blocked and a person can abandon it', async () => {
    const remote = await openWithRemote(
      { kind: 'respond', status: 201, body: 'made', applyEffect: true },
      failingCommit,
    );
    const sessionId = await approvedSession(802);
    const answer = await backend.call(
      sessionId,
      'http_request',
      { route: 'docs', method: 'POST', path: '/documents/5', body: '{"a":1}' },
      never,
    );
    const r = actionReply(answer);
    expect(answer.isError).toBe(true);
    expect(r.error).toMatchObject({
      code: 'INTERNAL',
      phase: 'remote_execution',
      outcome: 'unknown',
      retry: 'reconcile',
    });
    expect(r).toMatchObject({
      effect: 'unknown_effect',
      outcome_basis: 'broker_error_after_dispatch',
      evidence: { dispatch_started: true },
    });
    expect(
      f
        .events(r.invocation_id)
        .map((e) => e.kind)
        .at(-1),
    ).toBe('OUTCOME_RECORDED');
    expect(remote.requests).toHaveLength(1);
    // Recorded, so the lane holds a blocked head (not a head "dispatching" forever) that a person can abandon.
    const [card] = await waitForCards(
      f.queue,
      (cards) => cards.some((c) => c.state === 'blocked_head'),
      'a blocked head',
    );
    expect(card).toMatchObject({ action_id: r.invocation_id, state: 'blocked_head' });
    await f.queue.abandon(card?.ticket ?? 0, person, 'checked the remote by hand');
    expect(f.queue.cards()).toEqual([]);
  });
});

describe('when the broker fails before dispatch, after admission', () => {
  it('the action is recorded not_attempted (INTERNAL, never), the agent hears its envelope, and the lane is not wedged', async () => {
    let failing = true;
    const flaky = (real: CredentialVault): CredentialVault => ({
      state: () => real.state(),
      list: () => real.list(),
      describe: (name) => real.describe(name),
      withSecret: (name, use) =>
        failing
          ? Promise.reject(new CodedError('INTERNAL', 'the vault failed unexpectedly'))
          : real.withSecret(name, use),
      wrap: (purpose, plaintext) => real.wrap(purpose, plaintext),
      unwrap: (purpose, sealed) => real.unwrap(purpose, sealed),
      onLock: (listener) => real.onLock(listener),
      onUnlock: (listener) => real.onUnlock(listener),
    });
    await open(undefined, { vault: flaky });
    const sessionId = await approvedSession(851);
    const first = actionReply(
      await backend.call(
        sessionId,
        'http_request',
        { route: 'plain', method: 'POST', path: '/documents/6', body: '{"marker":"f"}' },
        never,
      ),
    );
    expect(first.error).toMatchObject({
      code: 'INTERNAL',
      outcome: 'not_attempted',
      retry: 'never',
      phase: 'credential_injection',
    });
    expect(first.outcome_basis).toBe('broker_error_before_dispatch');
    failing = false;
    // Same lane (document-6): the failed head is resolved, so the next write is released.
    const second = actionReply(
      await backend.call(
        sessionId,
        'http_request',
        { route: 'plain', method: 'POST', path: '/documents/6', body: '{"marker":"g"}', timeout_ms: 5_000 },
        never,
      ),
    );
    expect(second).toMatchObject({ caller_disposition: 'completed', effect: 'succeeded' });
    expect(f.server.markers()).toEqual(['g']);
  });
});

describe('when one session keeps many actions open', () => {
  /** POST /documents/n on `docs` from the session, its caller waiting 1 ms: the action keeps its place. */
  const postWaiting1ms = (sessionId: string, marker: string) => (n: number) =>
    backend.call(
      sessionId,
      'http_request',
      { route: 'docs', method: 'POST', path: `/documents/${n}`, body: `{"marker":"${marker}${n}"}`, timeout_ms: 1 },
      never,
    );

  it('beyond the bound a call is RATE_LIMITED before admission (nothing journaled); a closed or dispatched one frees a place', async () => {
    await open(undefined, { openActionsMax: 3 });
    const sessionId = await approvedSession(901);
    // Each call's wait ends at once; its action keeps waiting for approval (open, undispatched).
    const call = postWaiting1ms(sessionId, 'm');
    const waiting = [actionReply(await call(1)), actionReply(await call(2)), actionReply(await call(3))];
    expect(waiting.map((r) => r.caller_disposition)).toEqual(['timed_out', 'timed_out', 'timed_out']);
    const before = f.h.temp.journal.stats().events;
    const refused = reply(await call(4));
    expect(refused).toMatchObject({
      invocation_id: null,
      error: { code: 'RATE_LIMITED', retry: 'backoff', outcome: 'not_attempted' },
    });
    expect(f.h.temp.journal.stats().events).toBe(before);
    // Other sessions are not affected.
    const other = await approvedSession(902);
    expect(
      actionReply(
        await backend.call(
          other,
          'http_request',
          { route: 'docs', method: 'POST', path: '/documents/9', body: '{"marker":"o"}', timeout_ms: 1 },
          never,
        ),
      ).caller_disposition,
    ).toBe('timed_out');
    // Cancelling one closes it: a place is free again.
    await backend.call(sessionId, 'cancel_action', { action_id: waiting[0]?.invocation_id }, never);
    expect(actionReply(await call(5)).caller_disposition).toBe('timed_out');
    expect(reply(await call(6))).toMatchObject({ error: { code: 'RATE_LIMITED' } });
    // Approving one lets it dispatch and settle: another place.
    const card = (
      await waitForCards(
        f.queue,
        (cards) => cards.some((c) => c.action_id === waiting[1]?.invocation_id),
        'the second card',
      )
    ).find((c) => c.action_id === waiting[1]?.invocation_id);
    await f.queue.approve(card?.ticket ?? 0, person);
    await f.server.waitForArrivals(1);
    expect(actionReply(await call(7)).caller_disposition).toBe('timed_out');
    expect(openActionsPerSessionMax).toBe(256);
  });

  it('dispatched actions count until their outcome is recorded: an agent looping 1 ms waits against a remote that holds every request cannot open a connection per call', async () => {
    // The attack (THREAT-MODEL 4): each call on a lane of its own dispatches at once, its caller stops waiting after
    // 1 ms and the remote never answers, so the action is no longer open (dispatched) and its caller holds no slot.
    const remote = await AdversarialHttpServer.start({ script: () => ({ kind: 'apply_then_hang' }) });
    servers.push(remote);
    const lanes = [
      '    timeout_ms: 3000',
      '    lanes:',
      "      - { methods: ['*'], path: '/documents/{id}', lane: 'doc-{id}' }",
    ].join('\n');
    await open(undefined, { config: localRouteConfig(remote.port, lanes), openActionsMax: 3, runningActionsMax: 5 });
    const sessionId = await approvedSession(903);
    const call = postWaiting1ms(sessionId, 'r');
    const held: string[] = [];
    for (let n = 1; n <= 5; n += 1) {
      const answer = actionReply(await call(n));
      expect(answer.caller_disposition).toBe('timed_out');
      held.push(answer.invocation_id);
    }
    await vi.waitFor(() => expect(remote.requests).toHaveLength(5), { timeout: 5000 });
    expect(held.every((id) => f.h.temp.journal.getAction(id)?.dispatch_seq !== null)).toBe(true);
    // Every call beyond the bound is refused before admission, however many the agent sends.
    const before = f.h.temp.journal.stats().events;
    for (let n = 6; n <= 60; n += 1) {
      const refused = reply(await call(n));
      expect(refused).toMatchObject({
        invocation_id: null,
        error: { code: 'RATE_LIMITED', retry: 'backoff', outcome: 'not_attempted' },
      });
      expect(refused.error?.message).toContain('at most 5 actions of one session may run at once');
    }
    expect(f.h.temp.journal.stats().events).toBe(before);
    expect(remote.requests).toHaveLength(5);
    // The route's deadline records each held action unknown; then the session may run actions again.
    await vi.waitFor(
      () => expect(held.map((id) => f.h.temp.journal.getAction(id)?.outcome)).toEqual(held.map(() => 'unknown')),
      { timeout: 10_000 },
    );
    await vi.waitFor(async () => expect(actionReply(await call(61)).caller_disposition).toBe('timed_out'), {
      timeout: 5000,
    });
    await vi.waitFor(() => expect(remote.requests).toHaveLength(6), { timeout: 5000 });
    expect(runningActionsPerSessionMax).toBe(openActionsPerSessionMax + 64);
  }, 30_000);
});

describe('when cancel_action names an action that is already closed', () => {
  // The recorded unknown the INTERNAL-after-dispatch case above leaves (failingCommit: the result store fails).
  it('abandoned by a person: nothing is recorded, the answer says the cancel had no effect and why, and the record keeps its history', async () => {
    await openWithRemote({ kind: 'respond', status: 201, body: 'made', applyEffect: true }, failingCommit);
    const sessionId = await approvedSession(901);
    const id = actionReply(
      await backend.call(
        sessionId,
        'http_request',
        { route: 'docs', method: 'POST', path: '/documents/3', body: '{"a":1}' },
        never,
      ),
    ).invocation_id;
    const [card] = await waitForCards(f.queue, (cards) => cards.some((c) => c.state === 'blocked_head'), 'blocked');
    await f.queue.abandon(card?.ticket ?? 0, person, 'checked the remote by hand');
    const history = f.events(id).map((e) => e.kind);
    expect(history.at(-1)).toBe('ABANDONED');

    const answer = await backend.call(sessionId, 'cancel_action', { action_id: id }, never);
    expect(answer.isError).toBe(true);
    const refused = reply(answer);
    expect(refused).toMatchObject({
      invocation_id: null,
      error: { code: 'ACTION_CLOSED', retry: 'never', field: 'action_id' },
    });
    expect(refused.error).not.toHaveProperty('outcome');
    expect(refused.error?.message).toContain(`cancel_action had no effect: action ${id} is already closed`);
    expect(refused.error?.message).toContain('a person abandoned it (outcome unknown, INTERNAL)');
    expect(answer.text).toContain('ACTION_CLOSED');
    // Nothing was appended, and what the agent reads afterwards is the record as it was: no caller disposition.
    expect(f.events(id).map((e) => e.kind)).toEqual(history);
    const status = await backend.call(sessionId, 'action_status', { action_id: id }, never);
    expect(actionReply(status)).toMatchObject({
      caller_disposition: null,
      effect: 'unknown_effect',
      error: { code: 'INTERNAL', outcome: 'unknown' },
    });
    // The journal itself refuses a caller event after ABANDONED, whoever writes it.
    await expect(
      f.h.temp.journal.append({ kind: 'CALLER_CANCELLED', action_id: id, payload: { stage: 'remote_execution' } }),
    ).rejects.toMatchObject({ code: 'IMPOSSIBLE_TRANSITION', refusal: { kind: 'abandoned' } });
    expect(f.events(id).map((e) => e.kind)).toEqual(history);
  });

  it.each([
    ['committed', 'it is settled: committed (effect succeeded)'],
    ['rejected by a person', 'its ticket was rejected before dispatch (not_attempted, APPROVAL_DENIED)'],
    ['refused at validation', 'it closed before dispatch (not_attempted, INVALID_ARGUMENT)'],
  ] as const)('%s: the same answer, nothing recorded, the disposition kept', async (closedHow, why) => {
    await open();
    const sessionId = await approvedSession(902);
    let id: string;
    if (closedHow === 'committed') {
      const post = { route: 'plain', method: 'POST', path: '/documents/4', body: '{"m":1}' };
      id = actionReply(await backend.call(sessionId, 'http_request', post, never)).invocation_id;
    } else if (closedHow === 'rejected by a person') {
      const post = { route: 'docs', method: 'POST', path: '/documents/5', body: '{"m":2}' };
      const call = backend.call(sessionId, 'http_request', post, never);
      const [card] = await waitForCardCount(f.queue, 1);
      await f.queue.reject(card?.ticket ?? 0, person, 'not today');
      id = actionReply(await call).invocation_id;
    } else {
      id = actionReply(
        await backend.call(sessionId, 'http_request', { route: 'plain', method: 'POST' }, never),
      ).invocation_id;
    }
    const history = f.events(id).map((e) => e.kind);
    const before = actionReply(await backend.call(sessionId, 'action_status', { action_id: id }, never));

    const answer = await backend.call(sessionId, 'cancel_action', { action_id: id }, never);
    expect(reply(answer)).toMatchObject({ invocation_id: null, error: { code: 'ACTION_CLOSED', field: 'action_id' } });
    expect(reply(answer).error?.message).toContain(
      `cancel_action had no effect: action ${id} is already closed: ${why}`,
    );
    expect(reply(answer).error?.message).toContain('Nothing was recorded');
    expect(f.events(id).map((e) => e.kind)).toEqual(history);
    const after = actionReply(await backend.call(sessionId, 'action_status', { action_id: id }, never));
    expect(after).toEqual(before);
    // The executor answered the call itself, but no handoff was reported here, so none is recorded: never "completed".
    expect(after.caller_disposition).toBeNull();
  });
});
