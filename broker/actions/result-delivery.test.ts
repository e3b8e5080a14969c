import { afterEach, describe, expect, it, vi } from 'vitest';
import { startAgentSocket, type AgentSocket } from '../agent/index.js';
import {
  agentToolReplySchema,
  type ActionState,
  type AgentToolReply,
  type JournalEvent,
  type NewEvent,
} from '../contract/index.js';
import type { Journal, ResultInput, ResultStore, UnitRows } from '../journal/index.js';
import { type AgentBackend, type ToolAnswer } from '../ports/index.js';
import { connectPostern, PosternActionError, type PosternClient } from '../sdk/index.js';
import { connectRawLines, initializeFrame, type RawLineClient } from '../testing/malformed-mcp.js';
import { fixtureAgentBackend, openQueueFixture, type QueueFixture } from '../testing/queue-fixture.js';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import type { RunningAgentBackend } from './agent-backend.js';

/**
 * Result delivery in article 000's write order, against the real stack: the agent socket (kernel
 * peer identity, MCP framing), the real backend and executor, the journal, the result store and the
 * arrival-log endpoint — whose log is the ground truth of how many times the remote was called.
 * Route `plain` needs no approval; the session is approved by policy (observe).
 */
let f: QueueFixture;
let backend: RunningAgentBackend;
let socket: AgentSocket;
let dir: TempDir;
const closers: (() => unknown)[] = [];

afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

interface Seams {
  /** Called once the result is sealed, before the commit that writes it with the RESULT_COMMITTED naming it. */
  readonly afterResultSealed?: () => void;
  /** Called once RESULT_COMMITTED is durable, before the executor answers. */
  readonly afterResultCommitted?: () => void;
  /** Wraps the backend the socket talks to. */
  readonly socketBackend?: (real: RunningAgentBackend) => AgentBackend;
  readonly retentionSeconds?: number;
  /** The journal's wait for a commit to ride in (appendLater); the fixture's default otherwise. */
  readonly laterFlushMs?: number;
}

async function start(seams: Seams = {}): Promise<void> {
  f = await openQueueFixture({
    agentsYaml: '  session_approval: observe',
    ...(seams.laterFlushMs === undefined ? {} : { laterFlushMs: seams.laterFlushMs }),
  });
  closers.push(() => f.dispose());
  const config =
    seams.retentionSeconds === undefined
      ? f.config
      : { ...f.config, results: { retention_seconds: seams.retentionSeconds } };
  backend = await fixtureAgentBackend(f, 'boot-test', {
    journal: withAfterAppend(f.h.temp.journal, 'RESULT_COMMITTED', seams.afterResultCommitted),
    results: withAfterSeal(f.h.results, seams.afterResultSealed),
    config,
    processAlive: (pid) => pid === process.pid,
  });
  closers.push(() => backend.close());
  dir = createTempDir('postern-delivery-');
  closers.push(() => dir.remove());
  socket = await startAgentSocket({
    dataDir: dir.path,
    backend: seams.socketBackend === undefined ? backend : seams.socketBackend(backend),
  });
  closers.push(() => socket.close());
}

function withAfterSeal(real: ResultStore, after: (() => void) | undefined): ResultStore {
  if (after === undefined) return real;
  return new Proxy(real, {
    get(target, prop) {
      if (prop === 'rowsOf') {
        return (input: ResultInput) => {
          const rows = target.rowsOf(input);
          after();
          return rows;
        };
      }
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

function withAfterAppend(real: Journal, kind: NewEvent['kind'], after: (() => void) | undefined): Journal {
  if (after === undefined) return real;
  return new Proxy(real, {
    get(target, prop) {
      if (prop === 'append') {
        return async (event: NewEvent, rows?: UnitRows) => {
          const appended = await target.append(event, rows);
          if (event.kind === kind) after();
          return appended;
        };
      }
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/** A raw agent connection that has completed initialize. */
async function rawAgent(): Promise<RawLineClient> {
  const client = await connectRawLines(socket.path);
  closers.push(() => client.destroy());
  client.send(initializeFrame(0, 'delivery-test'));
  expect(await client.nextMessage()).toMatchObject({ id: 0, result: { serverInfo: { name: 'postern' } } });
  client.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
  return client;
}

async function sdkAgent(): Promise<PosternClient> {
  const client = await connectPostern({ socketPath: socket.path, clientName: 'delivery-test' });
  closers.push(() => client.close());
  return client;
}

function httpCall(client: RawLineClient, marker: string, id = 1): void {
  const args = { route: 'plain', method: 'POST', path: '/documents/1', body: JSON.stringify({ marker }) };
  client.send(
    JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'http_request', arguments: args } }),
  );
}

/** The one action this broker has admitted, once its outcome is recorded. */
async function settledAction(): Promise<ActionState> {
  return vi.waitFor(() => {
    const [state] = f.h.temp.journal.listActions();
    if (state === undefined || !state.recorded || state.outcome === null) throw new Error('no settled action yet');
    return state;
  });
}

const kinds = (actionId: string): string[] => f.events(actionId).map((e) => e.kind);
const count = (actionId: string, kind: string): number => kinds(actionId).filter((k) => k === kind).length;

describe('when the agent’s connection drops after the response is recorded', () => {
  it.each([
    ['after the result is sealed, before the commit that writes it with RESULT_COMMITTED', 'sealed'],
    ['after RESULT_COMMITTED is durable, before the answer is built', 'committed'],
  ] as const)(
    '%s: fetch_result on a new connection gets the committed result; the remote was called once',
    async (_when, point) => {
      // The seam needs the connection before it exists: a holder filled once it does.
      const held: { agent?: RawLineClient } = {};
      const drop = (): void => held.agent?.destroy();
      await start(point === 'sealed' ? { afterResultSealed: drop } : { afterResultCommitted: drop });
      const first = await rawAgent();
      held.agent = first;
      httpCall(first, 'once');
      await first.closed;
      const state = await settledAction();
      expect(state).toMatchObject({ outcome: 'committed', effect: 'succeeded' });
      await vi.waitFor(() => expect(kinds(state.action_id)).toContain('CALLER_DISCONNECTED'));
      expect(count(state.action_id, 'RESULT_DELIVERED')).toBe(0);

      const second = await sdkAgent();
      const fetched = await second.fetchResult(state.action_id);
      expect(fetched).toMatchObject({
        invocation_id: state.action_id,
        effect: 'succeeded',
        response: { status: 200, body: '{"received":"once"}' },
      });
      expect(fetched.error).toBeUndefined();
      await vi.waitFor(() => expect(count(state.action_id, 'RESULT_DELIVERED')).toBe(1));
      // Fetching again is another read: still one arrival, one dispatch, one RESULT_DELIVERED.
      await second.fetchResult(state.action_id);
      expect(f.server.markers()).toEqual(['once']);
      expect(count(state.action_id, 'DISPATCH_STARTED')).toBe(1);
      expect(f.h.temp.journal.getAction(state.action_id)).toMatchObject({
        outcome: 'committed',
        stage: 'result_delivered',
      });
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(count(state.action_id, 'RESULT_DELIVERED')).toBe(1);
    },
  );
});

describe('when the answer carrying the result cannot be written', () => {
  it('the outcome stays committed, a delivery note says fetch_result, and the fetch answers the remote’s own classification', async () => {
    const held: { agent?: RawLineClient } = {};
    // The answer is ready; the connection goes before the socket writes it.
    await start({
      socketBackend: (real) => ({
        ...real,
        async call(sessionId, tool, args, signal): Promise<ToolAnswer> {
          const answer = await real.call(sessionId, tool, args, signal);
          if (tool !== 'http_request') return answer;
          held.agent?.destroy();
          await new Promise<void>((resolve) =>
            signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve(), { once: true }),
          );
          return answer;
        },
      }),
    });
    const first = await rawAgent();
    held.agent = first;
    httpCall(first, 'lost');
    await first.closed;
    const state = await settledAction();
    await vi.waitFor(() => expect(f.h.temp.journal.getAction(state.action_id)?.phase).toBe('result_delivery'));
    const noted = f.h.temp.journal.getAction(state.action_id);
    expect(noted).toMatchObject({
      outcome: 'committed',
      effect: 'succeeded',
      retry: 'fetch_result',
      code: 'RESULT_DELIVERY_FAILED',
      outcome_basis: 'result_recorded_delivery_failed',
      caller_disposition: 'disconnected',
      recorded: true,
    });
    expect(kinds(state.action_id).slice(-2)).toEqual(['CALLER_DISCONNECTED', 'OUTCOME_RECORDED']);
    expect(count(state.action_id, 'RESULT_DELIVERED')).toBe(0);

    const second = await sdkAgent();
    // action_status tells the caller what to do: fetch the recorded result (never resend).
    await expect(second.actionStatus(state.action_id)).rejects.toMatchObject({
      code: 'RESULT_DELIVERY_FAILED',
      retry: 'fetch_result',
    });
    const fetched = await second.fetchResult(state.action_id);
    const committed = f.events(state.action_id).find((e) => e.kind === 'RESULT_COMMITTED')?.classification;
    expect(fetched).toMatchObject({
      effect: 'succeeded',
      outcome_basis: committed?.outcome_basis,
      response: { status: 200, body: '{"received":"lost"}' },
    });
    expect(fetched.error).toBeUndefined();
    await vi.waitFor(() => expect(count(state.action_id, 'RESULT_DELIVERED')).toBe(1));
    // Delivered: the status is the result's again, and the note stays in the history.
    expect((await second.actionStatus(state.action_id)).error).toBeUndefined();
    expect(count(state.action_id, 'OUTCOME_RECORDED')).toBe(1);
    expect(f.server.markers()).toEqual(['lost']);
    expect(count(state.action_id, 'DISPATCH_STARTED')).toBe(1);
  });
});

describe('when the answer is written to the caller’s connection', () => {
  it('RESULT_DELIVERED follows the write, once; the answer names the committed result', async () => {
    await start();
    const agent = await rawAgent();
    httpCall(agent, 'handed');
    const answer = (await agent.nextMessage()) as {
      id: number;
      result: { structuredContent: AgentToolReply; isError: boolean };
    };
    const r = agentToolReplySchema.parse(answer.result.structuredContent);
    expect(answer.result.isError).toBe(false);
    const actionId = r.invocation_id ?? expect.unreachable('an action answer');
    await vi.waitFor(() => expect(count(actionId, 'RESULT_DELIVERED')).toBe(1));
    expect(f.h.temp.journal.getAction(actionId)).toMatchObject({
      stage: 'result_delivered',
      caller_disposition: 'completed',
      code: null,
    });
    expect(kinds(actionId).indexOf('RESULT_COMMITTED')).toBeLessThan(kinds(actionId).indexOf('RESULT_DELIVERED'));
  });

  it('RESULT_DELIVERED starts no commit of its own: it rides in the next one', async () => {
    await start({ laterFlushMs: 60_000 });
    const agent = await rawAgent();
    httpCall(agent, 'rides');
    const answer = (await agent.nextMessage()) as { result: { structuredContent: AgentToolReply } };
    const actionId = agentToolReplySchema.parse(answer.result.structuredContent).invocation_id;
    const journal = f.h.temp.journal;
    // Held, not committed: an append of its own would have been committed on the next turn.
    await vi.waitFor(() => expect(journal.stats().pending_events).toBe(1));
    const commits = journal.stats().commits;
    for (let turn = 0; turn < 5; turn += 1) await new Promise((resolve) => setImmediate(resolve));
    expect(journal.stats()).toMatchObject({ commits, pending_events: 1 });
    // The next commit (here durable()'s) carries it, and the answer's write-ahead rule is unchanged.
    await journal.durable();
    expect(journal.stats()).toMatchObject({ commits: commits + 1, pending_events: 0 });
    expect(count(actionId ?? expect.unreachable('an action answer'), 'RESULT_DELIVERED')).toBe(1);
  });

  it('an answer without a result (a refusal, a status) records no delivery', async () => {
    await start();
    const agent = await sdkAgent();
    await expect(agent.fetchResult('act_unknown')).rejects.toBeInstanceOf(PosternActionError);
    expect(f.h.temp.journal.listActions()).toEqual([]);
  });
});

describe('when a stored result passes its retention', () => {
  const retentionSeconds = 3600;

  it('fetch_result answers RESULT_EXPIRED (retry never), journals nothing and never calls the remote again', async () => {
    await start({ retentionSeconds });
    const agent = await sdkAgent();
    const first = await agent.httpRequest({
      route: 'plain',
      method: 'POST',
      path: '/documents/2',
      body: '{"marker":"kept"}',
    });
    const actionId = first.invocation_id;
    await vi.waitFor(() => expect(count(actionId, 'RESULT_DELIVERED')).toBe(1));

    f.h.temp.clock.advance(retentionSeconds * 1000 - 1);
    expect((await agent.fetchResult(actionId)).response?.body).toBe('{"received":"kept"}');

    f.h.temp.clock.advance(1);
    const before: JournalEvent[] = f.events(actionId);
    const expired = await agent.fetchResult(actionId).then(
      () => expect.unreachable('an expired result is an error'),
      (error: unknown) => error,
    );
    expect(expired).toBeInstanceOf(PosternActionError);
    const envelope = (expired as PosternActionError).envelope;
    expect(envelope).toMatchObject({
      invocation_id: actionId,
      effect: 'succeeded',
      error: { code: 'RESULT_EXPIRED', phase: 'result_delivery', outcome: 'committed', retry: 'never' },
    });
    expect(envelope).not.toHaveProperty('response');
    expect(f.events(actionId)).toEqual(before);
    expect(f.server.markers()).toEqual(['kept']);
    // The record itself is untouched: action_status still says what happened.
    expect(await agent.actionStatus(actionId)).toMatchObject({
      effect: 'succeeded',
      evidence: { result_id: expect.any(String) },
    });
  });

  it('a result purged under a shorter retention than the one configured now is still RESULT_EXPIRED for its action, never bytes and never a bare refusal', async () => {
    await start({ retentionSeconds });
    const agent = await sdkAgent();
    const first = await agent.httpRequest({
      route: 'plain',
      method: 'POST',
      path: '/documents/3',
      body: '{"marker":"purged"}',
    });
    const actionId = first.invocation_id;
    await vi.waitFor(() => expect(count(actionId, 'RESULT_DELIVERED')).toBe(1));
    f.h.temp.clock.advance(10);
    // Purged by a sweep that ran with a 1 ms retention; the configured one (an hour) has not passed.
    expect(await f.h.results.purgeExpired(f.h.temp.clock.nowMs(), 1, 10)).toBe(1);
    const expired = await agent.fetchResult(actionId).then(
      () => expect.unreachable('a purged result is an error'),
      (error: unknown) => error,
    );
    expect((expired as PosternActionError).envelope).toMatchObject({
      invocation_id: actionId,
      error: { code: 'RESULT_EXPIRED', phase: 'result_delivery', outcome: 'committed' },
    });
    expect((expired as PosternActionError).envelope).not.toHaveProperty('response');
    expect(f.server.markers()).toEqual(['purged']);
  });
});
