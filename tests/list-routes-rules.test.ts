import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answerJsonMarker } from '../broker/agent/answer-text.js';
import { TestSshd } from '../broker/testing/test-sshd.js';
import { startBearerRouteDaemon, type BearerRouteDaemon } from './support/bearer-route-daemon.js';
import { connectSdkClient } from './support/mcp-sdk-client.js';

/**
 * list_routes tells an agent which calls run without a card: a route's method + path rules and an SSH host's command
 * rules, in the order they are tried, each with the approval it gives (a command rule without one has the host's),
 * and what a command rule's `*` may match (strict or loose). Through `postern mcp` against a real daemon, with the MCP
 * SDK's client (which validates structuredContent against the outputSchema); then the agent performs one call each
 * rule lists as `none`, and neither waits for a card (a real HTTP target, a real OpenSSH sshd when one can run here).
 * Never a host, address, user, port, host key or credential in the answer.
 */
const canary = 'CANARY-list-rules-7c1';
const unavailable = TestSshd.unavailableReason();
/** Where no sshd can run, a well-formed pin: the listing needs none, only the ssh_exec test does. */
const placeholderPin = `SHA256:${'A'.repeat(43)}`;
let sshd: TestSshd | undefined;
let running: BearerRouteDaemon;
let client: Client;

beforeAll(async () => {
  if (unavailable === undefined) sshd = await TestSshd.start();
  else console.warn(`the ssh_exec half is skipped: ${unavailable}`);
  running = await startBearerRouteDaemon({
    prefix: 'plrules-',
    canary,
    approval: 'per_call',
    respond: (req, res) => res.end(JSON.stringify({ path: req.url })),
    credentials:
      sshd === undefined
        ? []
        : [{ name: 'box-key', kind: 'ssh_key', secret: Buffer.from(sshd.userKey.privateKey), bindings: ['box'] }],
    yaml: [
      '    rules_may_loosen: true',
      '    rules:',
      "      - { methods: [GET, HEAD], path: '/guide/**', approval: none }",
      "      - { methods: ['*'], path: '/admin/**', approval: per_call }",
      'ssh_hosts:',
      '  - name: box',
      '    host: 127.0.0.1',
      `    port: ${sshd?.port ?? 22}`,
      `    user: ${sshd?.user ?? 'deploy'}`,
      '    credential: box-key',
      `    host_key: { pinned: ['${sshd?.hostKey.fingerprint ?? placeholderPin}'] }`,
      '    approval: per_call',
      '    rules_may_loosen: true',
      '    commands:',
      "      - { command: 'echo *', approval: none }",
      "      - { command: 'uptime', approval: session }",
      "      - { command: 'tar *', rules_may_loosen: true }",
    ],
  });
  client = await connectSdkClient(running.dataDir, 'list-rules-agent');
}, 90_000);

afterAll(async () => {
  await client?.close().catch(() => undefined);
  await running?.stop();
  await sshd?.dispose();
});

describe('list_routes on a real daemon', () => {
  it('lists each route rule and SSH command rule with the approval it gives, and nothing of the host or key', async () => {
    const result = (await client.callTool({ name: 'list_routes', arguments: {} })) as CallToolResult;
    expect(result.isError).toBe(false);
    expect(result.structuredContent).toEqual({
      // The digest of this listing (docs/agent.md): of what is shown here, so it says nothing of the host or key either.
      list_digest: expect.stringMatching(/^sha256:[0-9a-f]{64}$/),
      routes: [
        {
          name: 'docs',
          methods: ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'],
          approval: 'per_call',
          idempotency_contract: false,
          base_path: '/',
          rules: [
            { methods: ['GET', 'HEAD'], path: '/guide/**', approval: 'none' },
            { methods: ['*'], path: '/admin/**', approval: 'per_call' },
          ],
        },
      ],
      ssh_hosts: [
        {
          name: 'box',
          approval: 'per_call',
          commands: [
            { command: 'echo *', approval: 'none', wildcard: 'strict' },
            { command: 'uptime', approval: 'session', wildcard: 'strict' },
            // No approval of its own: the host's.
            { command: 'tar *', approval: 'per_call', wildcard: 'loose' },
          ],
        },
      ],
    });
    const block = result.content[0];
    if (block?.type !== 'text') throw new Error('no text block');
    const summary = block.text.slice(0, block.text.indexOf(answerJsonMarker));
    expect(summary).toContain(
      'route docs rules, first match wins, else approval per_call: GET HEAD /guide/** → none; * /admin/** → per_call',
    );
    expect(summary).toContain(
      'ssh host box commands, first match wins, else approval per_call: "echo *" → none; "uptime" → session; "tar *" → per_call (loose *)',
    );
    const whole = JSON.stringify(result);
    for (const never of ['127.0.0.1', 'box-key', 'docs-token', canary, sshd?.hostKey.fingerprint ?? placeholderPin])
      expect(whole).not.toContain(never);
  });

  it('a GET the route lists as none commits without a card', async () => {
    const result = (await client.callTool({
      name: 'http_request',
      arguments: { route: 'docs', method: 'GET', path: '/guide/start', timeout_ms: 20_000 },
    })) as CallToolResult;
    expect(result.structuredContent).toMatchObject({ effect: 'succeeded', response: { status: 200 } });
    expect(result.structuredContent).not.toHaveProperty('decision');
  });

  it('a command the host lists as none (echo *) runs without a card', async (ctx) => {
    TestSshd.required(sshd, ctx);
    const result = (await client.callTool({
      name: 'ssh_exec',
      arguments: { host: 'box', command: 'echo listed', timeout_ms: 20_000 },
    })) as CallToolResult;
    expect(result.structuredContent).toMatchObject({
      effect: 'succeeded',
      output: { exit_status: 0, stdout: 'listed\n' },
    });
    expect(result.structuredContent).not.toHaveProperty('decision');
  });
});
