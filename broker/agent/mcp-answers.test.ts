import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RunningAgentBackend } from '../actions/agent-backend.js';
import { actionRecordedCapability, actionRecordedNotification, callWaitMsMax } from '../contract/index.js';
import { type ToolAnswer } from '../ports/index.js';
import { fixtureAgentBackend, openQueueFixture, person, type QueueFixture } from '../testing/queue-fixture.js';
import { SocketClientTransport } from '../sdk/socket-client-transport.js';
import {
  envelopeAnswer,
  ScriptedAgentBackend,
  scriptedEnvelope,
  type ScriptedCall,
} from '../testing/scripted-agent-backend.js';
import { createTempDir, type TempDir } from '../testing/temp-dir.js';
import type { AgentLimits } from './agent-limits.js';
import { startAgentSocket, type AgentSocket } from './agent-socket.js';
import { answerJsonMarker } from './answer-text.js';

/**
 * The MCP surface as a real client sees it: the SDK Client (which validates every structuredContent
 * against the tool's outputSchema once it has listed the tools) over a real socket, with the scripted
 * backend answering.
 */
let dir: TempDir;
let backend: ScriptedAgentBackend;
let socket: AgentSocket;
let client: Client;

async function connect(limits?: Partial<AgentLimits>): Promise<void> {
  socket = await startAgentSocket({ dataDir: dir.path, backend, ...(limits === undefined ? {} : { limits }) });
  client = new Client({ name: 'answers-test', version: '1' });
  await client.connect(new SocketClientTransport(socket.path));
  // Listing caches the output schemas: from here on every callTool validates what it gets.
  await client.listTools();
}

beforeEach(() => {
  dir = createTempDir('postern-answers-');
  backend = new ScriptedAgentBackend();
});
afterEach(async () => {
  await client?.close().catch(() => undefined);
  await socket?.close();
  dir.remove();
});

/** What a client that reads only `content[0].text` has: the first line and the JSON after the marker. */
function readText(result: CallToolResult): { first: string; summary: string; json: unknown } {
  const block = result.content[0];
  if (block?.type !== 'text') throw new Error('the first content block is not text');
  const lines = block.text.split('\n');
  const marker = lines.indexOf(answerJsonMarker);
  expect(marker).toBeGreaterThan(0);
  return {
    first: lines[0] ?? '',
    summary: lines.slice(0, marker).join('\n'),
    json: JSON.parse(lines.slice(marker + 1).join('\n')),
  };
}

const held = (): { release: (a: ToolAnswer) => void; respond: (c: ScriptedCall) => Promise<ToolAnswer> } => {
  let release: (a: ToolAnswer) => void = () => undefined;
  const answer = new Promise<ToolAnswer>((resolve) => {
    release = resolve;
  });
  return { release: (a) => release(a), respond: () => answer };
};

describe('when a client lists the tools', () => {
  it('every tool declares an object outputSchema that admits a refusal', async () => {
    await connect();
    const { tools } = await client.listTools();
    expect(tools).toHaveLength(7);
    for (const tool of tools) {
      expect(tool.outputSchema?.type, tool.name).toBe('object');
      expect(JSON.stringify(tool.outputSchema), tool.name).toContain('"invocation_id":{"type":"null"}');
    }
    expect(JSON.stringify(tools.find((t) => t.name === 'list_routes')?.outputSchema)).toContain('"ssh_hosts"');
  });

  it("every caller's wait (timeout_ms) says to stay under the client's request timeout and wait on with action_status", async () => {
    await connect();
    const { tools } = await client.listTools();
    for (const name of ['http_request', 'ssh_exec', 'request_credential']) {
      const properties = tools.find((t) => t.name === name)?.inputSchema.properties as
        Record<string, { description?: string; maximum?: number }> | undefined;
      const wait = properties?.['timeout_ms'];
      expect(wait?.maximum, name).toBe(600_000);
      expect(wait?.description, name).toMatch(/below your MCP client's own request timeout \(60000 ms by default/);
      expect(wait?.description, name).toContain('a client that gives up first cancels the call');
      expect(wait?.description, name).toContain('CALLER_CANCELLED');
      expect(wait?.description, name).toContain('action_status with wait_ms');
    }
  });
});

describe('when answers come back to a validating client', () => {
  it('a committed HTTP answer validates, and its text carries the readable line and the whole reply as JSON', async () => {
    await connect();
    const body = '{"id":7,"note":"multi\nline"}';
    backend.respond = () => ({
      ...envelopeAnswer({
        ...scriptedEnvelope('act_http'),
        ticket: 3,
        lane: 'issues',
        response: {
          status: 201,
          headers: { 'content-type': 'application/json' },
          body,
          body_encoding: 'utf8',
          truncated: false,
          total_bytes: body.length,
          redacted: false,
        },
      }),
      text: 'ticket #3 committed: HTTP 201',
    });
    const result = (await client.callTool({
      name: 'http_request',
      arguments: { route: 'github', method: 'POST', path: '/x' },
    })) as CallToolResult;
    const text = readText(result);
    expect(text.first).toBe('ticket #3 committed: HTTP 201');
    expect(text.summary).toContain('action: act_http · ticket #3 · lane issues');
    expect(text.summary).toContain('response: HTTP 201 · body complete: 28 bytes (utf8) · 1 headers');
    expect(text.json).toEqual(result.structuredContent);
    expect((text.json as { response: { body: string } }).response.body).toBe(body);
  });

  it('marks a truncated body, a withheld body and SSH output in the readable lines', async () => {
    await connect();
    const response = {
      status: 200,
      headers: {},
      body: 'abc',
      body_encoding: 'utf8',
      truncated: true,
      total_bytes: 5_000_000,
      redacted: true,
    } as const;
    backend.respond = () => envelopeAnswer({ ...scriptedEnvelope('act_t'), response });
    const truncated = readText((await client.callTool({ name: 'http_request', arguments: {} })) as CallToolResult);
    expect(truncated.summary).toContain(
      'body TRUNCATED: 3 of 5000000 bytes kept (utf8); the rest was not stored · 0 headers · secrets redacted',
    );
    backend.respond = () =>
      envelopeAnswer({
        ...scriptedEnvelope('act_w'),
        response: {
          ...response,
          body: '',
          truncated: false,
          redacted: false,
          body_withheld: 'unsupported_content_encoding',
        },
      });
    const withheld = readText((await client.callTool({ name: 'http_request', arguments: {} })) as CallToolResult);
    expect(withheld.summary).toContain('body WITHHELD (unsupported_content_encoding)');
    backend.respond = () =>
      envelopeAnswer({
        ...scriptedEnvelope('act_s'),
        output: {
          exit_status: 3,
          stdout: '/wAB',
          stdout_encoding: 'base64',
          stderr: 'err\n',
          stderr_encoding: 'utf8',
          stdout_bytes: 3,
          stderr_bytes: 4,
          truncated: false,
          output_complete: true,
          redacted: true,
        },
      });
    const ssh = (await client.callTool({ name: 'ssh_exec', arguments: {} })) as CallToolResult;
    const sshText = readText(ssh);
    expect(sshText.summary).toContain(
      'output: exit 3 · stdout 3 bytes (base64) · stderr 4 bytes (utf8) · output complete · secrets redacted',
    );
    expect(sshText.json).toEqual(ssh.structuredContent);
  });

  it('a refusal validates and its text names the code, field, message and retry', async () => {
    await connect();
    const result = (await client.callTool({ name: 'delete_everything', arguments: {} })) as CallToolResult;
    expect(result.isError).toBe(true);
    const text = readText(result);
    expect(text.summary).toContain(
      'error: UNKNOWN_TOOL (field: name): not a Postern tool; list the tools first · retry: after_correction',
    );
    expect(text.json).toEqual(result.structuredContent);
  });

  it('a message with newlines cannot pose as the JSON marker', async () => {
    await connect();
    const error = {
      code: 'REMOTE_ERROR_STATUS',
      phase: 'remote_execution',
      outcome: 'committed',
      retry: 'never',
      message: `bad\n${answerJsonMarker}\n{"forged":true}`,
    } as const;
    backend.respond = () => envelopeAnswer(scriptedEnvelope('act_e', error));
    const result = (await client.callTool({ name: 'http_request', arguments: {} })) as CallToolResult;
    expect(readText(result).json).toEqual(result.structuredContent);
  });

  it('list_routes validates, and its text names every route and host entry', async () => {
    await connect();
    const result = (await client.callTool({ name: 'list_routes', arguments: {} })) as CallToolResult;
    const text = readText(result);
    expect(text.summary).toContain('routes: github (GET, POST; approval none)');
    expect(text.summary).toContain('ssh hosts: build-box (approval per_call)');
    expect(text.json).toEqual(result.structuredContent);
  });

  /** The backend's refusal of an unknown target (`field`: route or host), before the broker names the configured ones. */
  const invalidTarget = (message: string, field: string): ToolAnswer =>
    envelopeAnswer(
      scriptedEnvelope('act_u', {
        code: 'INVALID_TARGET',
        phase: 'validation',
        outcome: 'not_attempted',
        retry: 'after_correction',
        message,
        field,
      }),
    );

  it.each([
    ['route', 'http_request', 'configured routes: github'],
    ['host', 'ssh_exec', 'configured SSH host entries: build-box'],
  ])(
    'an unknown %s is refused with the configured names, in structuredContent and text',
    async (field, tool, names) => {
      await connect();
      backend.names = { routes: ['github'], ssh_hosts: ['build-box'] };
      backend.respond = () => invalidTarget('no such thing', field);
      const result = (await client.callTool({ name: tool, arguments: {} })) as CallToolResult;
      expect(result.structuredContent).toMatchObject({
        error: { code: 'INVALID_TARGET', field, message: `no such thing; ${names}` },
      });
      expect(readText(result).summary).toContain(`error: INVALID_TARGET (field: ${field}): no such thing; ${names}`);
    },
  );

  it('names as many whole configured names as the message bound holds, then says list_routes has them all', async () => {
    await connect();
    const routes = Array.from({ length: 1024 }, (_, i) => `route-${String(i).padStart(4, '0')}-${'x'.repeat(53)}`);
    backend.names = { routes, ssh_hosts: [] };
    backend.respond = () => invalidTarget('no such route', 'route');
    const result = (await client.callTool({ name: 'http_request', arguments: {} })) as CallToolResult;
    const { message } = (result.structuredContent as { error: { message: string } }).error;
    expect(message.length).toBeLessThanOrEqual(1000);
    expect(message).toMatch(/^no such route; configured routes: route-0000-x+, .*, … \(list_routes has them all\)$/);
    const listed = message.slice('no such route; configured routes: '.length, -', … (list_routes has them all)'.length);
    expect(listed.split(', ')).toEqual(routes.slice(0, listed.split(', ').length));
    // The bound is filled: one more name would not have fitted.
    expect(message.length + 2 + routes[0]!.length).toBeGreaterThan(1000);

    backend.names = { routes: [], ssh_hosts: [] };
    const none = (await client.callTool({ name: 'http_request', arguments: {} })) as CallToolResult;
    expect(none.structuredContent).toMatchObject({ error: { message: 'no such route; configured routes: none' } });

    // A refusal whose own text leaves no room for a name or the marker keeps its text whole and names none.
    const long = `no such route ${'r'.repeat(980)}`;
    backend.names = { routes, ssh_hosts: [] };
    backend.respond = () => invalidTarget(long, 'route');
    const whole = (await client.callTool({ name: 'http_request', arguments: {} })) as CallToolResult;
    expect(whole.structuredContent).toMatchObject({ error: { message: long } });
  });

  it('an answer outside the reply schema is never sent: the client gets INTERNAL, which validates', async () => {
    await connect();
    backend.respond = () => ({
      isError: false,
      structured: { ...scriptedEnvelope('act_bad'), effect: 'maybe' } as never,
      text: 'bad',
    });
    const result = (await client.callTool({ name: 'http_request', arguments: {} })) as CallToolResult;
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toMatchObject({ invocation_id: null, error: { code: 'INTERNAL' } });
  });
});

describe('when the client asks for progress', () => {
  // The subject is wall time: the call must outlive the client's request timeout. Progress is spaced at
  // a fifth of it, so a loaded machine has room, and the control case shows the timeout really fires.
  const timeoutMs = 1_500;
  const stepMs = 300;
  const steps = [
    'session approved',
    'card shown',
    'approved, waiting for #2',
    'dispatched',
    'response started',
    'response complete',
    'settled',
  ];

  it('sends each state change as notifications/progress and the client timeout resets on each', async () => {
    await connect();
    const seen: { progress: number; message?: string }[] = [];
    backend.respond = async (call) => {
      if (call.onProgress === undefined)
        throw new Error('no progress callback although the client sent a progressToken');
      for (const [i, message] of steps.entries()) {
        call.onProgress({ progress: i + 1, message });
        // A repeat is not progress: dropped.
        call.onProgress({ progress: i + 1, message: 'again' });
        await new Promise((resolve) => setTimeout(resolve, stepMs));
      }
      return envelopeAnswer(scriptedEnvelope('act_long'));
    };
    const started = Date.now();
    const result = await client.callTool({ name: 'http_request', arguments: {} }, undefined, {
      timeout: timeoutMs,
      resetTimeoutOnProgress: true,
      onprogress: (p) =>
        seen.push({ progress: p.progress, ...(p.message === undefined ? {} : { message: p.message }) }),
    });
    expect(Date.now() - started).toBeGreaterThan(timeoutMs);
    expect(result.isError).toBe(false);
    expect(seen).toEqual(steps.map((message, i) => ({ progress: i + 1, message })));
  });

  it('without progress the same wait ends in the client timeout (the control case)', async () => {
    await connect();
    backend.respond = async (call) => {
      expect(call.onProgress).toBeUndefined();
      await call.aborted;
      return envelopeAnswer(scriptedEnvelope('act_cut'));
    };
    const call = client.callTool({ name: 'http_request', arguments: {} }, undefined, { timeout: timeoutMs });
    await expect(call).rejects.toThrow(/timed out/i);
    expect(await (await backend.nextCall()).aborted).toBe('cancelled');
  });

  it('sends nothing after the answer', async () => {
    await connect();
    const later = held();
    let progressAfterAnswer: ((p: { progress: number; message: string }) => void) | undefined;
    backend.respond = (call) => {
      progressAfterAnswer = call.onProgress;
      return later.respond(call);
    };
    const seen: number[] = [];
    const errors: Error[] = [];
    client.onerror = (error) => errors.push(error);
    let firstSeen = (): void => undefined;
    const first = new Promise<void>((resolve) => {
      firstSeen = resolve;
    });
    const pending = client.callTool({ name: 'list_routes', arguments: {} }, undefined, {
      onprogress: (p) => {
        seen.push(p.progress);
        firstSeen();
      },
    });
    await backend.nextCall();
    progressAfterAnswer?.({ progress: 1, message: 'card shown' });
    // The SDK client hands a notification on a tick later than a response: release the answer once it was seen.
    await first;
    later.release({ isError: false, structured: { routes: [], ssh_hosts: [] }, text: '' });
    await pending;
    progressAfterAnswer?.({ progress: 2, message: 'too late' });
    // A ping is answered after anything sent before it: a late progress would have arrived by then.
    await client.ping();
    expect(seen).toEqual([1]);
    expect(errors).toEqual([]);
  });
});

describe('when a request is larger than a frame may be', () => {
  it('a 9 MiB http_request body gets PAYLOAD_LIMIT for that request and the next call on the same client works', async () => {
    await connect();
    const huge = client.callTool({
      name: 'http_request',
      arguments: { route: 'github', method: 'POST', path: '/', body: 'z'.repeat(9 * 1024 * 1024) },
    });
    const error = await huge.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(McpError);
    expect(error).toMatchObject({ code: -32600, data: { code: 'PAYLOAD_LIMIT' } });
    expect(backend.calls).toHaveLength(0);
    const next = await client.callTool({
      name: 'http_request',
      arguments: { route: 'github', method: 'GET', path: '/' },
    });
    expect(next.isError).toBe(false);
    expect(backend.calls).toHaveLength(1);
  });
});

describe("when the client declared postern's action_recorded capability (as postern mcp does)", () => {
  /** An SDK client declaring the capability (or not), recording every notification it is sent. */
  async function connectDeclaring(declares: boolean): Promise<Array<{ method: string; params?: unknown }>> {
    socket = await startAgentSocket({ dataDir: dir.path, backend });
    client = new Client(
      { name: 'answers-test', version: '1' },
      declares ? { capabilities: { experimental: { [actionRecordedCapability]: {} } } } : {},
    );
    const heard: Array<{ method: string; params?: unknown }> = [];
    client.fallbackNotificationHandler = async ({ method, params }) => {
      heard.push({ method, params });
    };
    await client.connect(new SocketClientTransport(socket.path));
    return heard;
  }

  it('is told the id of the action its call recorded, before the answer and once, naming its request', async () => {
    const heard = await connectDeclaring(true);
    const later = held();
    backend.respond = (call) => {
      if (call.onRecorded === undefined) throw new Error('no onRecorded although the client declared the capability');
      call.onRecorded('act_recorded_1');
      call.onRecorded('act_recorded_1');
      return later.respond(call);
    };
    const pending = client.callTool({ name: 'http_request', arguments: {} });
    await backend.nextCall();
    later.release(envelopeAnswer(scriptedEnvelope('act_recorded_1')));
    expect((await pending).isError).toBe(false);
    expect(heard).toEqual([
      { method: actionRecordedNotification, params: { request_id: expect.anything(), action_id: 'act_recorded_1' } },
    ]);
  });

  it('sends it only to a client that declared it, and never after the answer', async () => {
    const heard = await connectDeclaring(false);
    backend.respond = (call) => {
      expect(call.onRecorded).toBeUndefined();
      return envelopeAnswer(scriptedEnvelope('act_plain'));
    };
    await client.callTool({ name: 'http_request', arguments: {} });
    await client.close();
    await socket.close();

    const declared = await connectDeclaring(true);
    let afterAnswer: ((actionId: string) => void) | undefined;
    backend.respond = (call) => {
      afterAnswer = call.onRecorded;
      return envelopeAnswer(scriptedEnvelope('act_late'));
    };
    await client.callTool({ name: 'http_request', arguments: {} });
    afterAnswer?.('act_late');
    // A call after it: whatever was sent for the first arrives before this answer.
    backend.respond = () => envelopeAnswer(scriptedEnvelope('act_next'));
    await client.callTool({ name: 'list_routes', arguments: {} });
    expect(heard).toEqual([]);
    expect(declared).toEqual([]);
  });
});

describe('when the real backend refuses reads and calls (no part of an answer is ever "undefined")', () => {
  let f: QueueFixture | undefined;
  let real: RunningAgentBackend | undefined;
  afterEach(async () => {
    real?.close();
    await f?.dispose();
    f = undefined;
    real = undefined;
  });

  /**
   * A POST whose remote applies the write and drops the connection, through a real MCP client on the agent socket: its
   * outcome unknown after dispatch, no stored result. Sets this block's fixture and backend, and the file's socket and client.
   */
  async function unknownAfterDispatch(marker: string): Promise<{ fixture: QueueFixture; actionId: string }> {
    const fixture = await openQueueFixture({
      agentsYaml: '  session_approval: observe',
      server: { behave: () => 'apply_then_drop' },
    });
    f = fixture;
    real = await fixtureAgentBackend(fixture, 'boot-answers');
    socket = await startAgentSocket({ dataDir: fixture.h.temp.dir.path, backend: real });
    client = new Client({ name: 'answers-test', version: '1' });
    await client.connect(new SocketClientTransport(socket.path));
    await client.listTools();
    const sent = (await client.callTool({
      name: 'http_request',
      arguments: {
        route: 'plain',
        method: 'POST',
        path: '/documents/9',
        body: JSON.stringify({ marker }),
        headers: { 'content-type': 'application/json' },
      },
    })) as CallToolResult;
    expect(sent.structuredContent).toMatchObject({ error: { outcome: 'unknown' } });
    return { fixture, actionId: (sent.structuredContent as { invocation_id: string }).invocation_id };
  }

  it('fetch_result of an action a person settled by attestation is coded RESULT_NOT_STORED and says what is known', async () => {
    // The remote applies the write and drops the connection: unknown, no stored result; then a person attests it.
    const { fixture, actionId } = await unknownAfterDispatch('A');
    await fixture.queue.attest(actionId, person, 'committed', 'succeeded', 'the document shows version 2');

    const fetched = (await client.callTool({
      name: 'fetch_result',
      arguments: { action_id: actionId },
    })) as CallToolResult;
    expect(fetched.isError).toBe(true);
    expect(fetched.structuredContent).toMatchObject({
      invocation_id: actionId,
      effect: 'succeeded',
      outcome_basis: 'operator_attested',
      error: { code: 'RESULT_NOT_STORED', phase: 'result_delivery', outcome: 'committed', retry: 'never' },
      evidence: { dispatch_started: true, source: 'operator_attested' },
    });
    const text = readText(fetched);
    expect(text.first).toMatch(/^ticket #\d+ committed: RESULT_NOT_STORED$/);
    expect(text.summary).toMatch(
      /error: RESULT_NOT_STORED: no stored result: the action is committed \(effect succeeded/,
    );
    expect(text.summary).toContain("a person's attestation");
    expect(text.summary).toContain("what the person attested is in the action's record");
    expect(text.json).toEqual(fetched.structuredContent);
    expect(fixture.server.markers()).toEqual(['A']);
  });

  it('fetch_result of an action a person attested rejected is RESULT_NOT_STORED too, not the remote refusal it never was', async () => {
    // The same unknown, attested rejected: no remote answered, so no code may say "the remote returned a refusal".
    const { fixture, actionId } = await unknownAfterDispatch('B');
    await fixture.queue.attest(actionId, person, 'rejected', 'no_effect', 'the document still shows version 1');

    const status = (await client.callTool({
      name: 'action_status',
      arguments: { action_id: actionId },
    })) as CallToolResult;
    // Its status says who said so: ATTESTED_REJECTED, not REMOTE_REJECTED (a refusal the remote returned).
    expect(status.structuredContent).toMatchObject({ error: { code: 'ATTESTED_REJECTED', outcome: 'rejected' } });
    expect(readText(status).summary).not.toContain('authoritative refusal');
    const fetched = (await client.callTool({
      name: 'fetch_result',
      arguments: { action_id: actionId },
    })) as CallToolResult;
    expect(fetched.isError).toBe(true);
    expect(fetched.structuredContent).toMatchObject({
      invocation_id: actionId,
      effect: 'no_effect',
      outcome_basis: 'operator_attested',
      error: { code: 'RESULT_NOT_STORED', phase: 'result_delivery', outcome: 'rejected', retry: 'never' },
      evidence: { dispatch_started: true, source: 'operator_attested' },
    });
    const text = readText(fetched);
    expect(text.first).toMatch(/^ticket #\d+ rejected: RESULT_NOT_STORED$/);
    expect(text.summary).toMatch(
      /error: RESULT_NOT_STORED: no stored result: the action is rejected \(effect no_effect, basis operator_attested\); it was settled by a person's attestation, not by an answer from the remote/,
    );
    expect(text.summary).toContain("what the person attested is in the action's record");
    expect(text.summary).not.toContain('authoritative refusal');
    expect(text.json).toEqual(fetched.structuredContent);
    expect(fixture.server.markers()).toEqual(['B']);
  });

  it('every text block names only the parts its error carries: a refused read has no outcome part', async () => {
    f = await openQueueFixture({ agentsYaml: '  session_approval: observe' });
    real = await fixtureAgentBackend(f, 'boot-answers');
    socket = await startAgentSocket({ dataDir: f.h.temp.dir.path, backend: real });
    client = new Client({ name: 'answers-test', version: '1' });
    await client.connect(new SocketClientTransport(socket.path));
    await client.listTools();
    const nobody = 'act_0000000000000000000000nope';
    const reads: Array<[string, Record<string, unknown>, string]> = [
      ['action_status', { action_id: nobody }, 'NOT_FOUND'],
      ['fetch_result', { action_id: nobody }, 'NOT_FOUND'],
      ['cancel_action', { action_id: nobody }, 'NOT_FOUND'],
      ['action_status', { action_id: nobody, wait_ms: callWaitMsMax + 1 }, 'INVALID_ARGUMENT'],
      ['fetch_result', {}, 'INVALID_ARGUMENT'],
    ];
    /** The text block, once it is known to hold no "undefined" anywhere (headline, readable lines, JSON). */
    const wholeText = (result: CallToolResult, what: string): ReturnType<typeof readText> => {
      for (const block of result.content)
        if (block.type === 'text') expect(block.text, what).not.toContain('undefined');
      return readText(result);
    };
    for (const [name, args, code] of reads) {
      const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
      const what = `${name} ${JSON.stringify(args)}`;
      const text = wholeText(result, what);
      expect(result.isError, what).toBe(true);
      expect(result.structuredContent, what).toMatchObject({ invocation_id: null, error: { code } });
      expect(text.summary, what).toMatch(
        new RegExp(`^error: ${code}( \\(field: [\\w.]+\\))?: .+ · retry: \\w+ · phase: validation$`, 'm'),
      );
      expect(text.summary, what).not.toContain('outcome');
      expect(text.json, what).toEqual(result.structuredContent);
    }
    // Refusals that do carry an outcome (an action call refused, an unknown tool) still say it.
    const calls: Array<[string, Record<string, unknown>, string]> = [
      ['http_request', { route: 'nope', method: 'GET', path: '/' }, 'INVALID_TARGET'],
      ['http_request', { route: 'docs', path: '/' }, 'INVALID_ARGUMENT'],
      ['delete_everything', {}, 'UNKNOWN_TOOL'],
    ];
    for (const [name, args, code] of calls) {
      const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
      expect(wholeText(result, name).summary, name).toMatch(new RegExp(`error: ${code}.* · outcome: not_attempted`));
    }
  });
});

describe("when an agent calls in a session that is closed: the sweeper's end and a person's revocation differ", () => {
  let f: QueueFixture | undefined;
  let real: RunningAgentBackend | undefined;
  let alive = true;
  const clients: Client[] = [];
  afterEach(async () => {
    for (const c of clients.splice(0)) await c.close().catch(() => undefined);
    real?.close();
    await f?.dispose();
    f = undefined;
    real = undefined;
    alive = true;
  });

  /** The real backend and queue; the process table is the test's (`alive`), the peer this process as the kernel says. */
  async function connected(): Promise<{ fixture: QueueFixture; backend: RunningAgentBackend; sessionId: string }> {
    const fixture = await openQueueFixture({ agentsYaml: '  session_approval: observe' });
    f = fixture;
    const backend = await fixtureAgentBackend(fixture, 'boot-closed', { processAlive: () => alive });
    real = backend;
    socket = await startAgentSocket({ dataDir: fixture.h.temp.dir.path, backend });
    await newClient();
    const [session] = fixture.h.temp.journal.listSessions({ status: ['approved'] });
    if (session === undefined) throw new Error('no session was opened');
    return { fixture, backend, sessionId: session.session_id };
  }

  async function newClient(): Promise<Client> {
    const c = new Client({ name: 'closed-session-test', version: '1' });
    clients.push(c);
    await c.connect(new SocketClientTransport(socket.path));
    await c.listTools();
    return c;
  }

  async function write(c: Client): Promise<{ code: unknown; message: string }> {
    const result = (await c.callTool({
      name: 'http_request',
      arguments: { route: 'docs', method: 'POST', path: '/documents/1', body: '{"marker":"x"}' },
    })) as CallToolResult;
    expect(result.isError).toBe(true);
    const error = (result.structuredContent as { error: { code: unknown; message: string } }).error;
    expect(readText(result).summary).toContain(`error: ${String(error.code)}`);
    return { code: error.code, message: error.message };
  }

  it('ended by the sweeper (its process gone): SESSION_ENDED, saying it ended and to start a new session', async () => {
    const { fixture, backend, sessionId } = await connected();
    alive = false;
    expect(await backend.sweep()).toBe(1);
    expect(fixture.h.temp.journal.getSession(sessionId)).toMatchObject({ status: 'ended' });

    const [first] = clients;
    if (first === undefined) throw new Error('no client');
    const call = await write(first);
    expect(call.code).toBe('SESSION_ENDED');
    expect(call.message).toMatch(/^this session ended: the broker found its agent process gone while it ran/);
    expect(call.message).toContain('nobody revoked it');
    expect(call.message).toContain('a new agent process gets a new session');
    // A new connection from the same process finds the ended session: every call is refused the same way.
    expect((await write(await newClient())).code).toBe('SESSION_ENDED');
    expect(fixture.server.arrivals).toHaveLength(0);
  });

  it('revoked by a person: SESSION_REVOKED, and it stays so after the sweeper finds the process gone', async () => {
    const { fixture, backend, sessionId } = await connected();
    await fixture.queue.revokeSession(sessionId, person, 'unknown agent');
    const [first] = clients;
    if (first === undefined) throw new Error('no client');
    const call = await write(first);
    expect(call).toMatchObject({
      code: 'SESSION_REVOKED',
      message: 'a person revoked this session; nothing was accepted',
    });
    expect((await write(await newClient())).code).toBe('SESSION_REVOKED');

    alive = false;
    expect(await backend.sweep()).toBe(1);
    expect((await write(first)).code).toBe('SESSION_REVOKED');
    expect(fixture.server.arrivals).toHaveLength(0);
  });
});
