import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answerJsonMarker } from '../broker/agent/answer-text.js';
import { startBearerRouteDaemon, type BearerRouteDaemon } from './support/bearer-route-daemon.js';
import { connectSdkClient } from './support/mcp-sdk-client.js';

/**
 * An agent that reads only `content[0].text`, through `postern mcp` against a real daemon (real vault,
 * journal, executor and a real HTTP remote that echoes the injected credential): from the text alone it
 * gets a committed body, an error's code, field and message, the route names, and a stored result again.
 * The client is the MCP SDK's, which lists the tools first and so validates every structuredContent
 * against its outputSchema.
 */
const canary = 'CANARY-text-only-4f2a';
let running: BearerRouteDaemon;
let client: Client;
/** Requests to /held/… wait here until a test ends them; `heldArrived` hears of each one as it arrives. */
const held: ServerResponse[] = [];
let heldArrived: () => void = () => undefined;

beforeAll(async () => {
  running = await startBearerRouteDaemon({
    prefix: 'ptext-',
    canary,
    respond: (req, res) => {
      res.setHeader('content-type', 'application/json');
      if (req.url?.startsWith('/held/') === true) {
        held.push(res);
        heldArrived();
        return;
      }
      res.end(JSON.stringify({ path: req.url, note: 'line one\nline two', echoed: req.headers.authorization ?? null }));
    },
  });
  client = await connectSdkClient(running.dataDir, 'text-only-agent');
}, 60_000);

afterAll(async () => {
  for (const res of held.splice(0)) res.end('{}');
  await client?.close().catch(() => undefined);
  await running?.stop();
});

/** All a text-only client has: the text block, and the JSON it carries after the marker line. */
async function callText(
  name: string,
  args: Record<string, unknown>,
): Promise<{ text: string; first: string; reply: Record<string, unknown> }> {
  const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
  const block = result.content[0];
  if (block?.type !== 'text') throw new Error('no text block');
  expect(block.text).not.toContain(canary);
  const lines = block.text.split('\n');
  const marker = lines.indexOf(answerJsonMarker);
  expect(marker).toBeGreaterThan(0);
  return {
    text: block.text,
    first: lines[0] ?? '',
    reply: JSON.parse(lines.slice(marker + 1).join('\n')) as Record<string, unknown>,
  };
}

describe('when an agent reads only the text block', () => {
  it('learns the route names from list_routes', async () => {
    const { text, reply } = await callText('list_routes', {});
    expect(text).toContain('routes: docs (');
    expect(reply).toMatchObject({ routes: [{ name: 'docs' }], ssh_hosts: [] });
  });

  it('reads a committed response body (scrubbed), and reads it again with fetch_result', async () => {
    const { first, text, reply } = await callText('http_request', { route: 'docs', method: 'GET', path: '/guide' });
    expect(first).toMatch(/^ticket #\d+ committed: HTTP 200/);
    expect(text).toContain('response: HTTP 200 · body complete');
    const response = reply['response'] as { status: number; body: string };
    const body = JSON.parse(response.body) as { path: string; note: string; echoed: string };
    expect(body).toMatchObject({ path: '/guide', note: 'line one\nline two' });
    // The remote echoed the injected credential: the text, like structuredContent, has it redacted.
    expect(body.echoed).not.toContain(canary);
    const again = await callText('fetch_result', { action_id: reply['invocation_id'] });
    expect((again.reply['response'] as { body: string }).body).toBe(response.body);
  });

  it('reads an unknown route refusal: code, field, message and the configured names', async () => {
    const { text, reply } = await callText('http_request', { route: 'nope', method: 'GET', path: '/' });
    expect(text).toMatch(/error: INVALID_TARGET \(field: route\): [^\n]*configured routes: docs/);
    expect(reply).toMatchObject({ error: { code: 'INVALID_TARGET', field: 'route', retry: 'after_correction' } });
  });

  it('reads a malformed call refusal naming its field', async () => {
    const { text } = await callText('http_request', { route: 'docs', path: '/' });
    expect(text).toMatch(/error: INVALID_ARGUMENT \(field: method\)/);
    const status = await callText('action_status', { action_id: 'act_not_mine' });
    expect(status.text).toMatch(/error: NOT_FOUND \(field: action_id\)/);
  });

  it('a fetch_result before the outcome is recorded says RESULT_NOT_READY, outcome unknown, retry fetch_result and how to wait', async () => {
    const arrived = new Promise<void>((resolve) => (heldArrived = resolve));
    const timedOut = await callText('http_request', {
      route: 'docs',
      method: 'POST',
      path: '/held/1',
      body: '{"n":1}',
      timeout_ms: 1_000,
    });
    await arrived;
    const id = timedOut.reply['invocation_id'] as string;
    const early = await callText('fetch_result', { action_id: id });
    // Answered before any assertion, so a failing one never leaves the lane blocked for the next test.
    for (const res of held.splice(0)) res.end('{"done":true}');
    expect(timedOut.text).toMatch(/error: CALLER_DEADLINE_EXCEEDED: [^\n]* · retry: fetch_result · /);
    // The readable lines alone (above the JSON) carry the code, retry, phase, outcome and the way to wait.
    const readable = early.text.slice(0, early.text.indexOf(answerJsonMarker));
    expect(early.first).toMatch(/^ticket #\d+ unknown: RESULT_NOT_READY/);
    expect(readable).toMatch(
      /error: RESULT_NOT_READY: [^\n]*action_status \{"action_id":"act_\w+","wait_ms":…\}[^\n]* · retry: fetch_result · phase: remote_execution · outcome: unknown/,
    );
    expect(early.reply).toMatchObject({
      effect: 'unknown_effect',
      error: { code: 'RESULT_NOT_READY', phase: 'remote_execution', outcome: 'unknown', retry: 'fetch_result' },
    });
    const settled = await callText('action_status', { action_id: id, wait_ms: 20_000 });
    expect(settled.reply).toMatchObject({ effect: 'succeeded' });
    const fetched = await callText('fetch_result', { action_id: id });
    expect(fetched.first).toMatch(/committed: HTTP 200/);
  });

  it('a 9 MiB body is answered PAYLOAD_LIMIT and the same client keeps working', async () => {
    const error = await client
      .callTool({
        name: 'http_request',
        arguments: { route: 'docs', method: 'POST', path: '/', body: 'z'.repeat(9 * 1024 * 1024) },
      })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(error).toBeInstanceOf(McpError);
    expect(error).toMatchObject({ data: { code: 'PAYLOAD_LIMIT' } });
    const { first } = await callText('http_request', { route: 'docs', method: 'GET', path: '/after' });
    expect(first).toMatch(/committed: HTTP 200/);
  });
});
