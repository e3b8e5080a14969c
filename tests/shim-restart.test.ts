import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { agentSocketPath, startAgentSocket } from '../broker/agent/index.js';
import { IdempotencyTarget } from '../broker/testing/idempotency-target.js';
import { initializeFrame } from '../broker/testing/malformed-mcp.js';
import { holdUntilAborted, ScriptedAgentBackend } from '../broker/testing/scripted-agent-backend.js';
import { DrillAgent, type ToolReply } from './support/drill-agent.js';
import { op } from './support/drill.js';
import { HoldingProxy } from './support/holding-proxy.js';
import { posternBin, repoRoot } from './support/postern-process.js';
import { RecoveryRig, waitForCount, within } from './support/recovery-rig.js';

/**
 * Issue 15, "agents survive broker restarts": one agent process with ONE MCP SDK Client through
 * `postern mcp` against a real daemon. Its first call commits; its second is held at a proxy (the
 * target applied it) when the daemon is SIGKILLed. The shim answers the lost call with
 * BROKER_RESTARTED naming the action (the broker told the shim its id before dispatching it), reconnects to the restarted daemon on the same data directory and replays the
 * client's initialize; the same Client then reads both of its earlier actions (the session is the
 * agent process, not the shim), retries the unknown one with retry_of, and the session shows the
 * reconnection.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'pshim-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step().catch(() => undefined);
}, 60_000);

const post = (n: number): Record<string, unknown> => ({
  route: 'docs',
  method: 'POST',
  path: `/releases/${n}`,
  body: `{"release":"r-${n}"}`,
  idempotency_key: `key-shim-${n}`,
  timeout_ms: 60_000,
});

function structured(reply: ToolReply): Record<string, unknown> {
  expect(reply.structuredContent).toBeDefined();
  return reply.structuredContent ?? {};
}

describe('when the broker is killed and restarted under a connected agent', () => {
  it('the shim reconnects and the same client reads, and retries, its earlier actions', async () => {
    const target = await IdempotencyTarget.start('honours');
    cleanup.push(() => target.stop());
    const proxy = await HoldingProxy.start(target.port);
    cleanup.push(() => proxy.stop());
    const rig = await RecoveryRig.create(scratch, 'restart', {
      port: proxy.port,
      retry: { attempts_max: 2, automatic: false, backoff_ms: 0 },
    });
    cleanup.push(() => rig.stop());
    await rig.start();
    const agent = await DrillAgent.start(rig.dataDir, 'shim-restart-agent');
    cleanup.push(() => agent.stop());

    const first = structured(await within(agent.call('http_request', post(1)).reply, 'the first call'));
    expect(first).toMatchObject({ effect: 'succeeded', response: { status: 201 } });
    const firstId = first['invocation_id'] as string;

    proxy.holdNext = 1;
    const lost = agent.call('http_request', post(2)).reply.then(
      () => ({ message: 'answered by the broker', data: undefined }),
      (error: unknown) => ({ message: String(error), data: (error as { data?: unknown }).data }),
    );
    await waitForCount(() => proxy.held.length, 1, 'the second call, applied by the target and held');
    const recordedId = await rig.acceptedAction('route:docs POST /releases/2');
    await rig.crash();
    // Answered by the shim, not dropped: the client's request was in flight on the lost connection. The broker had
    // named the call's action to the shim before dispatching it, so the answer names it: the agent asks about that
    // action instead of resending the write.
    const answer = await within(lost, 'the answer to the call in flight at the crash');
    expect(answer.message).toMatch(/MCP error -32000: the connection to the Postern broker was lost/);
    expect(answer.message).toContain(`action ${recordedId} was recorded`);
    expect(answer.data).toEqual({ code: 'BROKER_RESTARTED', action_id: recordedId });
    const secondId = (answer.data as { action_id: string }).action_id;

    await rig.start();
    // Sent while the shim may still be reconnecting: it waits for the replayed initialize, then goes.
    const fetched = structured(
      await within(agent.call('fetch_result', { action_id: firstId }).reply, 'fetch_result after the restart'),
    );
    expect(fetched).toMatchObject({ invocation_id: firstId, effect: 'succeeded', response: { status: 201 } });
    const statusReply = await within(
      agent.call('action_status', { action_id: secondId }).reply,
      'action_status after the restart',
    );
    const status = structured(statusReply);
    expect(status).toMatchObject({
      invocation_id: secondId,
      effect: 'unknown_effect',
      error: { code: 'BROKER_RESTARTED', retry: 'same_idempotency_key' },
    });
    // The call was cut off unanswered (the shim answered it BROKER_RESTARTED): no caller disposition is recorded, and
    // the answer says exactly that, never "completed".
    expect(status['caller_disposition']).toBeNull();
    expect(statusReply.content?.[0]?.text).toContain('caller: not recorded');
    const shown = await op(rig.dataDir, 'actions.show', { action_id: secondId });
    expect(shown).toMatchObject({ state: { caller_disposition: null } });
    // The first call's answer was handed over (RESULT_DELIVERED): that, and only that, makes it "completed". A cancel
    // of it now changes nothing, and says so.
    const firstStatus = structured(await within(agent.call('action_status', { action_id: firstId }).reply, 'status'));
    expect(firstStatus).toMatchObject({ caller_disposition: 'completed', effect: 'succeeded' });
    const cancel = await within(
      agent.call('cancel_action', { action_id: firstId }).reply,
      'cancel of a settled action',
    );
    expect(cancel.isError).toBe(true);
    expect(structured(cancel)).toMatchObject({ invocation_id: null, error: { code: 'ACTION_CLOSED' } });
    expect(cancel.content?.[0]?.text).toContain('cancel_action had no effect');
    expect(structured(await within(agent.call('action_status', { action_id: firstId }).reply, 'status'))).toEqual(
      firstStatus,
    );

    const retried = structured(
      await within(
        agent.call('http_request', { ...post(2), retry_of: secondId }).reply,
        'the retry_of after the restart',
      ),
    );
    expect(retried).toMatchObject({ invocation_id: secondId, effect: 'succeeded' });
    // The target honoured the key: the retry reached it and applied nothing new.
    expect(target.effects.filter((e) => e.includes('/releases/2'))).toHaveLength(1);

    const { sessions } = await op(rig.dataDir, 'sessions.list', {});
    const mine = sessions.filter((s) => s.pid === agent.pid);
    expect(mine).toHaveLength(1);
    expect(mine[0]).toMatchObject({ status: 'approved', reconnects: 1, ended_at_ms: null });
  }, 120_000);
});

/** The shim on raw stdio: every line it writes, in order, and a wait for the next one. */
function rawShim(dataDir: string, reconnectForSeconds: number) {
  const child = spawn(
    process.execPath,
    [posternBin, 'mcp', '--data-dir', dataDir, '--reconnect-for', String(reconnectForSeconds)],
    { cwd: repoRoot, stdio: ['pipe', 'pipe', 'pipe'] },
  );
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (text: string) => (stderr += text));
  const lines: Array<Record<string, unknown>> = [];
  const waiters: Array<() => void> = [];
  createInterface({ input: child.stdout }).on('line', (line) => {
    lines.push(JSON.parse(line) as Record<string, unknown>);
    waiters.splice(0).forEach((wake) => wake());
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const send = (frame: unknown): boolean =>
    child.stdin.write(`${typeof frame === 'string' ? frame : JSON.stringify(frame)}\n`);
  const answerTo = (id: number): Promise<Record<string, unknown>> =>
    within(
      new Promise((resolve) => {
        const look = (): void => {
          const found = lines.find((l) => l['id'] === id);
          if (found === undefined) waiters.push(look);
          else resolve(found);
        };
        look();
      }),
      `the answer to request ${id}`,
    );
  return { child, send, answerTo, exited, lines, stderr: () => stderr };
}

/** The shim's last line when no broker came back: coded as every CLI failure is (`postern: CODE FIELD: …`). */
const gaveUpLine = (dataDir: string, socketPath: string, why: string): string =>
  `postern: NOT_FOUND --data-dir: gave up reconnecting after 2 s: no broker is running for ${dataDir} ` +
  `(nothing listens on ${socketPath}: ${why}; start one with: postern daemon --data-dir ${dataDir})`;

const toolCall = (id: number): unknown => ({
  jsonrpc: '2.0',
  id,
  method: 'tools/call',
  params: { name: 'list_routes', arguments: {} },
});

describe('when the socket goes away under the shim (scripted broker)', () => {
  it('answers the lost request, replays initialize on the new socket without showing its answer, and gives up with a clear line', async () => {
    const dataDir = mkdtempSync(path.join(scratch, 'raw-'));
    const backend = new ScriptedAgentBackend();
    let socket = await startAgentSocket({ dataDir, backend });
    cleanup.push(() => socket.close());
    const shim = rawShim(dataDir, 2);
    cleanup.push(async () => shim.child.kill('SIGKILL'));

    shim.send(initializeFrame(1, 'raw-restart'));
    expect(await shim.answerTo(1)).toMatchObject({ result: { serverInfo: { name: 'postern' } } });
    shim.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    const answerNormally = backend.respond;
    backend.respond = holdUntilAborted;
    // Two calls in flight: the broker names the action the first recorded (the shim declared that it wants to be
    // told), the second recorded none yet.
    for (const id of [2, 5])
      shim.send({
        jsonrpc: '2.0',
        id,
        method: 'tools/call',
        params: { name: 'ssh_exec', arguments: { host: 'h', command: 'true' } },
      });
    const named = await within(backend.nextCall(), 'the first held call');
    await within(backend.nextCall(), 'the second held call');
    if (named.onRecorded === undefined) throw new Error('the shim did not declare postern.action_recorded');
    named.onRecorded('act_named_before_the_crash');
    // What the broker sent before going away has been read by the shim: a list_routes answered after it proves it.
    backend.respond = answerNormally;
    shim.send(toolCall(6));
    await shim.answerTo(6);
    await socket.close();
    const lost = await shim.answerTo(2);
    expect(lost).toMatchObject({
      error: { code: -32000, data: { code: 'BROKER_RESTARTED', action_id: 'act_named_before_the_crash' } },
    });
    expect(JSON.stringify(lost)).toContain('action_status {\\"action_id\\":\\"act_named_before_the_crash\\"}');
    const unnamed = await shim.answerTo(5);
    expect(unnamed).toMatchObject({ error: { code: -32000, data: { code: 'BROKER_RESTARTED' } } });
    expect((unnamed['error'] as { data: Record<string, unknown> }).data).not.toHaveProperty('action_id');

    // Sent while no broker listens: it waits for the new socket and the replayed initialize.
    backend.respond = answerNormally;
    shim.send(toolCall(3));
    socket = await startAgentSocket({ dataDir, backend });
    expect(await shim.answerTo(3)).toMatchObject({ result: { structuredContent: { routes: expect.any(Array) } } });
    expect(backend.sessionsOpened.map((s) => [s.client.name, s.session_id])).toEqual([
      ['raw-restart', 'ses_1'],
      ['raw-restart', 'ses_1'],
    ]);
    // The client saw answers to its own ids only: the replayed initialize was answered to the shim, and the
    // broker's action_recorded notification was the shim's (no line without an id reached the client).
    expect(shim.lines.map((l) => l['id'])).toEqual([1, 6, 2, 5, 3]);

    await socket.close();
    shim.send(toolCall(4));
    expect(await within(shim.exited, 'the shim giving up')).toBe(1);
    expect(shim.lines.find((l) => l['id'] === 4)).toMatchObject({ error: { data: { code: 'BROKER_RESTARTED' } } });
    // The one coded line the shim's start says for the same case (mcp-shim.test.ts "when no broker listens").
    const gaveUp = shim
      .stderr()
      .split('\n')
      .filter((line) => line.includes('gave up'));
    expect(gaveUp).toHaveLength(1);
    const socketPath = agentSocketPath(dataDir);
    expect(['ECONNREFUSED', 'ENOENT'].map((why) => gaveUpLine(dataDir, socketPath, why))).toContain(gaveUp[0]);
  }, 60_000);
});
