import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { JournalEvent } from '../broker/contract/index.js';
import { closedNeverSent, readsCommitted, rewriteActionRow } from '../broker/testing/action-rows.js';
import { IdempotencyTarget, type IdempotencyBehaviour } from '../broker/testing/idempotency-target.js';
import { DrillAgent, type ToolReply } from './support/drill-agent.js';
import { laneCards, op, waitFor } from './support/drill.js';
import { HoldingProxy } from './support/holding-proxy.js';
import { PosternProcess } from './support/postern-process.js';
import { RecoveryRig, waitForCount, within } from './support/recovery-rig.js';
import { SdkAgent } from './support/sdk-agent.js';

/**
 * Issue 7, the release test for recovery across real restarts: a real `postern daemon`, real agent
 * processes (MCP through `postern mcp`, and the SDK straight on the socket), the three scripted
 * idempotency targets (broker/testing/idempotency-target.ts) each losing a response after the
 * effect, and the daemon SIGKILLed while the target holds a request open — the automatic same-key
 * retry, or a person's reconciliation lookup — then started again on the same data directory and
 * unlocked again. Each case asserts the real effects at the target and every recorded outcome
 * (the operator API's actions.show while it runs, the journal itself after a clean stop).
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'prestart-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const post = {
  route: 'docs',
  method: 'POST',
  path: '/releases',
  body: '{"release":"r-1"}',
  idempotency_key: 'key-r-1',
  timeout_ms: 60_000,
};
const target = 'route:docs POST /releases';

const ofKind = <K extends JournalEvent['kind']>(
  events: JournalEvent[],
  kind: K,
): Array<Extract<JournalEvent, { kind: K }>> =>
  events.filter((e): e is Extract<JournalEvent, { kind: K }> => e.kind === kind);

/** Everything a case started, stopped in afterEach whatever happened. */
const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step().catch(() => undefined);
}, 60_000);

/**
 * A same-user process's edit of an action's row in the journal file: its session becomes the newest session's (the
 * process that connected last), and its outcome reads as not recorded yet (so a cancel would be recorded). Returns the
 * undo. Checks the attack's premise: the row names that session now.
 */
function claimRow(dataDir: string, actionId: string): () => void {
  const db = new Database(path.join(dataDir, 'journal.sqlite'), { timeout: 5_000 });
  try {
    const newest = db.prepare('SELECT session_id FROM sessions ORDER BY first_seq DESC LIMIT 1').get() as {
      session_id: string;
    };
    const row = db.prepare('SELECT session_id, state FROM actions WHERE action_id = ?').get(actionId) as {
      session_id: string;
      state: string;
    };
    expect(row.session_id).not.toBe(newest.session_id);
    const write = db.prepare('UPDATE actions SET session_id = ?, state = ? WHERE action_id = ?');
    const forged = { ...JSON.parse(row.state), session_id: newest.session_id, recorded: false };
    write.run(newest.session_id, JSON.stringify(forged), actionId);
    expect(db.prepare('SELECT session_id FROM actions WHERE action_id = ?').get(actionId)).toEqual({
      session_id: newest.session_id,
    });
    return () => {
      const undo = new Database(path.join(dataDir, 'journal.sqlite'), { timeout: 5_000 });
      try {
        undo
          .prepare('UPDATE actions SET session_id = ?, state = ? WHERE action_id = ?')
          .run(row.session_id, row.state, actionId);
      } finally {
        undo.close();
      }
    };
  } finally {
    db.close();
  }
}

async function openTarget(
  behaviour: IdempotencyBehaviour,
  options: { loseResponses?: number; hangLookups?: number },
): Promise<IdempotencyTarget> {
  const t = await IdempotencyTarget.start(behaviour, options);
  cleanup.push(() => t.stop());
  return t;
}
async function openRig(name: string, route: Parameters<typeof RecoveryRig.create>[2]): Promise<RecoveryRig> {
  const rig = await RecoveryRig.create(scratch, name, route);
  cleanup.push(() => rig.stop());
  await rig.start();
  return rig;
}
async function openAgent(rig: RecoveryRig, name: string): Promise<DrillAgent> {
  const agent = await DrillAgent.start(rig.dataDir, name);
  cleanup.push(() => agent.stop());
  return agent;
}

/**
 * Cases 1–3: the route retries automatically under the same key (budget 2, no backoff). The first
 * response is lost after the effect; the automatic retry (generation 1) reaches the target and its
 * answer is held; the daemon is killed with that retry in flight. After the restart the action must
 * be unknown (BROKER_RESTARTED, never not_attempted) with generation 1 still recorded, and an
 * agent's retry_of from a new agent process (same request, same key) takes generation 2 and commits.
 */
async function crashDuringSameKeyRetry(
  behaviour: IdempotencyBehaviour,
): Promise<{ rig: RecoveryRig; target: IdempotencyTarget; id: string }> {
  const t = await openTarget(behaviour, { loseResponses: 1 });
  const proxy = await HoldingProxy.start(t.port);
  cleanup.push(() => proxy.stop());
  proxy.holdNext = 1;
  const rig = await openRig(`same-key-${behaviour}`, {
    port: proxy.port,
    retry: { attempts_max: 2, automatic: true, backoff_ms: 0 },
  });
  const first = await openAgent(rig, `rr-${behaviour}-first`);

  const call = first.call('http_request', post).reply;
  // It is expected to reject once the daemon is killed, possibly while the crash below is still awaited:
  // handled here so that ordering is not an unhandled rejection; the assertion after the crash reads it.
  call.catch(() => undefined);
  await waitForCount(() => proxy.held.length, 1, 'the automatic retry, answered by the target and held');
  const id = await rig.acceptedAction(target);

  // In flight: attempt 1 recorded unknown, the lease of generation 1 live, attempt 2 dispatched — open again, so
  // actions.show has no outcome for it until the retry records one (attempt 1's unknown stays in its events).
  const inFlight = await rig.show(id);
  expect(inFlight.state).toMatchObject({
    outcome: null,
    effect: null,
    recorded: false,
    retry_generation: 1,
    retry_budget: 2,
    lease: { generation: 1, open: true },
  });
  expect(inFlight.state.attempts.map((a) => a.n)).toEqual([1, 2]);
  expect(inFlight.events.filter((e) => e.kind === 'OUTCOME_RECORDED').map((e) => e.outcome)).toEqual(['unknown']);
  expect(t.requests.map((r) => [r.method, r.path, r.key, r.body])).toEqual([
    ['POST', '/releases', 'key-r-1', post.body],
    ['POST', '/releases', 'key-r-1', post.body],
  ]);

  const exit = await rig.crash();
  expect(exit.signal).toBe('SIGKILL');
  // The first agent's call ends with its connection (the shim exits with the socket): no answer.
  await expect(within(call, 'the first agent call after the crash')).rejects.toThrow();
  await first.stop();

  await rig.start();
  const recovered = await rig.show(id);
  expect(recovered.state).toMatchObject({
    outcome: 'unknown',
    code: 'BROKER_RESTARTED',
    phase: 'remote_execution',
    effect: 'unknown_effect',
    recorded: true,
    retry_generation: 1,
    retry_budget: 2,
    lease: { generation: 1, open: false },
  });
  expect(recovered.events.map((e) => e.outcome)).not.toContain('not_attempted');
  expect(recovered.events.filter((e) => e.kind === 'OUTCOME_RECORDED').map((e) => [e.outcome, e.code])).toEqual([
    ['unknown', expect.any(String)],
    ['unknown', 'BROKER_RESTARTED'],
  ]);
  // The evidence after the restart is what it was after the lost response: dispatched under a
  // declared key within its retention, no answer. The disposition a resend depends on:
  expect.soft(recovered.state.retry, 'the recovered retry disposition (classifyRestart)').toBe('same_idempotency_key');
  return { rig, target: t, id };
}

/** The retry_of from a new agent process, and what the record and the target say afterwards. */
async function retryOfCommits(
  rig: RecoveryRig,
  t: IdempotencyTarget,
  id: string,
  agentName: string,
  effects: number,
): Promise<void> {
  const second = await openAgent(rig, agentName);
  const reply: ToolReply = await within(
    second.call('http_request', { ...post, retry_of: id }).reply,
    'the retry_of answer',
  );
  expect(reply.structuredContent?.error, JSON.stringify(reply.structuredContent)).toBeUndefined();
  expect(reply.isError ?? false).toBe(false);
  expect(reply.structuredContent).toMatchObject({ invocation_id: id, effect: 'succeeded', response: { status: 201 } });

  const settled = await rig.show(id);
  expect(settled.state).toMatchObject({
    outcome: 'committed',
    effect: 'succeeded',
    retry_generation: 2,
    lease: { generation: 2, open: false },
  });
  expect(settled.state.attempts.map((a) => a.n)).toEqual([1, 2, 3]);
  expect(settled.released_by).toMatchObject({ kind: 'same_key_retry', outcome: 'committed', actor: { kind: 'agent' } });
  expect(settled.events.filter((e) => e.kind === 'DISPATCH_STARTED')).toHaveLength(3);

  // The real effects, and every request under the one key with the one body.
  expect(t.effectsOf(post.body)).toBe(effects);
  expect(t.requests).toHaveLength(3);
  expect(t.requests.every((r) => r.key === 'key-r-1' && r.body === post.body)).toBe(true);

  // Who asked for generation 2: the new agent process's own session.
  const asking = (await op(rig.dataDir, 'sessions.list', {})).sessions.find(
    (x) => x.client_name === agentName,
  )?.session_id;
  expect(asking).toBeDefined();

  await second.stop();
  await rig.stop();
  const events = await rig.journalEvents(id);
  expect(ofKind(events, 'DISPATCH_STARTED').map((e) => [e.payload.attempt, e.payload.generation])).toEqual([
    [1, undefined],
    [2, 1],
    [3, 2],
  ]);
  expect(
    ofKind(events, 'RETRY_LEASED').map((e) => [e.payload.generation, e.payload.decision, e.payload.requested_by.kind]),
  ).toEqual([
    [1, 'RETRY_SAME_KEY', 'broker'],
    [2, 'RETRY_SAME_KEY', 'agent'],
  ]);
  const outcomes = [...ofKind(events, 'OUTCOME_RECORDED'), ...ofKind(events, 'RESULT_COMMITTED')].map((e) => [
    e.classification?.outcome,
    e.classification?.code ?? null,
  ]);
  expect(outcomes).toEqual([
    ['unknown', expect.any(String)],
    ['unknown', 'BROKER_RESTARTED'],
    ['committed', null],
  ]);
  expect(events.some((e) => e.classification?.outcome === 'not_attempted')).toBe(false);
  // The record names the session that asked for the retry (docs/operator.md: `actor` — who asked),
  // not the session that made the original call (whose process is gone by now).
  expect(ofKind(events, 'RETRY_LEASED')[1]?.payload.requested_by, 'RETRY_LEASED generation 2 requested_by').toEqual({
    kind: 'agent',
    id: asking,
  });
}

describe('a restart in the middle of a same-key automatic retry', () => {
  it('1. honouring target: unknown after the restart with generation 1 kept; the retry_of takes generation 2 and commits; one real effect, three dispatches', async () => {
    const { rig, target: t, id } = await crashDuringSameKeyRetry('honours');
    expect(t.effectsOf(post.body)).toBe(1);
    await retryOfCommits(rig, t, id, 'rr-honours-second', 1);
  }, 120_000);

  it('2. ignoring target: every dispatched attempt under the one key applied its effect, and the record shows each of them', async () => {
    const { rig, target: t, id } = await crashDuringSameKeyRetry('ignores');
    // The lost first attempt and the in-flight retry: two effects before the restart.
    expect(t.effectsOf(post.body)).toBe(2);
    await retryOfCommits(rig, t, id, 'rr-ignores-second', 3);
  }, 120_000);

  it('3. 422 target: after the restart a retry_of with a changed body is refused locally and sends nothing; the same body commits; one real effect', async () => {
    const { rig, target: t, id } = await crashDuringSameKeyRetry('rejects_changed');
    const before = await rig.show(id);
    const changed = await openAgent(rig, 'rr-rejects-changed');
    const refused = await within(
      changed.call('http_request', { ...post, body: '{"release":"r-2"}', retry_of: id }).reply,
      'the changed retry_of answer',
    );
    expect(refused.isError).toBe(true);
    expect(refused.structuredContent).toMatchObject({
      invocation_id: null,
      error: { code: 'IDEMPOTENCY_MISMATCH', outcome: 'not_attempted', phase: 'validation' },
    });
    expect(t.requests).toHaveLength(2);
    expect((await rig.show(id)).events).toHaveLength(before.events.length);
    await changed.stop();
    await retryOfCommits(rig, t, id, 'rr-rejects-same', 1);
  }, 120_000);
});

/**
 * A second agent asks for another POST on the lane whose head is the unknown at `ticket`: its ticket waits behind that
 * head (the head's card says blocked_head) and the target sees none of it. Returns the agent, the request and its
 * pending reply.
 */
async function newWriteWaitsBehind(
  rig: RecoveryRig,
  t: IdempotencyTarget,
  ticket: number,
  agentName: string,
): Promise<{ second: DrillAgent; next: typeof post; behind: Promise<ToolReply> }> {
  const second = await openAgent(rig, agentName);
  const next = { ...post, body: '{"release":"r-2"}', idempotency_key: 'key-r-2' };
  const behind = second.call('http_request', next).reply;
  const cards = await waitFor(
    () => laneCards(rig.dataDir, 'route:docs'),
    (c) => c.some((x) => x.ticket > ticket && x.waiting_for_ticket === ticket),
    'the new ticket waiting behind the unknown head',
  );
  expect(cards.find((c) => c.ticket === ticket)?.state).toBe('blocked_head');
  expect(t.requests.filter((r) => r.body === next.body)).toHaveLength(0);
  return { second, next, behind };
}

describe('a restart in the middle of a reconciliation lookup', () => {
  it('4. the lookup is recorded unknown, the original stays unknown without a result; reconciling again commits it (remote_query) and releases its lane', async () => {
    const t = await openTarget('honours', { loseResponses: 1, hangLookups: 1 });
    const rig = await openRig('reconcile', { port: t.port });
    const first = await openAgent(rig, 'rr-reco-first');
    const lost = await within(first.call('http_request', post).reply, 'the lost-response answer');
    expect(lost.structuredContent?.error).toMatchObject({ outcome: 'unknown', phase: 'remote_execution' });
    const id = lost.structuredContent?.invocation_id ?? '';
    const ticket = (await rig.show(id)).state.ticket ?? 0;
    expect(ticket).toBeGreaterThan(0);
    expect(t.effectsOf(post.body)).toBe(1);

    // A person reconciles; the lookup reaches the target and hangs; the daemon is killed.
    const cli = (args: string[]): PosternProcess => new PosternProcess([...args, '--data-dir', rig.dataDir]);
    const asking = cli(['actions', 'reconcile', id, '--json']);
    cleanup.push(() => asking.stop('SIGKILL'));
    await waitForCount(() => t.requests.filter((r) => r.method === 'GET').length, 1, 'the lookup at the target');
    expect(t.requests.at(-1)).toMatchObject({ method: 'GET', path: '/operations/key-r-1' });
    const lookupId = await rig.acceptedAction('route:docs GET /operations/key-r-1');
    expect((await rig.crash()).signal).toBe('SIGKILL');
    const askingExit = await asking.exitWithin();
    expect(askingExit.code, asking.stderr).not.toBe(0);
    await first.stop();

    await rig.start();
    const lookup = await rig.show(lookupId);
    expect(lookup.state).toMatchObject({ outcome: 'unknown', code: 'BROKER_RESTARTED', lane: null, approval: 'none' });
    expect(lookup.events.map((e) => e.outcome)).not.toContain('not_attempted');
    const original = await rig.show(id);
    expect(original.state).toMatchObject({ outcome: 'unknown', recorded: true });
    expect(original.state.code).not.toBe('BROKER_RESTARTED');
    expect(original.events.map((e) => e.kind)).not.toContain('RECONCILIATION_RESULT');
    expect(original.released_by).toBeNull();

    // A new write in the same lane waits behind the unknown head.
    const { second, next, behind } = await newWriteWaitsBehind(rig, t, ticket, 'rr-reco-second');

    const again = cli(['actions', 'reconcile', id, '--json']);
    const againExit = await again.exitWithin();
    expect(againExit.code, again.stderr).toBe(0);
    const result = JSON.parse(again.stdout) as {
      lookup_action_id: string;
      correlation: string;
      outcome: string;
      journal_seq: number;
    };
    expect(result).toMatchObject({ correlation: 'idempotency_token', outcome: 'committed' });
    expect(result.lookup_action_id).not.toBe(lookupId);

    const settled = await rig.show(id);
    expect(settled.state).toMatchObject({ outcome: 'committed', effect: 'succeeded', source: 'remote_query' });
    expect(settled.events.filter((e) => e.kind === 'RECONCILIATION_RESULT')).toHaveLength(1);
    expect(settled.released_by).toMatchObject({
      kind: 'reconciliation',
      source: 'remote_query',
      outcome: 'committed',
      seq: result.journal_seq,
    });
    expect((await rig.show(result.lookup_action_id)).state).toMatchObject({ outcome: 'committed', lane: null });

    // The lane moved on: the waiting write was sent and committed.
    const sent = await within(behind, 'the write behind the released head');
    expect(sent.structuredContent?.error).toBeUndefined();
    expect(sent.structuredContent).toMatchObject({ effect: 'succeeded', response: { status: 201 } });

    expect(t.effectsOf(post.body)).toBe(1);
    expect(t.effectsOf(next.body)).toBe(1);
    expect(t.requests.map((r) => `${r.method} ${r.path}`)).toEqual([
      'POST /releases',
      'GET /operations/key-r-1',
      'GET /operations/key-r-1',
      'POST /releases',
    ]);

    await second.stop();
    await rig.stop();
    const events = await rig.journalEvents(id);
    expect(ofKind(events, 'DISPATCH_STARTED')).toHaveLength(1);
    expect(
      ofKind(events, 'RECONCILIATION_RESULT').map((e) => [
        e.payload.lookup_action_id,
        e.classification?.outcome,
        e.classification?.source,
      ]),
    ).toEqual([[result.lookup_action_id, 'committed', 'remote_query']]);
    const lookupEvents = await rig.journalEvents(lookupId);
    expect(ofKind(lookupEvents, 'ACTION_ACCEPTED')[0]?.payload.reconciles).toBe(id);
    expect(
      ofKind(lookupEvents, 'OUTCOME_RECORDED').map((e) => [e.classification?.outcome, e.classification?.code]),
    ).toEqual([['unknown', 'BROKER_RESTARTED']]);
  }, 120_000);
});

describe('a restart after a result was committed but never read', () => {
  it('5. the caller stopped waiting before the answer; after a crash, fetch_result from the same agent process returns the stored result (same digest); the target saw one request', async () => {
    const t = await openTarget('honours', {});
    const proxy = await HoldingProxy.start(t.port);
    cleanup.push(() => proxy.stop());
    proxy.holdNext = 1;
    const rig = await openRig('fetch-result', { port: proxy.port });
    const agent = await SdkAgent.start(rig.dataDir, 'rr-sdk');
    cleanup.push(() => agent.stop());
    await agent.connect();

    // The caller waits one second; the target's answer is held past it, so the call times out.
    const call = agent.call('httpRequest', { ...post, timeout_ms: 1_000 });
    await waitForCount(() => proxy.held.length, 1, 'the target answer, held');
    const timedOut = await call;
    // The wait's answer is the current envelope (dispatched, nothing recorded yet), error or not.
    const envelope = 'error' in timedOut ? timedOut.error.envelope : timedOut.value;
    expect(envelope).toMatchObject({
      caller_disposition: 'timed_out',
      effect: 'unknown_effect',
      evidence: { dispatch_started: true },
    });
    expect(envelope).not.toHaveProperty('response');
    const id = String(envelope?.['invocation_id']);

    // The answer arrives; the broker commits the result with nobody waiting for it.
    proxy.release();
    const committed = await waitFor(
      () => rig.show(id),
      (s) => s.state.outcome === 'committed' && s.state.result_digest !== null,
      'the committed result',
    );
    expect(committed.events.map((e) => e.kind)).not.toContain('RESULT_DELIVERED');
    const digest = committed.state.result_digest;

    expect((await rig.crash()).signal).toBe('SIGKILL');
    await rig.start();
    const recovered = await rig.show(id);
    expect(recovered.state).toMatchObject({
      outcome: 'committed',
      effect: 'succeeded',
      result_digest: digest,
      caller_disposition: 'timed_out',
    });
    expect(recovered.events.map((e) => e.code)).not.toContain('BROKER_RESTARTED');

    // Another agent process edits the action's plaintext row to name its own session (this run has not touched the
    // action, so the broker holds no state of it in memory): the result is still not its to read.
    const thief = await SdkAgent.start(rig.dataDir, 'rr-sdk-thief');
    cleanup.push(() => thief.stop());
    await thief.connect();
    const restore = claimRow(rig.dataDir, id);
    const stolen = await thief.call('fetchResult', id);
    expect('error' in stolen && stolen.error.code).toBe('NOT_FOUND');
    // Nor is it its to cancel: a cancel is recorded only on what the action's sealed events say.
    const cancelled = await thief.call('cancelAction', id);
    expect('error' in cancelled && cancelled.error.code).toBe('NOT_FOUND');
    restore();
    await thief.stop();

    // The same agent process reconnects (its session is the process) and reads its result.
    await agent.connect();
    const fetched = await agent.call('fetchResult', id);
    if ('error' in fetched)
      throw new Error(`fetch_result failed: ${fetched.error.code ?? ''} ${fetched.error.message}`);
    expect(fetched.value).toMatchObject({
      invocation_id: id,
      effect: 'succeeded',
      evidence: { result_digest: digest },
      response: { status: 201, body: proxy.held[0]?.body },
    });
    await waitFor(
      () => rig.show(id),
      (s) => s.events.some((e) => e.kind === 'RESULT_DELIVERED'),
      'RESULT_DELIVERED after the fetch',
    );
    // Another agent process is another session: the action is not its to read.
    const stranger = await SdkAgent.start(rig.dataDir, 'rr-sdk-stranger');
    cleanup.push(() => stranger.stop());
    await stranger.connect();
    const foreign = await stranger.call('fetchResult', id);
    expect('error' in foreign && foreign.error.code).toBe('NOT_FOUND');

    expect(t.requests).toHaveLength(1);
    expect(t.effectsOf(post.body)).toBe(1);
    await agent.stop();
    await stranger.stop();
    await rig.stop();
    const events = await rig.journalEvents(id);
    expect(ofKind(events, 'DISPATCH_STARTED')).toHaveLength(1);
    expect(ofKind(events, 'RESULT_COMMITTED').map((e) => e.payload.result_digest)).toEqual([digest]);
    expect(ofKind(events, 'RESULT_DELIVERED')).toHaveLength(1);
  }, 120_000);
});

/** A locked restart over a rewritten row: the log warns of it, and its card says held and offers nothing to decide. */
async function restartsLockedHolding(rig: RecoveryRig, id: string): Promise<void> {
  const restarted = await rig.startLocked();
  expect(restarted.process.stdout + restarted.process.stderr).toContain(
    "an action's row read at start differs from the journal's log: it says never dispatched",
  );
  const held = (await laneCards(rig.dataDir, 'route:docs')).find((c) => c.action_id === id);
  expect(held).toMatchObject({ state: 'dispatching' });
  expect(held?.text).toContain('held: its record was found rewritten at this start');
}

/**
 * A daemon killed (SIGKILL) while a POST's answer is held at its target: the target applied it (one effect), the
 * daemon's record of it is in flight. What another process then does to the file is each case's own.
 */
async function killedWithRequestAtTarget(
  name: string,
): Promise<{ t: IdempotencyTarget; rig: RecoveryRig; id: string }> {
  const t = await openTarget('honours', {});
  const proxy = await HoldingProxy.start(t.port);
  cleanup.push(() => proxy.stop());
  proxy.holdNext = 1;
  const rig = await openRig(name, { port: proxy.port });
  const agent = await openAgent(rig, `rr-${name}`);
  const call = agent.call('http_request', post).reply;
  call.catch(() => undefined);
  await waitForCount(() => proxy.held.length, 1, 'the target answer, held');
  const id = await rig.acceptedAction(target);
  // The effect happened: the target applied the request and its answer is held.
  expect(t.effectsOf(post.body)).toBe(1);
  expect((await rig.crash()).signal).toBe('SIGKILL');
  await agent.stop();
  return { t, rig, id };
}

/**
 * THREAT-MODEL: with no broker running, a same-user process rewrites an action's row to read as if it was never
 * dispatched (its stage back to credential_authorized, no dispatch, no attempt), the edit a copy of the row taken
 * before the dispatch would make. Recovery reads that row at the next start (no earlier run's event opens before the
 * vault is attached), so it is checked against the log's plaintext kind headers (Journal.recover).
 */
function rewriteNeverDispatched(dataDir: string, actionId: string): void {
  const db = new Database(path.join(dataDir, 'journal.sqlite'), { timeout: 5_000 });
  try {
    const row = db.prepare('SELECT state FROM actions WHERE action_id = ?').get(actionId) as { state: string };
    const state = JSON.parse(row.state) as Record<string, unknown>;
    // The premise: dispatched (in flight, or settled since).
    expect(state['dispatch_seq']).not.toBeNull();
    const outcomeFields = ['outcome', 'phase', 'retry', 'code', 'effect', 'outcome_basis', 'source'];
    const forged = {
      ...state,
      ...Object.fromEntries(outcomeFields.map((field) => [field, null])),
      stage: 'credential_authorized',
      dispatch_evidence: 'never_started',
      dispatch_seq: null,
      attempts: [],
      recorded: false,
      result_id: null,
      result_digest: null,
    };
    db.prepare(
      `UPDATE actions SET stage = 'credential_authorized', dispatch_evidence = 'never_started', dispatch_seq = NULL,
      recorded = 0, result_id = NULL, result_digest = NULL, resolved_at_ms = NULL,
      ${outcomeFields.map((field) => `${field} = NULL`).join(', ')}, state = ? WHERE action_id = ?`,
    ).run(JSON.stringify(forged), actionId);
  } finally {
    db.close();
  }
}

describe("a restart after another process rewrote an action's row to read never dispatched", () => {
  it('6. the daemon was killed with the request at the target; after the restart (and its unlock) the action is unknown from its own events, never not_attempted; the log warns; the target saw one request', async () => {
    const { t, rig, id } = await killedWithRequestAtTarget('row-rewritten');
    rewriteNeverDispatched(rig.dataDir, id);

    const restarted = await rig.start();
    const recovered = await rig.show(id);
    expect(recovered.state).toMatchObject({
      outcome: 'unknown',
      code: 'BROKER_RESTARTED',
      effect: 'unknown_effect',
      phase: 'remote_execution',
      outcome_basis: 'broker_restart_after_dispatch',
      recorded: true,
    });
    // Recovered from its own sealed events once the restart unlocked: the dispatched attempt is there.
    expect(recovered.state.attempts.map((a) => a.n)).toEqual([1]);
    expect(recovered.events.map((e) => e.outcome)).not.toContain('not_attempted');
    expect(restarted.process.stdout + restarted.process.stderr).toContain(
      "an action's row read at start differs from the journal's log: it says never dispatched",
    );
    // Its lane waits for a lookup or a person: the blocked head's card is shown.
    expect(await laneCards(rig.dataDir, 'route:docs')).toContainEqual(
      expect.objectContaining({ action_id: id, state: 'blocked_head' }),
    );
    expect(t.requests).toHaveLength(1);
  }, 120_000);
});

describe("a locked restart after another process rewrote a settled action's row to read never dispatched", () => {
  it('7. the action is held: its card says so and offers nothing to decide; once a person unlocks, its own events say committed and the card is gone', async () => {
    const t = await openTarget('honours', {});
    const rig = await openRig('row-rewritten-settled', { port: t.port });
    const first = await openAgent(rig, 'rr-settled-first');
    const done = await within(first.call('http_request', post).reply, 'the first call');
    expect(done.structuredContent).toMatchObject({ effect: 'succeeded' });
    const id = await rig.acceptedAction(target);
    await first.stop();
    await rig.stop();
    rewriteNeverDispatched(rig.dataDir, id);

    await restartsLockedHolding(rig, id);

    await rig.unlock();
    const settled = await waitFor(
      () => rig.show(id),
      (s) => s.state.outcome === 'committed',
      'the held action folded from its own events after the unlock',
    );
    expect(settled.state.dispatch_seq).not.toBeNull();
    expect(await laneCards(rig.dataDir, 'route:docs')).toEqual([]);
    // Nothing was sent again, and nothing was recorded over the settled action.
    expect(t.requests).toHaveLength(1);
    expect(settled.events.filter((e) => e.kind === 'OUTCOME_RECORDED')).toEqual([]);
  }, 120_000);
});

describe("a locked restart after another process rewrote an in-flight action's row to read settled, not_attempted", () => {
  it('8. the log shows it dispatched with no outcome: it is held in its lane (never not_attempted, its card says held); once a person unlocks, its own events make it unknown; the target saw one request', async () => {
    const { t, rig, id } = await killedWithRequestAtTarget('row-rewritten-closed');
    // The row, columns and state alike, made to read as a restart before dispatch would have closed it.
    rewriteActionRow(path.join(rig.dataDir, 'journal.sqlite'), id, closedNeverSent);

    // Held in its lane, as the log shows it: in flight, nothing to decide.
    await restartsLockedHolding(rig, id);

    await rig.unlock();
    const recovered = await waitFor(
      () => rig.show(id),
      (s) => s.state.recorded,
      'the held action recovered from its own events after the unlock',
    );
    expect(recovered.state).toMatchObject({
      outcome: 'unknown',
      outcome_basis: 'broker_restart_after_dispatch',
      phase: 'remote_execution',
    });
    expect(recovered.state.attempts.map((a) => a.n)).toEqual([1]);
    expect(recovered.events.map((e) => e.outcome)).not.toContain('not_attempted');
    expect(await laneCards(rig.dataDir, 'route:docs')).toContainEqual(
      expect.objectContaining({ action_id: id, state: 'blocked_head' }),
    );
    expect(t.requests).toHaveLength(1);
  }, 120_000);
});

describe("a restart after another process rewrote a recorded unknown's row to read committed", () => {
  it('9. its outcome header says unknown: it is held, then folded from its own events at the unlock; the lane it heads stays blocked, a new write waits behind it and nothing is sent; the log warns', async () => {
    const t = await openTarget('honours', { loseResponses: 1 });
    const rig = await openRig('unknown-rewritten', { port: t.port });
    const first = await openAgent(rig, 'rr-unknown-first');
    const lost = await within(first.call('http_request', post).reply, 'the lost-response answer');
    expect(lost.structuredContent?.error).toMatchObject({ outcome: 'unknown', phase: 'remote_execution' });
    const id = lost.structuredContent?.invocation_id ?? '';
    const before = await rig.show(id);
    const ticket = before.state.ticket ?? 0;
    expect(ticket).toBeGreaterThan(0);
    await first.stop();
    await rig.stop();
    // The row, columns and state alike, made to read as if the remote's answer had been recorded: resolved, no lane.
    rewriteActionRow(path.join(rig.dataDir, 'journal.sqlite'), id, readsCommitted);

    const restarted = await rig.start();
    expect(restarted.process.stdout + restarted.process.stderr).toContain(
      "an action's row read at start differs from the journal's log: it says another outcome",
    );
    const shown = await waitFor(
      () => rig.show(id),
      (s) => s.state.recorded && s.state.outcome === 'unknown',
      'the held action folded from its own events after the unlock',
    );
    // Recorded already: nothing was appended over it.
    expect(shown.events.map((e) => e.kind)).toEqual(before.events.map((e) => e.kind));

    // A new write in the same lane waits behind the unknown head, as before the rewrite.
    const { behind } = await newWriteWaitsBehind(rig, t, ticket, 'rr-unknown-second');
    behind.catch(() => undefined);
    expect(t.effectsOf(post.body)).toBe(1);
  }, 120_000);
});

describe("a restart after another process rewrote an in-flight POST's row to say it is idempotent", () => {
  it('10. the restart record takes the retry from its own events (a same-key retry while its key lasts), never the backoff the row would advise; the log warns; the target saw one request', async () => {
    const { t, rig, id } = await killedWithRequestAtTarget('row-says-idempotent');
    // A POST under a declared key: the row made to claim what would advise sending it again with no key at all.
    rewriteActionRow(path.join(rig.dataDir, 'journal.sqlite'), id, (state) => ({ ...state, idempotent: true }));

    const restarted = await rig.start();
    // Recorded once the daemon serves (it unlocked with its passphrase and waits for the unlock's records).
    const recovered = await rig.show(id);
    expect(recovered.state).toMatchObject({
      outcome: 'unknown',
      code: 'BROKER_RESTARTED',
      outcome_basis: 'broker_restart_after_dispatch',
      retry: 'same_idempotency_key',
    });
    // One restart record, folded into the retry above.
    expect(recovered.events.filter((e) => e.kind === 'OUTCOME_RECORDED').map((e) => e.code)).toEqual([
      'BROKER_RESTARTED',
    ]);
    expect(restarted.process.stdout + restarted.process.stderr).toContain(
      "has a row that differs from its own events: it says idempotent, or names an idempotency key's expiry",
    );
    expect(t.requests).toHaveLength(1);
  }, 120_000);
});

describe('a locked restart after a keyed POST was killed in flight', () => {
  it('11. its restart record waits for the unlock (its retry rests on its own events): its card says it was in flight and waits for it; once a person unlocks, unknown with a same-key retry, a blocked head; the target saw one request', async () => {
    const { t, rig, id } = await killedWithRequestAtTarget('deferred-locked');

    const restarted = await rig.startLocked();
    expect(restarted.process.stdout + restarted.process.stderr).toContain(
      'actions in flight when the broker stopped read in flight until the vault unlocks',
    );
    // Its events are sealed until the unlock: its card, read from the lane, is what says where it stands.
    const card = (await laneCards(rig.dataDir, 'route:docs')).find((c) => c.action_id === id);
    expect(card).toMatchObject({ state: 'dispatching', dispatch_recorded: true, retry_possible: false });
    expect(card?.text).toContain(
      'its restart record (unknown, and which retry is safe) is written from its own events',
    );

    await rig.unlock();
    const recovered = await waitFor(
      () => rig.show(id),
      (s) => s.state.recorded,
      'the restart record, written at the unlock',
    );
    expect(recovered.state).toMatchObject({
      outcome: 'unknown',
      code: 'BROKER_RESTARTED',
      retry: 'same_idempotency_key',
    });
    expect(await laneCards(rig.dataDir, 'route:docs')).toContainEqual(
      expect.objectContaining({ action_id: id, state: 'blocked_head' }),
    );
    expect(t.requests).toHaveLength(1);
  }, 120_000);
});
