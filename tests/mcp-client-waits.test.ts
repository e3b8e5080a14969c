import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startAgentSocket, type AgentSocket } from '../broker/agent/index.js';
import { answerJsonMarker } from '../broker/agent/answer-text.js';
import type { RunningAgentBackend } from '../broker/actions/agent-backend.js';
import { fixtureAgentBackend, openQueueFixture, person, type QueueFixture } from '../broker/testing/queue-fixture.js';
import { waitForCardCount } from '../broker/testing/queue-waits.js';
import { posternBin, repoRoot } from './support/postern-process.js';

/**
 * A real MCP SDK client through the real `postern mcp` shim, with a client request timeout (2 s) shorter than the
 * card's approval window, against the real agent backend and queue whose default wait is configured below it
 * (postern.yaml `agents.wait_ms_default: 1000`). The client never times out: every call is answered first.
 */
const clientTimeoutMs = 2_000;
let f: QueueFixture;
let backend: RunningAgentBackend;
let socket: AgentSocket;
let client: Client;
const sentCallIds: Array<string | number> = [];

async function connect(agentsYaml: string): Promise<void> {
  f = await openQueueFixture({ agentsYaml });
  backend = await fixtureAgentBackend(f, 'boot-mcp-waits');
  socket = await startAgentSocket({ dataDir: f.h.temp.dir.path, backend });
  client = new Client({ name: 'waits-client', version: '1' });
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [posternBin, 'mcp', '--data-dir', f.h.temp.dir.path],
    cwd: repoRoot,
    stderr: 'pipe',
  });
  // The ids of the tools/call requests as sent, so a later notifications/cancelled names a real, answered one.
  sentCallIds.length = 0;
  const send = transport.send.bind(transport);
  transport.send = (message: JSONRPCMessage) => {
    if ('method' in message && message.method === 'tools/call' && 'id' in message) sentCallIds.push(message.id);
    return send(message);
  };
  await client.connect(transport);
}

afterEach(async () => {
  await client.close();
  await socket.close();
  backend.close();
  await f.dispose();
});

type Reply = {
  invocation_id: string;
  caller_disposition: string;
  effect: string | null;
  queue?: { waiting: string };
  error?: { code: string };
  response?: { status: number };
};
const structured = (result: Awaited<ReturnType<Client['callTool']>>): Reply => result.structuredContent as Reply;

describe('when a per-call card waits longer than the client request timeout', () => {
  beforeEach(() => connect('  session_approval: observe\n  wait_ms_default: 1000'));

  it('the broker answers first (timed_out, with the place); the card survives; the agent polls with action_status wait_ms to the committed result', async () => {
    const first = await client.callTool(
      {
        name: 'http_request',
        arguments: { route: 'docs', method: 'POST', path: '/documents/3', body: '{"marker":"mcp"}' },
      },
      undefined,
      { timeout: clientTimeoutMs },
    );
    const answer = structured(first);
    expect(answer).toMatchObject({ caller_disposition: 'timed_out', queue: { waiting: 'approval' } });
    // No cancel reached the broker: the card is still there and the action is not closed.
    const [card] = await waitForCardCount(f.queue, 1);
    expect(card?.action_id).toBe(answer.invocation_id);
    expect(f.events(answer.invocation_id).map((e) => e.kind)).not.toContain('CALLER_CANCELLED');

    // A notifications/cancelled for the request Postern already answered changes nothing.
    expect(sentCallIds).toHaveLength(1);
    await client.notification({
      method: 'notifications/cancelled',
      params: { requestId: sentCallIds[0] ?? -1, reason: 'late client timeout' },
    });
    const still = structured(
      await client.callTool({ name: 'action_status', arguments: { action_id: answer.invocation_id } }, undefined, {
        timeout: clientTimeoutMs,
      }),
    );
    expect(still).toMatchObject({ queue: { waiting: 'approval' } });
    expect(f.events(answer.invocation_id).map((e) => e.kind)).not.toContain('CALLER_CANCELLED');
    expect(f.queue.cards().map((c) => c.action_id)).toEqual([answer.invocation_id]);

    await f.queue.approve(card?.ticket ?? 0, person);
    let polled = still;
    for (let chunk = 0; chunk < 20 && polled.effect === null; chunk += 1) {
      polled = structured(
        await client.callTool(
          { name: 'action_status', arguments: { action_id: answer.invocation_id, wait_ms: 1_500 } },
          undefined,
          { timeout: clientTimeoutMs },
        ),
      );
    }
    expect(polled).toMatchObject({ effect: 'succeeded' });
    const fetched = structured(
      await client.callTool({ name: 'fetch_result', arguments: { action_id: answer.invocation_id } }, undefined, {
        timeout: clientTimeoutMs,
      }),
    );
    expect(fetched.response).toMatchObject({ status: 200 });
    expect(f.server.markers()).toEqual(['mcp']);
  });

  it('fetch_result while the card waits is RESULT_NOT_READY: not_attempted so far, retry fetch_result, in the text too', async () => {
    const first = structured(
      await client.callTool(
        {
          name: 'http_request',
          arguments: { route: 'docs', method: 'POST', path: '/documents/9', body: '{"marker":"early"}' },
        },
        undefined,
        { timeout: clientTimeoutMs },
      ),
    );
    expect(first).toMatchObject({ caller_disposition: 'timed_out', queue: { waiting: 'approval' } });
    const early = await client.callTool(
      { name: 'fetch_result', arguments: { action_id: first.invocation_id } },
      undefined,
      { timeout: clientTimeoutMs },
    );
    expect(early.isError).toBe(true);
    expect(early.structuredContent).toMatchObject({
      effect: null,
      error: { code: 'RESULT_NOT_READY', outcome: 'not_attempted', retry: 'fetch_result' },
      queue: { waiting: 'approval' },
    });
    const [block] = early.content as Array<{ type: string; text?: string }>;
    const readable = (block?.text ?? '').split(answerJsonMarker)[0] ?? '';
    expect(readable).toMatch(
      /error: RESULT_NOT_READY: [^\n]*action_status[^\n]*wait_ms[^\n]* · retry: fetch_result · phase: credential_injection · outcome: not_attempted/,
    );
    expect(f.server.markers()).toEqual([]);
  });

  it('a read refused as NOT_FOUND names no outcome', async () => {
    const result = await client.callTool(
      { name: 'action_status', arguments: { action_id: 'act_0000000000000000000000nope' } },
      undefined,
      { timeout: clientTimeoutMs },
    );
    expect(result.isError).toBe(true);
    const refusal = result.structuredContent as { invocation_id: null; error: Record<string, unknown> };
    expect(refusal.error).toMatchObject({ code: 'NOT_FOUND', field: 'action_id' });
    expect(refusal.error).not.toHaveProperty('outcome');
  });
});

describe('when the client asks for progress (a progressToken) and resets its timeout on it', () => {
  beforeEach(() => connect('  session_approval: observe\n  wait_ms_default: 20000\n  progress_heartbeat_ms: 300'));

  it('a call waiting on a person longer than the client timeout stays alive on progress and gets the committed result', async () => {
    const messages: string[] = [];
    const call = client.callTool(
      {
        name: 'http_request',
        arguments: { route: 'docs', method: 'POST', path: '/documents/4', body: '{"marker":"progress"}' },
      },
      undefined,
      {
        timeout: clientTimeoutMs,
        resetTimeoutOnProgress: true,
        onprogress: (p) => messages.push(p.message ?? ''),
      },
    );
    const [card] = await waitForCardCount(f.queue, 1);
    // The premise, not a wait for an event: the person takes longer than the client's 2 s timeout, with no state
    // change meanwhile, so only the heartbeat can keep the request alive.
    await new Promise((resolve) => setTimeout(resolve, clientTimeoutMs * 1.5));
    await f.queue.approve(card?.ticket ?? 0, person);
    const answer = structured(await call);
    expect(answer).toMatchObject({ effect: 'succeeded', caller_disposition: 'completed' });
    expect(messages.some((m) => m.startsWith('card shown'))).toBe(true);
    expect(messages.some((m) => m.endsWith('(still waiting)'))).toBe(true);
    expect(f.server.markers()).toEqual(['progress']);
  });

  it('without resetting on progress the same client gives up at its timeout (the control case)', async () => {
    const call = client.callTool(
      {
        name: 'http_request',
        arguments: { route: 'docs', method: 'POST', path: '/documents/5', body: '{"marker":"control"}' },
      },
      undefined,
      {
        timeout: clientTimeoutMs,
        onprogress: () => undefined,
      },
    );
    await expect(call).rejects.toThrow(/timed out/i);
  });
});
