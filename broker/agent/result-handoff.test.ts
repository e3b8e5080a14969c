import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { ResultHandoff, ToolAnswer } from '../ports/index.js';
import { connectRawLines, initializeFrame, type RawLineClient } from '../testing/malformed-mcp.js';
import {
  envelopeAnswer,
  ScriptedAgentBackend,
  scriptedEnvelope,
  type ScriptedCall,
} from '../testing/scripted-agent-backend.js';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import { startAgentSocket, type AgentSocket } from './agent-socket.js';

/** The scripted backend plus the two handoff reports the socket gives (ports/agent-backend.ts). */
class HandoffBackend extends ScriptedAgentBackend {
  readonly reports: { written: boolean; sessionId: string; handoff: ResultHandoff }[] = [];

  async resultDelivered(sessionId: string, handoff: ResultHandoff): Promise<void> {
    this.reports.push({ written: true, sessionId, handoff });
  }

  async resultNotDelivered(sessionId: string, handoff: ResultHandoff): Promise<void> {
    this.reports.push({ written: false, sessionId, handoff });
  }
}

const handoff: ResultHandoff = { action_id: 'act_1', result_id: 'res_act_1_1' };
const withResult = (): ToolAnswer => ({ ...envelopeAnswer(scriptedEnvelope('act_1')), handoff });

let dir: TempDir;
let backend: HandoffBackend;
let socket: AgentSocket;
const clients: RawLineClient[] = [];

beforeEach(async () => {
  dir = createTempDir('postern-handoff-');
  backend = new HandoffBackend();
  socket = await startAgentSocket({ dataDir: dir.path, backend });
});
afterEach(async () => {
  for (const client of clients.splice(0)) client.destroy();
  await socket.close();
  dir.remove();
});

async function agent(): Promise<RawLineClient> {
  const client = await connectRawLines(socket.path);
  clients.push(client);
  client.send(initializeFrame(0));
  await client.nextMessage();
  client.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
  return client;
}

const call = (client: RawLineClient, id: number): void =>
  client.send(
    JSON.stringify({
      jsonrpc: '2.0',
      id,
      method: 'tools/call',
      params: { name: 'http_request', arguments: { route: 'r' } },
    }),
  );

/** A responder that answers with the result once the test releases it. */
function heldAnswer(): { release: (answer: ToolAnswer) => void; respond: (c: ScriptedCall) => Promise<ToolAnswer> } {
  let release: (answer: ToolAnswer) => void = () => undefined;
  const answer = new Promise<ToolAnswer>((resolve) => {
    release = resolve;
  });
  return { release: (a) => release(a), respond: () => answer };
}

describe('when an answer carries a committed result', () => {
  it('its write completing is reported as delivered, once, with the session and the handoff', async () => {
    backend.respond = withResult;
    const client = await agent();
    call(client, 1);
    expect(await client.nextMessage()).toMatchObject({ id: 1, result: { isError: false } });
    await vi.waitFor(() => expect(backend.reports).toHaveLength(1));
    expect(backend.reports[0]).toEqual({ written: true, sessionId: 'ses_1', handoff });
  });

  it('a connection gone before the answer is written is reported as not delivered', async () => {
    const held = heldAnswer();
    backend.respond = held.respond;
    const client = await agent();
    call(client, 2);
    const received = await backend.nextCall();
    client.destroy();
    expect(await received.aborted).toBe('disconnected');
    held.release(withResult());
    await vi.waitFor(() => expect(backend.reports).toEqual([{ written: false, sessionId: 'ses_1', handoff }]));
  });

  it('a call the caller cancelled gets no answer and no report (MCP: nothing is owed)', async () => {
    const held = heldAnswer();
    backend.respond = held.respond;
    const client = await agent();
    call(client, 3);
    const received = await backend.nextCall();
    client.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 3 } }));
    expect(await received.aborted).toBe('cancelled');
    held.release(withResult());
    client.send(JSON.stringify({ jsonrpc: '2.0', id: 4, method: 'ping' }));
    expect(await client.nextMessage()).toEqual({ jsonrpc: '2.0', id: 4, result: {} });
    client.destroy();
    await client.closed;
    // The server is done with the connection (its write callbacks ran before its close): no report was made.
    await backend.nextDisconnect();
    await new Promise((resolve) => setImmediate(resolve));
    expect(backend.reports).toEqual([]);
  });
});

describe('when the caller goes away in the middle of a large answer', () => {
  it('the handoff is never reported delivered (failed, or not known either way)', async () => {
    const big = {
      status: 200,
      headers: {},
      body: 'x'.repeat(8 * 1024 * 1024),
      body_encoding: 'utf8',
      truncated: false,
      total_bytes: 8 * 1024 * 1024,
      redacted: false,
    } as const;
    backend.respond = () => ({ ...withResult(), structured: { ...scriptedEnvelope('act_1'), response: big } });
    const client = await agent();
    call(client, 6);
    // The first bytes prove the write started; the rest cannot fit in the socket's buffers.
    await new Promise<void>((resolve) => client.socket.once('data', () => resolve()));
    client.socket.pause();
    client.destroy();
    await backend.nextDisconnect();
    await new Promise((resolve) => setImmediate(resolve));
    expect(backend.reports.filter((r) => r.written)).toEqual([]);
  });
});

describe('when an answer carries no result', () => {
  it('nothing is reported', async () => {
    const client = await agent();
    call(client, 5);
    expect(await client.nextMessage()).toMatchObject({ id: 5 });
    client.destroy();
    await client.closed;
    // The server is done with the connection (its write callbacks ran before its close): no report was made.
    await backend.nextDisconnect();
    await new Promise((resolve) => setImmediate(resolve));
    expect(backend.reports).toEqual([]);
  });
});
